"""``dbsim replay`` of a database production, end to end, with the figures (issue #29).

One lab of this script's own (root): two volumes, ``old`` and ``new``, each an ext4 on a loop
device with a QoS ceiling of read and write IOPS (the lab's blkio rule), one throwaway
PostgreSQL whose backends are in the lab's groups (128 MiB memory: reads reach the devices).
Production is ``pgbench -N --rate`` (TPC-B-like without the branch/teller updates: a read
and an update of a random account, a history insert), or ``--mix``'s built-in scripts with
weights, with its tables in a tablespace on ``old``; ``dbsim capture --path`` records it once
its writes are in steady state (the host's write-back delay after pgbench starts). The replay: a slob scenario on ``new`` (its own
tablespace), ``dbsim replay CAPTURE --on SCENARIO --scale …``. Prints replay.json's per-scale
figures and the answer; writes ``bench/results/replay_db-<stamp>.json`` (replay.json and the
command). The cluster's settings are the lab's (the user's), never tuned here.

    sudo .venv/bin/python bench/replay_db.py --scales 1,2,8 --duration 8
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from sim.replay.dbjob import writeback_delay_s  # noqa: E402
from storage.lab import Lab, parse_volume  # noqa: E402
from storage.lab.status import postgres_target  # noqa: E402

DBSIM = [sys.executable, "-m", "sim.cli"]
MiB, GiB = 1 << 20, 1 << 30


#: The cluster's own write counters, sampled every second while production and the replay run,
#: so the device writes of a window can be laid beside what the database wrote into the page
#: cache over it: the checkpointer's blocks, the background writer's, the backends' own
#: evictions, and the WAL (pg_stat_bgwriter, pg_stat_wal; PostgreSQL 15).
PG_STAT_SQL = (
    "SELECT extract(epoch FROM clock_timestamp()), b.checkpoints_timed, b.checkpoints_req, "
    "b.buffers_checkpoint, b.buffers_clean, b.buffers_backend, b.buffers_alloc, "
    "w.wal_records, w.wal_bytes, w.wal_write, w.wal_sync "
    "FROM pg_stat_bgwriter b, pg_stat_wal w"
)
PG_STAT_KEYS = (
    "t", "checkpoints_timed", "checkpoints_req", "buffers_checkpoint", "buffers_clean",
    "buffers_backend", "buffers_alloc", "wal_records", "wal_bytes", "wal_write", "wal_sync",
)  # fmt: skip


class PgStatSampler(threading.Thread):
    """:data:`PG_STAT_SQL` once a second into ``rows`` until :meth:`stop`."""

    def __init__(self, psql_argv: list[str], env: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.argv, self.env = psql_argv, env
        self.rows: list[dict[str, float]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            got = subprocess.run(
                [*self.argv, "-At", "-F", ",", "-c", PG_STAT_SQL],
                env=self.env, capture_output=True, text=True,
            )  # fmt: skip
            if got.returncode == 0 and got.stdout.strip():
                values = [float(v) for v in got.stdout.strip().split(",")]
                self.rows.append(dict(zip(PG_STAT_KEYS, values, strict=True)))

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=10)

    def over(self, start: float, end: float) -> dict[str, float] | None:
        """Each counter's rate per second between the samples nearest ``start`` and ``end``
        (wall clock, s)."""
        if len(self.rows) < 2:
            return None
        first = min(self.rows, key=lambda r: abs(r["t"] - start))
        last = min(self.rows, key=lambda r: abs(r["t"] - end))
        seconds = last["t"] - first["t"]
        if seconds <= 0:
            return None
        out = {k: (last[k] - first[k]) / seconds for k in PG_STAT_KEYS if k != "t"}
        out["seconds"] = seconds
        return out


def _wall_window(bundle: Path, first_t: float, last_t: float) -> tuple[float, float]:
    """A bundle's window (its own clock, s from its start) on the wall clock."""
    summary = json.loads((bundle / "summary.json").read_text())
    started = datetime.fromisoformat(str(summary["started_at"]).replace("Z", "+00:00"))
    return started.timestamp() + first_t, started.timestamp() + last_t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", default="1,2,8")
    ap.add_argument("--duration", type=float, default=8.0, help="each scale's measured s")
    ap.add_argument("--old-iops", type=int, default=300, help="old volume's ceiling")
    ap.add_argument("--new-iops", type=int, default=400, help="new volume's ceiling")
    ap.add_argument("--rate", type=int, default=40, help="pgbench --rate (tps)")
    ap.add_argument(
        "--mix", default="-N",
        help="production's pgbench transactions: -N (the default), or built-in scripts with "
        "weights, e.g. 'select-only@49,simple-update@1' (a read production with a few writes)",
    )  # fmt: skip
    ap.add_argument("--pgbench-scale", type=int, default=20)
    ap.add_argument("--rows", type=int, default=80_000, help="SLOB rows on new (8 KiB each)")
    ap.add_argument("--capture-s", type=float, default=30.0)
    ap.add_argument(
        "--slo", action="append", default=[], metavar="KEY=MS",
        help="device latency objective handed to dbsim replay (read_p99=..., repeatable): "
        "with one, the replay judges each scale and names the headroom",
    )  # fmt: skip
    ap.add_argument(
        "--images", type=Path, default=None,
        help="the directory for the lab's volume images (default: beside the lab's state, on "
        "the host's disk; the suite's test gives a tmpfs of its own)",
    )  # fmt: skip
    ap.add_argument("--pg-port", type=int, default=55700 + os.getpid() % 200)
    ap.add_argument(
        "--out", type=Path, default=None,
        help="the results file (default bench/results/replay_db-<stamp>.json)",
    )  # fmt: skip
    args = ap.parse_args()
    if args.out is not None and os.path.lexists(args.out):  # before minutes of work, not after
        print(f"error: --out {args.out}: exists; the results go to a new file", file=sys.stderr)
        return 2
    # A SIGTERM (the suite's test on its timeout) unwinds through the lab's teardown below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    base = Path(tempfile.mkdtemp(prefix="dbsim-bench-rdb-", dir="/var/tmp"))
    base.chmod(0o755)  # postgres must search every parent directory
    lab = Lab(base / "state", args.images or base / "images", name=f"dbsim-bench-rdb-{os.getpid()}")
    started = time.monotonic()
    try:
        status = lab.up(
            3 * GiB, base / "mnt", memory_limit_bytes=128 * MiB, postgres=True,
            pg_port=args.pg_port,
            volumes=[parse_volume("old"), parse_volume("new")],
        )  # fmt: skip
        doc = run(lab, status, base, args)
    finally:
        with contextlib.suppress(Exception):
            problems = lab.down()
            print("lab down:", problems or "clean")
            if not problems:  # the lab's directories and the run bundles (figures kept below)
                shutil.rmtree(base, ignore_errors=True)
    doc["wall_s"] = round(time.monotonic() - started, 1)
    out = (
        args.out or REPO / "bench" / "results" / f"replay_db-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    out.parent.mkdir(exist_ok=True)
    # A new file only: never one that is there (or a link to one) by the time the run ends.
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, indent=1) + "\n")
    print(f"wall {doc['wall_s']} s; written {out}")
    return int(doc.get("exit_code") or 0)


def pgbench_mix(mix: str) -> list[str]:
    """pgbench's options for --mix: ``-N``, or ``-b SCRIPT@WEIGHT`` for each comma-separated
    built-in script."""
    if mix == "-N":
        return ["-N"]
    return [arg for script in mix.split(",") for arg in ("-b", script.strip())]


def run(lab: Lab, status: dict[str, Any], base: Path, args: argparse.Namespace) -> dict[str, Any]:
    pg = status["postgres"]
    port, vols = pg["port"], {v["name"]: v for v in status["volumes"]}
    env = {**os.environ, "PGPASSWORD": Path(pg["password_file"]).read_text().strip()}
    conn = ["-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]

    def psql(sql: str) -> None:
        subprocess.run(["psql", *conn, "-c", sql], env=env, check=True, capture_output=True)

    psql(f"CREATE TABLESPACE lab_old LOCATION '{vols['old']['tablespace_dir']}'")
    init = ["-i", "-s", str(args.pgbench_scale), "-I", "dtGvp", "-q"]
    init += ["--tablespace=lab_old", "--index-tablespace=lab_old"]
    init_done = subprocess.run(["pgbench", *conn, *init, "postgres"], env=env, capture_output=True)
    if init_done.returncode:
        raise SystemExit(f"pgbench -i: {init_done.stderr.decode(errors='replace')[-500:]}")
    psql("CHECKPOINT")
    # The ceilings once the data is in (a load under 300 IOPS takes minutes), caches emptied.
    lab.set_ceiling(read_iops=args.old_iops, write_iops=args.old_iops, volume="old")
    lab.set_ceiling(read_iops=args.new_iops, write_iops=args.new_iops, volume="new")
    lab.cold_cache()
    delay, how = writeback_delay_s()
    warm = delay + 2.0
    total = warm + args.capture_s + 2.0
    bench = ["pgbench", *conn, *pgbench_mix(args.mix), f"--rate={args.rate}", "-T", f"{total:.0f}"]
    bench += ["-c", "4"]
    print(
        f"production: {' '.join(bench[len(conn) + 1 :])} on old; capture after {warm:g} s ({how})"
    )
    sampler = PgStatSampler(["psql", *conn, "postgres"], env)
    sampler.start()
    prod = subprocess.Popen([*bench, "postgres"], env=env, stdout=subprocess.PIPE, text=True)
    time.sleep(warm)
    captures = base / "captures"
    cap = subprocess.Popen(
        [*DBSIM, "capture", "--path", vols["old"]["tablespace_dir"], "--interval", "1",
         "-o", str(captures), "--name", "prod"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    time.sleep(args.capture_s)
    cap.send_signal(signal.SIGTERM)
    cap.wait(timeout=60)
    tps = (prod.communicate(timeout=120)[0] or "").strip().splitlines()[-1:]
    print("pgbench:", *tps)
    (bundle,) = captures.iterdir()
    scenario = base / "new.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "new-volume",
        "target": postgres_target(status, vols["new"]),
        "workload": {"name": "slob", "parameters": {
            "table_prefix": "vnew", "scale": args.rows, "load_batch_rows": 20_000}},
        "load": {"sessions": 8, "duration_s": args.duration},
    }, sort_keys=False))  # fmt: skip
    argv = ["replay", str(bundle), "--on", str(scenario), "--scale", args.scales,
            "--duration", f"{args.duration:g}", "-o", str(base / "replays")]  # fmt: skip
    for slo in args.slo:
        argv += ["--slo", slo]
    done = subprocess.run([*DBSIM, *argv], cwd=REPO, capture_output=True, text=True)
    sampler.stop()
    print(done.stdout)
    if done.returncode not in (0, 1, 5):
        print(done.stderr[-2000:])
        return {"command": argv, "exit_code": done.returncode, "stderr": done.stderr[-2000:]}
    doc = json.loads(next((base / "replays").glob("*/replay.json")).read_text())
    doc["command"] = ["dbsim", *argv]
    doc["production_command"] = bench[len(conn) + 1 :]
    doc["pg_stat"] = pg_stat_windows(doc, bundle, sampler)
    return doc


def pg_stat_windows(doc: dict[str, Any], capture: Path, sampler: PgStatSampler) -> dict[str, Any]:
    """The cluster's write counters over the capture's window and each run's measured one,
    beside the device's writes over the same window: what the database wrote per second into
    the page cache (checkpointer, background writer, backends; WAL) against what reached the
    device."""
    out: dict[str, Any] = {"samples": sampler.rows}
    shape = doc["capture"]["shape"]
    window = shape["window"]
    out["capture"] = {
        "device_write_iops": shape["write_iops"],
        "pg": sampler.over(*_wall_window(capture, window["first_t"], window["last_t"])),
    }
    runs = [("calibration", doc.get("calibration") or {}, None)]
    runs += [(f"{s['scale']:g}x", s, s["replay"]) for s in doc["scales"]]
    for name, entry, replay in runs:
        bundle = Path(str(entry.get("bundle")))
        got = replay or entry.get("device") or {}
        if not (bundle / "summary.json").is_file() or "window" not in got:
            continue
        win = got["window"]
        out[name] = {
            "device_write_iops": got["write_iops"],
            "ops_s": entry.get("ops_s"),
            "pg": sampler.over(*_wall_window(bundle, win["first_t"], win["last_t"])),
        }
    return out


if __name__ == "__main__":
    raise SystemExit(main())
