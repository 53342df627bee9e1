"""``dbsim replay --compress 48``: a captured curve with a burst, replayed 48 times faster
(issue #29: the burst's position and height kept within one interval and 10 %).

Production is fio on loop device A for ``--production-s`` seconds: random 8 KiB reads at
``--base`` per second, and a burst job adding ``--burst`` per second for ``--burst-s``
seconds from ``--burst-at`` — captured by ``dbsim capture --path``. The replay runs
``dbsim replay CAPTURE --on <dir on loop device B> --compress 48`` (steps of 2 s, each 96
captured seconds) and its per-step table and ``replay.json`` go to stdout and
``bench/results/replay_day-<stamp>.json``. Root, fio and bpftrace needed.

    sudo .venv/bin/python bench/replay_day.py
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_fio import DBSIM, REPO, loop_fs, sh

JOB = """[global]
filename={path}
size=96M
direct=1
ioengine=libaio
time_based=1
randrepeat=0
bs=8k
rw=randread
iodepth=4
[base]
runtime={runtime}
rate_iops={base}
[burst]
startdelay={burst_at}
runtime={burst_s}
rate_iops={burst}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--production-s", type=int, default=480)
    parser.add_argument("--base", type=int, default=200)
    parser.add_argument("--burst", type=int, default=400)
    parser.add_argument("--burst-at", type=int, default=200)
    parser.add_argument("--burst-s", type=int, default=150)
    parser.add_argument("--compress", type=float, default=48)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dbsim-replay-day-"))
    devices, mounts = [], []
    try:
        for name in ("a", "b"):
            devices.append(loop_fs(work / f"{name}.img", work / name))
            mounts.append(work / name)
        data = work / "a" / "data"
        data.mkdir()
        sh("dd", "if=/dev/zero", f"of={data / 'prod.bin'}", "bs=1M", "count=96", "oflag=direct")
        job = work / "prod.fio"
        job.write_text(JOB.format(path=data / "prod.bin", runtime=args.production_s, base=args.base,
                                  burst_at=args.burst_at, burst_s=args.burst_s, burst=args.burst))  # fmt: skip
        proc = subprocess.Popen([*DBSIM, "capture", "--path", str(data), "-o", str(work / "captures"),
                                 "--quiet"], cwd=REPO, stdout=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(5)
        sh("fio", str(job), "--output-format=terse")
        time.sleep(2)
        proc.send_signal(signal.SIGTERM)
        bundle = proc.communicate(timeout=60)[0].strip()
        started = time.monotonic()
        done = subprocess.run(
            [*DBSIM, "replay", bundle, "--on", str(work / "b" / "replay"), "--compress",
             f"{args.compress:g}", "--step", "2", "--duration", "10", "--size", "96M",
             "-o", str(work / "replays")],
            cwd=REPO, capture_output=True, text=True,
        )  # fmt: skip
        wall = time.monotonic() - started
        sys.stdout.write(done.stdout + done.stderr)
        found = list((work / "replays").glob("*/replay.json"))
        result = {"command": " ".join(sys.argv), "exit": done.returncode, "wall_s": wall,
                  "replay": json.loads(found[0].read_text()) if found else None}  # fmt: skip
        out = REPO / "bench" / "results" / f"replay_day-{time.strftime('%Y%m%d-%H%M%S')}.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"exit {done.returncode}, replay {wall:.0f} s; figures: {out}")
        return 0 if found else 1
    finally:
        for mnt in mounts:
            subprocess.run(["umount", str(mnt)], check=False)
        for device in devices:
            subprocess.run(["losetup", "--detach", device], check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
