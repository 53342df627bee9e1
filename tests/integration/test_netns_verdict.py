"""Issue #32: the verdict of a run on three netns hosts names the worker host that limits.

tests/support/netns_hosts.py builds the hosts and tests/integration/test_netns_hosts.py's
Cluster runs the master on h0 and a worker on h1 and on h2, each with its SQLite data on a loop
device of its own. h2's worker is put, once connected, in a cgroup of the test's own with a
CFS CPU quota of :data:`QUOTA_CORES` (as a Kubernetes CPU limit would hold it): its host
collector reads the quota and the periods throttled (storage.collectors.cpu_quota), and the
verdict (sim.analysis.hosts) is to say "client-bound on host <h2>" with h2's CPU against its
quota — while h1 has room to spare and the loop devices idle.

What it rests on, measured (run alone, then beside ``stress-ng --cpu 2``): h2's dbsim at
87 / 88 % of its quota and throttled in 98 / 99 % of its periods over the run (the verdict's
gates: 80 % of the quota, or throttled in 50 % of the periods), h1's well below its one core.
Either gate alone calls it; CPU contention lowers the first (the group gets less than its
quota) but not the second. Wall time: 33-40 s on this 2-CPU machine.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.lab.cgroups import own_paths, v1_mounts
from tests.integration.test_netns_hosts import Cluster
from tests.support.netns_hosts import netns_hosts

pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.timing]

#: h2's worker's CPU quota: a tenth of a core, which its share of the paced load outgrows.
QUOTA_CORES = 0.1
PERIOD_US = 100_000
#: The paced load (both workers together); each worker takes half.
RATE_OPS_S = 600


@contextlib.contextmanager
def cpu_quota_group(cores: float) -> Iterator[tuple[Path, bool]]:
    """A cgroup with a CFS quota of ``cores`` under this process's own group — in cgroup v2
    when its ``cpu`` controller is there, else in v1's ``cpu`` hierarchy — and whether it is
    v1; removed afterwards."""
    name = f"dbsim-netns-{secrets.token_hex(3)}"
    own = own_paths()
    controllers = Path("/sys/fs/cgroup/cgroup.controllers")
    v1 = not (controllers.exists() and "cpu" in controllers.read_text().split())
    if not v1:
        group = Path("/sys/fs/cgroup") / own.get("", "/").lstrip("/") / name
        group.mkdir()
        if not (group / "cpu.max").exists():  # the cpu controller not enabled down to here
            group.rmdir()
            pytest.skip("SKIPPED LOUDLY: cgroup v2 cpu controller not enabled for this group")
        (group / "cpu.max").write_text(f"{int(cores * PERIOD_US)} {PERIOD_US}\n")
    else:
        mounts = v1_mounts()
        if "cpu" not in mounts:
            pytest.skip("SKIPPED LOUDLY: no cgroup cpu controller to hold a worker to a quota")
        group = mounts["cpu"] / own.get("cpu", "/").lstrip("/") / name
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
        (group / "cpu.cfs_quota_us").write_text(f"{int(cores * PERIOD_US)}\n")
    try:
        yield group, v1
    finally:
        for _ in range(50):  # the worker's processes are gone once the hosts are torn down
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def mount_cgroup_fs(pid: int, group: Path, v1: bool) -> None:
    """The cgroup file system mounted in the worker's own mount namespace, as on a machine
    or in a container: ``ip netns exec`` gives each command a fresh /sys without it."""
    mount = (
        "mount -t tmpfs cgroup /sys/fs/cgroup && mkdir /sys/fs/cgroup/cpu && "
        "mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu"
        if v1
        else "mount -t cgroup2 cgroup2 /sys/fs/cgroup"
    )
    done = subprocess.run(
        ["nsenter", "-t", str(pid), "-m", "sh", "-c", mount], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    seen = Path(f"/proc/{pid}/cgroup").read_text()
    assert f"/{group.name}" in seen, seen


def test_a_worker_host_held_to_a_cpu_quota_is_named_in_the_verdict(tmp_path: Path) -> None:
    with (
        cpu_quota_group(QUOTA_CORES) as (group, v1),
        netns_hosts(tmp_path, 3, luns=(1, 2)) as hosts,
    ):
        cluster = Cluster(tmp_path, hosts, {})
        starved = hosts[2]
        pid = starved.procs[0].pid  # ip netns exec, unshare and sh exec the worker in place
        (group / "cgroup.procs").write_text(f"{pid}\n")
        mount_cgroup_fs(pid, group, v1)
        cluster.start(users=4, duration_s=16, rate_ops_s=RATE_OPS_S)
        summary = cluster.summary()
        assert summary["status"] == "completed", summary.get("error")
        bundle = Path(summary["bundle"])

        # The worker's own samples say its quota and its throttling (h1 has none).
        lines = (bundle / "timeseries" / "host.csv").read_text().splitlines()
        header = lines[0].split(",")
        rows = [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]
        mine = [r for r in rows if r["entity"] == starved.hostname and r["phase"] == "measure"]
        assert mine and all(
            float(r["cpu_limit_cores"]) == pytest.approx(QUOTA_CORES) for r in mine
        ), mine[:2]
        used = [float(r["process_cpu_pct"]) for r in mine]
        throttled = [float(r["cpu_throttled_pct"]) for r in mine if r.get("cpu_throttled_pct")]
        print(f"{starved.name}: dbsim process CPU {min(used):.1f}-{max(used):.1f} % of one core "
              f"(quota {100 * QUOTA_CORES:.0f} %), throttled in "
              f"{min(throttled):.0f}-{max(throttled):.0f} % of periods (measured, host.csv)")  # fmt: skip

        analysis = json.loads((bundle / "analysis.json").read_text())
        verdict = analysis["verdict"]
        print(f"verdict: {verdict['summary']}")
        call = verdict.get("storage_call_withheld") or verdict["call"]
        assert call == "client-bound", verdict
        evidence = {c["check"]: c for c in verdict["evidence"]}
        process = evidence["dbsim process CPU % of one core"]
        assert process["passed"] and process["meaning"].startswith(f"host {starved.hostname}")
        if verdict["call"] == "client-bound":
            assert verdict["summary"].startswith(
                f"Client-bound on host {starved.hostname} (CPU "
            ), verdict["summary"]
            assert f"of its {QUOTA_CORES:.2f}-core quota" in verdict["summary"]
