"""One scale of a replay against its capture (:mod:`sim.replay.against`): the device figures
recomputed from both bundles, a file replay's call figures, or a day shape's steps as
``replay.json`` holds them; the mismatches with what ``replay.json`` stored, and its
judgement of record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.errors import ConfigError
from sim.replay import fidelity
from sim.replay.against_figures import FIGURES, band, differs, figure_row, shape_mismatches
from sim.replay.against_windows import Window, locate, replay_window
from sim.replay.spread import file_values, side


def judgement(entry: dict[str, Any]) -> dict[str, Any]:
    """The judgement of record: ``replay.json``'s fidelity of the scale."""
    fid = entry.get("fidelity") or {}
    return {
        "faithful": bool(fid.get("faithful")),
        "cause": fid.get("cause"),
        "failed": list(fid.get("failed") or []),
        "not_judged": [
            c["figure"] for c in fid.get("checks") or [] if c.get("tolerance") == "not judged"
        ],
    }


def scale_entry(
    entry: dict[str, Any], doc: dict[str, Any], replay: Path, cap: Window, capture: Path
) -> dict[str, Any]:
    """One scale of the comparison (the module docstring)."""
    scale = float(entry["scale"])
    out: dict[str, Any] = {"scale": scale, "judgement": judgement(entry)}
    if "day" in entry:
        return {**out, **_day(entry)}
    if not isinstance(entry.get("bundle"), str):
        raise ConfigError(f"{replay}: replay.json names no bundle for the scale {scale:g}x")
    bundle = locate(entry["bundle"], doc, replay)
    if not bundle.is_dir():
        raise ConfigError(f"{replay}: the bundle of the scale {scale:g}x is missing ({bundle})")
    rep = replay_window(bundle, entry.get("replay") or {})
    files = bool(doc.get("files"))
    found = {} if files else {c.figure: c for c in fidelity.checks(cap.shape, rep.shape, scale)}
    rows = [figure_row(f, (cap, rep), scale, found) for f in FIGURES]
    mismatches = shape_mismatches("replay", rep.shape.as_dict(), entry.get("replay") or {})
    stored = {c["figure"]: c for c in (entry.get("fidelity") or {}).get("checks") or []}
    file_rows: list[dict[str, Any]] = []
    file_series: dict[str, Any] = {}
    if files:
        file_rows, file_mismatches, file_series = _files(entry, doc, bundle, capture, scale)
        mismatches += file_mismatches
    judged = [r for r in (*rows, *file_rows) if r["check"]]
    mismatches += _check_mismatches(judged, stored)
    extra = [c for name, c in stored.items() if name not in {r["check"] for r in judged}]
    return {
        **out,
        "bundle": str(bundle),
        "windows": {"capture": cap.shape.window.how, "replay": rep.shape.window.how},
        "intervals": {"capture": len(cap.picked), "replay": len(rep.picked)},
        "figures": rows,
        "file_figures": file_rows,
        "judged_elsewhere": [
            {"figure": c["figure"], "ok": c.get("ok"), "off": c.get("off")} for c in extra
        ],
        "mismatches": mismatches,
        "series": _series(cap, rep, scale),
        "file_series": file_series,
    }


def _check_mismatches(rows: list[dict[str, Any]], stored: dict[str, Any]) -> list[str]:
    """A recomputed check whose verdict or figures are not the stored one's."""
    out = []
    for row in rows:
        theirs = stored.get(row["check"])
        if theirs is None:
            out.append(f"{row['check']}: judged here, absent from replay.json's checks")
            continue
        ok = theirs.get("ok") if theirs.get("tolerance") != fidelity.NOT_JUDGED else None
        if ok != row["ok"] or theirs.get("tolerance") != row["tolerance"]:
            out.append(
                f"{row['check']}: recomputed {_said(row['ok'], row['tolerance'])}, replay.json "
                f"{_said(ok, theirs.get('tolerance'))}"
            )
        elif differs(theirs.get("expected"), row["asked"]) or differs(
            theirs.get("delivered"), row["replay"]
        ):
            out.append(
                f"{row['check']}: recomputed asked {row['asked']!r} delivered {row['replay']!r}, "
                f"replay.json {theirs.get('expected')!r} and {theirs.get('delivered')!r}"
            )
        elif "band" in theirs and _bands_differ(row["band"], theirs["band"]):
            # A replay.json written before checks carried their band has no "band": nothing
            # to compare, the recomputed check's own band is drawn.
            out.append(
                f"{row['check']}: recomputed band {row['band']!r}, replay.json {theirs['band']!r}"
            )
    return out


def _bands_differ(ours: list[float] | None, theirs: Any) -> bool:
    """Whether a recomputed band is not the stored one to rounding (a stored band that is not
    two numbers is not the recomputed one either)."""
    if ours is None or theirs is None:
        return (ours is None) != (theirs is None)
    if not isinstance(theirs, list) or len(theirs) != 2:
        return True
    if not all(isinstance(b, int | float) and not isinstance(b, bool) for b in theirs):
        return True
    return any(differs(a, float(b)) for a, b in zip(ours, theirs, strict=True))


def _said(ok: bool | None, tolerance: Any) -> str:
    return f"{'not judged' if ok is None else 'ok' if ok else 'NOT ok'} at {tolerance}"


def _series(cap: Window, rep: Window, scale: float) -> dict[str, Any]:
    """Per side the per-interval read and write IOPS (the capture's times the scale) and
    read share, on seconds since the side's window began, for the page's charts."""
    out = {}
    for name, win, factor in (("asked", cap, scale), ("replay", rep, 1.0)):
        s, picked = win.series, win.picked
        start = win.shape.window.first_t
        reads = [float(s["read_iops"][i] or 0.0) for i in picked]
        writes = [float(s["write_iops"][i] or 0.0) for i in picked]
        out[name] = {
            "t": [float(s["t"][i]) - start for i in picked],
            "read_iops": [factor * r for r in reads],
            "write_iops": [factor * w for w in writes],
            "read_pct": [
                100 * r / (r + w) if r + w > 0 else None for r, w in zip(reads, writes, strict=True)
            ],
        }
    return out


def _day(entry: dict[str, Any]) -> dict[str, Any]:
    """A day-shape scale as replay.json holds it (nothing recomputed)."""
    fid = entry.get("fidelity") or {}
    return {
        "day": dict(entry["day"]),
        "steps": list(fid.get("steps") or []),
        "unit": fid.get("unit", "IOPS"),
        "peak": fid.get("peak"),
        "total": fid.get("total"),
        "recomputed": False,
        "what": "the day shape's steps as replay.json holds them: not recomputed",
        "mismatches": [],
    }


def _files(
    entry: dict[str, Any], doc: dict[str, Any], bundle: Path, capture: Path, scale: float
) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
    """A file replay's call figures: the capture's calls over its window and the scale's over
    its run's measured stage, judged by :func:`sim.replay.fileplan.checks` again; and both
    sides' reproduced calls per interval for the page (the capture's times the scale)."""
    from sim.replay.filejob import (
        REPRODUCED,
        production_rows,
        read_series,
        shape_over,
    )
    from sim.replay.fileplan import checks

    cap_rows, how = production_rows(capture)
    cap_files = shape_over(cap_rows, how)  # production_window's shape, from the rows kept
    rows = _stage_rows(bundle, read_series(bundle), float(doc.get("interval_s") or 1.0))
    rep_files = shape_over(rows, str((entry.get("files") or {}).get("window", "")))
    out = [file_row(check, cap_rows, rows, scale) for check in checks(cap_files, rep_files, scale)]
    mismatches = _file_mismatches("capture", cap_files.as_dict(), doc["capture"].get("files"))
    mismatches += _file_mismatches("replay", rep_files.as_dict(), entry.get("files"))
    series = {
        name: {
            "t": [r["t"] - picked[0]["t"] + _period(picked) for r in picked],
            "calls_s": [
                factor * v for v in file_values(picked, "calls_s", REPRODUCED)[0] if v is not None
            ],
        }
        for name, picked, factor in (("asked", cap_rows, scale), ("replay", rows, 1.0))
    }
    return out, mismatches, series


def file_row(
    check: fidelity.Check, cap_rows: list[dict[str, float]], rows: list[dict[str, float]],
    scale: float,
) -> dict[str, Any]:  # fmt: skip
    """One call figure of a file replay: its check (with the band it was judged against) and
    both sides' reproduced calls per interval (the capture's times the scale)."""
    from sim.replay.filejob import REPRODUCED

    key = _file_key(check.figure)
    factor = scale if key == "calls_s" else 1.0
    most = 100.0 if check.unit == "%" else None
    captured = None if check.expected is None else check.expected / factor
    asked = side(*file_values(cap_rows, key, REPRODUCED), factor, most)
    got = side(*file_values(rows, key, REPRODUCED), 1.0, most)
    return {
        "figure": check.figure, "key": key, "unit": check.unit, "check": check.figure,
        "capture": captured, "asked": check.expected, "replay": check.delivered,
        "off": check.off, "tolerance": check.tolerance, "ok": check.ok, "judged": True,
        "band": band(check),
        "asked_intervals": asked.as_dict(), "replay_intervals": got.as_dict(),
    }  # fmt: skip


def _period(rows: list[dict[str, float]]) -> float:
    """The rows' interval (their first gap): an interval's end since its window began."""
    return rows[1]["t"] - rows[0]["t"] if len(rows) > 1 else 1.0


def _file_key(figure: str) -> str:
    if figure == "calls/s":
        return "calls_s"
    if figure.endswith(" share"):
        return f"{figure.removesuffix(' share')}_share"
    return f"{figure.removesuffix(' size')}_kib"


def _stage_rows(
    bundle: Path, rows: list[dict[str, float]], interval_s: float
) -> list[dict[str, float]]:
    """The ``fileops`` rows wholly inside the run's measured stage (as the replay took them)."""
    from sim.replay.dbrun import measured_stage
    from sim.replay.fileplan import rows_in_stage
    from sim.safeio import read_json_file

    summary = read_json_file(bundle / "summary.json", what="run summary")
    stage = measured_stage(summary)
    start, end = float(stage["t"]), float(stage["t"]) + float(stage["duration_s"])
    return rows_in_stage(rows, start, end, interval_s)


def _file_mismatches(name: str, ours: dict[str, Any], stored: Any) -> list[str]:
    stored = stored or {}
    out = []
    for key in ("reproduced_calls_s", "read_kib", "write_kib"):
        if differs(ours.get(key), stored.get(key)):
            out.append(
                f"{name} {key}: recomputed {ours.get(key)!r}, replay.json {stored.get(key)!r}"
            )
    for cls, rate in (ours.get("calls_s") or {}).items():
        if differs(rate, (stored.get("calls_s") or {}).get(cls)):
            out.append(f"{name} {cls} calls/s: recomputed {rate!r}, replay.json "
                       f"{(stored.get('calls_s') or {}).get(cls)!r}")  # fmt: skip
    return out
