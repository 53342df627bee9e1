"""``dbsim replay CAPTURE --on SCENARIO.yaml``: a pgbench production replayed as a SLOB-like
workload on another PostgreSQL, on another device (issue #29 step 2).

Production: ``pgbench -S --rate`` (point lookups, paced) on a throwaway PostgreSQL whose data
sits on lab A's loop device (16 MB shared_buffers, a 128 MiB memory group against ~300 MiB of
pgbench data, so lookups reach the device), captured by ``dbsim capture --path`` on its data
directory. The replay: a scenario whose target is lab B's PostgreSQL (its own loop device, the
SLOB table of 80,000 one-row blocks: the session's ground-truth lab, tests/integration/conftest.py
``ground_lab``), at 1x and 2x. Each scale's figures are recomputed here from replay.json's two
captures against the documented tolerances.

Measured here (three runs, 1x and 2x): read IOPS -0.4 to +1.9 %, read share +0.18 to +0.24
points. The capture's writes (0.4-0.55/s, the file system's own: pgbench -S writes
nothing) are 4-6 in its window: not judged, nor their mean size (Poisson's interval ±125-153 %;
sim.replay.fidelity), said on the console. Once, beside four other timing workers, they were
1.9/s (~23: judged): the replay's 1.5/s passed, its 5.0 KiB mean write against the capture's
9.26 failed, named ("the database's mean write size ..."): a read-only production's writes are
the file system's and the server's own, which SLOB's parameters do not set, so both write
figures may fail, with their cause. The mean read size: 8.4-9.6 KiB captured (the
kernel's read-ahead among the lookups, 3-7 % of the reads above one block, mostly 16-32 KiB).
SLOB's scans of cf2 cannot make it (the caches hold cf2: 0.04-0.45 device requests a scan,
measured); range reads of two consecutive cf1 blocks (PostgreSQL's TID range scan: a block,
then the read-ahead's first 32 KiB window) do, at the share the calibration's measured cost
gives (sim.replay.dbsize). Three runs: 8.69, 9.24 and 8.36 KiB captured; replayed -0.7 to
+2.8 % at 1x and 2x (range_pct 8-44; 0.97-1.12 requests above a block a range read, 28-33
KiB). So each scale must be faithful in every judged figure, the read size included, and
the exit code is 5 exactly when one is not.

Wall time here: two labs up and loaded (~35 s), pgbench's initialisation, a 12 s capture,
then three runs of ~20 s (calibration, 1x, 2x): 91 s at a load average of 0.7-5.6, 102 and
105 s at 16-20; with the range reads 118, 118 and 121 s at 12-15 (run alone, niced). Lab B
was a private_ground_lab of this module's own until it took the session's (same table,
settings and memory group), which the ground-truth unit of make test's timing phase has
built by then: one lab up and load less on that unit's one worker. A
production with writes (pgbench -N) is test_replay_db_writes.py's: its writes reach the device
a write-back delay (35 s here) after they are made, which every run then waits for.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.replay import dbjob, dbsize, dbwarmup
from sim.replay.shape import production_window
from storage.lab import Lab, system
from tests.e2e.conftest import Dbsim, clean_environment, read_summary, single_bundle
from tests.integration.test_ground_truth import GroundLab
from tests.integration.test_lab import _free_port, _mounted_under
from tests.support.ramdisk import mount_ram, unmount_ram
from tests.support.replay_compare import check_compare
from tests.support.replay_figures import recomputed

pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.timing]

GiB, MiB = 1 << 30, 1 << 20
PGBENCH_SCALE = 20  # ~300 MiB of accounts and index against lab A's 128 MiB memory group
RATE_TPS = 150
PRODUCTION_S = 12
SCALE_S = 8
#: Captures of the production at most, until one is read-only (:func:`_read_only_capture`).
CAPTURES = 3


@contextlib.contextmanager
def production_lab(port: int) -> Iterator[tuple[dict[str, Any], str]]:
    """Lab A: a loop device with a throwaway PostgreSQL in a 128 MiB memory group; its status
    and the cluster's password. Always taken down."""
    base = Path(tempfile.mkdtemp(prefix="dbsim-rpa-", dir="/var/tmp"))
    base.chmod(0o755)  # postgres must search every parent directory
    # The images in memory, off the host's disk (tests/support/ramdisk.py).
    ram = mount_ram(base / "images", 2 * GiB)
    lab = Lab(base / "state", base / "images", name=f"dbsim-rpa-{os.getpid()}")
    try:
        status = lab.up(
            2 * GiB, base / "mnt", memory_limit_bytes=128 * MiB, postgres=True, pg_port=port
        )
        yield status, Path(status["postgres"]["password_file"]).read_text().strip()
    finally:
        with contextlib.suppress(Exception):
            lab.down()
        for mount_point in _mounted_under(base):
            subprocess.run(["umount", mount_point], check=False)
        for loop in system.loops_for(base / "images" / f"{lab.name}.img"):
            subprocess.run(["losetup", "--detach", loop], check=False)
        unmount_ram(base / "images", ram)
        if not _mounted_under(base):
            shutil.rmtree(base, ignore_errors=True)


def _pgbench(port: int, password: str, *args: str) -> None:
    env = {**os.environ, "PGPASSWORD": password}
    argv = ["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", *args, "postgres"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def _capture(dbsim: Dbsim, data_dir: str, out: Path, port: int, password: str) -> Path:
    capture = dbsim.start(
        "capture", "--path", data_dir, "--interval", "1", "-o", out, "--name", "prod"
    )  # fmt: skip
    try:
        for _ in range(1200):  # its first interval written: the tracer runs
            assert capture.poll() is None, capture.communicate()
            found = list(out.glob("*/summary.json"))
            if found and int(read_summary(found[0].parent).get("intervals_written") or 0) >= 1:
                break
            time.sleep(0.05)
        _pgbench(port, password, "-S", f"--rate={RATE_TPS}", "-T", str(PRODUCTION_S), "-c", "4")
        time.sleep(2)
        capture.send_signal(signal.SIGTERM)
        done = dbsim.finish(capture, timeout=60)
    finally:
        dbsim.cleanup()
    assert done.rc == 143, done.describe()
    return single_bundle(out)


def _check_scale(production: dict[str, Any], entry: dict[str, Any]) -> None:
    """The documented tolerances recomputed from the two captures' figures. The figures SLOB's
    mix can make must hold: the read IOPS (the run's closed loop on the delivered IOPS; in
    three runs here -0.3 to +1.6 %) and the read share. A figure out of its tolerance must be one
    replay.json lists as failed, and the cause must name why."""
    scale, got, fid = entry["scale"], entry["replay"], entry["fidelity"]
    ok, _ = recomputed(production, entry)
    print(f"{scale:g}x", ok, fid["cause"], entry["slob"]["parameters"], got["read_kib"])
    assert ok["read IOPS"] and ok["read share"], (scale, got, production)
    # The mean read size within the documented ±10 %: range reads of consecutive cf1 blocks
    # (PostgreSQL's TID ranges) reach the device at the read-ahead's sizes (sim.replay.dbsize).
    assert ok["read size"], (scale, got["read_kib"], production["read_kib"], entry["slob"])
    assert entry["slob"]["parameters"]["range_pct"] > 0 and entry["slob"]["size_why"] is None
    assert sorted(f for f, held in ok.items() if not held) == sorted(fid["failed"])
    # Faithful where the product is: only the writes SLOB's mix cannot make may miss, named.
    assert set(fid["failed"]) <= {"write IOPS", "write size"}, fid
    assert fid["faithful"] == (not fid["failed"]) == (entry["verdict"] is not None)
    if "write IOPS" in fid["failed"]:
        assert str(fid["cause"]).startswith("the workload cannot reach the write share")
    if "write size" in fid["failed"]:
        assert "the database's mean write size is " in fid["cause"]


def test_a_pgbench_production_replayed_on_another_postgresql(
    tmp_path: Path, ground_lab: GroundLab
) -> None:
    for tool in ("pgbench", "bpftrace"):
        if shutil.which(tool) is None:
            pytest.skip(f"!!! NOT RUN: {tool} is missing")
    dbsim = Dbsim(tmp_path, clean_environment(tmp_path))
    port_a = _free_port(55466)  # its own: the array twin (55462) may start beside it
    with production_lab(port_a) as (status, password):
        _pgbench(port_a, password, "-i", "-s", str(PGBENCH_SCALE), "-I", "dtGvp", "-q")
        _pgbench_checkpoint(port_a, password)
        bundle = _read_only_capture(
            dbsim, status["postgres"]["data_dir"], tmp_path, port_a, password
        )
    # Lab B: the session's ground-truth lab (tests/integration/conftest.py), the same lab this
    # module built for itself until now (private_ground_lab: same table, settings and memory
    # group); in the timing phase's ground-truth unit it is up already (10.5 s to build).
    scenario = _target_scenario(ground_lab)
    try:
        done = dbsim(
            "replay", bundle, "--on", scenario, "--scale", "1,2", "--duration", str(SCALE_S),
            "-o", tmp_path / "replays", "--write-scenario", tmp_path / "derived-{scale}x.yaml",
            timeout=600,
        )  # fmt: skip
    finally:
        # The replay's calibration loads what its scale needs (cf2 when scan_pct > 0: 1 here):
        # its pages written now, not by a checkpoint during the next user's measured runs.
        ground_lab.sql("CHECKPOINT")
    print(done.stdout)
    written = list((tmp_path / "replays").glob("*/replay.json"))
    assert written, done.describe()
    # 80 columns, but for a line that ends in a path (a path is not wrapped)
    assert all(len(line) <= 80 for line in done.stdout.splitlines() if ": /" not in line)
    doc = json.loads(written[0].read_text())
    production = doc["capture"]["shape"]
    assert production["read_iops"] > 0  # the lookups reached lab A's device
    assert [s["scale"] for s in doc["scales"]] == [1.0, 2.0]
    # pgbench -S writes nothing of its own (the file system's 0.2 % quiet): no write-back to
    # wait for (a production with writes: bench/replay_db.py, docs/capture.md). On a busy host
    # one capture held 1.2 % writes (3/s of 8.5 KiB) and the replay, by its rule, waited for
    # their write-back: the rule is what is checked, not the host's quiet.
    wrote = production["write_iops"] >= dbwarmup.WRITE_SHARE_MIN * (
        production["read_iops"] + production["write_iops"]
    )
    for entry in doc["scales"]:
        if wrote:
            assert entry["slob"]["warmup_s"] > dbjob.SHORT_WARMUP_S, production
        else:
            assert entry["slob"]["warmup_s"] == dbjob.SHORT_WARMUP_S, production
        assert entry["slob"]["rate_iops"] == pytest.approx(
            entry["scale"] * (production["read_iops"] + production["write_iops"])
        )
        _check_scale(production, entry)
        unjudged = [c for c in entry["fidelity"]["checks"] if c["tolerance"] == "not judged"]
        for check in unjudged:  # never a silent pass: the console says it
            assert check["note"].split(" (")[0] in done.stdout.replace("\n    ", " ")
    # What a range read cost at the device, measured by the calibration: requests above one
    # block (the read-ahead's window), not a cached range. A capture that held writes (the
    # host's, 1.7 % in stop 42's CI; the last of _read_only_capture's may still) is replayed as
    # a row-update mix, which keeps its range reads' cost among its row costs.
    calibration = doc["calibration"]
    rows = calibration["row_costs"]
    cost = calibration["range_cost"] if rows is None else rows["ranges"]
    assert cost is not None, calibration
    assert cost["multi"] >= dbsize.CACHED_RANGE_REQUESTS and cost["multi_kib"] > 8.0, cost
    faithful = all(s["fidelity"]["faithful"] for s in doc["scales"])
    assert done.rc == (0 if faithful else 5), done.describe()
    _check_written_scenarios(dbsim, doc, tmp_path)
    # dbsim compare CAPTURE REPLAY: the device figures recomputed from both bundles
    check_compare(dbsim, bundle, written[0], Path(doc["scales"][0]["bundle"]), tmp_path)


def _check_written_scenarios(dbsim: Dbsim, doc: dict[str, Any], tmp_path: Path) -> None:
    """``--write-scenario``: each scale's scenario, as its run ran it, below a header naming
    its capture and fidelity; ``dbsim validate`` takes it as ``dbsim run`` would."""
    assert [w["path"] for w in doc["scenarios_written"]] == [
        str(tmp_path / "derived-1x.yaml"), str(tmp_path / "derived-2x.yaml")
    ]  # fmt: skip
    for entry, written in zip(doc["scales"], doc["scenarios_written"], strict=True):
        text = Path(written["path"]).read_text()
        ran = Path(entry["scenario"]).read_text()
        assert text.endswith(ran) and text[: -len(ran)].count("\n# ") == 3, text
        assert f"from the capture {doc['capture']['bundle']}" in text
        checked = dbsim("validate", written["path"])
        assert checked.rc == 0, checked.describe()
        as_run = yaml.safe_load(checked.stdout)  # validate prints it as it would run
        assert as_run["load"]["rate_iops"] == pytest.approx(entry["slob"]["rate_iops"], abs=0.05)


def _read_only_capture(
    dbsim: Dbsim, data_dir: str, tmp_path: Path, port: int, password: str
) -> Path:
    """A capture of the read-only production this test is about, taken up to
    :data:`CAPTURES` times: pgbench -S writes nothing (alone and beside ``stress-ng --cpu 2``,
    0.3 writes/s on lab A's device: two WAL writes, the journal's commits), but in two of four
    timing phases of 2026-12-07 something of the host's wrote 3.4-3.5/s of 6.7-7.7 KiB there
    during the capture (1.7-1.9 % of the I/Os; not found: a bpftrace of every loop device's
    writes through the next phase did not meet it). Such a capture is a production with
    writes, whose replay at 1x met 7.7 writes a row update against the 2 it was derived from
    (docs/capture.md, a read production with few writes) and missed the read share: test_replay_db_writes' case (make test-long), not
    this one. Each capture set aside is printed with its figures; the last is used whatever
    it holds, and then the checks below judge it as they would any."""
    for attempt in range(1, CAPTURES + 1):
        bundle = _capture(dbsim, data_dir, tmp_path / f"captures-{attempt}", port, password)
        profiled = dbsim("profile", bundle, "--json")
        assert profiled.rc == 0, profiled.describe()
        seen = production_window(json.loads(profiled.stdout))
        if _read_only(seen):
            break
        print(
            f"capture {attempt} held writes: {seen.read_iops:.1f} reads/s, "
            f"{seen.write_iops:.2f} writes/s ({bundle})"
        )
    return bundle


def _read_only(seen: Any) -> bool:
    """Whether the replay takes the capture as read-only: its writes under
    :data:`~sim.replay.dbwarmup.WRITE_SHARE_MIN` of its I/Os, the file system's own to the
    warm-up, the appends and SLOB's update share alike (a capture with 0.86 % of the host's
    writes got update_pct 1 before that last was so; CI rehearsal of 2026-12-07 07:16)."""
    return seen.write_iops < dbwarmup.WRITE_SHARE_MIN * (seen.read_iops + seen.write_iops)


def _pgbench_checkpoint(port: int, password: str) -> None:
    """Initialisation's writes on the device now, not during the capture."""
    env = {**os.environ, "PGPASSWORD": password}
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-c", "CHECKPOINT"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip


def _target_scenario(lab: GroundLab) -> Path:
    """Lab B's scenario, no ceiling, its cache emptied: the SLOB table on its loop device."""
    lab.lab.set_ceiling(read_iops=0)
    lab.cold_cache()
    return lab.write_scenario("replay-target", {"sessions": 8, "duration_s": SCALE_S})
