"""Two lab volumes with different ceilings under one PostgreSQL cluster (issue #19's lab).

As root, a lab of the test's own (state, images, mount and cgroup names) gets two volumes,
``old`` capped at 500 read IOPS and ``new`` at 2,000, and a throwaway PostgreSQL whose every
backend is in the lab's one blkio group, which holds a rule per volume's device. A SLOB-like
table is loaded into a tablespace on each volume (``target.tablespace`` with ``create: true``
on the directory the lab made for it); a short read-only run against each must read from that
volume's loop device (the block collector names it, the summary's ``data_location`` is the
tablespace) at its ceiling, within 10 %. ``down`` leaves nothing behind. The module takes
about a minute; ``-s`` prints the figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.errors import ConfigError
from storage.lab import Lab, parse_volume, system
from storage.lab.pgcluster import PG_USER, pg_bin
from storage.lab.status import postgres_target
from tests.integration.test_lab import _free_port, _mounted_under
from tests.integration.test_lab import _require_lab as require_lab
from tests.support import forked_dbsim
from tests.support.ramdisk import mount_ram, unmount_ram

pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.timing]

REPO_ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
CEILINGS = {"old": 500, "new": 2000}
MEMORY_LIMIT = 96 * MiB  # page cache of a few tens of MiB against a 125 MiB table
ROWS = 16_000  # one 8 KiB block each
#: blk-throttle's 100 ms slices at each edge of a short step (2 x 0.1 / 4 s = 5 %) and the
#: few tens of MiB of page cache that serve some reads without the device (up to ~5 %).
IOPS_TOL = 0.10
CLI_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def two_volumes() -> Iterator[tuple[Lab, dict[str, Any], Path]]:
    """The lab, its status once up, and a directory for scenarios and bundles."""
    require_lab()
    try:
        pg_bin()
        pwd.getpwnam(PG_USER)
    except (ConfigError, KeyError) as exc:
        pytest.skip(f"!!! NOT RUN: no PostgreSQL server binaries or {PG_USER} user: {exc}")
    # /var/tmp, not pytest's tmp_path: postgres must be able to search every parent directory.
    base = Path(tempfile.mkdtemp(prefix="dbsim-lab-vol-", dir="/var/tmp"))
    base.chmod(0o755)
    # The images in memory, off the host's disk (tests/support/ramdisk.py).
    ram = mount_ram(base / "images", len(CEILINGS) * 512 * MiB)
    lab = Lab(base / "state", base / "images", name=f"dbsim-lab-vol-{os.getpid()}")
    specs = [parse_volume(f"{name}:read-iops={iops}") for name, iops in CEILINGS.items()]
    try:
        status = lab.up(
            512 * MiB,
            base / "mnt",
            memory_limit_bytes=MEMORY_LIMIT,
            postgres=True,
            pg_port=_free_port(55444),  # its own: the ground-truth lab (55442) may start beside it
            volumes=specs,
        )
        (base / "runs").mkdir()
        yield lab, status, base / "runs"
        status = lab.status()
        problems = lab.down()
        assert problems == []
        _assert_nothing_left(lab, status, base)
    finally:
        with contextlib.suppress(Exception):
            lab.down()
        for mount_point in _mounted_under(base):
            subprocess.run(["umount", mount_point], check=False)
        for name in CEILINGS:
            for loop in system.loops_for(base / "images" / f"{lab.name}-{name}.img"):
                subprocess.run(["losetup", "--detach", loop], check=False)
        unmount_ram(base / "images", ram)
        if not _mounted_under(base):
            shutil.rmtree(base, ignore_errors=True)


def _assert_nothing_left(lab: Lab, status: dict[str, Any], base: Path) -> None:
    assert _mounted_under(base) == [str(base / "images")]  # the test's own tmpfs, no more
    for volume in status["volumes"]:
        assert not system.loops_for(Path(volume["image"])), volume
        assert not Path(volume["image"]).exists(), volume
    for path in status["cgroups"].values():
        assert not Path(path).exists(), f"cgroup {path} left behind"
    assert not Path(status["root"]).exists(), "the lab's root directory was left behind"
    assert not lab.state_file.exists()


def _scenario(status: dict[str, Any], volume: dict[str, Any], runs: Path, load: Any) -> Path:
    data = {
        "name": f"lab-{volume['name']}",
        "target": postgres_target(status, volume),
        "workload": {
            "name": "slob",
            "parameters": {
                "table_prefix": f"v{volume['name']}",
                "scale": ROWS,
                "update_pct": 0,
                "load_batch_rows": 8000,
            },
        },
        "load": load,
    }
    path = runs / f"{volume['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """``dbsim`` forked from the worker's pre-imported zygote (tests/support/forked_dbsim.py):
    a real command process without another interpreter start (~0.4 CPU-s each); the lab
    tests are not about start-up."""
    done = forked_dbsim.run(
        [sys.executable, "-m", "sim.cli", *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    assert done.returncode == 0, f"dbsim {' '.join(argv)}: {done.returncode}\n{done.stderr}"
    return done


def test_status_names_both_volumes_and_their_tablespace_dirs(
    two_volumes: tuple[Lab, dict[str, Any], Path],
) -> None:
    lab, status, _ = two_volumes
    assert status["up"] and status["postgres"]["running"], status
    postgres = pwd.getpwnam(PG_USER).pw_uid
    devices = set()
    for volume in status["volumes"]:
        assert volume["ceilings"]["read_iops"] == CEILINGS[volume["name"]]
        assert volume["mount_point"] == str(Path(status["root"]) / volume["name"])
        tablespace = Path(volume["tablespace_dir"])
        assert tablespace.stat().st_uid == postgres and not any(tablespace.iterdir())
        devices.add(volume["dev"])
    assert len(devices) == 2
    with pytest.raises(ConfigError, match="name one"):
        lab.set_ceiling(read_iops=100)
    with pytest.raises(ConfigError, match="no volume 'other'"):
        lab.set_ceiling(read_iops=100, volume="other")


def test_each_volume_holds_its_ceiling_under_one_cluster(
    two_volumes: tuple[Lab, dict[str, Any], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    lab, status, runs = two_volumes
    measured = {}
    for volume in status["volumes"]:
        name = volume["name"]
        device = os.path.basename(volume["device"])
        load = {"sessions": 4, "duration_s": 4, "warmup_s": 1}
        scenario = _scenario(status, volume, runs, load)
        _cli("load", str(scenario))
        lab.cold_cache()
        out = _cli("run", str(scenario), "-o", str(runs / name), "--skip-load", "-q")
        bundle = Path(out.stdout.strip().splitlines()[-1])
        summary = json.loads((bundle / "summary.json").read_text())
        assert summary["status"] == "completed", summary.get("error")
        assert summary["target"]["data_location"] == {
            "path": volume["tablespace_dir"],
            "from": f"tablespace lab_{name}",
        }
        block = summary["storage"]["block"]
        assert list(block) == [device], block
        latency = summary["storage"].get("blocklatency") or {}
        measured[name] = (block[device]["r_s"], block[device].get("r_await_ms"), latency)
    with capsys.disabled():
        for name, (r_s, r_await, latency) in measured.items():
            p99 = (latency.get(f"{os.path.basename(_dev(status, name))}:read") or {}).get("p99_ms")
            assert r_await is not None and p99 is not None, (r_await, latency)
            print(
                f"\n[lab volumes] {name}: ceiling {CEILINGS[name]} read IOPS, measured "
                f"{r_s:.1f} r/s (iostat r_await {r_await:.2f} ms, eBPF read p99 {p99:.2f} ms)"
            )
    for name, (r_s, _, _) in measured.items():
        assert r_s == pytest.approx(CEILINGS[name], rel=IOPS_TOL), measured


def _dev(status: dict[str, Any], name: str) -> str:
    (volume,) = [v for v in status["volumes"] if v["name"] == name]
    return str(volume["device"])
