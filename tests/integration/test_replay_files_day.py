"""The day shape of file production dbsim did not write (issue #29): fio's ``filestat`` and
``psync`` jobs on an ext4 of loop device A, 400 calls/s for 18 s with a 6 s burst to 1,200
calls/s (a second ``filestat`` job from 6 s), captured by ``dbsim capture --path`` with the
``fileops`` collector, then ``dbsim replay CAPTURE --on <dir on loop device B> --compress 3
--step 2``: every 6 captured seconds are 2 s of an EDA mix deck in one ``dbsim run`` (a load
step per step), judged over the windows the run's own stage log gives each step.

Tolerances, from counts. fio paces each job evenly (``rate_process=linear``) and the EDA
sessions are open loop on an even schedule, so the calls counted are schedules, not draws;
taken as Poisson counts anyway (an upper bound on chance): the burst's step compares the
capture's mean over its 6 s with the replay's over the 0.5 s intervals wholly inside its 2 s
(three: 1.5 s). The burst filling one step, 1,200 x 6 = 7,200 calls against 1,800:
sqrt(1/1,800 + 1/7,200) = 2.6 % at one standard deviation, so the judged 10 % is 3.8 of
them; split evenly over two steps (800/s: 4,800 against 1,200), 3.2 %, 10 % is 3.1 of them
(about 2 runs in 1,000 by chance). The burst's position (the busiest step delivered within
one step of the asked) is a factor of 1.5 to 3 between neighbours against those 3 %: not
chance. All steps together (±5 %: about 3,000 replayed calls against 12,000 captured, 2.0 %
as Poisson counts) the replay judges too, and says so before its answer when missed (exit
5, as test_replay_fio's day shape); the burst is asserted here either way.

Wall time here: 54 s and 61 s at load average 15 (68 s with 24 s of production): the capture
around 18 s of fio, then one ``dbsim run`` that waits for its fileops probes, a 2 s warm-up
and four steps of 2 s. Seen: the burst's step 1,023 of 1,027 and 975 of 975 calls/s, every
step within 0.02 s of its place on the run's clock.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import Dbsim, clean_environment
from tests.integration.test_replay_files import _capture_production
from tests.integration.test_replay_fio import _need, loop_fs

pytestmark = [pytest.mark.integration, pytest.mark.timing]

BASE_STAT, BASE_READ, BURST_STAT = 300, 100, 800  # fio's asked calls per second

DAY_JOB = f"""[global]
time_based=1
runtime=18
[stat]
directory={{d}}/stat
ioengine=filestat
nrfiles=50
filesize=4k
rate_iops={BASE_STAT}
[reads]
directory={{d}}/data
ioengine=psync
rw=randread
bs=4k
size=8M
rate_iops={BASE_READ}
[burst]
directory={{d}}/stat
ioengine=filestat
nrfiles=50
filesize=4k
startdelay=6
runtime=6
rate_iops={BURST_STAT}
"""


def test_file_day_shape_compressed_keeps_the_burst(tmp_path: Path) -> None:
    _need("losetup", "mkfs.ext4", "mount", "fio", "bpftrace")
    dbsim = Dbsim(tmp_path, clean_environment(tmp_path))
    with (
        loop_fs(tmp_path / "a.img", tmp_path / "a") as _,
        loop_fs(tmp_path / "b.img", tmp_path / "b"),
    ):
        data = tmp_path / "a" / "data"
        data.mkdir()
        bundle = _capture_production(dbsim, data, tmp_path / "captures", DAY_JOB)
        done = dbsim(
            "replay", bundle, "--on", tmp_path / "b" / "replay", "--compress", "3", "--step", "2",
            "-o", tmp_path / "replays", timeout=300,
        )  # fmt: skip
    print(done.stdout)
    assert done.rc in (0, 5), done.describe()
    assert all(len(line) <= 80 for line in done.stdout.splitlines()[:-1])
    doc = json.loads(next((tmp_path / "replays").glob("*/replay.json")).read_text())
    assert doc["files"] and doc["exit_code"] == done.rc
    entry = doc["scales"][0]
    fid = entry["fidelity"]
    assert fid["faithful"] == (done.rc == 0) and entry["verdict"] is None
    if done.rc == 5:  # labelled before the answer, naming what departed
        assert done.stdout.index("UNFAITHFUL at 1x") < done.stdout.index("Answer:")
    print(json.dumps(fid["schedule"]), json.dumps(fid["peak"]), json.dumps(fid["total"]))
    # Every step's window is the run's own (its stage log), within one sampling interval of
    # its place in the schedule.
    schedule = fid["schedule"]
    assert schedule["origin_t"] is not None and schedule["tolerance_s"] == 0.5, schedule
    assert "step boundaries" not in fid["failed"], (schedule, fid["cause"])
    assert all(row["window_t"] is not None for row in fid["steps"])
    asked = [row["asked_calls_s"] for row in fid["steps"]]
    peak = fid["peak"]
    # The burst is the schedule's highest step, well above the base (three times it for 6 s:
    # split evenly over two steps, twice the base in each), the idle edges below the base.
    assert peak["asked_calls_s"] >= 1.5 * (BASE_STAT + BASE_READ), asked
    assert abs(peak["busiest_delivered_step"] - peak["asked_step"]) <= 1
    assert peak["delivered_at_asked_step"] == pytest.approx(peak["asked_calls_s"], rel=0.10)
    assert "<- burst" in done.stdout
