"""The one writer of imported captures: rows of figures in, a capture bundle out.

The bundle has a run bundle's layout and formats (docs/bundle.md) so that everything that
reads bundles reads it: ``timeseries/<source>.csv`` with the columns ``t, interval, phase,
entity`` and the figures, ``timeseries/ops.csv`` with its header only (no operations were
run), and ``summary.json`` with ``kind: capture`` and the ``capture`` object (the spec of
issue #26: origin, format, files, interval, what was dropped, what only means were given
for). Files are written with the run bundle's own classes (:class:`AppendCsv`, whole lines;
:func:`atomic_write`, summary.json last), into a directory made fresh
(:func:`new_bundle_dir`), so nothing already there is ever replaced.

Times: each row's wall-clock time is the END of the interval its figures cover, as a run
bundle's ``t``. ``t`` is seconds since the capture started: the reading the first rates were
taken from (``started``), by default the first row's time less ``interval_s``. Intervals are
numbered 1, 2 … by distinct times. A figure a row does not have is an empty cell, never 0.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sim import __version__
from sim.bundle.files import AppendCsv, atomic_write, iso, new_bundle_dir, os_reason
from sim.bundle.writer import OPS_COLUMNS, SAMPLE_PREFIX_COLUMNS, SCHEMA_VERSION
from sim.errors import ConfigError, OutputDirectoryError
from sim.imports.source import Row
from sim.safeio import strict_json

KIND_CAPTURE = "capture"
PHASE = "measure"
#: ``capture.timezone`` when the file's times carry no zone.
ZONE_UNKNOWN = "as written in the file (zone unknown)"
#: Decimals kept per figure (as the run bundle's writer keeps them).
DIGITS = 4


def zone_of(moment: datetime) -> str:
    """``UTC``, an offset (``+02:00``) or :data:`ZONE_UNKNOWN`, as ``capture.timezone``."""
    offset = moment.utcoffset()
    if offset is None:
        return ZONE_UNKNOWN
    if offset == timedelta(0):
        return "UTC"
    return moment.isoformat()[-6:]


def write_capture_bundle(
    out_dir: Path,
    name: str,
    capture_meta: Mapping[str, Any],
    rows: Sequence[Row],
    *,
    started: datetime | None = None,
    host: Mapping[str, Any] | None = None,
    messages: Sequence[str] = (),
) -> Path:
    """Write ``rows`` as a new capture bundle in ``out_dir``; returns its directory.

    ``capture_meta`` becomes ``summary.capture`` (``origin``, ``format``, ``files``,
    ``interval_s``, ``dropped``, ``dropped_count``, ``means_only`` …); ``timezone`` is added
    from the times when it is missing. An OSError is an :class:`OutputDirectoryError` (exit
    2) and the files written so far are removed."""
    if not rows:
        raise ConfigError("import: no figures to write")
    ordered = sorted(rows, key=lambda row: row[0])
    interval_s = capture_meta.get("interval_s")
    first = ordered[0][0]
    if started is None:
        started = first - timedelta(seconds=interval_s or 0)
    times = sorted({row[0] for row in ordered})
    index = {moment: i for i, moment in enumerate(times, start=1)}
    try:
        path = new_bundle_dir(out_dir, name, now=_epoch(started))
    except OutputDirectoryError as exc:  # the run's wording names its scenario field
        raise OutputDirectoryError(str(exc).replace("output.directory:", "-o:", 1)) from None
    written: list[Path] = []
    try:
        (path / "timeseries").mkdir()
        written.append(path / "timeseries")
        _write_series(path, ordered, started, index, written)
        summary = _summary(path, capture_meta, ordered, times, started, host, messages)
        atomic_write(path / "summary.json", strict_json(summary) + "\n")
    except OSError as exc:
        _remove(path, written)
        where = exc.filename or path
        raise OutputDirectoryError(f"-o: cannot write {where}: {os_reason(exc)}") from exc
    return path


def _epoch(moment: datetime) -> float:
    # A naive time is the file's wall clock: named in the directory as written.
    return moment.timestamp()


def _write_series(
    path: Path,
    rows: Sequence[Row],
    started: datetime,
    index: Mapping[datetime, int],
    written: list[Path],
) -> None:
    ops = path / "timeseries" / "ops.csv"
    written.append(ops)
    AppendCsv(ops, OPS_COLUMNS).close()
    by_source: dict[str, list[dict[str, Any]]] = {}
    keys: dict[str, set[str]] = {}
    for moment, source, entity, figures in rows:
        record: dict[str, Any] = {
            "t": round((moment - started).total_seconds(), 3),
            "interval": index[moment],
            "phase": PHASE,
            "entity": entity,
        }
        for key, value in figures.items():
            if not math.isfinite(value):
                raise ValueError(f"{source} {entity}: {key} is {value}, not a figure")
            record[key] = round(float(value), DIGITS)
        by_source.setdefault(source, []).append(record)
        keys.setdefault(source, set()).update(figures)
    for source, records in sorted(by_source.items()):
        csv_path = path / "timeseries" / f"{source}.csv"
        written.append(csv_path)
        writer = AppendCsv(csv_path, SAMPLE_PREFIX_COLUMNS + tuple(sorted(keys[source])))
        try:
            writer.append(records)
        finally:
            writer.close()


def storage_means(
    rows: Sequence[Row], times: Sequence[datetime], started: datetime, interval_s: float | None
) -> dict[str, dict[str, dict[str, float]]]:
    """Per source and entity, each figure's mean weighted by its interval's length (a rate's
    total over the total time), as a run summary's ``storage``. An interval is as long as
    the time since the previous one, at most ``interval_s``: the gap between two files is no
    interval's."""
    length: dict[datetime, float] = {}
    previous = started
    for moment in times:
        seconds = (moment - previous).total_seconds()
        length[moment] = min(seconds, interval_s) if interval_s else seconds
        previous = moment
    sums: dict[tuple[str, str], dict[str, float]] = {}
    weights: dict[tuple[str, str], dict[str, float]] = {}
    counts: dict[tuple[str, str], int] = {}
    for moment, source, entity, figures in rows:
        key = (source, entity)
        weight = max(length[moment], 0.0) or 1e-9
        counts[key] = counts.get(key, 0) + 1
        for figure, value in figures.items():
            sums.setdefault(key, {})[figure] = sums.get(key, {}).get(figure, 0.0) + value * weight
            weights.setdefault(key, {})[figure] = weights.get(key, {}).get(figure, 0.0) + weight
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (source, entity), figure_sums in sorted(sums.items()):
        means = {
            figure: round(total / weights[(source, entity)][figure], DIGITS)
            for figure, total in sorted(figure_sums.items())
        }
        means["samples"] = counts[(source, entity)]
        out.setdefault(source, {})[entity] = means
    return out


def _summary(
    path: Path,
    capture_meta: Mapping[str, Any],
    rows: Sequence[Row],
    times: Sequence[datetime],
    started: datetime,
    host: Mapping[str, Any] | None,
    messages: Sequence[str],
) -> dict[str, Any]:
    capture = dict(capture_meta)
    capture.setdefault("timezone", zone_of(started))
    capture.setdefault("imported_at", iso(time.time()))
    measured_s = (times[-1] - started).total_seconds()
    summary: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "dbsim_version": __version__,
        "run": path.name,
        "kind": KIND_CAPTURE,
        "status": "completed",
        "state": "finished",
        "scenario": {"name": path.name, "workload": None, "target": None},
        "started_at": started.isoformat(),
        "ended_at": times[-1].isoformat(),
        "intervals_written": len(times),
        "host": dict(host or {}),
        "timing": {
            "warmup_s": 0.0,
            "measured_s": round(measured_s, 3),
            "sessions_started_at": started.isoformat(),
        },
        "storage": storage_means(rows, times, started, capture_meta.get("interval_s")),
        "capture": capture,
    }
    if messages:
        summary["messages"] = list(messages)
    return summary


def _remove(path: Path, written: list[Path]) -> None:
    """Remove what this writer made (by the names it created, in the fresh directory)."""
    for made in reversed(written):
        with contextlib.suppress(OSError):
            if made.is_dir() and not made.is_symlink():
                made.rmdir()
            else:
                os.unlink(made)
    with contextlib.suppress(OSError):
        path.rmdir()
