"""The console text of a file replay: the captured calls, then per scale the EDA deck, the
fidelity table (before anything else is said of the scale) and the verdict; the answer last.
Every line fits 80 columns; every figure says where it comes from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Wrap = Callable[..., list[str]]
Num = Callable[..., str]
#: The device-latency lines of a scale (sim.replay.console's, passed in: the console imports
#: this module, not the other way round).
Latency = Callable[[dict[str, Any]], list[str]]
#: The day shape's lines of a scale and its answer (sim.replay.console's, passed in too).
Day = tuple[Callable[[dict[str, Any]], list[str]], Callable[[dict[str, Any]], str]]


def _calls(files: dict[str, Any], n: Num) -> str:
    rates = files["calls_s"]
    parts = [f"{c} {n(v)}" for c, v in sorted(rates.items(), key=lambda kv: -kv[1]) if v > 0]
    sizes = f"reads of {n(files['read_kib'])} KiB, writes of {n(files['write_kib'])} KiB"
    return f"{n(files['reproduced_calls_s'])} calls/s reproduced ({', '.join(parts)}); {sizes}"


def _fidelity(entry: dict[str, Any], wrap: Wrap, n: Num) -> list[str]:
    fid, scale = entry["fidelity"], entry["scale"]
    out = [f"  {'figure':<16}{'asked':>10}{'delivered':>11}{'off':>11}  {'tolerance':<14} ok"]
    for c in fid["checks"]:
        out.append(
            f"  {c['figure']:<16}{n(c['expected'], 4):>10}{n(c['delivered'], 4):>11}"
            f"{c['off']:>11}  {c['tolerance']:<14} {'yes' if c['ok'] else 'NO'}"
        )
    spread = fid["per_interval"]
    if spread["intervals"] and spread["lowest_pct"] is not None:
        out += wrap(
            f"  per interval: reproduced calls {spread['lowest_pct']:.1f} % to "
            f"{spread['highest_pct']:.1f} % of the asked over {spread['intervals']} intervals",
            "    ",
        )
    if fid["faithful"]:
        out.append(f"  FAITHFUL at {scale:g}x: every figure within its tolerance")
    else:
        out += wrap(f"  UNFAITHFUL at {scale:g}x: {fid['cause']}; no verdict", "    ")
    return out


def _scale(entry: dict[str, Any], wrap: Wrap, n: Num, latency: Latency) -> list[str]:
    eda, run = entry["eda"], entry["run"]
    ops = ", ".join(f"{op} {n(r)}/s" for op, r in eda["operations_s"].items() if r > 0)
    out = wrap(
        f"At {entry['scale']:g}x: EDA {eda['parameters']['component']}, {eda['sessions']} "
        f"processes, {n(eda['rate_ops_s'])} ops/s: {ops} (derived from the captured calls "
        f"x {entry['scale']:g}).",
        "  ",
    )
    done = run.get("delivered_ops_s")
    out += wrap(
        f"  dbsim run completed {n(done)} of {n(run['asked_ops_s'])} ops/s asked (measured); "
        f"asked = capture x {entry['scale']:g}, delivered = the run's fileops collector over "
        f"{entry['files']['window']}",
        "    ",
    )
    return out + _fidelity(entry, wrap, n) + latency(entry)


def answer(doc: dict[str, Any], n: Num) -> str:
    parts = []
    for entry in doc["scales"]:
        scale = f"{entry['scale']:g}x"
        if not entry["fidelity"]["faithful"]:
            why = str(entry["fidelity"]["cause"]).split(" (")[0]
            parts.append(f"at {scale} the replay was unfaithful ({why})")
        elif not doc["slos_ms"]:
            parts.append(f"at {scale} faithful, no SLO given")
        else:
            met = entry["verdict"]["slos_met"]
            parts.append(f"at {scale} faithful, {'SLOs met' if met else 'SLO MISSED'}")
    room = doc["headroom"]
    largest = room.get("largest_passing_scale")
    tail = (
        f"headroom about {largest:g}x (the largest faithful scale that met the SLOs)"
        if largest is not None and doc["slos_ms"]
        else "no headroom judged (no --slo, or no faithful scale met them)"
    )
    ceiling = room.get("ceiling")
    if ceiling:
        tail += (
            f"; the ceiling about {ceiling['times_capture']:.2g}x the capture "
            f"({n(ceiling['delivered_calls_s'])} calls/s delivered of "
            f"{n(ceiling['asked_calls_s'])} asked at {ceiling['at_scale']:g}x, measured)"
        )
    return "Answer: " + "; ".join(parts) + " - " + tail + "."


def file_lines(doc: dict[str, Any], wrap: Wrap, n: Num, latency: Latency, day: Day) -> list[str]:
    cap = doc["capture"]
    out = wrap(f"File production ({cap['origin']} {cap['kind']} {cap['bundle']}):", "  ")
    out += wrap(f"  {_calls(cap['files'], n)} (measured, over {cap['files']['window']})", "    ")
    left = cap["not_reproduced_calls_s"]
    if left:
        said = ", ".join(f"{c} {n(v)}/s" for c, v in left.items())
        out += wrap(f"  not reproduced (no EDA operation makes them alone): {said}", "    ")
    if doc["scales"] and all("day" in entry for entry in doc["scales"]):
        for entry in doc["scales"]:
            out += day[0](entry)
        return [*out, *wrap(day[1](doc), "  "), f"replay: {doc['directory']}/replay.json"]
    tol = doc["tolerances"]
    out += wrap(
        f"Fidelity tolerances: reproduced calls/s ±{tol['calls_pct']:g} %, each class's "
        f"share ±{tol['share_points']:g} points, mean read and write sizes ±{tol['size_pct']:g} "
        f"%; a deck behind its schedule by over {tol['behind_schedule_pct']:g} % is too slow.",
        "  ",
    )
    for entry in doc["scales"]:
        out += _scale(entry, wrap, n, latency)
    out += wrap(answer(doc, n), "  ")
    out.append(f"replay: {doc['directory']}/replay.json")
    return out
