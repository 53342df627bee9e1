"""The checks of ``dbsim check``, in order, each one :class:`CheckLine`; see :mod:`sim.check`.

A check that cannot run because an earlier one failed is a ✗ line saying so, so the output
always has the same lines. Whatever the check loaded is dropped, whichever check failed (and on
Ctrl-C): the SLOB workload's own ``drop`` under the scratch prefix, then ``dbsim_registry``
when the check created it and nothing else is registered in it.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sim.check.reads import ReadWindow, read_window
from sim.connect_check import ProbeReport, probe
from sim.core.cache import server_cache_bytes, size_text
from sim.dialects import FirstContact, dialect_of, dialects
from sim.errors import ConfigError
from sim.protocols import Target, connect_sql
from sim.sql import Statement, quote_identifier
from workloads.common import drop_statement
from workloads.ownership import REGISTRY_TABLE
from workloads.slob.parameters import MIN_ROWS, SlobParameters
from workloads.slob.workload import SlobWorkload

#: The SLOB method: data several times the cache, so most reads miss it (sim.core.cache).
CACHE_FACTOR = 4
#: Physical reads per read at least this share of WORK_UNIT − 1: the reads reach the storage.
#: With the table CACHE_FACTOR times the cache about 1 − 1/4 of the rows miss it.
REACH_SHARE = 0.5
DEFAULT_MAX_ROWS = 200_000
DEFAULT_DURATION_S = 20.0
DEFAULT_SESSIONS = 2


@dataclass(frozen=True)
class CheckLine:
    """One check's verdict: ``ok``, its ``name``, what was seen, and the fix when not ok."""

    name: str
    ok: bool
    text: str
    fix: str = ""

    def render(self) -> str:
        mark = "\u2713" if self.ok else "\u2717"
        fix = f" \u2014 fix: {self.fix}" if self.fix else ""
        return f"{mark} {self.name}: {self.text}{fix}"


@dataclass(frozen=True)
class CheckOptions:
    """``rows``: None sizes the table from the cache (CACHE_FACTOR × it, at most
    ``max_rows``); ``slob``: the scenario's SLOB knobs kept (block size, WORK_UNIT …)."""

    rows: int | None = None
    max_rows: int = DEFAULT_MAX_ROWS
    duration_s: float = DEFAULT_DURATION_S
    sessions: int = DEFAULT_SESSIONS
    slob: dict[str, Any] | None = None


PRIVILEGE_LINE = ("privileges",)
LATER = ("load", "one row per block", "statistics views", "reads reach the storage")


def _error(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


async def _one(conn: Any, name: str, sql: str) -> Any:
    return await conn.scalar(Statement(f"check_{name}", sql, ()))


class FirstContactCheck:
    """The sequence against one opened target; ``emit`` gets each line as it is decided."""

    def __init__(
        self,
        target: Target,
        options: CheckOptions,
        emit: Callable[[CheckLine], None],
        blocking: Callable[[Callable[[], Any]], Any],
    ) -> None:
        self.target = target
        self.options = options
        self.emit = emit
        self.blocking = blocking
        self.lines: list[CheckLine] = []
        self.prefix = f"chk{secrets.token_hex(4)}"
        self.names: dict[str, str] = {}
        self.workload: SlobWorkload | None = None
        self.registry_was_there = True
        self.report: ProbeReport | None = None
        self.cache_name = "its cache"
        self.cache_bytes: int | None = None

    def say(self, name: str, ok: bool, text: str, fix: str = "") -> bool:
        line = CheckLine(name, ok, text, fix)
        self.lines.append(line)
        self.emit(line)
        return ok

    def skip(self, names: tuple[str, ...], why: str) -> None:
        for name in names:
            self.say(name, False, f"not run: {why}")

    async def run(self, record: FirstContact) -> list[CheckLine]:
        if not await self.connect(record):
            self.skip((*PRIVILEGE_LINE, *LATER), "no connection")
            self.say("drop", True, "nothing was created")
            return self.lines
        if not await self.privileges(record):
            self.skip(LATER, "grant the missing privileges first")
            self.say("drop", True, "nothing was created")
            return self.lines
        try:
            if await self.load():
                if await self.pages(record):
                    await self.reads(record)
                else:
                    self.skip(LATER[2:], "the table is not SLOB-like")
            else:
                self.skip(LATER[1:], "nothing was loaded")
        finally:
            await self.drop()
        return self.lines

    # ------------------------------------------------------------------ connect, privileges

    async def connect(self, record: FirstContact) -> bool:
        """``sim.connect_check``'s probe (the round trip, the login, validate --connect's
        privileges), then this record's names for the check's own GRANTs."""
        began = time.monotonic()
        try:
            self.report = await probe(self.target)
        except Exception as exc:
            return self.say("connect", False, _error(exc), _connect_fix())
        ms = (time.monotonic() - began) * 1000
        report = self.report
        who = f" as {report.user}" if report.user else ""
        version = f", server {report.server_version}" if report.server_version else ""
        text = f"{report.kind} at {report.address}{who}: {report.round_trip} answered{version}"
        conn = await connect_sql(self.target)
        try:
            for key, sql in record.names.items():
                self.names[key] = str(await _one(conn, key, sql))
        finally:
            await conn.close()
        return self.say("connect", True, f"{text} ({ms:.0f} ms)")

    async def privileges(self, record: FirstContact) -> bool:
        """validate --connect's privileges (sim.connect_check), then the check's own."""
        assert self.report is not None
        answers = [
            (p.name, p.purpose, p.required, bool(p.held), p.grant, p.detail)
            for p in self.report.privileges
        ]
        answers += await self._own_privileges(record)
        if not answers:
            return self.say("privileges", True, record.no_privileges)
        held_all = True
        for what, purpose, required, held, grant, detail in answers:
            error = f"; {detail}" if detail else ""
            if held:
                self.say(f"privilege {what}", True, f"held ({purpose})")
            elif not required:
                text = f"not held, optional ({purpose}){error}; to have it: {grant}"
                self.say(f"privilege {what}", True, text)
            else:
                held_all = False
                self.say(f"privilege {what}", False, f"missing ({purpose}){error}", grant)
        return held_all

    async def _own_privileges(
        self, record: FirstContact
    ) -> list[tuple[str, str, bool, bool, str, str]]:
        found = []
        conn = await connect_sql(self.target)
        try:
            for privilege in record.privileges:
                error = ""
                try:
                    held = bool(int(await _one(conn, "privilege", privilege.held) or 0))
                except Exception as exc:
                    held, error = False, _error(exc)
                    with contextlib.suppress(Exception):
                        await conn.rollback()
                found.append(
                    (
                        privilege.what.format(**self.names),
                        privilege.needed_for,
                        privilege.required,
                        held,
                        privilege.grant.format(**self.names),
                        error,
                    )
                )
        finally:
            await conn.close()
        return found

    # ------------------------------------------------------------------ load and pages

    async def cache(self, record: FirstContact) -> tuple[str, int | None]:
        """The engine's own data cache: its name and bytes (None: unknown)."""
        dialect = dialect_of(self.target)
        if dialect is not None and dialect.cache is not None:
            size, _ = await server_cache_bytes(self.target)
            return dialect.cache.name, size
        if record.own_cache_bytes is not None:
            return "cache_size", record.own_cache_bytes(self.target)
        return "its cache", None

    def parameters(self, rows: int) -> SlobParameters:
        knobs = dict(self.options.slob or {})
        knobs.update(table_prefix=self.prefix, scale=rows, update_pct=0, scan_pct=0)
        knobs.update(schemas=1, threads_per_schema=1, do_hotspot=False, hot_schema_frequency=0)
        return SlobParameters(**knobs)

    async def load(self) -> bool:
        record = _record(self.target)
        assert record is not None
        self.cache_name, self.cache_bytes = await self.cache(record)
        block = int(SlobParameters(**(self.options.slob or {})).block_size_bytes)
        rows = self.options.rows
        if rows is None:
            wanted = math.ceil(CACHE_FACTOR * (self.cache_bytes or 0) / block)
            rows = min(max(wanted, MIN_ROWS), self.options.max_rows)
        began = time.monotonic()
        try:
            self.workload = SlobWorkload(self.parameters(rows), self.target)
            conn = await connect_sql(self.target)
            try:
                self.registry_was_there = await self.workload.registry.registry_present(conn)
            finally:
                await conn.close()
            await self.workload.load(lambda what, done, total: None)
        except Exception as exc:
            return self.say("load", False, _error(exc), "see the error; the scratch tables go")
        table = self.workload.table_name(1)
        size = size_text(self.workload.data_bytes())
        took = time.monotonic() - began
        text = f"{rows:,} rows of {block:,} B ({size}) into {table} in {took:.0f} s"
        return self.say("load", True, text)

    async def pages(self, record: FirstContact) -> bool:
        assert self.workload is not None
        try:
            facts = (await self.workload.verify())["tables"][0]
        except Exception as exc:
            return self.say(
                "one row per block",
                False,
                _error(exc),
                "report it: the table options that keep a row alone on its page did not hold here",
            )
        most = int(facts["max_rows_per_block"])
        least = self.workload.rows_per_block
        note = "" if least == 1 else f" (the engine's least for a row this size is {least})"
        text = (
            f"{int(facts['rows']):,} rows on {int(facts['blocks']):,} pages, at most {most} "
            f"a page{note}, by {record.page_proof}"
        )
        return self.say("one row per block", True, text)

    # ------------------------------------------------------------------ reads and statistics

    async def reads(self, record: FirstContact) -> None:
        assert self.workload is not None
        dialect = dialect_of(self.target)
        collectors = []
        if dialect is not None and dialect.stats_collectors is not None:
            options = {"table_pattern": self.workload.table_pattern()}
            collectors = dialect.stats_collectors(self.target, options)
        window = await read_window(
            self.target,
            self.workload,
            collectors,
            sessions=self.options.sessions,
            duration_s=self.options.duration_s,
            process_reads=record.process_reads,
            blocking=self.blocking,
        )
        self.statistics(window, record)
        self.judge_reads(window)

    def statistics(self, window: ReadWindow, record: FirstContact) -> None:
        if window.stats_error:
            fix = "grant what the error names (docs/databases.md, dbsim check)"
            self.say("statistics views", False, window.stats_error, fix)
        elif window.sources:
            describe = ", ".join(window.sources)
            text = f"the {describe} collector read them {window.samples} times"
            self.say("statistics views", True, text)
        elif record.process_reads:
            text = "the engine keeps none; this process's read calls (/proc/self/io) count"
            self.say("statistics views", True, text)
        else:
            self.say("statistics views", False, "dbsim reads none for this engine yet")

    def judge_reads(self, window: ReadWindow) -> None:
        assert self.workload is not None
        name = "reads reach the storage"
        expected = self.workload.p.work_unit - 1
        if window.reads == 0:
            self.say(name, False, f"no read completed in {window.seconds:.0f} s")
            return
        if window.physical is None:
            self.say(name, False, "no physical reads could be counted (see the line above)")
            return
        per_read = window.physical / window.reads
        seen = (
            f"{per_read:.1f} physical reads per read (WORK_UNIT - 1 = {expected}), "
            f"{window.reads:,} reads in {window.seconds:.0f} s"
        )
        if per_read >= REACH_SHARE * expected:
            self.say(name, True, seen)
            return
        data = self.workload.data_bytes()
        cache = self.cache_bytes
        held = f"{self.cache_name} ({size_text(cache)})"
        if cache and data < CACHE_FACTOR * cache:
            rows = math.ceil(CACHE_FACTOR * cache / self.workload.p.block_size_bytes)
            why = f"the cache served them: the table ({size_text(data)}) is under {CACHE_FACTOR} x {held}"
            self.say(name, False, f"{seen}; {why}", f"--rows {rows} (or a smaller cache)")
        else:
            why = f"another cache served them (the table is {size_text(data)}, {held})"
            self.say(name, False, f"{seen}; {why}", "see docs/databases.md, dbsim check")

    # ------------------------------------------------------------------ drop

    async def drop(self) -> None:
        if self.workload is None:
            self.say("drop", True, "nothing was created")
            return
        try:
            dropped = await self.workload.drop()
            if not self.registry_was_there:
                dropped += await self._drop_registry()
            conn = await connect_sql(self.target)
            try:
                left = await self.workload.registry.owned(
                    conn, f"{self.prefix}%", self.workload.owned_names()
                )
            finally:
                await conn.close()
        except Exception as exc:
            fix = f"dbsim drop with workload.parameters.table_prefix={self.prefix}"
            self.say("drop", False, _error(exc), fix)
            return
        if left:
            self.say("drop", False, f"still there: {', '.join(left)}", "dbsim drop")
            return
        self.say("drop", True, f"dropped {', '.join(dropped) or 'nothing'}")

    async def _drop_registry(self) -> list[str]:
        """The registry the check created, when no table of anyone's is recorded in it."""
        dialect = self.target.dialect
        quoted = quote_identifier(dialect, REGISTRY_TABLE)
        conn = await connect_sql(self.target)
        try:
            others = await _one(
                conn,
                "registry_rows",
                f"SELECT COUNT(*) FROM {quoted} WHERE name <> '{REGISTRY_TABLE}'",
            )
            if int(others or 0):
                return []
            await conn.execute(drop_statement(REGISTRY_TABLE, dialect))
            await conn.commit()
        finally:
            await conn.close()
        return [REGISTRY_TABLE]


def _record(target: Target) -> FirstContact | None:
    dialect = dialect_of(target)
    return dialect.first_contact if dialect is not None else None


def _checked() -> list[str]:
    return [name for name, d in dialects().items() if d.first_contact is not None]


def _connect_fix() -> str:
    return "check target.host, port, database, user and the password's variable"


async def run_checks(
    target: Target,
    options: CheckOptions,
    emit: Callable[[CheckLine], None],
    blocking: Callable[[Callable[[], Any]], Any],
) -> list[CheckLine]:
    """Every check against ``target`` (opened by the caller); the lines, also emitted."""
    record = _record(target)
    if record is None:
        raise ConfigError(
            f"dbsim check: no first-contact checks for a {target.kind} target "
            f"(it checks SQL targets: {', '.join(sorted(_checked()))})"
        )
    return await FirstContactCheck(target, options, emit, blocking).run(record)


__all__ = ["CheckLine", "CheckOptions", "FirstContactCheck", "run_checks"]
