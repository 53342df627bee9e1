"""The replay's console text: the production's shape, then per scale the job, the fidelity
table (before anything else is said of the scale) and the verdict; the answer last. Every
line fits 80 columns; every figure says where it comes from."""

from __future__ import annotations

import textwrap
from typing import Any

from sim.replay.verdict import LATENCY_WORDS

WIDTH = 80


def _n(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def _wrap(text: str, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False)


def _shape_line(shape: dict[str, Any]) -> str:
    return (
        f"{_n(shape['read_iops'] + shape['write_iops'])} IOPS ({_n(shape['read_iops'])} "
        f"reads/s of {_n(shape['read_kib'])} KiB, {_n(shape['write_iops'])} writes/s of "
        f"{_n(shape['write_kib'])} KiB), {_n(shape['read_pct'])} % reads, "
        f"{_n(shape['seq_pct'])} % sequential, {_n(shape['inflight'])} in flight"
    )


def _fidelity(entry: dict[str, Any]) -> list[str]:
    fid = entry["fidelity"]
    scale = entry["scale"]
    lines = [f"  {'figure':<12}{'asked':>11}{'delivered':>11}{'off':>12}  {'tolerance':<18} ok"]
    for c in fid["checks"]:
        ok = "yes" if c["ok"] else "NO"
        if c["tolerance"] == "not judged":
            ok = "-"
        lines.append(
            f"  {c['figure']:<12}{_n(c['expected'], 4):>11}{_n(c['delivered'], 4):>11}"
            f"{c['off']:>12}  {c['tolerance']:<18} {ok}"
        )
    for c in fid["checks"]:  # a small count's wider tolerance, or no judgement, said
        if c.get("note"):
            lines += _wrap(f"  {c['note']}", "    ")
    spread = fid["per_interval"]
    if spread["intervals"]:
        lines += _wrap(
            f"  per interval: delivered IOPS {spread['lowest_pct']:.1f} % to "
            f"{spread['highest_pct']:.1f} % of the asked over {spread['intervals']} "
            "intervals",
            "    ",
        )
    unjudged = [c["figure"] for c in fid["checks"] if c["tolerance"] == "not judged"]
    if fid["faithful"] and unjudged:
        lines += _wrap(
            f"  FAITHFUL at {scale:g}x: every judged figure within its tolerance (not "
            f"judged: {', '.join(unjudged)})",
            "    ",
        )
    elif fid["faithful"]:
        lines.append(f"  FAITHFUL at {scale:g}x: every figure within its tolerance")
    else:
        lines += _wrap(f"  UNFAITHFUL at {scale:g}x: {fid['cause']}; no verdict", "    ")
    return lines


def _latency(entry: dict[str, Any]) -> list[str]:
    rows = entry["verdict"]["latency"] if entry["verdict"] else []
    parts = []
    for r in rows:
        slo = ""
        if r["slo_ms"] is not None:
            slo = f", SLO {_n(r['slo_ms'])} ms {'met' if r['met'] else 'MISSED'}"
        prod = r["production_ms"]
        seen = "none captured" if prod is None else f"{_n(prod)} ms"
        parts.append(
            f"{LATENCY_WORDS[r['figure']]} {_n(r['measured_ms'])} ms (production {seen}{slo})"
        )
    if not parts:
        return []
    return _wrap("  device latency (measured): " + "; ".join(parts) + ".", "    ")


def scale_lines(entry: dict[str, Any]) -> list[str]:
    jobs = ", ".join(
        f"{j['rw']} {_n(j['iops'])}/s bssplit={j['bssplit']} iodepth={j['iodepth']}"
        for j in entry["job"]["jobs"]
    )
    window = entry["replay"]["window"]
    lines = _wrap(f"At {entry['scale']:g}x: fio asked {jobs} (derived).", "  ")
    lines += _wrap(
        f"  asked = capture x {entry['scale']:g}; delivered = the replay's own capture, "
        f"measured over {window['how']}",
        "    ",
    )
    return lines + _fidelity(entry) + _latency(entry)


def _day_key(fid: dict[str, Any]) -> tuple[str, str]:
    """The figures' key suffix and printed unit of a day shape (fio's IOPS, a tree's calls)."""
    unit = fid.get("unit", "IOPS")
    return ("calls_s" if unit == "calls/s" else "iops"), unit


def day_lines(entry: dict[str, Any]) -> list[str]:
    """The day shape of one scale: the steps around the burst, then the judgement."""
    fid, day = entry["fidelity"], entry["day"]
    key, unit = _day_key(fid)
    asked_of = day.get("asked", "the step's captured IOPS")
    delivered_of = day.get(
        "delivered",
        "the replay's own capture over the window fio ran the step in, on fio's own clock",
    )
    out = _wrap(
        f"Day shape at {entry['scale']:g}x: {day['steps']} steps of {day['step_s']:g} s, "
        f"each {day['compress'] * day['step_s']:g} captured seconds (derived); asked = "
        f"{asked_of} x {entry['scale']:g}, delivered = {delivered_of} (measured).",
        "  ",
    )
    peak = fid["peak"]["asked_step"]
    out.append(f"  {'step':>5}  {'captured t (s)':>17}{'asked':>11}{'delivered':>11}{'off':>10}")
    for row in fid["steps"]:
        if abs(row["step"] - peak) > 3:
            continue
        got, want = row[f"delivered_{key}"], row[f"asked_{key}"]
        off = "-" if got is None or not want else f"{100 * (got / want - 1):+.1f} %"
        span = f"{row['captured_t'][0]:.0f}-{row['captured_t'][1]:.0f}"
        mark = " <- burst" if row["step"] == peak else ""
        out.append(
            f"  {row['step']:>5}  {span:>17}{_n(want, 4):>11}{_n(got, 4):>11}{off:>10}{mark}"
        )
    total, n = fid["total"], max(1, len(fid["steps"]))
    out += _wrap(
        f"  all steps: {_n(total[f'delivered_{key}'] / n, 4)} {unit} "
        f"delivered per step of {_n(total[f'asked_{key}'] / n, 4)} asked "
        f"(±5 %); the burst within one step and 10 % of its height",
        "    ",
    )
    if fid["faithful"]:
        out.append(f"  FAITHFUL at {entry['scale']:g}x: the burst kept its step and height")
    else:
        out += _wrap(
            f"  UNFAITHFUL at {entry['scale']:g}x: {fid['cause']} ({', '.join(fid['failed'])})",
            "    ",
        )
    return out


def day_answer(doc: dict[str, Any]) -> str:
    """The answer of a replay whose scales are all day shapes."""
    said = "; ".join(_day_answer(entry) for entry in doc["scales"])
    return f"Answer: {said} - the day shape judges fidelity, no SLO."


def _day_answer(entry: dict[str, Any]) -> str:
    peak = entry["fidelity"]["peak"]
    key, unit = _day_key(entry["fidelity"])
    kept = "kept" if entry["fidelity"]["faithful"] else "did not keep"
    return (
        f"at {entry['scale']:g}x the day shape {kept} its burst (step {peak['asked_step']}: "
        f"{_n(peak[f'asked_{key}'])} {unit} asked, {_n(peak['delivered_at_asked_step'])} "
        "delivered)"
    )


def answer(doc: dict[str, Any]) -> str:
    parts = []
    if all("day" in entry for entry in doc["scales"]):
        return day_answer(doc)
    for entry in doc["scales"]:
        scale = f"{entry['scale']:g}x"
        if not entry["fidelity"]["faithful"]:
            why = str(entry["fidelity"]["cause"]).split(" (")[0]
            parts.append(f"at {scale} the replay was unfaithful ({why})")
            continue
        rows = {r["figure"]: r for r in entry["verdict"]["latency"]}
        key = "read_p99" if "read_p99" in rows else next(iter(rows), None)
        said = "SLOs met" if entry["verdict"]["slos_met"] else "SLO MISSED"
        if not doc["slos_ms"]:
            said = "no SLO given"
        if key is not None:
            r = rows[key]
            said = (
                f"{LATENCY_WORDS[key]} {_n(r['measured_ms'])} ms (production "
                f"{_n(r['production_ms'])} ms), {said}"
            )
        parts.append(f"at {scale} {said}")
    room = doc["headroom"]
    largest = room.get("largest_passing_scale")
    tail = (
        f"headroom about {largest:g}x (the largest faithful scale that met the SLOs)"
        if largest is not None
        else "no faithful scale met the SLOs: no headroom shown"
    )
    if largest is not None and not doc["slos_ms"]:
        tail = f"faithful up to {largest:g}x; no SLO given (--slo), so no headroom is judged"
    ceiling = room.get("ceiling")
    if ceiling:
        tail += (
            f"; the target's ceiling about {ceiling['times_capture']:.2g}x the capture "
            f"({_n(ceiling['delivered_iops'])} IOPS delivered of {_n(ceiling['asked_iops'])} "
            f"asked at {ceiling['at_scale']:g}x, measured)"
        )
    return "Answer: " + "; ".join(parts) + " - " + tail + "."


def _scale_lines(entry: dict[str, Any]) -> list[str]:
    if "slob" not in entry:
        return scale_lines(entry)
    from sim.replay.dbconsole import db_scale_lines

    return db_scale_lines(entry, _wrap) + _fidelity(entry) + _latency(entry)


def lines(doc: dict[str, Any]) -> list[str]:
    if doc.get("files"):  # file production replayed as an EDA mix deck
        from sim.replay.fileconsole import file_lines

        return file_lines(doc, _wrap, _n, _latency, (day_lines, day_answer))
    cap = doc["capture"]
    out = _wrap(f"Production ({cap['origin']} {cap['kind']} {cap['bundle']}):", "  ")
    out += _wrap(
        f"  {_shape_line(cap['shape'])} (measured, over {cap['shape']['window']['how']})", "    "
    )
    tol = doc["tolerances"]
    out += _wrap(
        f"Fidelity tolerances: device read and write IOPS ±{tol['iops_pct']:g} %, read share "
        f"±{tol['read_share_points']:g} points, mean request sizes ±{tol['size_pct']:g} %.",
        "  ",
    )
    for caveat in doc.get("caveats") or []:  # before any scale is said
        out += _wrap(f"Caveat: {caveat}.", "  ")
    for entry in doc["scales"]:
        out += day_lines(entry) if "day" in entry else _scale_lines(entry)
    out += _wrap(answer(doc), "  ")
    out.append(f"replay: {doc['directory']}/replay.json")
    return out
