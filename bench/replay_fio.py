"""``dbsim replay`` of block-level production, end to end, with the figures (issue #29).

Production is a fio job dbsim did not write (random reads of 8 KiB and 64 KiB, 70/30 by
fio's ``bssplit``, and 8 KiB writes, each paced by fio) on a file of an ext4 on loop device
A, captured by ``dbsim capture --path``. The replay runs ``dbsim replay CAPTURE --on <dir on
loop device B> --scale …`` inside a cgroup v1 blkio group made by this script that throttles
device B to ``--ceiling`` times the captured read and write IOPS (the lab's host-side
ceiling: ``blkio.throttle.*_iops_device``). It prints, per scale, the asked and delivered
figures and the fidelity, then the answer, and writes ``bench/results/replay_fio-<stamp>.json``
(the whole ``replay.json`` plus the command). Root, fio and bpftrace needed.

    sudo .venv/bin/python bench/replay_fio.py --scales 1,2,3 --duration 30 --ceiling 2.5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sim.replay.shape import production_window  # noqa: E402
from storage.lab.cgroups import own_paths, v1_mounts  # noqa: E402

DBSIM = [sys.executable, "-m", "sim.cli"]
JOB = """[global]
filename={path}
size=96M
direct=1
ioengine=libaio
time_based=1
runtime={runtime}
randrepeat=0
[reads]
rw=randread
bssplit=8k/70:64k/30
iodepth=4
rate_process=poisson
rate_iops={reads}
[writes]
rw=randwrite
bs=8k
iodepth=2
rate_iops={writes}
"""


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


def loop_fs(image: Path, mnt: Path) -> str:
    with image.open("wb") as handle:
        handle.truncate(512 << 20)
    device = sh("losetup", "--find", "--show", str(image))
    sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", device)
    mnt.mkdir()
    sh("mount", "-o", "noatime", device, str(mnt))
    return device


def capture(work: Path, data: Path, args: argparse.Namespace) -> Path:
    sh("dd", "if=/dev/zero", f"of={data / 'prod.bin'}", "bs=1M", "count=96", "oflag=direct")
    job = work / "prod.fio"
    job.write_text(JOB.format(path=data / "prod.bin", runtime=args.production_s,
                              reads=args.reads, writes=args.writes))  # fmt: skip
    out = work / "captures"
    proc = subprocess.Popen([*DBSIM, "capture", "--path", str(data), "-o", str(out), "--quiet"],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)  # fmt: skip
    time.sleep(5)  # the collectors started, bpftrace tracing
    sh("fio", str(job), "--output-format=terse")
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    return Path(proc.communicate(timeout=60)[0].strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="1,2,3")
    parser.add_argument("--duration", type=float, default=30.0, help="fio seconds per scale")
    parser.add_argument("--ceiling", type=float, default=2.5, help="B's throttle, x capture")
    parser.add_argument("--reads", type=int, default=500, help="production reads/s (fio)")
    parser.add_argument("--writes", type=int, default=200, help="production writes/s (fio)")
    parser.add_argument("--production-s", type=int, default=60)
    parser.add_argument("--slo-ms", type=float, default=50.0, help="read p99 SLO (ms)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dbsim-replay-bench-"))
    devices, mounts = [], []
    group = None
    try:
        for name in ("a", "b"):
            devices.append(loop_fs(work / f"{name}.img", work / name))
            mounts.append(work / name)
        data = work / "a" / "data"
        data.mkdir()
        bundle = capture(work, data, args)
        profile = json.loads(sh(*DBSIM, "profile", str(bundle), "--json"))
        seen = production_window(profile)
        group = v1_mounts()["blkio"] / own_paths().get("blkio", "/").lstrip("/")
        group = group / f"dbsim-replay-bench-{uuid.uuid4().hex[:8]}"
        group.mkdir()
        rdev = os.stat(devices[1]).st_rdev
        dev = f"{os.major(rdev)}:{os.minor(rdev)}"
        ceiling = (round(args.ceiling * seen.read_iops), round(args.ceiling * seen.write_iops))
        (group / "blkio.throttle.read_iops_device").write_text(f"{dev} {ceiling[0]}\n")
        (group / "blkio.throttle.write_iops_device").write_text(f"{dev} {ceiling[1]}\n")
        replay = [*DBSIM, "replay", str(bundle), "--on", str(work / "b" / "replay"),
                  "--scale", args.scales, "--duration", f"{args.duration:g}", "--size", "96M",
                  "-o", str(work / "replays"), "--slo", f"read_p99={args.slo_ms:g}"]  # fmt: skip
        enter = f'echo $$ > {group / "cgroup.procs"} && exec "$@"'
        started = time.monotonic()
        done = subprocess.run(["sh", "-c", enter, "sh", *replay], cwd=REPO, text=True,
                              capture_output=True)  # fmt: skip
        wall = time.monotonic() - started
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        found = list((work / "replays").glob("*/replay.json"))
        result = {
            "command": " ".join(sys.argv),
            "exit": done.returncode,
            "wall_s": wall,
            "throttle_iops": {"read": ceiling[0], "write": ceiling[1]},
            "replay": json.loads(found[0].read_text()) if found else None,
        }
        out = REPO / "bench" / "results" / f"replay_fio-{time.strftime('%Y%m%d-%H%M%S')}.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"exit {done.returncode}, {wall:.0f} s; figures: {out}")
        return 0 if found else 1
    finally:
        if group is not None and group.exists():
            group.rmdir()
        for mnt in mounts:
            subprocess.run(["umount", str(mnt)], check=False)
        for device in devices:
            subprocess.run(["losetup", "--detach", device], check=False)
        shutil.rmtree(work, ignore_errors=True)  # its images, captures and replays


if __name__ == "__main__":
    raise SystemExit(main())
