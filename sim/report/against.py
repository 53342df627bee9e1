"""A replay against its capture (:func:`sim.replay.against.compare_replay`) as text: the
console's lines (fixed width, as ``dbsim replay`` prints its fidelity: every line fits 80
columns) and the per-figure CSV. The page is :mod:`sim.report.against_page`."""

from __future__ import annotations

import csv
import io
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

WIDTH = 80
DASH = "-"
UNIT_WORDS = {"1/s": "", "%": " %", "KiB": " KiB", "ms": " ms"}


def num(value: float | None, digits: int = 4) -> str:
    """``digits`` significant digits (trailing zeros kept: 202.0), thousands grouped; a dash
    for none."""
    if value is None:
        return DASH
    if abs(value) >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    return f"{value:#.{digits}g}"


def pair(low: float | None, high: float | None) -> str:
    """An interval's two ends: four significant digits from 1 up, three below."""
    if low is None or high is None:
        return DASH
    return "–".join(num(v, 4 if abs(v) >= 1 else 3) for v in (low, high))


def wrap(text: str, indent: str = "    ") -> list[str]:
    return textwrap.wrap(
        text,
        WIDTH,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,  # a path stays whole (copied from the console), past 80 if it must
    )


def label(row: Mapping[str, Any]) -> str:
    return f"{row['figure']}{UNIT_WORDS.get(row['unit'], ' ' + row['unit'])}"


def ok_cell(row: Mapping[str, Any]) -> str:
    return DASH if row["ok"] is None else ("yes" if row["ok"] else "NO")


def figure_lines(rows: Sequence[Mapping[str, Any]], title: str) -> list[str]:
    """The per-figure table: capture, asked, replay, off, tolerance, ok."""
    out = [
        f"  {title:<16}{'capture':>10}{'asked':>10}{'replay':>10}{'off':>10}  {'tolerance':<16}ok"
    ]
    for row in rows:
        asked = num(row["asked"]) if row["asked"] is not None else DASH
        out.append(
            f"  {label(row):<16}{num(row['capture']):>10}{asked:>10}{num(row['replay']):>10}"
            f"{row['off']:>11}  {row['tolerance']:<16}{ok_cell(row):<3}".rstrip()
        )
    return out


def interval_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each side's per-interval range and the 95 % interval of its mean."""
    out = [
        f"  {'intervals':<16}{'asked range':>15}{'asked mean CI':>16}"
        f"{'replay range':>15}{'replay mean CI':>16}"
    ]
    for row in rows:
        a, r = row["asked_intervals"], row["replay_intervals"]
        cells = (pair(a["low"], a["high"]), pair(a["mean_low"], a["mean_high"]),
                 pair(r["low"], r["high"]), pair(r["mean_low"], r["mean_high"]))  # fmt: skip
        # One space at least between cells, however wide a figure is.
        out.append(
            f"  {label(row):<16}"
            + "".join(f" {c:>{w - 1}}" for c, w in zip(cells, (15, 16, 15, 16), strict=True))
        )
    return out


def judgement_lines(entry: Mapping[str, Any]) -> list[str]:
    """replay.json's judgement of the scale, first."""
    said, scale = entry["judgement"], f"{entry['scale']:g}x"
    if not said["faithful"]:
        return wrap(f"UNFAITHFUL at {scale} (replay.json's judgement): {said['cause']}", "  ")
    unjudged = said.get("not_judged") or []
    if unjudged:
        text = f"every judged figure within its tolerance (not judged: {', '.join(unjudged)})"
    elif "day" in entry:
        text = "the burst kept its step and height"
    else:
        text = "every figure within its tolerance"
    return wrap(f"FAITHFUL at {scale} (replay.json's judgement): {text}", "  ")


def mismatch_lines(mismatches: Sequence[str], what: str) -> list[str]:
    if not mismatches:
        return wrap(f"  recomputed {what} agree with replay.json's (to a millionth).")
    out = wrap(
        f"  MISMATCH: recomputed from the bundles, {len(mismatches)} figure(s) differ from "
        "replay.json's beyond rounding (a bug; the judgement of record is replay.json's):"
    )
    for line in mismatches:
        out += wrap(f"    {line}", "      ")
    return out


def day_lines(entry: Mapping[str, Any]) -> list[str]:
    """A day-shape scale's steps as replay.json holds them."""
    key = "calls_s" if entry["unit"] == "calls/s" else "iops"
    peak = (entry.get("peak") or {}).get("asked_step")
    out = wrap(
        f"  the day shape's {len(entry['steps'])} steps of {entry['day']['step_s']:g} s "
        f"({entry['unit']}), as replay.json holds them: not recomputed",
    )
    out.append(f"  {'step':>5}{'captured t (s)':>17}{'asked':>12}{'delivered':>12}{'off':>10}")
    for row in entry["steps"]:
        want, got = row.get(f"asked_{key}"), row.get(f"delivered_{key}")
        off = DASH if got is None or not want else f"{100 * (got / want - 1):+.1f} %"
        span = f"{row['captured_t'][0]:.0f}-{row['captured_t'][1]:.0f}"
        mark = " <- burst" if row["step"] == peak else ""
        out.append(f"  {row['step']:>5}{span:>17}{num(want):>12}{num(got):>12}{off:>10}{mark}")
    return out


def scale_lines(entry: Mapping[str, Any]) -> list[str]:
    out = ["", *judgement_lines(entry)]
    if "day" in entry:
        return out + day_lines(entry)
    out += wrap(f"  replay window: {entry['windows']['replay']}")
    if entry["file_figures"]:
        out += figure_lines(entry["file_figures"], "file calls")
        out += interval_lines(entry["file_figures"])
        out += wrap("  device figures (shown, not judged: a file replay is judged on its calls)")
    out += figure_lines(entry["figures"], "device")
    out += interval_lines([r for r in entry["figures"] if r["capture"] is not None])
    for other in entry["judged_elsewhere"]:
        verdict = "ok" if other["ok"] else "NOT ok"
        out += wrap(f"  also judged by the replay (not recomputed here): {other['figure']} "
                    f"{verdict} ({other['off']})")  # fmt: skip
    return out + mismatch_lines(entry["mismatches"], "figures and checks")


LEGEND = (
    "  capture: the production's figure over its window; replay: the scale's own capture over "
    "the window replay.json judged (both measured, recomputed from the bundles); asked: capture "
    "x scale for a rate (derived); off, tolerance, ok: the fidelity check run again (latencies "
    "and the sequential share shown, not judged); range: the lowest and highest interval "
    "(asked: the capture's x scale); mean CI: the 95 % interval of the window's mean from batch "
    "means ('-': under 5 batches)."
)
DAY_LEGEND = (
    "  asked: each step's captured rate x scale; delivered: the replay's over the window the "
    "step ran in; both as replay.json holds them (a day shape is not recomputed)."
)


def console_lines(result: Mapping[str, Any]) -> list[str]:
    cap, rep = result["capture"], result["replay"]
    out = wrap(
        f"dbsim compare: capture {cap['bundle']} against the {rep['kind']} replay "
        f"{rep['directory']} (the bundle it was made from: same device and inode)",
        "  ",
    )
    out += wrap(f"  capture window ({cap['intervals']} intervals): {cap['window']}")
    days = all("day" in e for e in result["scales"])
    out += wrap(DAY_LEGEND if days else LEGEND)
    out += mismatch_lines(cap["mismatches"], "capture figures")
    for entry in result["scales"]:
        out += scale_lines(entry)
    bad = [f"{e['scale']:g}x" for e in result["scales"] if not e["judgement"]["faithful"]]
    out.append("")
    if bad:
        out += wrap(
            f"Answer: unfaithful at {', '.join(bad)} (replay.json's judgement); exit 5.", "  "
        )
    else:
        out += wrap("Answer: every scale faithful (replay.json's judgement); exit 0.", "  ")
    return out


CSV_HEADERS = (
    "scale", "table", "figure", "unit", "capture", "asked", "replay", "off", "tolerance", "ok",
    "judged", "asked_low", "asked_high", "asked_mean_ci95_low", "asked_mean_ci95_high",
    "asked_batches", "replay_low", "replay_high", "replay_mean_ci95_low",
    "replay_mean_ci95_high", "replay_batches", "faithful",
)  # fmt: skip


def _plain(value: Any) -> str:
    return "" if value is None else str(value)


def csv_rows(result: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for entry in result["scales"]:
        faithful = entry["judgement"]["faithful"]
        for table, figures in (("files", entry.get("file_figures") or []),
                               ("device", entry.get("figures") or [])):  # fmt: skip
            for r in figures:
                a, p = r["asked_intervals"], r["replay_intervals"]
                values = [
                    entry["scale"], table, r["figure"], r["unit"], r["capture"], r["asked"],
                    r["replay"], r["off"], r["tolerance"], r["ok"], r["judged"], a["low"],
                    a["high"], a["mean_low"], a["mean_high"], a["batches"], p["low"], p["high"],
                    p["mean_low"], p["mean_high"], p["batches"], faithful,
                ]  # fmt: skip
                rows.append([_plain(v) for v in values])
        key = "calls_s" if entry.get("unit") == "calls/s" else "iops"
        for step in entry.get("steps") or []:
            values = [entry["scale"], "day", f"step {step['step']}", entry["unit"], None,
                      step.get(f"asked_{key}"), step.get(f"delivered_{key}")]  # fmt: skip
            rows.append([_plain(v) for v in values] + [""] * 14 + [_plain(faithful)])
    return rows


def render_csv(result: Mapping[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADERS)
    writer.writerows(csv_rows(result))
    return out.getvalue()
