"""Ground truth: runs on a real block device with a known IOPS ceiling prove that the telemetry
and the correlation analysis are right (docs/ground-truth.md).

One lab for the module (its own state directory, image directory, mount point, cgroup name and
port, so a user's lab or a colleague's test run is never touched; always taken down): a loop
device with ext4, a throwaway PostgreSQL cluster inside the lab's blkio and memory groups
(shared_buffers 16 MB, memory limit 128 MiB, so neither the database nor the kernel can cache
the table), and a SLOB-like table of 80,000 rows, one per 8 KiB block (625 MiB), loaded with
``dbsim load``. Every run goes through the real CLI (``python -m sim.cli run … -o … --skip-load``;
a load-and-verify would scan the table through the ceiling), so the bundle, analysis.json and
report.html are produced the normal way; the assertions read them.

* **T2** — a 500 read-IOPS ceiling and SLOB read-only steps of 1, 2, 4, 8 and 16 sessions, with
  SLOB think time so that the first two steps ask for clearly less than the ceiling and the
  last two for at least twice it: the device's read IOPS over the saturated steps is 500 ± 5 %,
  the knee of latency versus IOPS (analysis.curve.knee.x) 500 ± 10 %, and each read statement
  costs WORK_UNIT − 1 physical reads (± 10 %, from the bundle's time series; the summary's
  finding, from the bundle's time-weighted means). The steps are written as a ``load.sweep``
  with SLOs (``stop_on_breach`` off), so the same run serves the sweep test.
* **T3** — 8 sessions throughout, the steps set the ceiling to 2000 and then 500 IOPS (through
  ``load.steps[].lab``): the device holds each ceiling (± 5 %) and the verdict of step 2 is
  storage-bound. Application p99 follows the storage latency the database measures
  (``blk_read_time`` per block read, with ``track_io_timing`` on) at Pearson r ≥ 0.8, and the
  device's read IOPS at r ≤ −0.8. The issue's literal wording — p99 against the device's
  ``await`` — is an xfail: blk-throttle queues the I/O above the device, where iostat does not
  see it (a test shows that too), so that correlation is weak and noisy (figures in the xfail
  reason and in docs/ground-truth.md).
* **Idle** — the same SLOB with every key drawn in an 8 MiB hot spot that fits in
  shared_buffers, after a warm-up, under the same 500 IOPS ceiling: storage idle, not called
  storage-bound.
* **Sweep** — T2's run read as a sweep with an SLO on read p99: the highest SLO-meeting load
  sits at the ceiling (± 10 %) (the section's comment).

Tuning of the lab cluster (ALTER SYSTEM on the throwaway cluster only): ``track_io_timing`` on;
``autovacuum`` off, because an autovacuum ANALYZE of the wide SLOB rows holds ~100 MB and the
memory group's OOM killer then crash-restarts the whole cluster (seen while building this), and
because its reads would spend the ceiling's budget. Before each run the lab's own page cache is
emptied and the loop device's backing file is kept in the host's page cache (see
:meth:`GroundLab.cold_cache`). The module takes about two and a half minutes; ``-s`` prints the figures;
``DBSIM_GROUND_TRUTH_DIR=<dir>`` keeps the scenarios and bundles there.

The scenario steps' ``lab:`` ceilings are applied by ``sim.run.runner.attach_lab``, which uses the
default ``Lab()`` (``/run/dbsim-lab``). This module's lab is a private one, so T3 runs the CLI
through a shim that points ``storage.lab.Lab`` at it (see :data:`LAB_SHIM`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from sim.analysis import load_bundle, stats
from sim.analysis.series import BundleSeries
from sim.errors import ConfigError
from storage.lab import Lab, system
from storage.lab.pgcluster import PG_USER, pg_bin
from tests.integration.test_lab import _mounted_under
from tests.integration.test_lab import _require_lab as require_lab
from tests.support.ramdisk import mount_ram, unmount_ram

pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.timing]

REPO_ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
GiB = 1 << 30
LAB_SIZE = 3 * GiB  # sparse: the table (625 MiB), its index, and WAL up to max_wal_size
MEMORY_LIMIT = 128 * MiB  # page cache ≤ ~100 MiB against a 625 MiB table
ROWS = 80_000
WORK_UNIT = 64
CEILING = 500
HIGH_CEILING = 2000
#: A steady step of 8-12 s under blk-throttle's 100 ms slices: one slice more or less at each
#: edge is 1.7-2.5 %; the rest is for the step's first and last intervals left out unevenly.
IOPS_TOL = 0.05
KNEE_TOL = 0.10
READS_PER_READ_TOL = 0.10
MIN_CORRELATION = 0.8
#: The device's await may rise by at most this share of the database's read-wait rise for
#: the throttle's queue to count as invisible to iostat (measured: −0.1 to 1.2 %).
AWAIT_SHARE_OF_WAIT = 0.25
CLI_TIMEOUT_S = 240
#: A directory to keep the scenarios and bundles in (default: pytest's temporary directory,
#: which other pytest runs on the host rotate away).
KEEP_ENV = "DBSIM_GROUND_TRUTH_DIR"

# T2: think time makes one session ask for ~150 read IOPS and two for ~300; four ask for
# ~750 on a quiet host but reached only 453 on a busy one, so the IOPS check takes the steps
# of 8 and 16 sessions, which ask for twice the ceiling or more either way.
T2_SESSIONS = (1, 2, 4, 8, 16)
T2_BELOW_UP_TO = 2  # sessions up to which the steps must run clearly below the ceiling ...
T2_BELOW = 0.85  # ... (below this share of it), so that the knee is a bend, not a given
T2_SATURATED_FROM = 8  # sessions from which the steps ask for more than the ceiling
T2_STEP_S = 8.0
T2_THINK = {"every_n_loops": 1, "min_ms": 250, "max_ms": 350}
T3_SESSIONS = 8
T3_STEP_S = 12.0
WARMUP_S = 3.0
IDLE_WARMUP_S = 6.0  # 1,024 hot blocks at 500 IOPS, plus index pages
IDLE_MEASURE_S = 8.0

# attach_lab() uses the default Lab(); this runs the real CLI with storage.lab.Lab
# pointed at this module's private lab. argv: base directory, lab name, then dbsim's argv.
LAB_SHIM = """
import sys
from pathlib import Path
import storage.lab
from storage.lab.lifecycle import Lab
base, name = Path(sys.argv[1]), sys.argv[2]
storage.lab.Lab = lambda: Lab(base / "state", base / "images", name)
from sim.cli import main
sys.exit(main(sys.argv[3:]))
"""


#: The client runs ahead as the lab's PostgreSQL does: its own nice and, in a session of its
#: own, its session group's (storage.lab.system.start_session_ahead).
_run_ahead = system.start_session_ahead(system.DATABASE_NICE)


def _require_lab() -> None:
    """The lab's needs (root, cgroup v1, util-linux) and PostgreSQL's server binaries."""
    require_lab()
    try:
        pg_bin()
        pwd.getpwnam(PG_USER)
    except (ConfigError, KeyError) as exc:
        pytest.skip(f"!!! NOT RUN: no PostgreSQL server binaries or {PG_USER} user: {exc}")


@dataclass
class GroundLab:
    lab: Lab
    base: Path
    status: dict[str, Any]
    scenario: dict[str, Any]
    runs: Path
    device: str
    password: str
    port: int
    setup_s: dict[str, float] = field(default_factory=dict)

    def sql(self, *statements: str) -> list[Any]:
        """Run statements on the lab's cluster (as postgres, over TCP); their results."""
        import asyncpg

        async def go() -> list[Any]:
            conn = await asyncpg.connect(
                host="127.0.0.1", port=self.port, user="postgres", password=self.password
            )
            try:
                return [await conn.fetchval(s) for s in statements]
            finally:
                await conn.close()

        return asyncio.run(go())

    def write_scenario(self, name: str, load: dict[str, Any], **params: Any) -> Path:
        scenario = json.loads(json.dumps(self.scenario))  # a deep copy
        scenario["name"] = name
        scenario["load"] = load
        scenario["workload"]["parameters"].update(params)
        path = self.runs / f"{name}.yaml"
        path.write_text(yaml.safe_dump(scenario, sort_keys=False))
        return path

    def cli(self, *argv: str, through_lab_shim: bool = False) -> subprocess.CompletedProcess[str]:
        prefix = [sys.executable]
        prefix += ["-c", LAB_SHIM, str(self.base), self.lab.name] if through_lab_shim else [
            "-m", "sim.cli"
        ]  # fmt: skip
        done = subprocess.run(
            [*prefix, *argv],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
            # The client runs ahead of the host's other work, as the lab's PostgreSQL does
            # (storage.lab.system.DATABASE_NICE): these tests ask what the throttled device
            # does to latency, not what the host's scheduler does. At nice 0 beside `stress-ng
            # --cpu 2`, one of T2's one-session reads (0.10-0.11 s) took 0.64 s, the step's
            # p99 of 17 reads, and broke the 0.6 s SLO the sweep places between 4 and 8 sessions.
            preexec_fn=_run_ahead,
        )
        assert done.returncode == 0, f"dbsim {' '.join(argv)}: {done.returncode}\n{done.stderr}"
        return done

    def cold_cache(self) -> None:
        """Start a run from the device: the lab's own file systems synced (a host-wide
        ``sync`` made every other test's ext4 commit its journal, counted as that test's
        writes: storage/lab/pagecache.py), then ``memory.force_empty`` on the lab's memory
        group empties the lab's own page cache (the database files as ext4 caches them).

        Unlike ``lab.drop_caches()`` (global) this leaves other users' caches alone, and the
        loop device's backing file in the host's page cache (the loop driver charges it to
        the root memory group under cgroup v1); the file is read through once more so it is
        all there even if someone dropped the caches. Below the ceiling the device then
        answers at memory speed, whatever the shared host disk is doing: with the backing
        file on that disk, a busy neighbour held the 2000-IOPS step to 899 and 1727 read
        IOPS (device await 8.5 and 4.6 ms), so the ceiling was not the limit."""
        self.lab.sync()
        memory = Path(self.status["cgroups"]["memory"])
        (memory / "memory.force_empty").write_text("0\n")
        system.read_data_extents(Path(self.status["image"]))

    def run(self, scenario: Path, *, through_lab_shim: bool = False) -> Path:
        """``dbsim run scenario -o runs --skip-load -q``; the bundle, checked complete."""
        self.cold_cache()
        out = self.cli(
            "run", str(scenario), "-o", str(self.runs), "--skip-load", "-q",
            through_lab_shim=through_lab_shim,
        )  # fmt: skip
        bundle = Path(out.stdout.strip().splitlines()[-1])
        for name in ("summary.json", "analysis.json", "report.html", "timeseries/block.csv"):
            assert (bundle / name).is_file(), f"{bundle}: no {name}"
        summary = json.loads((bundle / "summary.json").read_text())
        assert summary["status"] == "completed", summary.get("error")
        return bundle


@contextlib.contextmanager
def private_ground_lab(prefix: str, name: str, runs: Path, port: int) -> Iterator[GroundLab]:
    """A lab of the caller's own (state, image, mount and cgroup names from ``prefix``) with
    a throwaway PostgreSQL (track_io_timing on, autovacuum off) and the SLOB table loaded,
    verified, vacuumed and checkpointed; always taken down, with a last resort that never
    leaves a mount or loop device."""
    # /var/tmp, not pytest's tmp_path: postgres must be able to search every parent directory.
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    base.chmod(0o755)
    # The images in memory, off the host's disk (tests/support/ramdisk.py).
    ram = mount_ram(base / "images", LAB_SIZE)
    lab = Lab(base / "state", base / "images", name=f"{prefix}{os.getpid()}")
    timings: dict[str, float] = {}
    try:
        started = time.monotonic()
        status = lab.up(
            LAB_SIZE, base / "mnt", memory_limit_bytes=MEMORY_LIMIT, postgres=True, pg_port=port
        )
        assert status["up"] and status["postgres"]["running"], status
        timings["lab_up_s"] = time.monotonic() - started
        pg = status["postgres"]
        runs.mkdir(parents=True, exist_ok=True)
        scenario = {
            "name": name,
            "target": {
                "kind": "postgres",
                "host": "127.0.0.1",
                "port": port,
                "user": "postgres",
                "database": "postgres",
                "password_file": pg["password_file"],
                "data_directory": pg["data_dir"],  # the block collector finds the loop device
            },
            "workload": {
                "name": "slob",
                "parameters": {
                    "scale": ROWS,
                    "work_unit": WORK_UNIT,
                    "update_pct": 0,
                    "load_batch_rows": 20_000,
                },
            },
        }
        ground = GroundLab(
            lab=lab,
            base=base,
            status=status,
            scenario=scenario,
            runs=runs,
            device=os.path.basename(status["device"]),
            password=Path(pg["password_file"]).read_text().strip(),
            port=port,
            setup_s=timings,
        )
        ground.sql(
            "ALTER SYSTEM SET track_io_timing = on",
            "ALTER SYSTEM SET autovacuum = off",
            "SELECT pg_reload_conf()",
        )
        started = time.monotonic()
        load = ground.write_scenario("load", {"sessions": 1, "duration_s": 1})
        report = json.loads(ground.cli("load", str(load), "--json").stdout)
        (table,) = report["verify"]["tables"]
        assert (table["rows"], table["blocks"], table["max_rows_per_block"]) == (ROWS, ROWS, 1)
        # The verify scan set the rows' hint bits; VACUUM sets the visibility map and the
        # checkpoint writes it all now, so that no hint-bit write-back reaches the device
        # during the runs (it would add writes to a read-only workload's IOPS).
        ground.sql(f"VACUUM {table['table']}", "CHECKPOINT")
        timings["load_s"] = time.monotonic() - started
        yield ground
    finally:
        problems: list[str] = []
        with contextlib.suppress(Exception):
            problems = lab.down()
        # Last resort, independent of the state file: never leave a mount or loop device.
        for mount_point in _mounted_under(base):
            subprocess.run(["umount", mount_point], check=False)
        for loop in system.loops_for(base / "images" / f"{lab.name}.img"):
            subprocess.run(["losetup", "--detach", loop], check=False)
        unmount_ram(base / "images", ram)
        if not _mounted_under(base):
            shutil.rmtree(base, ignore_errors=True)
        if problems:
            print(f"\n!!! lab {lab.name} left behind: {problems}")


@pytest.fixture(scope="module")
def ground(ground_lab: GroundLab) -> GroundLab:
    """The session's ground-truth lab (tests/integration/conftest.py), shared with
    test_lab_iops: built once, always taken down."""
    return ground_lab


# --------------------------------------------------------------------------- bundle figures


def _analysis(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / "analysis.json").read_text())


def _summary(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / "summary.json").read_text())


def _step_index(series: BundleSeries, step: int) -> np.ndarray:
    return np.flatnonzero(np.array([s == step for s in series.step]))


def _step_mean(
    series: BundleSeries, values: np.ndarray, step: int, *, steady: bool = False
) -> float:
    """Duration-weighted mean of a per-second rate over one step's measured intervals.

    ``steady``: without the step's first and last intervals, i.e. the step's steady state:
    the first holds the sessions being added (or the old ceiling's queue draining), the last
    may hold the stop at the end of the run (0.65 s at 304 reads/s, and a whole second at
    378, were seen there; every other second of those steps read 473-526)."""
    index = _step_index(series, step)
    if steady:
        index = index[1:-1]
    mean = stats.nan_mean(values[index], series.duration_s[index])
    assert mean is not None, f"no values in step {step + 1}"
    return mean


def _read_iops(series: BundleSeries, device: str) -> np.ndarray:
    return series.sources["block"][device]["r_s"]


def _db(series: BundleSeries) -> dict[str, np.ndarray]:
    (entity,) = [e for e in series.sources["db"] if not e.startswith("table:")]
    return series.sources["db"][entity]


def _table_blocks_read_per_read(series: BundleSeries) -> float:
    """The workload table's heap + index blocks read (cache misses) per read statement over
    the measured window, each interval weighted by its length: the SLOB sanity figure."""
    blocks = 0.0
    for entity, cols in series.sources["db"].items():
        if entity.startswith("table:"):
            rate = np.nan_to_num(cols["heap_blks_read_s"]) + np.nan_to_num(cols["idx_blks_read_s"])
            blocks += float(np.sum(rate * np.nan_to_num(cols["interval_s"])))
    return blocks / float(np.nansum(series.ops["read"]["count"]))


def _read_wait_ms(series: BundleSeries) -> np.ndarray:
    """The database's own storage latency per interval: ms of read I/O wait per block read
    (pg_stat_database blk_read_time / blks_read; needs track_io_timing)."""
    db = _db(series)
    reads = db["blks_read_s"]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(reads > 0, db["blk_read_time_ms_s"] / reads, np.nan)


def _segment(analysis: dict[str, Any], label: str) -> dict[str, Any]:
    (segment,) = [s for s in analysis["segments"] if s["label"] == label]
    return segment


def _best_r(result: dict[str, Any]) -> float:
    """The larger of Pearson and Spearman (the most generous reading); -inf if undefined."""
    values = [v for v in (result["pearson"], result["spearman"]) if v is not None]
    return max(values) if values else -math.inf


# --------------------------------------------------------------------------- T2


@pytest.fixture(scope="module")
def t2_bundle(ground: GroundLab) -> Path:
    """T2's run, which is also the sweep test's: the steps of 1-16 sessions written as a
    ``load.sweep`` (the same steps, durations, warm-up and think time) with the sweep's SLOs
    and ``stop_on_breach`` off, so that every step runs (see the sweep section)."""
    assert ground.lab.set_ceiling(read_iops=CEILING)["read_iops"] == CEILING
    load = {
        "warmup_s": WARMUP_S,
        "think": T2_THINK,
        "sweep": {
            "vary": "sessions",
            "start": T2_SESSIONS[0],
            "factor": 2,
            "max": T2_SESSIONS[-1],
            "step_duration_s": T2_STEP_S,
            "stop_on_breach": False,
        },
    }
    path = ground.write_scenario("t2-sweep-500", load)
    scenario = yaml.safe_load(path.read_text())
    scenario["slos"] = [
        {"name": "read latency", "op": "read", "p99_us_max": P99_LIMIT_US},
        {"name": "lab device", "device": ground.device, "await_ms_max": AWAIT_LIMIT_MS},
    ]
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    # GroundLab.run asserts exit 0 (some load met every SLO), a complete bundle and "completed".
    bundle = ground.run(path)
    stages = [s for s in _summary(bundle)["stages"] if s.get("phase") == "measure"]
    assert [s["sessions"] for s in stages] == list(T2_SESSIONS), stages
    return bundle


def test_t2_device_holds_the_ceiling_and_the_knee_sits_on_it(
    ground: GroundLab, t2_bundle: Path
) -> None:
    analysis, summary = _analysis(t2_bundle), _summary(t2_bundle)
    series = load_bundle(t2_bundle)
    assert analysis["primary_device"] == ground.device, analysis["primary_device"]
    assert analysis["primary_op"] == "read"
    r_s = _read_iops(series, ground.device)
    steps = range(len(T2_SESSIONS))
    whole_steps = [_step_mean(series, r_s, i) for i in steps]
    per_step = [_step_mean(series, r_s, i, steady=True) for i in steps]
    saturated = [v for v, s in zip(per_step, T2_SESSIONS, strict=True) if s >= T2_SATURATED_FROM]
    below = [v for v, s in zip(per_step, T2_SESSIONS, strict=True) if s <= T2_BELOW_UP_TO]
    mean_saturated = sum(saturated) / len(saturated)
    knee = analysis["curve"]["knee"]
    reads_per_read = _table_blocks_read_per_read(series)
    finding = summary["findings"]["db"]["physical_reads_per_read"]
    writes = [_step_mean(series, series.sources["block"][ground.device]["w_s"], i) for i in
              range(len(T2_SESSIONS))]  # fmt: skip
    print(
        f"\n[T2] {ground.setup_s}\n[T2] ceiling {CEILING} read IOPS; sessions {T2_SESSIONS}: "
        f"device read IOPS per step, steady {[round(v, 1) for v in per_step]}, whole "
        f"{[round(v, 1) for v in whole_steps]} (writes {[round(v, 1) for v in writes]}); "
        f"mean over saturated steps {mean_saturated:.1f}\n"
        f"[T2] curve {[(p['x'], p['ops_s'], p['p99_us']) for p in analysis['curve']['points']]}"
        f"\n[T2] knee {knee}\n[T2] physical reads per read: {reads_per_read:.2f} from the time "
        f"series, {finding} in the summary's findings (WORK_UNIT-1 = {WORK_UNIT - 1}); "
        f"io_per_op {analysis['io_per_op']}\n"
        f"[T2] verdict {analysis['verdict']['call']}: {analysis['verdict']['summary']}\n"
        f"[T2] segments {[(s['label'], s['verdict']['call']) for s in analysis['segments']]}"
        f"\n[T2] bundle {t2_bundle}"
    )
    assert mean_saturated == pytest.approx(CEILING, rel=IOPS_TOL), per_step
    assert all(v < T2_BELOW * CEILING for v in below), per_step  # the curve really bends
    assert knee is not None and knee["method"] == "plateau", analysis["curve"]
    assert knee["x"] == pytest.approx(CEILING, rel=KNEE_TOL), knee
    assert reads_per_read == pytest.approx(WORK_UNIT - 1, rel=READS_PER_READ_TOL)
    assert analysis["verdict"]["call"] == "storage-bound", analysis["verdict"]
    for i, sessions in enumerate(T2_SESSIONS):
        if sessions >= T2_SATURATED_FROM:
            assert _segment(analysis, f"step {i + 1}")["verdict"]["call"] == "storage-bound"


def test_t2_summary_finding_physical_reads_per_read(t2_bundle: Path) -> None:
    """The issue's figure as the summary reports it: WORK_UNIT − 1 physical reads per read."""
    finding = _summary(t2_bundle)["findings"]["db"]["physical_reads_per_read"]
    assert finding == pytest.approx(WORK_UNIT - 1, rel=READS_PER_READ_TOL)


# --------------------------------------------------------------------------- T3


@pytest.fixture(scope="module")
def t3_bundle(ground: GroundLab) -> Path:
    load = {
        "warmup_s": WARMUP_S,
        "sessions": T3_SESSIONS,
        "steps": [
            {"duration_s": T3_STEP_S, "lab": {"read_iops": HIGH_CEILING}},
            {"duration_s": T3_STEP_S, "lab": {"read_iops": CEILING}},
        ],
    }
    bundle = ground.run(ground.write_scenario("t3-ceiling-2000-500", load), through_lab_shim=True)
    stages = [s for s in _summary(bundle)["stages"] if s.get("phase") == "measure"]
    assert [s["lab"]["read_iops"] for s in stages] == [HIGH_CEILING, CEILING], stages
    return bundle


def _t3_figures(ground: GroundLab, bundle: Path) -> dict[str, Any]:
    analysis = _analysis(bundle)
    series = load_bundle(bundle)
    op = analysis["primary_op"]
    p99 = series.ops[op]["p99_us"]
    r_s = _read_iops(series, ground.device)
    wait = _read_wait_ms(series)
    device_corr = analysis["correlation"][op]["p99_us"]
    return {
        "analysis": analysis,
        "op": op,
        "iops": [_step_mean(series, r_s, i, steady=True) for i in (0, 1)],
        "iops_whole": [_step_mean(series, r_s, i) for i in (0, 1)],
        "p99_ms": [s["p99_us"] / 1000 for s in analysis["segments"]],  # median of intervals
        "await_ms": [s["await_ms"] for s in analysis["segments"]],
        "read_wait_ms": [_step_mean(series, wait, i) for i in (0, 1)],
        "p99_vs_read_wait": stats.correlation(p99, wait),
        "p99_vs_read_iops": stats.correlation(p99, r_s),
        "p99_vs_device": {
            m: device_corr[m] for m in ("await_ms", "r_await_ms", "aqu_sz", "util_pct", "iops")
        },
    }


def _t3_print(figures: dict[str, Any], bundle: Path) -> None:
    analysis = figures["analysis"]
    print(
        f"\n[T3] ceilings {HIGH_CEILING} -> {CEILING}, {T3_SESSIONS} sessions: device read IOPS "
        f"steady {[round(v, 1) for v in figures['iops']]}, whole "
        f"{[round(v, 1) for v in figures['iops_whole']]}; p99 (median of intervals) "
        f"{[round(v, 1) for v in figures['p99_ms']]} ms; device await "
        f"{figures['await_ms']} ms; database read wait per block "
        f"{[round(v, 2) for v in figures['read_wait_ms']]} ms\n"
        f"[T3] p99 vs database read wait {figures['p99_vs_read_wait']}; p99 vs device read "
        f"IOPS {figures['p99_vs_read_iops']}\n[T3] p99 vs device (analysis.json) "
        f"{figures['p99_vs_device']}\n[T3] verdict {analysis['verdict']['call']}; segments "
        f"{[(s['label'], s['verdict']['call'], s['device_iops']) for s in analysis['segments']]}"
        f"\n[T3] step 2: {_segment(analysis, 'step 2')['verdict']['summary']}\n[T3] bundle {bundle}"
    )


def test_t3_lowered_ceiling_is_held_and_step_2_is_storage_bound(
    ground: GroundLab, t3_bundle: Path
) -> None:
    figures = _t3_figures(ground, t3_bundle)
    _t3_print(figures, t3_bundle)
    high, low = figures["iops"]
    assert high == pytest.approx(HIGH_CEILING, rel=IOPS_TOL), figures["iops"]
    assert low == pytest.approx(CEILING, rel=IOPS_TOL), figures["iops"]
    step2 = _segment(figures["analysis"], "step 2")["verdict"]
    assert step2["call"] == "storage-bound", step2


def test_t3_p99_follows_the_storage_wait_the_database_measures(
    ground: GroundLab, t3_bundle: Path
) -> None:
    """The strongest true statement: p99 moves with the storage latency PostgreSQL times
    around its reads (blk-throttle's queue included), and inversely with the device's IOPS."""
    figures = _t3_figures(ground, t3_bundle)
    wait = figures["p99_vs_read_wait"]
    assert wait["pearson"] is not None and wait["pearson"] >= MIN_CORRELATION, wait
    high_ceiling_wait, low_ceiling_wait = figures["read_wait_ms"]
    # 8 sessions each waiting for one read: about 8/2000 s, then 8/500 s per read.
    assert low_ceiling_wait > 2 * high_ceiling_wait, figures["read_wait_ms"]
    iops = figures["p99_vs_read_iops"]
    assert iops["pearson"] is not None and iops["pearson"] <= -MIN_CORRELATION, iops


def test_t3_device_await_does_not_see_the_throttle_queue(
    ground: GroundLab, t3_bundle: Path
) -> None:
    """Why the literal reading fails: when the ceiling came down, the wait per read that the
    database measured grew by 9–10 ms while iostat's await at the device moved by −0.01 to
    +0.12 ms: blk-throttle queues the I/O before the device's request queue."""
    figures = _t3_figures(ground, t3_bundle)
    await_rise = figures["await_ms"][1] - figures["await_ms"][0]
    wait_rise = figures["read_wait_ms"][1] - figures["read_wait_ms"][0]
    assert wait_rise > 0 and await_rise < AWAIT_SHARE_OF_WAIT * wait_rise, figures


@pytest.mark.xfail(
    strict=False,  # not strict: the correlation is weak and noisy, not reliably below 0.8
    reason=(
        "blk-throttle queues I/O above the device, where iostat cannot see it: with the "
        "ceiling cut from 2000 to 500 IOPS, p99 rose 325-498 -> 1102-1202 ms and the "
        "database's read wait per block 3.4-3.6 -> 12.4-13.9 ms, while the device's await "
        "went 0.06-0.11 -> 0.10-0.20 ms; corr(p99, await) was Pearson -0.13 to 0.74 "
        "(Spearman -0.08 to 0.70) over seven runs, and -0.72 to +0.22 over six with the "
        "backing file on the host's busy disk; aqu-sz and %util correlate negatively"
    ),
)
def test_t3_literal_p99_follows_device_await(ground: GroundLab, t3_bundle: Path) -> None:
    """The issue's wording: corr(application p99, storage await) ≥ 0.8, with await read
    from the device (iostat) as analysis.json reports it (best of Pearson and Spearman)."""
    figures = _t3_figures(ground, t3_bundle)
    assert _best_r(figures["p99_vs_device"]["await_ms"]) >= MIN_CORRELATION, figures


# --------------------------------------------------------------------------- idle


def test_idle_storage_with_everything_cached_is_not_storage_bound(ground: GroundLab) -> None:
    assert ground.lab.set_ceiling(read_iops=CEILING)["read_iops"] == CEILING
    load = {"sessions": 4, "warmup_s": IDLE_WARMUP_S, "duration_s": IDLE_MEASURE_S}
    scenario = ground.write_scenario(
        "idle-hot-spot",
        load,
        do_hotspot=True,
        hotspot_frequency=1,  # every key in the hot spot: 1,024 rows, 8 MiB < shared_buffers
        hotspot_mb=8,
        hotspot_offset_mb=16,
    )
    bundle = ground.run(scenario)
    analysis = _analysis(bundle)
    series = load_bundle(bundle)
    reads = np.nansum(series.ops["read"]["count"])
    device_reads = float(np.nansum(_read_iops(series, ground.device) * series.duration_s))
    io = analysis["io_per_op"]
    print(
        f"\n[idle] {int(reads)} reads, {device_reads:.0f} device reads "
        f"({device_reads / reads:.4f} per read); io_per_op {io}\n[idle] verdict "
        f"{analysis['verdict']['call']}: {analysis['verdict']['summary']}\n[idle] segments "
        f"{[(s['label'], s['verdict']['call']) for s in analysis['segments']]}\n"
        f"[idle] bundle {bundle}"
    )
    # The premise: the database cache served the reads and the device had nothing to do.
    assert io["cache_hit_pct"] is not None and io["cache_hit_pct"] >= 99.0, io
    assert device_reads / reads < 0.05, (device_reads, reads)
    assert analysis["verdict"]["call"] != "storage-bound", analysis["verdict"]
    for segment in analysis["segments"]:
        assert segment["verdict"]["call"] != "storage-bound", segment


# --------------------------------------------------------------------------- sweep
#
# Acceptance: a sweep on the lab device with a known ceiling reports the highest SLO-meeting
# load at the ceiling (± 10 %) — the correlation issue's "what load can this storage carry".
#
# On the module's lab and T2's run (until session 6 it was a module of its own that built and
# loaded a second lab just like it and ran the same steps again): T2's steps are written as
# ``load.sweep`` over sessions 1, 2, 4, 8, 16 (``factor: 2``) with these SLOs, and
# ``stop_on_breach: false`` so that T2 gets its 16-session step; that a sweep stops at its first
# breach on a real run is tests/e2e/test_exit_codes.py's
# ``test_a_sweep_stops_at_its_first_breach_and_exits_1``.
#
# The SLO is the one a DBA would set from T2's figures — read p99
# at most 0.6 s. T2 measured p99 ≈ 0.10 s at 150 IOPS (1 session), 0.17 s at 300 (2), 0.31 s at
# the 500-IOPS ceiling (4 sessions, which ask for ~750) and 0.8-1.9 s beyond (8, 16: the
# requests queue in the throttle); this module measured 0.40 s at 4 sessions and 0.97 s at 8.
# 0.6 s sits between 4 and 8 sessions, so the sweep should break at 8 sessions and answer
# 4 sessions at ~500 device IOPS. A storage SLO names the lab's loop device (``device:``), so
# every point's storage figures are read on it; its limit (await ≤ 20 ms: the loop device
# answers from the host's page cache, blk-throttle queues above it) always holds, so only the
# latency SLO decides.
#
# Exit code: some load met every SLO (step 1), so ``dbsim run`` exits **0** even though later
# steps breached (docs/validation.md: 1 only when even the first step missed one).
#
# Runs go through the real CLI (``--skip-load``); ``-s`` prints the sweep's points.

SWEEP_TOLERANCE = 0.10
P99_LIMIT_US = 600_000  # 0.6 s: above 0.31-0.40 s at the ceiling (4 sessions), below 0.8 s beyond
AWAIT_LIMIT_MS = 20.0
SWEEP_EXPECTED_HIGHEST = 4  # the first step that reaches the ceiling; 8 sessions queue past the SLO


def _print_sweep(sweep: dict[str, Any], exit_code: int) -> None:
    print(f"\nlab sweep (ceiling {CEILING} read IOPS, read p99 ≤ {P99_LIMIT_US / 1e6:g} s), "
          f"device {sweep['device']}, exit {exit_code}")  # fmt: skip
    for p in sweep["points"]:
        iops, p99 = p["device_iops"], p["p99_us"]
        print(
            f"  {p['label']}: {p['sessions']:>2} sessions  "
            f"{'-' if iops is None else f'{iops:6.1f}'} IOPS  "
            f"p99 {'-' if p99 is None else f'{p99 / 1e6:.3f} s'}  "
            f"complete {p['complete']}  slo_met {p['slo_met']}"
        )
    hp = sweep["highest_passing"]
    print(
        f"  highest passing: {hp and hp['sessions']} sessions, "
        f"{sweep['device_iops_at_highest_passing']} IOPS; "
        f"first breach: {sweep['first_breach'] and sweep['first_breach']['label']}"
    )


def test_sweep_reports_the_highest_slo_meeting_load_at_the_ceiling(
    ground: GroundLab, t2_bundle: Path
) -> None:
    bundle = t2_bundle
    summary = _summary(bundle)
    sweep = summary["sweep"]
    _print_sweep(sweep, 0)

    assert sweep["device"] == ground.device, sweep["device"]
    assert [p["sessions"] for p in sweep["points"]] == list(T2_SESSIONS)  # no stop: all ran
    hp = sweep["highest_passing"]
    breach = sweep["first_breach"]
    assert hp is not None, "no step met the SLOs"
    assert breach is not None, "no step broke the p99 SLO: the ceiling never showed"
    # The highest passing load is the last step before the breach, and every step below it met
    # the SLOs.
    assert hp["step"] == breach["step"] - 1, (hp["label"], breach["label"])
    assert all(p["slo_met"] for p in sweep["points"][: hp["step"] + 1])
    assert summary["slos"]["met"] is True
    assert hp["sessions"] == SWEEP_EXPECTED_HIGHEST, hp
    iops = sweep["device_iops_at_highest_passing"]
    assert iops == hp["device_iops"]
    assert abs(iops - CEILING) <= SWEEP_TOLERANCE * CEILING, (
        f"device IOPS at the highest passing load {iops:.1f}, not {CEILING} ± 10 %"
    )
