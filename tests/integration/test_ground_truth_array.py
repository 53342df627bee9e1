"""Ground truth on the lab array (issue #18): T3 literally, and an idle run, on PostgreSQL.

A private lab (state, images, mount, cgroup names and port of its own; always taken down)
with one array volume, ``lun`` (the FUSE array under the loop device, no policy at first), a
throwaway PostgreSQL (96 MiB memory limit, shared_buffers 16 MB) and a SLOB-like table of
40,000 one-row blocks (312 MiB) in a tablespace on the volume. The scenario collects the
array's ONTAP REST endpoint with the unchanged ONTAP collector (the lab's self-signed
certificate as ``ca_file``). Runs go through the real CLI (through the ground-truth module's
shim, so a step's ``lab:`` settings reach this lab).

* **T3 literally** — 8 sessions, the array's QoS policy stepped from 2,000 to 500 IOPS
  (``lab: {volume: lun, qos_iops: …}``): the device stays under the first policy and holds
  the second (± 5 %, steady seconds), the ONTAP collector's read IOPS agree with iostat's (± 5 %), corr(application
  p99, iostat await) ≥ 0.8 as analysis.json reports it, corr(p99, ONTAP volume read latency)
  ≥ 0.8, and step 2 is storage-bound with the device's await as the evidence. On the
  blk-throttle lab the same test is an xfail (tests/integration/test_ground_truth.py): there
  the queue is above the device.
* **T2** — a 500-IOPS policy, a sweep of 1 → 16 sessions with think time: the device holds
  the policy once the sessions ask for more (± 5 %), the knee lands on it (± 10 %), and the
  ONTAP collector's read IOPS agree with iostat's on every step (± 5 %).
* **Idle** — every key in an 8 MiB hot spot (fits in shared_buffers) after a warm-up, under a
  500-IOPS policy: not called storage-bound.

About 100 s; ``-s`` prints the figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from sim.analysis import load_bundle, stats
from storage.lab import Lab, parse_volume
from storage.lab.status import postgres_target
from tests.integration.test_ground_truth import (
    LAB_SHIM,
    _best_r,
    _read_iops,
    _segment,
    _step_mean,
)
from tests.integration.test_lab import _free_port, _mounted_under
from tests.integration.test_lab_array import _require_array
from tests.support.ramdisk import mount_ram, unmount_ram

pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.timing]

REPO_ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
ROWS = 40_000
HIGH, LOW = 2000, 500
SESSIONS = 8
STEP_S = 12.0
T2_STEP_S = 6.0
T2_SESSIONS = (1, 2, 4, 8, 16)
#: Each session reads (63 blocks) then thinks ~0.3 s: 1-2 sessions ask for less than 500 IOPS.
T2_THINK = {"every_n_loops": 1, "min_ms": 250, "max_ms": 350}
#: The array's policy paces requests 1/max_iops apart with no burst (storage/lab/qos.py), so a
#: window's count is exact to one request at each edge (0.05 % of a step); the 5 % is the FUSE
#: array's own CPU on two shared cores falling behind its schedule (93 % of the policy seen
#: once with another suite beside it).
IOPS_TOL = 0.05
MIN_CORRELATION = 0.8
USER_ENV = "DBSIM_LAB_ARRAY_ONTAP_USER"


class ArrayGround:
    def __init__(self, lab: Lab, base: Path, status: dict[str, Any]) -> None:
        self.lab, self.base, self.status = lab, base, status
        self.volume = status["volumes"][0]
        self.device = os.path.basename(self.volume["device"])
        self.runs = base / "runs"
        self.runs.mkdir()
        ontap = self.volume["array"]["ontap"]
        os.environ[USER_ENV] = ontap["user"]
        self.scenario: dict[str, Any] = {
            "name": "array-ground",
            "target": postgres_target(status, self.volume),
            "workload": {
                "name": "slob",
                "parameters": {"scale": ROWS, "work_unit": 64, "update_pct": 0},
            },
            "collectors": {
                "interval_s": 1,
                "ontap": {
                    "cluster": ontap["cluster"],
                    "username_env": USER_ENV,
                    "password_file": ontap["password_file"],
                    "ca_file": ontap["ca_file"],
                    "svm": ontap["svm"],
                    "volumes": [self.volume["name"]],
                    "mode": "statistics",
                },
            },
        }

    def scenario_file(self, name: str, load: dict[str, Any], **params: Any) -> Path:
        data = json.loads(json.dumps(self.scenario))
        data["name"], data["load"] = name, load
        data["workload"]["parameters"].update(params)
        path = self.runs / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        prefix = [sys.executable, "-c", LAB_SHIM, str(self.base), self.lab.name]
        done = subprocess.run(
            [*prefix, *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"dbsim {' '.join(argv)}: {done.returncode}\n{done.stderr}"
        return done

    def run(self, scenario: Path) -> Path:
        self.lab.cold_cache()
        out = self.cli("run", str(scenario), "-o", str(self.runs), "--skip-load", "-q")
        bundle = Path(out.stdout.strip().splitlines()[-1])
        summary = json.loads((bundle / "summary.json").read_text())
        assert summary["status"] == "completed", summary.get("error")
        return bundle


@pytest.fixture(scope="module")
def ground() -> Iterator[ArrayGround]:
    _require_array()
    base = Path(tempfile.mkdtemp(prefix="dbsim-gt-array-", dir="/var/tmp"))
    base.chmod(0o755)  # postgres must be able to search every parent directory
    # The images in memory, off the host's disk (tests/support/ramdisk.py).
    ram = mount_ram(base / "images", 2 << 30)
    lab = Lab(base / "state", base / "images", name=f"dbsim-gt-array-{os.getpid()}")
    try:
        status = lab.up(
            2 << 30,
            base / "mnt",
            memory_limit_bytes=96 * MiB,
            postgres=True,
            pg_port=_free_port(55462),
            volumes=[parse_volume("lun:array=1")],
        )
        assert status["up"] and status["postgres"]["running"], status
        ground = ArrayGround(lab, base, status)
        ground.cli("load", str(ground.scenario_file("load", {"sessions": 1, "duration_s": 1})))
        yield ground
    finally:
        problems: list[str] = []
        with contextlib.suppress(Exception):
            problems = lab.down()
        unmount_ram(base / "images", ram)
        if not _mounted_under(base):
            shutil.rmtree(base, ignore_errors=True)
        assert not problems, problems


def _ontap_read(series: Any, column: str) -> np.ndarray:
    (entity,) = [e for e in series.sources["ontap"] if e.startswith("volume:")]
    return np.asarray(series.sources["ontap"][entity][column], dtype=float)


def test_t3_literal_on_the_array(ground: ArrayGround) -> None:
    load = {
        "warmup_s": 3.0,
        "sessions": SESSIONS,
        "steps": [
            {"duration_s": STEP_S, "lab": {"volume": "lun", "qos_iops": HIGH}},
            {"duration_s": STEP_S, "lab": {"volume": "lun", "qos_iops": LOW}},
        ],
    }
    bundle = ground.run(ground.scenario_file("t3-array-2000-500", load))
    analysis = json.loads((bundle / "analysis.json").read_text())
    series = load_bundle(bundle)
    op = analysis["primary_op"]
    p99 = np.asarray(series.ops[op]["p99_us"], dtype=float)
    r_s = _read_iops(series, ground.device)
    iops = [_step_mean(series, r_s, i, steady=True) for i in (0, 1)]
    ontap_iops = [_step_mean(series, _ontap_read(series, "read_iops"), i, steady=True) for i in (0, 1)]  # fmt: skip
    corr_await = analysis["correlation"][op]["p99_us"]["await_ms"]
    corr_ontap = stats.correlation(p99, _ontap_read(series, "read_latency_us"))
    step2 = _segment(analysis, "step 2")["verdict"]
    print(
        f"\n[T3 array] policy {HIGH} -> {LOW} IOPS, {SESSIONS} sessions: iostat read IOPS "
        f"(steady) {[round(v, 1) for v in iops]}, ONTAP collector {[round(v, 1) for v in ontap_iops]}; "
        f"await {[s['await_ms'] for s in analysis['segments']]} ms; p99 "
        f"{[round(s['p99_us'] / 1000, 1) for s in analysis['segments']]} ms\n"
        f"[T3 array] corr(p99, iostat await) {corr_await}; corr(p99, ONTAP read latency) "
        f"{corr_ontap}\n[T3 array] step 2: {step2['summary']}\n[T3 array] bundle {bundle}"
    )  # fmt: skip
    # Step 1: at most the 2,000 policy, far above step 2's. Whether it reaches 2,000 depends
    # on the FUSE array's own speed, which another job on the 2 CPUs cut to 1,533 once (CI):
    # the step down to the 500 ceiling is what T3 is about, and that is held at ± 5 %.
    assert 2 * LOW <= iops[0] <= HIGH * (1 + IOPS_TOL), iops
    assert iops[1] == pytest.approx(LOW, rel=IOPS_TOL), iops
    for host, array in zip(iops, ontap_iops, strict=True):
        assert array == pytest.approx(host, rel=IOPS_TOL), (iops, ontap_iops)
    assert _best_r(corr_await) >= MIN_CORRELATION, corr_await
    assert _best_r(corr_ontap) >= MIN_CORRELATION, corr_ontap
    assert step2["call"] == "storage-bound", step2
    # The evidence names the device and the latency it showed: the array's QoS queue, seen
    # by the host (a base service time of 0.5 ms; the queue makes it tens of ms).
    assert "await" in step2["summary"] and ground.device in step2["summary"], step2
    assert _segment(analysis, "step 2")["await_ms"] >= 10, analysis["segments"]


def test_t2_on_the_array_holds_the_policy_and_the_knee_sits_on_it(ground: ArrayGround) -> None:
    """T2 below the block layer: a 500-IOPS policy, sessions 1 → 16 with think time (1 and 2
    ask for clearly less than the policy, 8 and 16 for more): the device holds the policy, the
    knee of latency versus device IOPS lands on it, the ONTAP collector counts what iostat
    counts, and the run is storage-bound."""
    assert ground.lab.set_policy("lun", {"max_iops": LOW})["max_iops"] == LOW
    load = {
        "warmup_s": 3.0,
        "think": T2_THINK,
        "sweep": {"vary": "sessions", "start": 1, "factor": 2, "max": 16,
                  "step_duration_s": T2_STEP_S, "stop_on_breach": False},
    }  # fmt: skip
    bundle = ground.run(ground.scenario_file("t2-array-500", load))
    analysis = json.loads((bundle / "analysis.json").read_text())
    series = load_bundle(bundle)
    r_s = _read_iops(series, ground.device)
    steps = range(len(T2_SESSIONS))
    per_step = [_step_mean(series, r_s, i, steady=True) for i in steps]
    ontap = [_step_mean(series, _ontap_read(series, "read_iops"), i, steady=True) for i in steps]
    knee = analysis["curve"]["knee"]
    print(
        f"\n[T2 array] policy {LOW} IOPS, sessions {T2_SESSIONS}: iostat read IOPS per step (steady) "
        f"{[round(v, 1) for v in per_step]}, ONTAP collector {[round(v, 1) for v in ontap]}; "
        f"knee {knee}; verdict {analysis['verdict']['call']}\n[T2 array] bundle {bundle}"
    )
    assert all(v < 0.85 * LOW for v in per_step[:2]), per_step  # a bend, not a given
    # 16 sessions ask for ~6 × the policy: held to it. 8 sit just past the closed loop's
    # saturation point: one session's think time is ~7.5 ms per I/O (300 ms over ~40 I/Os)
    # against the policy's 2 ms, so N* = (2 + 7.5) / 2 ≈ 4.75 sessions, and mean-value analysis
    # puts 8 sessions at 93-97 % of the policy; every ms of client delay (CPU taken by other
    # jobs) adds to the think time and lowers it (89.5 % and 93 % seen on a busy CI machine).
    # So that step is held to "near" the policy (85 %), not "at" it.
    assert per_step[-1] == pytest.approx(LOW, rel=IOPS_TOL), per_step
    assert LOW * 0.85 <= per_step[-2] <= LOW * (1 + IOPS_TOL), per_step
    for host, array in zip(per_step, ontap, strict=True):
        assert array == pytest.approx(host, rel=IOPS_TOL), (per_step, ontap)
    assert knee is not None and knee["x"] == pytest.approx(LOW, rel=0.10), analysis["curve"]
    assert analysis["verdict"]["call"] == "storage-bound", analysis["verdict"]


def test_idle_run_on_the_array_is_not_storage_bound(ground: ArrayGround) -> None:
    assert ground.lab.set_policy("lun", {"max_iops": LOW})["max_iops"] == LOW
    scenario = ground.scenario_file(
        "idle-array",
        {"sessions": 4, "warmup_s": 6.0, "duration_s": 8.0},
        do_hotspot=True,
        hotspot_frequency=1,  # every key in the hot spot: 1,024 rows, 8 MiB < shared_buffers
        hotspot_mb=8,
        hotspot_offset_mb=16,
    )
    analysis = json.loads((ground.run(scenario) / "analysis.json").read_text())
    print(f"\n[idle array] {analysis['verdict']['call']}: {analysis['verdict']['summary']}")
    assert analysis["io_per_op"]["cache_hit_pct"] >= 99.0, analysis["io_per_op"]
    assert analysis["verdict"]["call"] != "storage-bound", analysis["verdict"]
    for segment in analysis["segments"]:
        assert segment["verdict"]["call"] != "storage-bound", segment
