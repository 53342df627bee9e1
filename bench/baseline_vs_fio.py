"""dbsim baseline vs bare fio: does running fio under dbsim (collectors sampling every second,
the bundle written beside it) cost the storage measurement anything?

Each repetition runs the same points twice, alternating: ``dbsim baseline`` on a tree, then
bare fio with the very job files dbsim wrote (from that run's ``fio/`` directory) on the same
files. Medians of the per-point IOPS ratio (dbsim ÷ bare fio) are reported; the target is
≥ 0.97 on every point (dbsim adds one /proc/diskstats read per second and nothing on the I/O
path).

    .venv/bin/python bench/baseline_vs_fio.py --dir /var/tmp/dbsim-bench --repeat 5 --runtime 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
TARGET = 0.97


def dbsim_run(tree: Path, out: Path, args: argparse.Namespace) -> Path:
    cmd = [
        sys.executable, "-m", "sim.cli", "baseline", str(tree), "--preset", args.preset,
        "--runtime", str(args.runtime), "--ramp", str(args.ramp), "--size", args.size,
        "--keep-files", "--quiet", "-o", str(out),
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"dbsim baseline failed: {done.stderr.strip()}")
    return Path(done.stdout.strip())


def bare_fio(job: Path) -> float:
    done = subprocess.run(
        ["fio", "--output-format=json", str(job)], capture_output=True, text=True, check=True
    )
    start = done.stdout.find("{")
    job_result = json.loads(done.stdout[start:])["jobs"][0]
    return float(job_result["read"]["iops"]) + float(job_result["write"]["iops"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/dbsim-bench-baseline"))
    parser.add_argument("--preset", default="random-4k")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--runtime", type=float, default=5.0)
    parser.add_argument("--ramp", type=float, default=1.0)
    parser.add_argument("--size", default="512M")
    args = parser.parse_args()
    tree, out = args.dir / "tree", args.dir / "runs"
    ratios: dict[str, list[float]] = {}
    rows = []
    for n in range(args.repeat):
        bundle = dbsim_run(tree, out, args)
        points = json.loads((bundle / "baseline.json").read_text())["points"]
        for point in points:
            fio_iops = bare_fio(bundle / "fio" / f"{point['id']}.fio")
            ratio = point["iops"] / fio_iops
            ratios.setdefault(point["id"], []).append(ratio)
            rows.append({"repeat": n, "id": point["id"], "dbsim": point["iops"], "fio": fio_iops})
            print(
                f"{n} {point['id']:14} dbsim {point['iops']:10,.0f}  fio {fio_iops:10,.0f}  {ratio:.3f}"
            )
    medians = {pid: statistics.median(v) for pid, v in ratios.items()}
    print("\nmedian dbsim ÷ bare fio per point:")
    for pid, value in medians.items():
        print(f"  {pid:14} {value:.3f}  {'met' if value >= TARGET else 'MISSED'} (≥ {TARGET})")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"baseline_vs_fio-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"args": vars(args) | {"dir": str(args.dir)}, "runs": rows,
                                "medians": medians}, indent=2))  # fmt: skip
    print(f"results: {path}")


if __name__ == "__main__":
    main()
