"""Ownership as identity: dbsim writes to and drops only objects it can show it created.

The registry table ``dbsim_registry`` (name, workload, fingerprint) holds one row per object
dbsim created. Its ``fingerprint`` column is a JSON record: the workload, the parameters that
shape the data, the load state, a random *token* and the object's *identity* in the target's
catalogue. An object is dbsim's only when all of these hold:

* the catalogue has exactly one object of that name in the target's schema, and it is a
  table (a view, materialized view, synonym, index … named like dbsim's table is refused);
* the registry has a row for it, of this workload;
* the object carries the token, written by dbsim where the dialect allows it (the dialect
  record's ``marker``: PostgreSQL and Oracle ``COMMENT ON TABLE … IS 'dbsim:<token>'``;
  SQLite a comment inside the CREATE TABLE text, which ``sqlite_master.sql`` keeps);
* its catalogue identity is the one recorded when dbsim created it (PostgreSQL: oid and the
  creating transaction; SQLite: root page; Oracle: OBJECT_ID and CREATED; SQL Server:
  object_id and create_date). A table dropped outside dbsim and re-created under the same
  name gets a new identity and no token, so it is refused, not taken for dbsim's.

The registry is checked the same way on every use: it carries its own token and has a first
row, under its own name, recording its own identity. A table named ``dbsim_registry`` that
lacks them (someone else's, or a copy) is refused, never adopted or written.

Every write path (load, ``run`` with or without ``--skip-load``, drop) goes through
:class:`TableRegistry` and refuses a foreign object with :class:`~sim.errors.OwnershipError`
(exit 2), naming it and why. Identities are queried with the ``object_identity`` statement of
``registry_sql/<dialect>.sql``.

What this does not defend against: someone who reads dbsim's registry and forges a table with
the recorded token and identity. The token is not a secret from anyone who can read the
schema; it tells accidents apart (same names, re-creations, copies), not an adversary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sim.errors import MissingDataError, OwnershipError, TargetError, WorkloadError
from sim.protocols import SqlConnection, Target, connect_sql
from sim.sql import Catalogue, Statement
from workloads.common import bind, catalog_name, drop_statement
from workloads.identity import (
    FIX_HINT,
    REGISTRY_OWNER,
    REGISTRY_TABLE,
    SAMPLE_TOKEN,
    SQL_DIR,
    STATE_LOADED,
    STATE_LOADING,
    STATEMENTS,
    CatalogObject,
    create_registry_statement,
    describe,
    is_marked,
    mark_statements,
    marked_create,
    mismatch,
    new_token,
    registry_table,
)


class TableRegistry:
    """The tables one workload created, recorded with their identities in ``dbsim_registry``.

    Methods take the connection to use and commit their own work. workloads.sqlkit calls them
    for every SQL workload, in this order: :meth:`registry_present` and
    :meth:`check_ownership` for every planned table (reading only, before anything is
    written), :meth:`ensure`, then per table :meth:`begin_load`, :meth:`create_table`
    (instead of running CREATE TABLE itself), the inserts and indexes, :meth:`finish_load`.
    ``--skip-load`` calls :meth:`check_loaded`; ``dbsim drop`` :meth:`owned` and :meth:`drop`.
    """

    def __init__(self, workload: str, dialect: str, paramstyle: str) -> None:
        self.workload = workload
        self.dialect = dialect
        self.paramstyle = paramstyle
        self.catalogue = Catalogue.load(SQL_DIR, dialect, required=STATEMENTS)
        self.marked = is_marked(dialect)

    def _render(self, name: str) -> Statement:
        return self.catalogue.render(name, self.paramstyle, registry=REGISTRY_TABLE)

    # ------------------------------------------------------------------ statements

    def inventory(self, sample_table: str | None = None) -> list[Statement]:
        """The registry's DDL and DML, and how a table (``sample_table``) gets its token."""
        create = marked_create(self.dialect, create_registry_statement(self.dialect), SAMPLE_TOKEN)
        statements = [create, *mark_statements(self.dialect, REGISTRY_TABLE, SAMPLE_TOKEN)]
        if sample_table is not None:
            statements += mark_statements(self.dialect, sample_table, SAMPLE_TOKEN)
        return statements + [self._render(n) for n in sorted(self.catalogue.statements)]

    # ------------------------------------------------------------------ reading

    async def catalog(self, conn: SqlConnection, name: str) -> list[CatalogObject]:
        """Every catalogue object called ``name`` in the target's schema (empty: none)."""
        statement = self._render("object_identity")
        tname = catalog_name(self.dialect, name)
        return [CatalogObject.parse(r) for r in await conn.column(statement, (tname,))]

    async def recorded(self, conn: SqlConnection, name: str) -> dict[str, Any] | None:
        """The registry record of ``name``, or None when dbsim did not create it."""
        statement = self._render("registry_get")
        text = await conn.scalar(statement, bind(statement, name=name))
        if text is None:
            return None
        try:
            record = json.loads(str(text))
        except ValueError:
            record = None
        if not isinstance(record, dict):
            raise OwnershipError(f"{REGISTRY_TABLE}: unreadable record for {name}: {text!r}")
        return record

    async def registry_present(self, conn: SqlConnection) -> bool:
        """Whether dbsim's registry is there (False: no object of its name at all); raises
        OwnershipError when the object of that name is not the registry dbsim created."""
        found = await self.catalog(conn, REGISTRY_TABLE)
        if not found:
            return False
        try:
            record = (
                await self.recorded(conn, REGISTRY_TABLE) if describe(found) == "table" else None
            )
        except TargetError as exc:  # not even the registry's columns
            await conn.rollback()
            raise OwnershipError(
                f"{REGISTRY_TABLE} exists but is not dbsim's registry (it cannot be read as "
                f"one); refusing to use it: move it away or use another schema"
            ) from exc
        problem: str | None
        if record is None:
            problem = (
                f"it is a {describe(found)}"
                if describe(found) != "table"
                else "it has no identity row (someone else's table, or a copy)"
            )
        else:
            problem = mismatch(found, record, REGISTRY_OWNER, self.marked)
        if problem:
            raise OwnershipError(
                f"{REGISTRY_TABLE} exists but is not dbsim's registry: {problem}; refusing to "
                f"use it: move it away or use another schema"
            )
        return True

    def _refuse(
        self, name: str, found: Sequence[CatalogObject], record: Mapping[str, Any] | None
    ) -> None:
        """Raise OwnershipError unless the existing object ``found`` is this workload's."""
        if record is None:
            raise OwnershipError(
                f"{describe(found)} {name} exists but was not created by dbsim; refusing to "
                f"touch it (choose another workload.parameters.table_prefix)"
            )
        problem = mismatch(found, record, self.workload, self.marked)
        if problem:
            raise OwnershipError(
                f"{name} is not the table dbsim created: {problem}; refusing to touch it "
                f"({FIX_HINT})"
            )

    # ------------------------------------------------------------------ writing

    async def _put(
        self, conn: SqlConnection, name: str, owner: str, record: Mapping[str, Any]
    ) -> None:
        statement = self._render("registry_put")
        text = json.dumps(record, sort_keys=True)
        await conn.execute(statement, bind(statement, name=name, workload=owner, fingerprint=text))

    async def _set(self, conn: SqlConnection, name: str, record: Mapping[str, Any]) -> None:
        statement = self._render("registry_set")
        text = json.dumps(record, sort_keys=True)
        await conn.execute(statement, bind(statement, name=name, fingerprint=text))

    async def _forget(self, conn: SqlConnection, name: str) -> None:
        statement = self._render("registry_delete")
        await conn.execute(statement, bind(statement, name=name))

    async def put_record(
        self, conn: SqlConnection, name: str, owner: str, record: Mapping[str, Any]
    ) -> None:
        """Record an object dbsim creates outside the tables (a tablespace), and commit."""
        await self._put(conn, name, owner, record)
        await conn.commit()

    async def set_record(self, conn: SqlConnection, name: str, record: Mapping[str, Any]) -> None:
        """Replace the record of ``name`` (put by :meth:`put_record`), and commit."""
        await self._set(conn, name, record)
        await conn.commit()

    async def forget(self, conn: SqlConnection, name: str) -> None:
        """Delete the record of ``name`` (dbsim dropped it), and commit."""
        await self._forget(conn, name)
        await conn.commit()

    async def ensure(self, conn: SqlConnection) -> None:
        """Create the registry, with its token and identity row, unless it is there (a
        look-alike raises OwnershipError)."""
        if await self.registry_present(conn):
            return
        token = new_token()
        begin = getattr(conn, "begin", None)  # CREATE and its mark in one (see create_table)
        try:
            if begin is not None:
                await begin()
            await conn.execute(
                marked_create(self.dialect, create_registry_statement(self.dialect), token)
            )
            for statement in mark_statements(self.dialect, REGISTRY_TABLE, token):
                await conn.execute(statement)
            await conn.commit()
        except TargetError:
            # Another dbsim may have created it since we looked; fine if it is there now.
            await conn.rollback()
            if await self.registry_present(conn):
                return
            raise
        found = await self.catalog(conn, REGISTRY_TABLE)
        if describe(found) != "table" or (self.marked and found[0].token != token):
            raise OwnershipError(f"{REGISTRY_TABLE} changed while dbsim was creating it")
        record = {
            "workload": REGISTRY_OWNER,
            "role": "registry",
            "token": token,
            "ident": found[0].ident,
        }
        await self._put(conn, REGISTRY_TABLE, REGISTRY_OWNER, record)
        await conn.commit()

    async def check_ownership(self, conn: SqlConnection, name: str) -> None:
        """Raise OwnershipError unless ``name`` is absent or this workload's (call for every
        table before loading any, so a refusal costs no loading time)."""
        found = await self.catalog(conn, name)
        if not found:
            return
        record = await self.recorded(conn, name) if await self.registry_present(conn) else None
        self._refuse(name, found, record)

    async def begin_load(
        self, conn: SqlConnection, name: str, fingerprint: Mapping[str, Any]
    ) -> bool:
        """Whether ``name`` must be built: False when it is ours and loaded with
        ``fingerprint`` already; otherwise a stale copy of ours is dropped, the table is
        registered as loading with a new token (so an interrupted load is rebuilt next time)
        and True is returned. The caller then builds it with :meth:`create_table`."""
        if not await self.registry_present(conn):
            raise WorkloadError(f"{REGISTRY_TABLE} is missing: call ensure() first")
        wanted = {"workload": self.workload, **fingerprint}
        found = await self.catalog(conn, name)
        record = await self.recorded(conn, name)
        if found:
            self._refuse(name, found, record)
        if record is not None:
            if (
                found
                and record.get("state") == STATE_LOADED
                and {k: record.get(k) for k in wanted} == wanted
            ):
                return False
            if found:
                await conn.execute(drop_statement(name, self.dialect))
            await self._forget(conn, name)
            await conn.commit()
        state = {**wanted, "state": STATE_LOADING, "token": new_token(), "ident": None}
        await self._put(conn, name, self.workload, state)
        await conn.commit()
        return True

    async def create_table(self, conn: SqlConnection, name: str, create: Statement) -> None:
        """Run ``create`` (the table's CREATE TABLE) with the token registered by
        :meth:`begin_load`, then record the new table's catalogue identity."""
        record = await self.recorded(conn, name)
        if record is None or record.get("state") != STATE_LOADING:
            raise WorkloadError(f"{name}: create_table() without begin_load()")
        token = str(record.get("token"))
        # One transaction where the connection has explicit ones (PostgreSQL: autocommit per
        # statement otherwise): a stop between the CREATE and the COMMENT ON that marks it (a
        # SIGINT in the native signal sweep's load phase) left a table without the token, which
        # dbsim then refused to drop as not its own. Rolled back whole, there is none.
        begin = getattr(conn, "begin", None)
        if begin is not None:
            await begin()
        await conn.execute(marked_create(self.dialect, create, token))
        for statement in mark_statements(self.dialect, name, token):
            await conn.execute(statement)
        found = await self.catalog(conn, name)
        # Just created, in this transaction where DDL is transactional: it must be one table
        # with the token (SQL Server has no token: the table's identity is recorded in the
        # transaction that created it).
        if describe(found) != "table" or (self.marked and found[0].token != token):
            raise OwnershipError(f"{name} changed while dbsim was creating it ({FIX_HINT})")
        await self._set(conn, name, {**record, "ident": found[0].ident})
        await conn.commit()

    async def finish_load(
        self, conn: SqlConnection, name: str, fingerprint: Mapping[str, Any]
    ) -> None:
        """Mark ``name`` loaded (and commit the work of the load with it), once it is still
        the table dbsim created."""
        found = await self.catalog(conn, name)
        record = await self.recorded(conn, name)
        if not found:
            raise WorkloadError(f"{name} disappeared while dbsim was loading it")
        self._refuse(name, found, record)
        assert record is not None  # _refuse raised otherwise
        wanted = {"workload": self.workload, **fingerprint}
        await self._set(conn, name, {**record, **wanted, "state": STATE_LOADED})
        await conn.commit()

    # ------------------------------------------------------------------ using loaded data

    async def check_loaded_on(
        self, target: Target, wanted: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Any]:
        """:meth:`check_loaded` on a connection of its own: a workload's ``check_loaded``."""
        conn = await connect_sql(target)
        try:
            tables = await self.check_loaded(conn, wanted)
        finally:
            await conn.close()
        return {"skipped": True, "tables": tables}

    async def check_loaded(
        self, conn: SqlConnection, wanted: Mapping[str, Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """Check, without writing, that every table of ``wanted`` (name → fingerprint) is
        dbsim's and loaded with that fingerprint: OwnershipError for a foreign object,
        MissingDataError naming what is missing or stale. Returns a line per table."""
        present = await self.registry_present(conn)
        missing: list[str] = []
        stale: list[str] = []
        checked = []
        for name, fingerprint in wanted.items():
            found = await self.catalog(conn, name)
            if not found:
                missing.append(name)
                continue
            record = await self.recorded(conn, name) if present else None
            self._refuse(name, found, record)
            assert record is not None
            want = {"workload": self.workload, **fingerprint}
            if record.get("state") != STATE_LOADED:
                stale.append(f"{name} (its load did not finish)")
            elif {k: record.get(k) for k in want} != want:
                differ = sorted(k for k in want if record.get(k) != want[k])
                stale.append(f"{name} (loaded with other {', '.join(differ)})")
            else:
                checked.append({"table": name, "state": STATE_LOADED, "ident": found[0].ident})
        if missing or stale:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(missing))
            if stale:
                parts.append("not loaded as this scenario needs: " + ", ".join(stale))
            raise MissingDataError(
                f"--skip-load: the {self.workload} data is not there ({'; '.join(parts)}); "
                f"build it with `dbsim load` and this scenario, or run without --skip-load"
            )
        return checked

    # ------------------------------------------------------------------ dropping

    async def owned(self, conn: SqlConnection, like: str, pattern: re.Pattern[str]) -> list[str]:
        """Registered tables of this workload whose whole name matches ``pattern``.

        ``like`` (a LIKE pattern) only narrows the query (``_`` is a wildcard there and some
        databases compare case-insensitively); the exact match is ``pattern``'s.
        """
        if not await self.registry_present(conn):
            return []
        statement = self._render("registry_names")
        names = await conn.column(statement, bind(statement, workload=self.workload, pattern=like))
        return [str(n) for n in names if pattern.fullmatch(str(n))]

    async def holds_tables(self, conn: SqlConnection) -> bool:
        """Whether the registry still records a table of any workload (its own row aside)."""
        statement = self._render("registry_others")
        count = await conn.scalar(statement, bind(statement, owner=REGISTRY_OWNER))
        return bool(count)

    async def drop(self, conn: SqlConnection, names: Sequence[str]) -> list[str]:
        """Drop the registered tables ``names`` (and their registry rows); return them. Every
        one is checked first: a foreign object among them refuses the whole drop."""
        if not await self.registry_present(conn):
            return []
        plan: list[tuple[str, bool]] = []
        for name in names:
            record = await self.recorded(conn, name)
            if record is None or record.get("workload") != self.workload:
                continue  # not ours: never drop it
            found = await self.catalog(conn, name)
            if found:
                self._refuse(name, found, record)
            plan.append((name, bool(found)))
        for name, exists in plan:
            if exists:
                await conn.execute(drop_statement(name, self.dialect))
            await self._forget(conn, name)
            await conn.commit()
        return [name for name, _ in plan]


__all__ = [
    "REGISTRY_TABLE",
    "STATEMENTS",
    "CatalogObject",
    "TableRegistry",
    "create_registry_statement",
    "new_token",
    "registry_table",
]
