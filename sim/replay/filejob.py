"""File production to an EDA mix deck: the captured file system calls (the ``fileops``
collector's classes, :mod:`storage.collectors.fileops_script`) over the production's window,
and the EDA parameters whose calls reproduce them at a scale.

**The window.** The intervals of the capture's ``fileops`` series from the first to the last
whose calls reach 10 % of the median of the intervals with calls, less the first and the last
(the workload started and ended inside them), less a leading or trailing interval above twice
the span's median: a start-up burst (fio's set-up ``stat`` of every file, 10,000 calls in one
second here) is not the production's load.

**The footprint.** Each EDA operation makes a known set of calls (measured here through the
``fileops`` collector; the native loop, ``storage/targets/native/fileloop.c``):
:data:`FOOTPRINT`. Each reproduced class has one operation that makes it
(:data:`PRIMARY`); the operations' rates are solved so that every class's calls, side effects
included (a ``chmod`` also opens and ``fstat``s), are the captured ones times the scale, none
below zero. OPEN, LOOKUP, RENAME and LINK are not reproduced (no EDA operation makes them
alone: an open is a side effect of the others); their share of the captured calls is said.

**Sizes.** Reads are ``random_read`` of one block (``block_size_bytes``: the captured mean read
size, 512-byte aligned), writes the back-end's ``seq_write`` transfers (``transfer_size_bytes``:
the captured mean write size). When both are within 1 % of a 4 KiB multiple they are opened
with ``O_DIRECT`` (``direct_io``), as fio's replay: the data calls reach the target's device,
not the test host's page cache. Otherwise (a build reads and writes about 1 KiB a call) the
sizes are kept to the byte (at least 512) and the calls are buffered, which the rules say.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from sim.errors import ConfigError

SOURCE = "fileops"
ACTIVE_SHARE = 0.10
BURST_TIMES = 2.0
#: O_DIRECT (as fio's replay: the page cache is not in the way) needs 4 KiB multiples.
ALIGN = 4096
MIN_BYTES = 512  # the EDA's smallest block
DECK = 1000
OPS_PER_PROCESS = 1000.0
MAX_PROCESSES = 8
BACKEND_FILE_BYTES = 4 << 20
FRONTEND_FILE_MIN = 16 << 10

#: The classes an EDA operation makes on purpose, judged by fidelity.
REPRODUCED = (
    "GETATTR",
    "ACCESS",
    "SETATTR",
    "READ",
    "WRITE",
    "CREATE",
    "MKDIR",
    "REMOVE",
    "READDIR",
)
NOT_REPRODUCED = ("OPEN", "LOOKUP", "RENAME", "LINK")
#: The EDA operation that makes each reproduced class.
PRIMARY = {
    "GETATTR": "stat",
    "ACCESS": "access",
    "SETATTR": "chmod",
    "READ": "random_read",
    "WRITE": "seq_write",
    "CREATE": "create",
    "MKDIR": "mkdir",
    "REMOVE": "unlink",
    "READDIR": "readdir",
}
#: Calls per EDA operation (the native loop; ``mkdir`` removes the oldest of its ring of 8 in
#: the steady state, ``readdir`` reads until an empty ``getdents64``). ``seq_write``'s pass
#: opens and checks (fstat) each file once: added per transfer in :func:`footprint`.
FOOTPRINT: dict[str, dict[str, float]] = {
    "stat": {"GETATTR": 1},
    "access": {"ACCESS": 1},
    "chmod": {"OPEN": 1, "GETATTR": 1, "SETATTR": 1},
    "create": {"OPEN": 1, "CREATE": 1},
    "unlink": {"REMOVE": 1},
    "mkdir": {"MKDIR": 1, "REMOVE": 1},
    "readdir": {"OPEN": 1, "READDIR": 2},
    "random_read": {"OPEN": 1, "READ": 1},
    "seq_write": {"WRITE": 1},
}


@dataclass(frozen=True)
class FileShape:
    """Calls per second per class, mean read and write sizes, over a window."""

    rates: dict[str, float]
    read_kib: float | None
    write_kib: float | None
    intervals: int
    how: str
    per_interval: list[float] = field(default_factory=list)  # reproduced calls/s

    @property
    def reproduced(self) -> float:
        return sum(self.rates.get(c, 0.0) for c in REPRODUCED)

    def share(self, cls: str) -> float | None:
        total = self.reproduced
        return 100.0 * self.rates.get(cls, 0.0) / total if total > 0 else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls_s": dict(self.rates),
            "reproduced_calls_s": self.reproduced,
            "read_kib": self.read_kib,
            "write_kib": self.write_kib,
            "intervals": self.intervals,
            "window": self.how,
        }


def read_series(bundle: Path) -> list[dict[str, float]]:
    """Per interval (measured rows, every file system together): calls/s per class, and the
    bytes read and written per second (``_read_b``, ``_write_b``)."""
    from sim.bundle import reader

    path = bundle / "timeseries" / f"{SOURCE}.csv"
    if not path.is_file():
        return []
    by_t: dict[float, dict[str, float]] = {}
    for row in reader.read_csv_rows(path, required=("t",)):
        if row.get("phase", "measure") != "measure":
            continue
        here = by_t.setdefault(float(row["t"]), {})
        for key, text in row.items():
            if key.endswith("_s") and text:
                here[key] = here.get(key, 0.0) + float(text)
        for name in ("read", "write"):
            kib, n = row.get(f"{name}_kib"), row.get(f"{name}_s")
            if kib and n:
                here[f"_{name}_b"] = here.get(f"_{name}_b", 0.0) + float(kib) * 1024 * float(n)
    return [dict(by_t[t], t=t) for t in sorted(by_t)]


def is_file_capture(bundle: Path) -> bool:
    """Whether the bundle counted file system calls (then it is replayed as a file tree)."""
    return any(row.get("ops_s", 0.0) > 0 for row in read_series(bundle))


def _reproduced(row: dict[str, float]) -> float:
    return sum(row.get(f"{c.lower()}_s", 0.0) for c in REPRODUCED)


def shape_over(rows: list[dict[str, float]], how: str) -> FileShape:
    n = len(rows)
    rates = {}
    for cls in (*REPRODUCED, *NOT_REPRODUCED):
        rates[cls] = sum(r.get(f"{cls.lower()}_s", 0.0) for r in rows) / n if n else 0.0
    sizes: dict[str, float | None] = {}
    for name in ("read", "write"):
        calls = sum(r.get(f"{name}_s", 0.0) for r in rows)
        nbytes = sum(r.get(f"_{name}_b", 0.0) for r in rows)
        sizes[name] = nbytes / calls / 1024 if calls > 0 else None
    per = [_reproduced(r) for r in rows]
    return FileShape(rates, sizes["read"], sizes["write"], n, how, per)


def production_window(bundle: Path) -> FileShape:
    """The captured file production's shape (the module's notes: the window)."""
    picked, how = production_rows(bundle)
    return shape_over(picked, how)


def production_rows(bundle: Path) -> tuple[list[dict[str, float]], str]:
    """The capture's ``fileops`` rows its window holds (the module's notes), and how they
    were picked."""
    rows = read_series(bundle)
    calls = [r.get("ops_s", 0.0) for r in rows]
    busy = [c for c in calls if c > 0]
    if not busy:
        raise ConfigError(f"replay: {bundle}: the capture counted no file system calls")
    floor = ACTIVE_SHARE * median(busy)
    active = [i for i, c in enumerate(calls) if c >= floor]
    picked = list(range(active[0], active[-1] + 1))
    if len(picked) > 2:
        picked = picked[1:-1]
    trimmed = 0
    while len(picked) > 3:
        mid = median(calls[i] for i in picked)
        if calls[picked[0]] > BURST_TIMES * mid:
            picked, trimmed = picked[1:], trimmed + 1
        elif calls[picked[-1]] > BURST_TIMES * mid:
            picked, trimmed = picked[:-1], trimmed + 1
        else:
            break
    how = (
        f"the active span, {len(picked)} intervals (t = {rows[picked[0]]['t']:g} to "
        f"{rows[picked[-1]]['t']:g} s; intervals under {ACTIVE_SHARE:.0%} of the median "
        f"and the span's partial first and last left out, and {trimmed} burst interval(s) "
        f"above {BURST_TIMES:g} x the span's median at its edges)"
    )
    return [rows[i] for i in picked], how


def footprint(op: str, p: dict[str, Any]) -> dict[str, float]:
    calls = dict(FOOTPRINT[op])
    if op == "seq_write":
        per_pass = max(1.0, p["backend_file_bytes"] / p["transfer_size_bytes"])
        calls["OPEN"] = calls.get("OPEN", 0.0) + 1 / per_pass
        calls["GETATTR"] = calls.get("GETATTR", 0.0) + 1 / per_pass
    return calls


def solve(asked: dict[str, float], p: dict[str, Any]) -> dict[str, float]:
    """Per EDA operation its rate, so that every reproduced class's calls are ``asked``
    (Gauss-Seidel on the footprints: each class's own operation takes what the others' side
    effects leave, never below zero); ``unlink`` is held to ``create``'s rate (a session
    removes only files it made)."""
    rate = {PRIMARY[c]: 0.0 for c in REPRODUCED if asked.get(c, 0.0) > 0}
    for _ in range(50):
        for cls in REPRODUCED:
            op = PRIMARY[cls]
            if op not in rate:
                continue
            others = sum(r * footprint(o, p).get(cls, 0.0) for o, r in rate.items() if o != op)
            rate[op] = max(0.0, (asked[cls] - others) / footprint(op, p)[cls])
        if "unlink" in rate:
            rate["unlink"] = min(rate["unlink"], rate.get("create", 0.0))
    return rate


@dataclass(frozen=True)
class FileJob:
    scale: float
    rates: dict[str, float]  # per EDA operation, ops/s
    parameters: dict[str, Any]
    sessions: int
    rate_ops_s: float
    rules: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "scale": self.scale,
            "operations_s": self.rates,
            "parameters": self.parameters,
            "sessions": self.sessions,
            "rate_ops_s": self.rate_ops_s,
            "rules": list(self.rules),
        }


def _aligned(kib: float | None) -> int:
    if not kib:
        return ALIGN
    return max(ALIGN, round(kib * 1024 / ALIGN) * ALIGN)


def _direct(*sizes: float | None) -> bool:
    """Whether every captured size is within 1 % of a 4 KiB multiple (O_DIRECT's unit)."""
    return all(not kib or abs(_aligned(kib) - kib * 1024) <= 0.01 * kib * 1024 for kib in sizes)


def _exact(kib: float | None) -> int:
    return max(MIN_BYTES, round(kib * 1024)) if kib else ALIGN


def _weights(rates: dict[str, float]) -> dict[str, int]:
    total = sum(rates.values())
    weights = {op: max(1, round(DECK * r / total)) for op, r in rates.items() if r > 0}
    if "unlink" in weights:
        weights["unlink"] = min(weights["unlink"], weights.get("create", 0))
        if weights["unlink"] == 0:
            del weights["unlink"]
    return weights


def derive(shape: FileShape, scale: float) -> FileJob:
    """The EDA parameters and load reproducing ``shape`` times ``scale``."""
    direct = _direct(shape.read_kib, shape.write_kib)
    size = _aligned if direct else _exact
    block, transfer = size(shape.read_kib), size(shape.write_kib)
    sizes = {"backend_file_bytes": BACKEND_FILE_BYTES, "transfer_size_bytes": transfer}
    asked = {c: shape.rates.get(c, 0.0) * scale for c in REPRODUCED}
    rates = solve(asked, sizes)
    front = {op: r for op, r in rates.items() if op != "seq_write" and r > 0}
    back = rates.get("seq_write", 0.0)
    front_rate = sum(front.values())
    params: dict[str, Any] = {"job_sets": 1, "block_size_bytes": block, "direct_io": direct}
    components = []
    n_front = 0
    if front_rate > 0:
        n_front = min(MAX_PROCESSES, max(1, math.ceil(front_rate / OPS_PER_PROCESS)))
        components.append("EDA_FRONTEND")
        params["frontend"] = {
            "process_rate_ops_s": front_rate / n_front,
            "processes_per_job_set": n_front,
            "file_size_bytes": max(FRONTEND_FILE_MIN, block),
            "mix": _weights(front),
        }
    if back > 0:
        components.append("EDA_BACKEND")
        params["transfer_size_bytes"] = transfer
        params["backend"] = {
            "process_rate_ops_s": back,
            "processes_per_job_set": 1,
            "file_size_bytes": BACKEND_FILE_BYTES,
            "files_per_dir": 2,
            "dirs": 1,
            "mix": {"seq_write": 1},
        }
    if not components:
        raise ConfigError("replay: the capture has no call an EDA operation reproduces")
    params["component"] = components[0] if len(components) == 1 else "EDA_BLENDED"
    rules = (
        "operations' rates solved from the captured calls per class times the scale and "
        "each operation's calls (sim.replay.filejob.FOOTPRINT), side effects included",
        f"mix: each front-end operation's share of a deck of {DECK} cards",
        f"random_read: one block of the captured mean read size ({block} B)",
        f"seq_write: transfers of the captured mean write size ({transfer} B)",
        "direct_io: data files opened with O_DIRECT (the page cache not in the way)"
        if direct
        else "buffered: the captured sizes are not 4 KiB multiples, which O_DIRECT needs "
        "(reads may be served by the target host's page cache)",
        f"front-end processes: one per {OPS_PER_PROCESS:g} ops/s, at most {MAX_PROCESSES}",
    )
    sessions = n_front + (1 if back > 0 else 0)
    return FileJob(scale, rates, params, sessions, front_rate + back, rules)
