"""Reading a bundle back (report, runs, compare, size, the analysis): every file bounded and
``summary.json`` validated against its schema before anyone looks inside.

A bundle directory is input like any other: it may be hand-edited, damaged or planted. Its
files are read through :mod:`sim.safeio` (regular files only, size-limited, nesting and
numbers bounded, so a FIFO cannot block a reader nor deep nesting exhaust the recursion
limit), and ``summary.json`` must match :class:`SummaryFile` — the types of every field a
reader descends into — or the command stops with one line naming the file and the field,
rather than failing deep inside ``report``, ``runs`` or ``compare``.

The schema is deliberately loose where the readers are: every field is optional (a failed or
interrupted run writes few), unknown fields are kept (newer writers add sections), and numbers
may be null. It is strict about types: a string where a number or a mapping goes is refused.
"""

from __future__ import annotations

import csv
import logging
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sim import safeio, safeyaml
from sim.errors import ConfigError

if TYPE_CHECKING:
    from hdrh.histogram import HdrHistogram

log = logging.getLogger(__name__)

SUMMARY_NAME = "summary.json"
ANALYSIS_NAME = "analysis.json"
SCENARIO_NAME = "scenario.yaml"
INTERVAL_HISTOGRAMS = ("histograms", "intervals.hlog")
#: A line of the interval histogram log longer than this is damaged (a run's lines hold one
#: operation's encoded histogram: a few kB), and skipped without being held in memory.
MAX_HLOG_LINE_CHARS = 1 << 20
#: summary.json nests 5 deep (storage.block.<device>.<figure>; distributed.workers[i].ops).
MAX_BUNDLE_DEPTH = 16

Scalar = str | int | float | bool | None
Number = float | None  # strict mode: ints are accepted for floats, text and booleans are not


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class ScenarioRef(_Part):
    name: str | None = None
    workload: str | None = None
    target: str | None = None


class OpFigures(_Part):
    count: Number = None
    errors: Number = None
    ops_s: Number = None
    p50_us: Number = None
    p95_us: Number = None
    p99_us: Number = None
    p99_9_us: Number = None
    max_us: Number = None
    min_us: Number = None


class Timing(_Part):
    warmup_s: Number = None
    measured_s: Number = None
    sessions_started_at: str | None = None


class Stage(_Part):
    t: Number = None
    phase: str | None = None
    step: int | None = None
    sessions: int | None = None
    rate_ops_s: Number = None
    rate_iops: Number = None
    delivered_iops: Number = None
    duration_s: Number = None
    session_ops: list[int | None] | None = None


class Mix(_Part):
    requested_pct: dict[str, Number] | None = None
    measured: dict[str, Number] | None = None
    measured_pct: dict[str, Number] | None = None
    expected_by_rule: dict[str, Number] | None = None
    exact: bool | None = None


class SummaryFile(_Part):
    """What the readers of ``summary.json`` rely on (docs/bundle.md describes the file)."""

    schema_version: int | None = None
    dbsim_version: str | None = None
    run: str | None = None
    status: str | None = None
    state: str | None = None
    last_state: str | None = None
    reason: str | None = None
    error: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    finished_at: str | None = None
    scenario: ScenarioRef | None = None
    intervals_written: int | None = None
    sessions: int | None = None
    host: dict[str, Scalar] | None = None
    operations: dict[str, OpFigures] | None = None
    storage: dict[str, dict[str, dict[str, Scalar]]] | None = None
    stages: list[Stage] | None = None
    timing: Timing | None = None
    mix: Mix | None = None
    messages: list[str] | None = None
    workload: dict[str, Any] | None = None
    target: dict[str, Any] | None = None
    collectors: list[dict[str, Any]] | None = None
    collector_errors: dict[str, Any] | None = None
    findings: dict[str, Any] | None = None
    errors: dict[str, Any] | None = None
    outages: dict[str, Any] | None = None
    analysis: dict[str, Any] | None = None
    verdict: dict[str, Any] | str | None = None
    slos: dict[str, Any] | list[Any] | None = None
    sweep: dict[str, Any] | None = None
    distributed: dict[str, Any] | None = None
    baseline: dict[str, Any] | None = None


class AnalysisFile(_Part):
    """The fields of ``analysis.json`` its readers descend into without further checks."""

    version: int | None = Field(default=None, alias="schema")
    primary_device: str | None = None
    io_per_op: dict[str, Any] | None = None
    verdict: dict[str, Any] | str | None = None
    series: dict[str, Any] | None = None


def _field_lines(where: str, exc: ValidationError) -> list[str]:
    lines: list[str] = []
    fields: set[str] = set()
    for err in exc.errors(include_url=False):
        field = ""
        for part in err["loc"]:
            if isinstance(part, int):
                field += f"[{part}]"
            elif not _UNION_MEMBER.match(part):  # a union's member (str, dict[...]) is no field
                field += f".{part}" if field else part
        field = field or "(top level)"
        got = err.get("input")
        shown = "" if isinstance(got, dict | list) else f" (got {type(got).__name__})"
        if field not in fields:  # a union's members each report the same field
            fields.add(field)
            message = _MODEL_NAME.sub("", err["msg"])
            lines.append(f"{where}: {field}: {message}{shown}")
    return lines


_MODEL_NAME = re.compile(r" or instance of \w+")
_UNION_MEMBER = re.compile(
    r"^(str|int|float|bool|none|(list|dict|function-\w+|is-instance)\[.*\])$"
)


def _read_json(path: Path, what: str) -> Any:
    return safeio.read_json_file(
        path, what=what, max_bytes=safeio.MAX_BUNDLE_FILE_BYTES, max_depth=MAX_BUNDLE_DEPTH
    )


def read_summary(bundle: Path, *, label: str = "") -> dict[str, Any]:
    """``bundle``'s summary.json as a dict, validated against :class:`SummaryFile`.

    A :class:`ConfigError` (exit 2) names the directory when it is not a bundle, the file
    when it cannot be read, and the file and the field when a field has the wrong type.
    ``label`` prefixes every line (``compare``'s ``baseline: ``)."""
    if not bundle.is_dir():
        reason = "no such directory" if not bundle.exists() else "not a directory"
        raise ConfigError(f"{label}{bundle} is not a run bundle ({reason})")
    path = bundle / SUMMARY_NAME
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"{label}{bundle} is not a run bundle (no {SUMMARY_NAME} in it)")
    try:
        data = _read_json(path, SUMMARY_NAME)
    except ConfigError as exc:
        raise ConfigError(f"{label}{exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{label}{path}: not a JSON object (a {type(data).__name__})")
    try:
        SummaryFile.model_validate(data)
    except ValidationError as exc:
        lines = _field_lines(f"{label}{path}", exc)
        raise ConfigError("\n".join(lines[:5])) from None
    return data


def read_analysis(bundle: Path) -> dict[str, Any] | None:
    """``analysis.json`` when the bundle has a readable, well-typed one, else None (the
    callers then analyse the bundle again); never blocks on a FIFO nor fills memory."""
    path = bundle / ANALYSIS_NAME
    if not path.exists():
        return None
    try:
        data = _read_json(path, ANALYSIS_NAME)
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: not a JSON object")
        AnalysisFile.model_validate(data)
    except (ConfigError, ValidationError) as exc:
        log.warning("%s: ignored, analysing the bundle again: %s", path, str(exc).splitlines()[0])
        return None
    return data


def read_json_file(path: Path, *, what: str) -> Any:
    """Another JSON file of a bundle (histograms, baseline.json), bounded; ConfigError."""
    return _read_json(path, what)


def read_scenario(bundle: Path) -> dict[str, Any] | None:
    """The resolved scenario (``scenario.yaml``) as data; None when there is none. A damaged
    one is a :class:`ConfigError` naming the file (and line)."""
    path = bundle / SCENARIO_NAME
    if not path.exists() and not path.is_symlink():
        return None
    text = safeio.read_text_file(path, what=SCENARIO_NAME, max_bytes=safeio.MAX_SCENARIO_BYTES)
    data = safeyaml.load_yaml(text, what=str(path))
    return data if isinstance(data, dict) else {}


def read_text(path: Path, *, what: str) -> str | None:
    """A text file of a bundle, bounded; None when it is missing or cannot be read."""
    try:
        return safeio.read_text_file(path, what=what, max_bytes=safeio.MAX_BUNDLE_FILE_BYTES)
    except ConfigError:
        return None


def read_csv_rows(path: Path, *, required: tuple[str, ...] = ()) -> list[dict[str, str]]:
    """A bundle CSV (a time series) as dicts, bounded and regular files only; a
    :class:`ConfigError` naming the file when it cannot be read or lacks a ``required``
    column. Readers that can do without the file catch it (the report shows what it has)."""
    try:
        # Not open(): a FIFO planted as a time series would block the reader for ever.
        with safeio.open_text_stream(path, what="time series") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise ConfigError(
                    f"{path}: not a dbsim time series (no column {', '.join(missing)})"
                )
            return list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc


def iter_whole_rows(path: Path) -> Iterator[dict[str, str]]:
    """A bundle CSV's rows as dicts, streamed, from whole lines only: a bundle still being
    written (a running capture) may end with part of a line, which is left for the next
    reader rather than read as a short row. A :class:`ConfigError` names the file when it
    cannot be opened (missing, a FIFO, unreadable); a row cut short by a damaged file (a
    field count other than the header's) is skipped."""
    try:
        handle = safeio.open_text_stream(path, what="time series")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with handle:
        lines = _whole_lines(handle)
        try:
            header = next(csv.reader(lines), None)
            if not header:
                return
            for cells in csv.reader(lines):
                if len(cells) == len(header):
                    yield dict(zip(header, cells, strict=True))
        except (OSError, UnicodeDecodeError, csv.Error):
            return  # the rest of the file cannot be read as rows: what came before stands


def _whole_lines(handle: Any) -> Iterator[str]:
    """The lines of ``handle`` that end with a newline; stops at the first that does not
    (the line an appending writer has not finished)."""
    for line in handle:
        if not line.endswith("\n"):
            return
        yield line


def read_rows_if_readable(path: Path) -> list[dict[str, str]]:
    """A bundle CSV as dicts; [] when it is missing, unreadable or not a regular file (for
    readers that show what there is: the report, a sweep's step figures)."""
    try:
        return read_csv_rows(path)
    except ConfigError:
        return []


def read_interval_histograms(
    bundle: Path, *, phase: str = "measure"
) -> Iterator[tuple[float, str, HdrHistogram]]:
    """``(t_end, op, histogram)`` of each line of ``phase`` in the bundle's interval histogram
    log (``histograms/intervals.hlog``: ``t_start_s,t_end_s,phase,op,<base64>``), streamed.
    Nothing when the log is missing, unreadable or not a regular file; a damaged line costs
    that line only."""
    from hdrh.histogram import HdrHistogram

    try:
        handle = safeio.open_text_stream(
            bundle.joinpath(*INTERVAL_HISTOGRAMS), what="histogram log"
        )
    except (OSError, ConfigError):
        return
    with handle:
        for line in _bounded_lines(handle):
            parts = line.rstrip("\n").split(",")
            if line.startswith("#") or len(parts) != 5 or parts[2] != phase:
                continue
            try:
                t_end = float(parts[1])
                histogram = HdrHistogram.decode(parts[4].encode("ascii"))
            except Exception:  # hdrh raises several kinds on a damaged line; it costs that line
                continue
            if math.isfinite(t_end):
                yield t_end, parts[3], histogram


def _bounded_lines(handle: Any) -> Iterator[str]:
    """The lines of a text stream, each at most :data:`MAX_HLOG_LINE_CHARS` (a longer one is
    read past in pieces and left out); ends quietly where the file cannot be read on."""
    try:
        while line := handle.readline(MAX_HLOG_LINE_CHARS):
            if line.endswith("\n") or len(line) < MAX_HLOG_LINE_CHARS:
                yield line
                continue
            while (rest := handle.readline(MAX_HLOG_LINE_CHARS)) and not rest.endswith("\n"):
                pass
    except (OSError, UnicodeDecodeError):
        return
