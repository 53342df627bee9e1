"""``dbsim report BUNDLE --csv DIR``: the run's time series and SLOs as CSV for a spreadsheet.

Two files: ``timeseries.csv``, the measured intervals aligned on ``t`` as the report plots them
(per operation ops/s, p50 and p99 in µs; per block device its figures; the host's CPU), one
column per figure; ``slos.csv``, the SLO table of the answer. Nothing is overwritten: ``DIR``
is made when missing (never through a link), and each file is created new
(:func:`sim.nofollow.write_new`): a file already there is refused, named, and left as it was.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sim.errors import ConfigError
from sim.nofollow import DIR_FLAGS, write_new

SERIES_NAME = "timeseries.csv"
SLOS_NAME = "slos.csv"
#: A cell a spreadsheet would read as a formula starts with one of these: quoted with "'".
FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value)
    return "'" + text if text.startswith(FORMULA_LEADS) else text


def series_columns(series: Mapping[str, Any]) -> tuple[list[str], list[list[object]]]:
    """The aligned series (the analysis' ``series`` shape) as headers and rows."""
    times = list(series.get("t") or [])
    columns: list[tuple[str, Sequence[Any]]] = [("t_s", times), ("step", series.get("step") or [])]
    for key, unit in (("ops_s", "ops_s"), ("p50_us", "p50_us"), ("p99_us", "p99_us")):
        for op, values in sorted(_mapping(series.get(key)).items()):
            columns.append((f"{op} {unit}", values))
    for device, figures in sorted(_mapping(series.get("device")).items()):
        for name, values in _mapping(figures).items():
            columns.append((f"{device} {name}", values))
    for name, values in sorted(_mapping(series.get("host")).items()):
        columns.append((f"host {name}", values))
    rows = [
        [values[i] if i < len(values) else None for _, values in columns] for i in range(len(times))
    ]
    return [name for name, _ in columns], rows


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _csv(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([_cell(h) for h in headers])
    writer.writerows([[_cell(v) for v in row] for row in rows])
    return buffer.getvalue().encode("utf-8")


def export_csv(
    bundle: Path, directory: Path, summary: Mapping[str, Any], analysis: dict[str, Any] | None
) -> list[Path]:
    """Write ``timeseries.csv`` and ``slos.csv`` into ``directory``; returns their paths.
    Raises :class:`ConfigError` (exit 2) when a file is already there or the directory
    cannot be used."""
    from sim.report.answer import build_answer
    from sim.report.data import series_from_bundle

    series = _mapping(analysis).get("series")
    if not (isinstance(series, dict) and series.get("t")):
        series = series_from_bundle(bundle)
    headers, rows = series_columns(series)
    answer = build_answer(summary, analysis)
    slo_rows = [
        [r.label, r.name, r.measured, r.target, r.margin, "met" if r.met else "missed"]
        for r in answer.slos
    ]
    files = {
        SERIES_NAME: _csv(headers, rows),
        SLOS_NAME: _csv(("slo", "name", "measured", "target", "margin", "result"), slo_rows),
    }
    with contextlib.suppress(FileExistsError):
        directory.mkdir(parents=True)
    try:
        fd = os.open(directory, DIR_FLAGS)
    except OSError as exc:
        raise ConfigError(f"report: --csv {directory}: {exc.strerror or exc}") from exc
    written: list[Path] = []
    try:
        for name in files:  # all or nothing: refuse before writing the first
            if _exists(name, fd):
                raise ConfigError(
                    f"report: --csv {directory / name} exists; dbsim writes new files only, "
                    "so it left it as it was (choose another directory)"
                )
        for name, data in files.items():
            try:
                write_new(name, data, dir_fd=fd)
            except OSError as exc:
                raise ConfigError(
                    f"report: --csv cannot write {directory / name}: {exc.strerror or exc}"
                ) from exc
            written.append(directory / name)
    finally:
        os.close(fd)
    return written


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
