"""The replay's judged figures recomputed from its two captures (replay.json), as the product
judges them (sim.replay.fidelity), for the database replay tests (test_replay_db.py,
test_replay_db_writes.py): their assertions check these against the verdict the product wrote,
so the product's own judge is not the only one.
"""

from __future__ import annotations

from typing import Any

from sim.replay import fidelity


def recomputed(
    production: dict[str, Any], entry: dict[str, Any]
) -> tuple[dict[str, bool], set[str]]:
    """Each figure of one scale (``entry``, one of replay.json's ``scales``) against its
    documented tolerance: {figure: held}, and the directions (``read``, ``write``) not judged
    because their counts are too few (their IOPS and mean size then absent from the first)."""
    scale, got = entry["scale"], entry["replay"]
    held: dict[str, bool] = {}
    unjudged: set[str] = set()
    for figure, key in (("read IOPS", "read_iops"), ("write IOPS", "write_iops")):
        want = production[key] * scale
        if want <= 0:
            continue
        # The larger of ±5 % and the two counts' Poisson interval.
        poisson = fidelity.poisson_tolerance(
            production[key] * production["window"]["seconds"], want * got["window"]["seconds"]
        )
        if poisson is None or poisson >= fidelity.NOT_JUDGED_HALF_WIDTH:
            unjudged.add(key.split("_")[0])  # not judged, nor its mean size: said
            continue  # (tests/unit/test_replay_fidelity.py)
        held[figure] = abs(got[key] - want) <= max(fidelity.IOPS_TOL, poisson) * want
    held["read share"] = abs(got["read_pct"] - production["read_pct"]) <= fidelity.READ_SHARE_POINTS
    for figure, key in (("read size", "read_kib"), ("write size", "write_kib")):
        if key.split("_")[0] in unjudged:
            continue
        if production[key] and got[key] is not None:  # judged as sim.replay.fidelity judges
            held[figure] = abs(got[key] - production[key]) <= fidelity.SIZE_TOL * production[key]
    return held, unjudged
