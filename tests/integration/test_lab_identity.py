"""`dbsim lab down` acts on identities, not names (issue #24, item 6).

As root, each test brings up a lab of its own (state, images, mount point and cgroup names
under a fresh /var/tmp directory; 16 MiB, no PostgreSQL, no array, no ceilings), then puts a
*foreign* object where one of the lab's was — what a user or another program could have done
since `up` — and takes the lab down from its now stale state file:

(a) the lab's loop device detached and attached again by someone else to a file of theirs,
    mounted at the lab's mount point (the same /dev/loopN, the same MAJ:MIN at the same
    place, even the same short mount ID);
(b) another file at the lab's image path (other size; same size; a symbolic link);
(c) a tmpfs at the lab's mount point, in place of the lab's file system or on top of it;
(d) another cgroup of the lab's group's name;
(e) another directory in place of the PostgreSQL cluster's directory (named volumes put it
    on the host, in the lab's root), the lab's own renamed away (the only case that starts
    PostgreSQL; beside it, the same lab taken down untouched leaves nothing).

Each foreign object must be left exactly as it was (its mount, its directory, its loop
device, its contents) and named on a warning; what is still the lab's is removed. Where the
lab's own file system is hidden under a foreign mount, `down` cannot remove it: a problem,
the state file kept, and a second `down` after the foreign mount is gone leaves nothing.
The foreign objects are removed by each test's finalizer. The command line is driven through
``sim.cli.entry.main`` in the test process (tests/e2e/conftest.py's ``InProcessDbsim``: the
child's directory, environment and logging, stdout and stderr captured) with
``storage.lab.Lab`` pointed at this test's private lab for the call; it used to be a child
process (``python -c`` with a shim doing the same), ~0.3 CPU-s of interpreter start-up and
imports for each of the module's 24 commands, while what is checked is the command's decision
(its lines and exit code, what it created), not the process boundary: `down` exits 0 with
`warning:` lines when only foreign things are left, 3 with `error:` lines when the lab's are.

The options of `lab up` are refused in one `error:` line naming the option, exit 2, with
nothing created: huge numbers, out-of-range values, repeated keys, size 0, a memory limit of
one byte, a relative `--mount`, and another `--mount` or `--size` while the lab is up.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import storage.lab
from sim.errors import ConfigError
from storage.lab import Lab, parse_volume
from storage.lab.pgcluster import PG_USER, Cluster, pg_bin
from tests.e2e.conftest import CliResult, InProcessDbsim
from tests.integration.test_lab import _free_port, _mounted_under
from tests.integration.test_lab import _require_lab as require_lab

pytestmark = [pytest.mark.integration, pytest.mark.root]

REPO_ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
LAB_SIZE = 16 * MiB  # the smallest the lab accepts: these are safety tests
HUGE = "9" * 5000


class Private:
    """A private lab, its base directory, and the foreign objects a test made."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.name = f"dbsim-lab-id-{os.getpid()}"
        self.lab = Lab(base / "state", base / "images", name=self.name)
        self.mount = base / "mnt"
        self.foreign_mounts: list[Path] = []
        self.foreign_loops: list[str] = []
        self.foreign_dirs: list[Path] = []

    def cli(self, *argv: str, cwd: Path | None = None) -> CliResult:
        """The real CLI (``sim.cli.entry.main``, in this process) with ``storage.lab.Lab``
        pointed at this private lab for the call (the commands look it up when they run)."""
        own = storage.lab.Lab
        storage.lab.Lab = lambda: Lab(self.base / "state", self.base / "images", self.name)
        try:
            return InProcessDbsim(cwd or REPO_ROOT, dict(os.environ), child_logging=True)(*argv)
        finally:
            storage.lab.Lab = own

    def up(self) -> dict[str, Any]:
        return self.lab.up(LAB_SIZE, self.mount)

    def recorded(self) -> dict[str, Any]:
        state = self.lab.load_state()
        assert state is not None
        return dict(state)


@pytest.fixture
def private() -> Iterator[Private]:
    require_lab()
    base = Path(tempfile.mkdtemp(prefix="dbsim-lab-id-", dir="/var/tmp"))
    base.chmod(0o755)
    env = Private(base)
    try:
        yield env
    finally:
        for mount in reversed(env.foreign_mounts):
            subprocess.run(["umount", str(mount)], check=False, capture_output=True)
        for loop in env.foreign_loops:
            subprocess.run(["losetup", "--detach", loop], check=False, capture_output=True)
        for group in env.foreign_dirs:
            with contextlib.suppress(OSError):
                group.rmdir()
        with contextlib.suppress(Exception):
            env.lab.down()
        for mount_point in _mounted_under(base):
            subprocess.run(["umount", mount_point], check=False)
        if not _mounted_under(base):
            shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------------------- oracles


def _run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout


def _mounts_at(path: Path) -> list[tuple[str, str, str]]:
    """(fstype, source, MAJ:MIN) of every mount at ``path``, lowest first."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if fields[4] == str(path):
            found.append((rest[0], rest[1], fields[2]))
    return found


def _backing(loop: str) -> tuple[str, int] | None:
    """(backing file, its inode) of ``loop`` as losetup reports them; None when detached."""
    done = subprocess.run(
        ["losetup", "--list", "--json", "--output", "NAME,BACK-FILE,BACK-INO", loop],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0 or not done.stdout.strip():
        return None
    (device,) = json.loads(done.stdout)["loopdevices"]
    if device["back-file"] is None:
        return None
    return device["back-file"], int(device["back-ino"])


def _foreign_image(env: Private, size: int = LAB_SIZE) -> Path:
    """An ext4 image of the test's own, outside the lab's directories."""
    where = env.base / "foreign"
    where.mkdir(exist_ok=True)
    image = where / "theirs.img"
    with open(image, "wb") as f:
        f.truncate(size)
    _run("mkfs.ext4", "-q", "-F", str(image))
    return image


def _gone_from_base(env: Private, status: dict[str, Any]) -> None:
    """What is the lab's and was not shadowed is gone: cgroups, image, state file."""
    for path in status["cgroups"].values():
        assert not Path(path).exists(), f"cgroup {path} left behind"
    assert not env.lab.state_file.exists(), "state file left behind"


# ---------------------------------------------------------------------------- (a)


def test_a_reused_loop_device_mounted_at_the_lab_mount_point_is_left_alone(
    private: Private,
) -> None:
    status = private.up()
    loop, mount = status["device"], Path(status["mount_point"])
    # Someone unmounts and detaches the lab's device, and reuses the very /dev/loopN.
    _run("umount", str(mount))
    _run("losetup", "--detach", loop)
    theirs = _foreign_image(private)
    _run("losetup", loop, str(theirs))
    private.foreign_loops.append(loop)
    _run("mount", "-t", "ext4", loop, str(mount))
    private.foreign_mounts.append(mount)
    (mount / "their-file").write_text("theirs\n")
    before = _mounts_at(mount)
    assert before and before[-1][2] == status["dev"]  # the same MAJ:MIN at the same place

    warnings: list[str] = []
    assert private.lab.down(warnings) == []

    assert _mounts_at(mount) == before, "the foreign mount was touched"
    assert (mount / "their-file").read_text() == "theirs\n"
    assert _backing(loop) == (str(theirs), os.stat(theirs).st_ino), "the foreign loop was touched"
    assert mount.is_dir()
    assert any(str(mount) in w and "left mounted" in w for w in warnings), warnings
    assert any(loop in w and "left attached" in w for w in warnings), warnings
    # The lab's own image is still the lab's (nobody took it): it is removed.
    assert not Path(status["image"]).exists()
    _gone_from_base(private, status)


# ---------------------------------------------------------------------------- (b)


@pytest.mark.parametrize("kind", ["other-size", "same-size", "symlink"])
def test_another_file_at_the_image_path_is_not_deleted(private: Private, kind: str) -> None:
    status = private.up()
    image, loop = Path(status["image"]), status["device"]
    recorded_loop = private.recorded()["volumes"][0]["identity"]["loop"]
    # The lab's image is unlinked (the loop device keeps it) and something else takes its name.
    image.unlink()
    theirs = private.base / "theirs.bin"
    theirs.write_bytes(b"their data\n")
    if kind == "other-size":
        image.write_bytes(b"their image\n")
    elif kind == "same-size":
        with open(image, "wb") as f:
            f.truncate(LAB_SIZE)  # the lab's size, another inode
    else:
        image.symlink_to(theirs)
    before = os.lstat(image)

    warnings: list[str] = []
    assert private.lab.down(warnings) == []

    after = os.lstat(image)
    assert (after.st_ino, after.st_size, after.st_mode) == (
        before.st_ino,
        before.st_size,
        before.st_mode,
    )
    assert theirs.read_bytes() == b"their data\n"
    if kind == "other-size":
        assert image.read_bytes() == b"their image\n"
    assert any(str(image) in w and "not the lab's image" in w for w in warnings), warnings
    # The lab's own device was known by its inode, not the name it had lost: detached.
    now = _backing(loop)
    assert now is None or now[1] != recorded_loop["backing_ino"], now
    assert _mounts_at(Path(status["mount_point"])) == []
    assert not Path(status["mount_point"]).exists()
    _gone_from_base(private, status)


# ---------------------------------------------------------------------------- (c)


def test_a_tmpfs_in_place_of_the_lab_file_system_is_left_mounted(private: Private) -> None:
    status = private.up()
    mount, loop = Path(status["mount_point"]), status["device"]
    lab_backing = _backing(loop)
    _run("umount", str(mount))
    _run("mount", "-t", "tmpfs", "-o", "size=1m", "theirs", str(mount))
    private.foreign_mounts.append(mount)
    (mount / "their-file").write_text("theirs\n")

    done = private.cli("lab", "down")

    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(line.startswith("warning: lab down: ") for line in lines), lines
    assert any(str(mount) in line and "tmpfs" in line for line in lines), lines
    assert "is down" in done.stdout and "Traceback" not in done.stderr
    assert [m[:2] for m in _mounts_at(mount)] == [("tmpfs", "theirs")]
    assert (mount / "their-file").read_text() == "theirs\n"
    assert _backing(loop) != lab_backing, "the lab's own device was left attached"
    assert not Path(status["image"]).exists()
    _gone_from_base(private, status)


def test_a_tmpfs_over_the_lab_file_system_is_left_and_the_lab_waits_for_it(
    private: Private,
) -> None:
    status = private.up()
    mount, loop = Path(status["mount_point"]), status["device"]
    lab_backing = _backing(loop)
    _run("mount", "-t", "tmpfs", "-o", "size=1m", "theirs", str(mount))
    private.foreign_mounts.append(mount)
    (mount / "their-file").write_text("theirs\n")

    done = private.cli("lab", "down")

    assert done.returncode == 3, done
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert any("still mounted" in line and str(mount) in line for line in errors), done.stderr
    assert any(line.startswith("warning: lab down: ") for line in done.stderr.splitlines())
    assert "Traceback" not in done.stderr
    stack = _mounts_at(mount)
    assert [m[0] for m in stack] == ["ext4", "tmpfs"], stack
    assert (mount / "their-file").read_text() == "theirs\n"
    assert _backing(loop) == lab_backing, "the lab's device went while its file system is mounted"
    assert private.lab.state_file.exists(), "what is left must stay recorded"

    # Once the foreign mount is gone, down finishes and leaves nothing of the lab.
    _run("umount", str(mount))
    private.foreign_mounts.remove(mount)
    warnings: list[str] = []
    assert private.lab.down(warnings) == []
    assert warnings == []
    assert _mounts_at(mount) == [] and not mount.exists()
    assert _backing(loop) != lab_backing
    assert not Path(status["image"]).exists()
    _gone_from_base(private, status)


# ---------------------------------------------------------------------------- (d)


def test_another_cgroup_of_the_lab_group_name_is_left(private: Private) -> None:
    status = private.up()
    blkio = Path(status["cgroups"]["blkio"])
    blkio.rmdir()  # the lab's group (it holds no process) ...
    blkio.mkdir()  # ... and someone else's of the same name
    private.foreign_dirs.append(blkio)
    theirs = os.stat(blkio).st_ino

    warnings: list[str] = []
    assert private.lab.down(warnings) == []

    assert blkio.is_dir() and os.stat(blkio).st_ino == theirs
    assert any(str(blkio) in w and "not the group the lab made" in w for w in warnings), warnings
    assert not Path(status["cgroups"]["memory"]).exists()
    assert not Path(status["image"]).exists()


# ---------------------------------------------------------------------------- (e)


@pytest.mark.parametrize("swapped", [False, True], ids=["the-lab-s", "theirs"])
def test_the_cluster_directory_is_removed_only_while_it_is_the_lab_s(
    private: Private, swapped: bool
) -> None:
    try:
        pg_bin()
        pwd.getpwnam(PG_USER)
    except (ConfigError, KeyError) as exc:
        pytest.skip(f"!!! NOT RUN: no PostgreSQL server binaries or {PG_USER} user: {exc}")
    status = private.lab.up(
        LAB_SIZE,
        private.mount,
        postgres=True,
        pg_port=_free_port(55452),
        volumes=[parse_volume("a")],
    )
    pg = status["postgres"]
    root = Path(pg["root"])  # with named volumes: on the host, in the lab's root directory
    assert pg["running"] and root.parent == private.mount
    if swapped:
        Cluster(root, pg["port"]).stop()
        moved = private.base / "moved-cluster"
        root.rename(moved)  # the lab's, under a name the lab never recorded
        root.mkdir()
        (root / "their-file").write_text("theirs\n")

    warnings: list[str] = []
    assert private.lab.down(warnings) == []

    if swapped:
        assert (root / "their-file").read_text() == "theirs\n"
        assert (moved / "data" / "PG_VERSION").exists()
        assert any(str(root) in w and "not the cluster directory" in w for w in warnings)
        assert any(str(private.mount) in w and "not the lab's" in w for w in warnings)
    else:
        assert warnings == [] and not private.mount.exists()
    assert not Path(status["volumes"][0]["image"]).exists()
    _gone_from_base(private, status)


# ---------------------------------------------------------------------------- options


def _refused(done: CliResult, option: str) -> None:
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert option in lines[0], lines
    assert "Traceback" not in done.stderr + done.stdout
    assert len(lines[0]) < 300, lines  # a 5,000-digit value is not echoed back


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["--volume", f"a:read-iops={HUGE}"], "--volume a: read-iops"),
        (["--volume", f"a:read-bps={HUGE}"], "--volume a: read-bps"),
        (["--volume", f"a:qos-iops={HUGE}"], "--volume a: qos-iops"),
        (["--volume", "a:read-iops=10000001"], "--volume a: read-iops"),
        (["--volume", "a:read-iops=5,read-iops=6"], "read-iops is given twice"),
        (["--volume", "a:size=0"], "--volume a: size"),
        (["--volume", "a:size=2T"], "--volume a: size"),
        (["--volume", "a:service-us=0"], "--volume a: service-us"),
        (["--size", HUGE], "--size"),
        (["--size", "0"], "--size"),
        (["--size", "2T"], "--size"),
        (["--read-iops", HUGE], "--read-iops"),
        (["--read-iops", "10000001"], "--read-iops"),
        (["--write-bps", HUGE], "--write-bps"),
        (["--read-bps", "2T"], "--read-bps"),
        (["--memory-limit", "1"], "--memory-limit"),
        (["--memory-limit", "0"], "--memory-limit"),
        (["--memory-limit", HUGE], "--memory-limit"),
        (["--pg-port", "70000"], "--pg-port"),
        (["--mount", "relative/mnt"], "--mount"),
    ],
)
def test_bad_options_are_refused_naming_the_option(
    private: Private, argv: list[str], option: str
) -> None:
    mount = [] if "--mount" in argv else ["--mount", str(private.mount)]
    done = private.cli("lab", "up", *mount, *argv, cwd=private.base)
    _refused(done, option)
    assert sorted(p.name for p in private.base.iterdir()) == [], "something was created"


def test_a_running_lab_refuses_another_place_or_size(private: Private) -> None:
    status = private.up()
    other = private.base / "other"
    _refused(private.cli("lab", "up", "--mount", str(other)), "--mount")
    _refused(private.cli("lab", "up", "--size", "32M"), "--size")
    assert not other.exists()
    # Naming the lab's own place and size, or neither, is the usual `up` on a running lab.
    again = private.cli("lab", "up", "--mount", str(private.mount), "--size", "16M", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["already_up"] is True
    assert private.cli("lab", "up", "--json").returncode == 0
    assert private.lab.status()["device"] == status["device"]
    assert private.lab.down() == []
