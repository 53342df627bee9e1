"""The migration question of issue #19, end to end on the storage lab (root, cgroup v1).

Builds a private lab with two volumes under one throwaway PostgreSQL: ``old`` capped at 500
read IOPS and ``new`` at 2,000. A SLOB-like table (read-only) goes into a tablespace on each.
Then:

1. a sweep per volume, offered load stepping through 250, 500 and 1,000 read IOPS, judged per
   step against ``read p99 <= X ms`` and the device's eBPF p99: the verdict at 1,000 IOPS says
   whether each volume meets "p99 <= X at 1,000 IOPS";
2. a fixed-rate run at 1,000 IOPS on old, on new and on new again, and ``dbsim compare``
   old -> new (a difference) and new -> new again (the same device twice: no difference);
3. the device mean and p99 from eBPF beside iostat's mean await, per run (mean against mean
   is the like-for-like check; the p99 is the tail an SLO is about).

Pacing: the steps are ``rate_iops`` when the scenario schema has it (the engine paces device
I/O itself), else ``rate_ops_s`` = IOPS / reads per operation, measured by a short closed-loop
calibration run on ``new``. The lab is always taken down; the bundles and a JSON of the
figures stay under ``bench/results/``.

    sudo .venv/bin/python bench/migration_demo.py            # about 3 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import typing
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sim.config.scenario import Sweep  # noqa: E402
from sim.errors import SimError  # noqa: E402
from storage.lab import Lab, parse_volume  # noqa: E402
from storage.lab.status import postgres_target  # noqa: E402

MiB = 1 << 20
CEILINGS = {"old": 500, "new": 2000}
STEPS_IOPS = (250, 500, 1000)
VERDICT_IOPS = 1000


def iops_pacing() -> bool:
    """Whether this dbsim paces by device IOPS (``load.sweep.vary: rate_iops``)."""
    return "rate_iops" in typing.get_args(Sweep.model_fields["vary"].annotation)


def free_port(preferred: int) -> int:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])


def dbsim(*argv: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "sim.cli", *argv], cwd=REPO, capture_output=True, text=True
    )
    if done.returncode not in ok:
        sys.exit(f"error: dbsim {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return done


class Demo:
    def __init__(self, args: argparse.Namespace, lab: Lab, status: dict[str, Any]) -> None:
        self.args, self.lab, self.status = args, lab, status
        self.runs: Path = args.results
        self.volumes = {v["name"]: v for v in status["volumes"]}

    def scenario(self, volume: str, name: str, load: dict[str, Any], slos: Any = ()) -> Path:
        vol = self.volumes[volume]
        data = {
            "name": name,
            "target": postgres_target(self.status, vol),
            "workload": {
                "name": "slob",
                "parameters": {
                    "table_prefix": f"m{volume}",
                    "scale": self.args.rows,
                    "update_pct": 0,
                    "work_unit": self.args.work_unit,
                    "load_batch_rows": 8000,
                },
            },
            "load": load,
            "slos": list(slos),
        }
        path = self.runs / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def run(self, scenario: Path) -> tuple[Path, dict[str, Any], int]:
        """``dbsim run`` from a cold lab cache; the bundle, its summary and the exit code
        (1: an SLO was missed, which is an answer here, not a failure)."""
        self.lab.cold_cache()
        done = dbsim("run", str(scenario), "-o", str(self.runs), "--skip-load", "-q", ok=(0, 1))
        bundle = Path(done.stdout.strip().splitlines()[-1])
        return bundle, json.loads((bundle / "summary.json").read_text()), done.returncode

    def device(self, volume: str) -> str:
        return os.path.basename(self.volumes[volume]["device"])

    def pace(self, iops: float, reads_per_op: float | None) -> dict[str, float]:
        if reads_per_op is None:
            return {"rate_iops": iops}
        return {"rate_ops_s": iops / reads_per_op}

    def calibrate(self) -> float:
        """Device reads per operation on ``new``, closed loop, below nothing but its ceiling."""
        load = {"sessions": 4, "duration_s": 4, "warmup_s": self.args.warmup_s}
        _, summary, _ = self.run(self.scenario("new", "calibrate", load))
        r_s = summary["storage"]["block"][self.device("new")]["r_s"]
        ops_s = sum(op["ops_s"] for op in summary["operations"].values())
        return float(r_s / ops_s)

    def slos(self, volume: str) -> list[dict[str, Any]]:
        return [
            {"name": f"read p99 <= {self.args.p99_ms:g} ms", "op": "read",
             "p99_us_max": self.args.p99_ms * 1000},
            {"name": f"device p99 <= {self.args.device_p99_ms:g} ms", "device": self.device(volume),
             "device_p99_ms_max": self.args.device_p99_ms},
        ]  # fmt: skip

    def sweep(self, volume: str, reads_per_op: float | None) -> dict[str, Any]:
        ((key, start),) = self.pace(STEPS_IOPS[0], reads_per_op).items()
        stop = start * STEPS_IOPS[-1] / STEPS_IOPS[0] * 1.001  # the last step, not above it
        load = {
            "sessions": self.args.sessions,
            "mode": "open",
            "warmup_s": self.args.warmup_s,
            "sweep": {"vary": key, "start": start, "factor": 2, "max": stop,
                      "step_duration_s": self.args.step_s, "stop_on_breach": False},
        }  # fmt: skip
        bundle, summary, rc = self.run(
            self.scenario(volume, f"sweep-{volume}", load, self.slos(volume))
        )
        points = summary["sweep"]["points"]
        at = points[-1]  # the 1,000-IOPS step
        return {"bundle": str(bundle), "exit": rc, "points": points, "at_verdict_iops": at,
                "latency": self.latency(summary, volume)}  # fmt: skip

    def latency(self, summary: dict[str, Any], volume: str) -> dict[str, Any]:
        dev = self.device(volume)
        block = summary["storage"]["block"][dev]
        ebpf = (summary["storage"].get("blocklatency") or {}).get(f"{dev}:read") or {}
        return {"device": dev, "r_s": block.get("r_s"), "r_await_ms": block.get("r_await_ms"),
                "ebpf_mean_ms": ebpf.get("mean_ms"), "ebpf_p50_ms": ebpf.get("p50_ms"),
                "ebpf_p99_ms": ebpf.get("p99_ms")}  # fmt: skip

    def fixed(self, volume: str, label: str, reads_per_op: float | None) -> dict[str, Any]:
        load = {"sessions": self.args.sessions, "mode": "open", "warmup_s": self.args.warmup_s,
                "duration_s": self.args.compare_s, **self.pace(VERDICT_IOPS, reads_per_op)}  # fmt: skip
        bundle, summary, rc = self.run(
            self.scenario(volume, f"fixed-{label}", load, self.slos(volume))
        )
        read = summary["operations"]["read"]
        return {"bundle": str(bundle), "exit": rc, "ops_s": read["ops_s"], "p99_us": read["p99_us"],
                "slos": summary["slos"], "latency": self.latency(summary, volume)}  # fmt: skip


def compare(baseline: str, candidate: str) -> dict[str, Any]:
    done = dbsim("compare", baseline, candidate, ok=(0, 1))
    return {"exit": done.returncode, "output": done.stdout.rstrip()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=16_000, help="SLOB rows (8 KiB each)")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--work-unit", type=int, default=3, help="SLOB WORK_UNIT (rows per read)")
    parser.add_argument("--warmup-s", type=float, default=5.0, help="the cache fills meanwhile")
    parser.add_argument("--step-s", type=float, default=5.0)
    parser.add_argument(
        "--compare-s", type=float, default=30.0, help="fixed-rate runs (compare needs >= 5 batches)"
    )
    parser.add_argument("--p99-ms", type=float, default=50.0, help="the read p99 objective")
    parser.add_argument("--device-p99-ms", type=float, default=20.0)
    parser.add_argument("--pg-port", type=int, default=55462)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("error: the lab needs root (loop devices, mounts, cgroups): run with sudo")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.results = REPO / "bench" / "results" / f"migration_demo-{stamp}"
    args.results.mkdir(parents=True)
    base = Path(tempfile.mkdtemp(prefix="dbsim-migration-", dir="/var/tmp"))
    base.chmod(0o755)  # postgres must be able to search every parent directory
    lab = Lab(base / "state", base / "images", name=f"dbsim-migration-{os.getpid()}")
    try:
        status = lab.up(
            1 << 30, base / "mnt", memory_limit_bytes=96 * MiB, postgres=True,
            pg_port=free_port(args.pg_port),
            volumes=[parse_volume(f"{n}:read-iops={c}") for n, c in CEILINGS.items()],
        )  # fmt: skip
        figures = demo(Demo(args, lab, status))
    except SimError as exc:
        sys.exit(f"error: {exc}")
    finally:
        problems = lab.down()
        for problem in problems:
            print(f"error: lab down: {problem}", file=sys.stderr)
        if not problems and not any(base.iterdir()):
            base.rmdir()
    out = args.results / "figures.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"\nfigures: {out.relative_to(REPO)}")
    return 0 if not problems else 3


def demo(d: Demo) -> dict[str, Any]:
    for volume in CEILINGS:
        dbsim("load", str(d.scenario(volume, f"load-{volume}", {"sessions": 1, "duration_s": 1})))
    reads_per_op = None if iops_pacing() else d.calibrate()
    pacing = (
        "rate_iops"
        if reads_per_op is None
        else f"rate_ops_s, {reads_per_op:.2f} reads/op (measured)"
    )
    print(f"pacing: {pacing}")
    sweeps = {volume: d.sweep(volume, reads_per_op) for volume in CEILINGS}
    print(f"\nthe steps (sweep, SLOs judged per step; the last one offers {VERDICT_IOPS:,} IOPS):")
    for volume, result in sweeps.items():
        print_sweep(volume, result)
    fixed = {label: d.fixed(volume, label, reads_per_op)
             for label, volume in (("old", "old"), ("new", "new"), ("new-again", "new"))}  # fmt: skip
    print(
        f"\nverdict: p99 <= {d.args.p99_ms:g} ms (read) and device p99 <= "
        f"{d.args.device_p99_ms:g} ms (eBPF) at {VERDICT_IOPS:,} read IOPS offered, "
        f"{d.args.compare_s:g} s each (dbsim's SLO verdicts):"
    )
    for label, result in fixed.items():
        missed = [v.get("name") or v["slo"] for v in result["slos"]["verdicts"] if not v["met"]]
        print(f"  {label:9} {'MEETS' if result['slos']['met'] else 'MISSES ' + ', '.join(missed)}")
    print("\nmeasured, same runs:")
    for label, result in fixed.items():
        lat = result["latency"]
        print(f"  {label:9} {result['ops_s']:8.1f} ops/s  read p99 {result['p99_us'] / 1000:8.2f} ms  "
              f"{lat['device']} {lat['r_s']:7.1f} r/s  iostat r_await {fmt(lat['r_await_ms'])} ms  "
              f"eBPF read mean {fmt(lat['ebpf_mean_ms'])} ms, p99 {fmt(lat['ebpf_p99_ms'])} ms")  # fmt: skip
    compares = {
        "old -> new": compare(fixed["old"]["bundle"], fixed["new"]["bundle"]),
        "new -> new again (same device)": compare(fixed["new"]["bundle"], fixed["new-again"]["bundle"]),
    }  # fmt: skip
    for title, result in compares.items():
        print(f"\n$ dbsim compare   # {title}: exit {result['exit']}\n{result['output']}")
    return {"ceilings": CEILINGS, "pacing": pacing, "reads_per_op": reads_per_op,
            "sweeps": sweeps, "fixed": fixed, "compare": compares}  # fmt: skip


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_sweep(volume: str, result: dict[str, Any]) -> None:
    at = result["at_verdict_iops"]
    verdict = {True: "meets", False: "misses", None: "not judged"}[at.get("slo_met")]
    lat = result["latency"]
    print(f"  {volume} ({CEILINGS[volume]:,} IOPS ceiling, {lat['device']}): {verdict} them at the "
          f"last step; breaches: {', '.join(b.get('name') or b['slo'] for b in at.get('breaches', [])) or 'none'}")  # fmt: skip
    for point, iops in zip(result["points"], STEPS_IOPS, strict=False):
        asked = f"{iops:,} IOPS asked"
        if point.get("rate_ops_s") is not None and "rate_iops" not in point:
            asked += f" ({point['load']:.1f} ops/s)"
        print(
            f"      {point['label']}: {asked}, {point['ops_s']:.1f} ops/s, "
            f"p99 {point['p99_us'] / 1000:.2f} ms, {point['device_iops']:.1f} IOPS, "
            f"SLOs {'met' if point['slo_met'] else 'missed'}"
        )


if __name__ == "__main__":
    sys.exit(main())
