"""A replay against its capture (:func:`sim.replay.against.compare_replay`) as one
self-contained page (inline CSS and SVG, no script, no request): per scale the judgement of
record, the per-figure table and the intervals' table (the console's,
:mod:`sim.report.against`), and a picture: the capture's per-interval series as asked (times
the scale) and the replay's on one time axis, seconds since each side's window began, with
the tolerance band of each judged figure around the asked window's figure. The charts are the
run report's (:func:`sim.report.svg.time_panels`), in the compare page's colours."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from sim.report.against import DASH, label, num, ok_cell, pair
from sim.report.compare_charts import SIDE_COLORS, overlay_axis
from sim.report.draw import AXIS
from sim.report.markup import Safe, badge, esc, page, section, table
from sim.report.scales import fmt_pct
from sim.report.svg import Panel, Series, time_panels

ASKED, REPLAY = SIDE_COLORS["baseline"], SIDE_COLORS["candidate"]
FIGURE_HEADERS = ("figure", "capture", "asked", "replay", "off", "tolerance", "ok")
INTERVAL_HEADERS = (
    "figure",
    "asked range",
    "asked 95 % CI of the mean",
    "replay range",
    "replay 95 % CI of the mean",
)
STEP_HEADERS = ("step", "captured t (s)", "asked", "delivered", "off")


def _figure_cells(rows: Sequence[Mapping[str, Any]]) -> list[list[object]]:
    out: list[list[object]] = []
    for r in rows:
        css = "" if r["ok"] is None else ("ok" if r["ok"] else "bad")
        mark = Safe(f'<span class="{css}">{esc(ok_cell(r))}</span>')
        asked = DASH if r["asked"] is None else num(r["asked"])
        out.append([label(r), num(r["capture"]), asked, num(r["replay"]), r["off"],
                    r["tolerance"], mark])  # fmt: skip
    return out


def _interval_cells(rows: Sequence[Mapping[str, Any]]) -> list[list[object]]:
    out: list[list[object]] = []
    for r in rows:
        a, p = r["asked_intervals"], r["replay_intervals"]
        out.append([label(r), pair(a["low"], a["high"]), pair(a["mean_low"], a["mean_high"]),
                    pair(p["low"], p["high"]), pair(p["mean_low"], p["mean_high"])])  # fmt: skip
    return out


def _placed(values: Sequence[Any], positions: Sequence[int | None], n: int) -> list[float | None]:
    out: list[float | None] = [None] * n
    for value, at in zip(values, positions, strict=False):
        if at is not None:
            out[at] = None if value is None else float(value)
    return out


def _panel(
    title: str, key: str, sides: Mapping[str, Mapping[str, Any]], band: Sequence[float] | None,
    positions: Mapping[str, list[int | None]], n: int, percent: bool = False,
) -> Panel:  # fmt: skip
    """One figure's panel: asked and replay placed on the shared axis (``positions``: each
    side's intervals' places among its ``n`` points), the band's edges as dashed lines."""
    lines = [
        Series(
            "asked (capture x scale)", _placed(sides["asked"][key], positions["asked"], n), ASKED
        ),
        Series("replay", _placed(sides["replay"][key], positions["replay"], n), REPLAY),
    ]
    if band is not None:
        lines += [Series("tolerance", [end] * n, AXIS, dashed=True) for end in band]
    # The axis at the data and the band (not from 0): a band of a few percent, seen.
    if percent:
        return Panel(title, lines, y_format=fmt_pct, y_floor=None)
    return Panel(title, lines, y_floor=None)


def _snapped(t: Sequence[float]) -> list[float]:
    """A side's times on its own intervals' grid (multiples of its median interval): sides
    whose intervals end a few ms apart then share one axis's points, where their raw times
    made a grid of those few ms (overlay_axis takes its period from all sides' times)."""
    gaps = sorted(b - a for a, b in itertools.pairwise(t) if b > a)
    period = gaps[len(gaps) // 2] if gaps else 1.0
    return [round(v / period) * period for v in t]


def _chart(entry: Mapping[str, Any]) -> str:
    """The scale's picture on one time axis: a file replay's reproduced calls first, then the
    device's read and write IOPS and read share."""
    bands = {r["key"]: r["band"] for r in [*entry["figures"], *entry["file_figures"]]}
    device, calls = entry["series"], entry.get("file_series") or {}
    roles = {name: {"t": _snapped(side["t"])} for name, side in device.items()}
    roles.update({f"{name} calls": {"t": _snapped(side["t"])} for name, side in calls.items()})
    t, where = overlay_axis(roles)
    panels = []
    if calls.get("asked", {}).get("t"):
        places = {name: where[f"{name} calls"] for name in calls}
        panels.append(_panel("reproduced calls/s", "calls_s", calls, bands.get("calls_s"),
                             places, len(t)))  # fmt: skip
    for title, key, pct in (
        ("device read IOPS", "read_iops", False),
        ("device write IOPS", "write_iops", False),
        ("device read share", "read_pct", True),
    ):
        panels.append(_panel(title, key, device, bands.get(key), where, len(t), pct))
    return time_panels(t, panels, label="asked and replay", panel_height=110)


def _day_chart(entry: Mapping[str, Any]) -> str:
    key = "calls_s" if entry["unit"] == "calls/s" else "iops"
    step_s = float(entry["day"]["step_s"])
    t = [float(row["step"]) * step_s for row in entry["steps"]]
    lines = [
        Series("asked", [row.get(f"asked_{key}") for row in entry["steps"]], ASKED),
        Series("delivered", [row.get(f"delivered_{key}") for row in entry["steps"]], REPLAY),
    ]
    return time_panels(t, [Panel(f"{entry['unit']} per step", lines)], label="day shape")


def _steps_table(entry: Mapping[str, Any]) -> Safe:
    key = "calls_s" if entry["unit"] == "calls/s" else "iops"
    rows = []
    for row in entry["steps"]:
        want, got = row.get(f"asked_{key}"), row.get(f"delivered_{key}")
        off = DASH if got is None or not want else f"{100 * (got / want - 1):+.1f} %"
        span = f"{row['captured_t'][0]:.0f}–{row['captured_t'][1]:.0f}"
        rows.append([row["step"], span, num(want), num(got), off])
    return table(STEP_HEADERS, rows, left=0)


def _judgement(entry: Mapping[str, Any]) -> Safe:
    said = entry["judgement"]
    word, kind = ("FAITHFUL", "pass") if said["faithful"] else ("UNFAITHFUL", "fail")
    why = said["cause"] or "every judged figure within its tolerance"
    return Safe(f'<p class="verdict">{badge(word, kind)} at {entry["scale"]:g}x '
                f"(replay.json's judgement): {esc(why)}</p>")  # fmt: skip


def _mismatches(mismatches: Sequence[str]) -> Safe:
    if not mismatches:
        return Safe('<p class="note">Recomputed from the bundles, every figure and check '
                    "agrees with replay.json's.</p>")  # fmt: skip
    items = "".join(f"<li>{esc(m)}</li>" for m in mismatches)
    return Safe(f'<p class="alert">MISMATCH with replay.json (a bug; the judgement of record '
                f"is replay.json's):</p><ul>{items}</ul>")  # fmt: skip


def _scale_section(entry: Mapping[str, Any]) -> Safe:
    scale = f"{entry['scale']:g}x"
    parts: list[str] = [_judgement(entry)]
    if "day" in entry:
        note = "The day shape's steps as replay.json holds them (not recomputed)."
        parts += [Safe(f'<p class="note">{esc(note)}</p>'), _steps_table(entry)]
        parts.append(Safe(f"<figure>{_day_chart(entry)}</figure>"))
        return section(f"scale-{scale}", f"At {scale}", *parts)
    parts.append(Safe(f'<p class="note">Replay window: {esc(entry["windows"]["replay"])}.</p>'))
    for title, rows in (("File calls", entry["file_figures"]), ("Device", entry["figures"])):
        if rows:
            parts.append(table(FIGURE_HEADERS, _figure_cells(rows), left=(0, 5, 6), caption=title))
            shown = [r for r in rows if r["capture"] is not None]
            parts.append(
                table(INTERVAL_HEADERS, _interval_cells(shown), caption=f"{title}: intervals")
            )
    parts.append(_mismatches(entry["mismatches"]))
    caption = (
        f"Asked (the capture's intervals x {entry['scale']:g} for a rate) blue, the replay "
        "vermilion, on seconds since each side's window began; dashed grey: the tolerance of "
        "the window's figure around the asked window's (an interval may fall outside it)."
    )
    chart = f'<figure id="chart-{scale}">{_chart(entry)}<figcaption>{esc(caption)}</figcaption>'
    parts.append(Safe(f"{chart}</figure>"))
    return section(f"scale-{scale}", f"At {scale}", *parts)


def render_page(result: Mapping[str, Any]) -> str:
    """The whole comparison as one page."""
    cap, rep = result["capture"], result["replay"]
    bad = [e for e in result["scales"] if not e["judgement"]["faithful"]]
    head = (
        f"<header><h1>dbsim compare: capture against replay</h1>"
        f'<p class="sub">{esc(cap["bundle"])} (the capture, as asked: '
        f'<span style="color:{ASKED}">blue</span>) against the {esc(rep["kind"])} replay '
        f'{esc(rep["directory"])} (<span style="color:{REPLAY}">vermilion</span>): the bundle '
        "it was made from (same device and inode).</p></header>"
    )
    good = [e for e in result["scales"] if e["judgement"]["faithful"]]
    scales = [", ".join(f"{e['scale']:g}x" for e in group) for group in (bad, good)]
    if bad:
        verdict = f"{badge('UNFAITHFUL', 'fail')} at {esc(scales[0])}"
        verdict += f"; faithful at {esc(scales[1])}" if good else ""
    else:
        verdict = f"{badge('FAITHFUL', 'pass')} at {esc(scales[1])}"
    legend = (
        f"Capture window: {cap['window']}. Figures recomputed from both bundles; the fidelity "
        f"checks run again on them. Range: {result['intervals']['spread']}. 95 % CI of the "
        f"mean: {result['intervals']['mean_ci95']}. Asked: {result['intervals']['asked']}."
    )
    summary = section(
        "summary",
        "Summary",
        Safe(
            f'<p class="verdict">{verdict} (replay.json\'s judgement; exit '
            f"{result['exit_code']}).</p>"
        ),
        Safe(f'<p class="note">{esc(legend)}</p>'),
        _mismatches(cap["mismatches"]),
    )
    body = head + summary + "".join(_scale_section(e) for e in result["scales"])
    return page(
        f"dbsim compare: {cap['bundle']} against {rep['directory']}",
        body,
        "Exit 0 every scale faithful, 5 a scale unfaithful, 2 bad input.",
    )
