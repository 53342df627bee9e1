"""``dbsim replay`` of file production, end to end, with the figures (issue #29).

Production is a file workload dbsim did not write, on an ext4 of loop device A, captured by
``dbsim capture --path`` with the ``fileops`` collector (file system calls per class, eBPF):

- ``--production fio``: fio's ``filecreate`` (40/s), ``filestat`` (200/s) and ``filedelete``
  (20/s) engines and two ``psync`` jobs, 4 KiB random reads (150/s) and 16 KiB random writes
  (60/s), each paced by fio;
- ``--production build``: a C source tree this script generates (``--files`` units, each
  including a few shared headers) compiled by ``make -j2`` again and again (``make clean``
  between), gcc's temporary files on the tree too (``TMPDIR``).

The replay runs ``dbsim replay CAPTURE --on <dir on loop device B> --scale …`` inside a cgroup
v1 blkio group made by this script that throttles device B's reads to ``--ceiling`` times the
captured READ calls (the replay's data reads are O_DIRECT). It prints the replay's console,
then writes ``bench/results/replay_files-<production>-<stamp>.json`` (the whole
``replay.json`` plus the command). Root, fio, gcc, make and bpftrace needed.

    sudo .venv/bin/python bench/replay_files.py --production fio --scales 1,2,3 --duration 20
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

from sim.replay.filejob import production_window  # noqa: E402
from storage.lab.cgroups import own_paths, v1_mounts  # noqa: E402

DBSIM = [sys.executable, "-m", "sim.cli"]
FIO_JOB = """[global]
time_based=1
runtime={runtime}
[create]
directory={d}/create
ioengine=filecreate
nrfiles=20000
filesize=4k
openfiles=1
rate_iops=40
[stat]
directory={d}/stat
ioengine=filestat
nrfiles=50
filesize=4k
rate_iops=200
[delete]
directory={d}/delete
ioengine=filedelete
nrfiles=20000
filesize=4k
openfiles=1
rate_iops=20
[reads]
directory={d}/data
ioengine=psync
rw=randread
bs=4k
size=8M
rate_iops=150
[writes]
directory={d}/data
ioengine=psync
rw=randwrite
bs=16k
size=8M
rate_iops=60
"""


def sh(*argv: str, cwd: Path | None = None) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, cwd=cwd).stdout.strip()


def loop_fs(image: Path, mnt: Path) -> str:
    with image.open("wb") as handle:
        handle.truncate(512 << 20)
    device = sh("losetup", "--find", "--show", str(image))
    sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", device)
    mnt.mkdir()
    sh("mount", "-o", "noatime", device, str(mnt))
    return device


def source_tree(root: Path, files: int) -> None:
    """A C project: ``files`` units, each including three of eight headers."""
    (root / "include").mkdir(parents=True)
    for h in range(8):
        lines = [f"#define H{h}_N {h + 1}"]
        lines += [
            f"static inline int h{h}_f{k}(int x) {{ return x * {k + 1} + H{h}_N; }}"
            for k in range(40)
        ]
        (root / "include" / f"h{h}.h").write_text("\n".join(lines) + "\n")
    for i in range(files):
        heads = "".join(f'#include "h{(i + k) % 8}.h"\n' for k in range(3))
        body = "\n".join(
            f"int u{i}_g{k}(int x) {{ return h{i % 8}_f{k}(x) + {k}; }}" for k in range(30)
        )
        (root / f"u{i}.c").write_text(f"#include <stdio.h>\n{heads}{body}\n")
    (root / "Makefile").write_text(
        "SRC := $(wildcard *.c)\nOBJ := $(SRC:.c=.o)\nlib.a: $(OBJ)\n\tar rcs $@ $^\n"
        "%.o: %.c\n\t$(CC) -O1 -Iinclude -c $< -o $@\nclean:\n\trm -f *.o lib.a\n"
    )


def run_production(kind: str, data: Path, seconds: float, files: int) -> None:
    if kind == "fio":
        job = data.parent / "prod.fio"
        job.write_text(FIO_JOB.format(d=data, runtime=int(seconds)))
        sh("fio", str(job), "--output-format=terse")
        return
    env = dict(os.environ, TMPDIR=str(data / "tmp"))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        subprocess.run(["make", "-s", "clean"], cwd=data / "src", env=env, check=True)
        subprocess.run(["make", "-s", "-j2"], cwd=data / "src", env=env, check=True)


def capture(work: Path, data: Path, args: argparse.Namespace) -> Path:
    if args.production == "fio":
        for sub in ("create", "stat", "delete", "data"):
            (data / sub).mkdir()
        job = work / "layout.fio"
        job.write_text(FIO_JOB.format(d=data, runtime=1))
        sh("fio", str(job), "--create_only=1")
    else:
        (data / "tmp").mkdir()
        source_tree(data / "src", args.files)
    out = work / "captures"
    proc = subprocess.Popen(
        [*DBSIM, "capture", "--path", str(data), "-o", str(out), "--quiet",
         "--set", "collectors.fileops.enabled=true", "--set", "collectors.fileops.attach_wait_s=30",
         "--set", "collectors.timeout_s=35"],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    for _ in range(600):  # the probes attached: a first fileops row written
        found = list(out.glob("*/timeseries/fileops.csv"))
        if found and len(found[0].read_text().splitlines()) >= 2:
            break
        time.sleep(0.1)
    run_production(args.production, data, args.production_s, args.files)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    return Path(proc.communicate(timeout=60)[0].strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--production", choices=("fio", "build"), default="fio")
    parser.add_argument("--scales", default="1,2,3")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per scale")
    parser.add_argument("--ceiling", type=float, default=2.5, help="B's read throttle, x capture")
    parser.add_argument("--production-s", type=float, default=30.0)
    parser.add_argument("--files", type=int, default=120, help="C units of the build")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dbsim-replay-files-"))
    devices, mounts = [], []
    group = None
    try:
        for name in ("a", "b"):
            devices.append(loop_fs(work / f"{name}.img", work / name))
            mounts.append(work / name)
        data = work / "a" / "data"
        data.mkdir()
        bundle = capture(work, data, args)
        seen = production_window(bundle)
        group = v1_mounts()["blkio"] / own_paths().get("blkio", "/").lstrip("/")
        group = group / f"dbsim-replay-files-{uuid.uuid4().hex[:8]}"
        group.mkdir()
        rdev = os.stat(devices[1]).st_rdev
        dev = f"{os.major(rdev)}:{os.minor(rdev)}"
        ceiling = max(1, round(args.ceiling * seen.rates["READ"]))
        (group / "blkio.throttle.read_iops_device").write_text(f"{dev} {ceiling}\n")
        replay = [*DBSIM, "replay", str(bundle), "--on", str(work / "b" / "replay"),
                  "--scale", args.scales, "--duration", f"{args.duration:g}",
                  "-o", str(work / "replays")]  # fmt: skip
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
            "throttle_read_iops": ceiling,
            "replay": json.loads(found[0].read_text()) if found else None,
        }
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = REPO / "bench" / "results" / f"replay_files-{args.production}-{stamp}.json"
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
