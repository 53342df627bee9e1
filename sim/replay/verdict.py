"""The answer after fidelity: per faithful scale, the device latency against the SLOs and
against production's own at its load (from the capture), and the headroom: the largest
faithful scale that met every SLO. An unfaithful scale gets no verdict; when it fell short
because the target could not deliver, the IOPS it did deliver are the target's ceiling.
"""

from __future__ import annotations

from typing import Any

from sim.errors import EXIT_OK, EXIT_SLO_MISSED, EXIT_UNFAITHFUL, ConfigError

LATENCY_KEYS = ("read_await", "write_await", "read_p99", "write_p99")
LATENCY_WORDS = {
    "read_await": "read await",
    "write_await": "write await",
    "read_p99": "read p99",
    "write_p99": "write p99",
}


def parse_slos(items: list[str] | None) -> dict[str, float]:
    """``--slo read_p99=2`` (ms, device latency) → ``{"read_p99": 2.0}``."""
    slos: dict[str, float] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in LATENCY_KEYS:
            raise ConfigError(
                f"--slo {item!r}: expected KEY=MS with KEY one of {', '.join(LATENCY_KEYS)}"
            )
        try:
            limit = float(value.removesuffix("ms"))
        except ValueError:
            raise ConfigError(f"--slo {item!r}: {value!r} is not a number of ms") from None
        if limit <= 0:
            raise ConfigError(f"--slo {item!r}: the limit must be above 0 ms")
        slos[key] = limit
    return slos


def verdict_if_faithful(
    judged: dict[str, Any], production: Any, shape: Any, slos: dict[str, float]
) -> dict[str, Any] | None:
    """A scale's verdict, only when its fidelity held: an unfaithful replay answers nothing
    about the storage (its cause is said instead), whichever target it ran on."""
    if not judged["faithful"]:
        return None
    return scale_verdict(production.latency_ms, shape.latency_ms, slos)


def scale_verdict(
    capture_latency: dict[str, float | None],
    replay_latency: dict[str, float | None],
    slos: dict[str, float],
) -> dict[str, Any]:
    rows = []
    for key in LATENCY_KEYS:
        measured = replay_latency.get(key)
        if measured is None:
            continue
        limit = slos.get(key)
        rows.append(
            {
                "figure": key,
                "measured_ms": measured,
                "production_ms": capture_latency.get(key),
                "slo_ms": limit,
                "met": None if limit is None else measured <= limit,
            }
        )
    missing = [k for k in slos if k not in {r["figure"] for r in rows}]
    met = all(r["met"] is not False for r in rows) and not missing
    return {"latency": rows, "slos_met": met, "slos_not_measured": missing}


def headroom(scales: list[dict[str, Any]], capture_iops: float) -> dict[str, Any]:
    """The largest faithful scale that met every SLO, and a ceiling where one was seen."""
    passing = [
        s["scale"]
        for s in scales
        if s["fidelity"]["faithful"] and s["verdict"] and s["verdict"]["slos_met"]
    ]
    ceilings = [
        s
        for s in scales
        if not s["fidelity"]["faithful"]
        and str(s["fidelity"]["cause"]).startswith("target too slow")
    ]
    out: dict[str, Any] = {"largest_passing_scale": max(passing) if passing else None}
    if ceilings and capture_iops > 0:
        first = min(ceilings, key=lambda s: s["scale"])
        delivered = first["replay"]["read_iops"] + first["replay"]["write_iops"]
        out["ceiling"] = {
            "at_scale": first["scale"],
            "asked_iops": capture_iops * first["scale"],
            "delivered_iops": delivered,
            "times_capture": delivered / capture_iops,
            "what": "measured: the device IOPS the replay delivered at the first scale the "
            "target could not deliver",
        }
    return out


def exit_code(scales: list[dict[str, Any]]) -> int:
    if any(not s["fidelity"]["faithful"] for s in scales):
        return EXIT_UNFAITHFUL
    if any(s["verdict"] is not None and not s["verdict"]["slos_met"] for s in scales):
        return EXIT_SLO_MISSED
    return EXIT_OK
