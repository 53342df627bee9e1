"""System calls of the lab: commands, loop devices, mounts, sizes, reading an image in.

Every command runs with a timeout and its output captured, so a failure becomes one line
(the command and the last line it printed) instead of a traceback or a hang.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sim.errors import ConfigError, TargetError
from storage.lab.identity import generation_of, node
from storage.lab.limits import shown

COMMAND_TIMEOUT_S = 120.0
REQUIRED_TOOLS = ("losetup", "mkfs.ext4", "mount", "umount", "setpriv")
#: The lab's servers stand for machines with processors of their own: they run ahead of the
#: host's other work (root only), so a load generator or another tenant on the host's CPUs does
#: not slow them below what they are set to deliver. The array (its FUSE process, and the
#: threads FUSE starts) at this nice value: a 500-IOPS policy delivered 449.6 at nice 0 beside
#: `stress-ng --cpu 2`.
ARRAY_NICE = -10
#: A lab PostgreSQL runs ahead of the host's other work but behind the array beneath it, whose
#: requests it waits for: a one-session read (~0.10 s) once took 0.64 s at nice 0 beside
#: `stress-ng --cpu 2`. At the array's own value (one timing phase beside three other suites,
#: load 7-10) the arrays' policies fell short: 400 of 500 IOPS under fio, 408 under eight sessions
#: of a lab PostgreSQL; which share the databases' priority took is not separated.
DATABASE_NICE = -5
#: Where the kernel groups processes by session (``kernel.sched_autogroup_enabled``, on by
#: default in Debian's kernels), a process's nice ranks it only among its own session's
#: processes, and each session's group competes with the others as one: a server at nice -10
#: in a session of its own had no more of the CPUs than one `stress-ng` started from another
#: terminal. The group has a nice value of its own (``/proc/PID/autogroup``).
AUTOGROUP = "/proc/{pid}/autogroup"

# At most 20 digits either side of the point: a longer number is refused before it is
# converted (5,000 digits made float() infinite and int() raise OverflowError).
_SIZE = re.compile(r"^\s*(\d{1,20}(?:\.\d{1,20})?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str | int) -> int:
    """Bytes from ``1073741824``, ``512M``, ``1G``, ``1GiB``, ``256MB`` (binary units)."""
    if isinstance(text, int):
        return text
    found = _SIZE.match(text)
    if found is None:
        raise ConfigError(f"size '{shown(text)}': expected bytes or a number with K/M/G/T, e.g. 1G")
    return int(float(found.group(1)) * _UNITS[found.group(2).lower()])


def format_size(n: int | None) -> str:
    """``1073741824`` -> ``1.0 GiB`` (for people; JSON output carries bytes)."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def missing_tools(tools: Sequence[str] = REQUIRED_TOOLS) -> list[str]:
    """The tools among ``tools`` that are not on PATH (nor in /sbin, /usr/sbin)."""
    path = os.environ.get("PATH", "") + ":/sbin:/usr/sbin"
    return [tool for tool in tools if shutil.which(tool, path=path) is None]


def run(
    argv: Sequence[str],
    what: str,
    *,
    timeout: float = COMMAND_TIMEOUT_S,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Run ``argv``; its stdout, or :class:`TargetError` naming ``what`` and the last line."""
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"lab: {what}: {argv[0]}: {exc}") from exc
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        last = lines[-1] if lines else f"exit {done.returncode}"
        shown = " ".join(argv[:3]) + (" …" if len(argv) > 3 else "")
        raise TargetError(f"lab: {what}: {shown}: {last}")
    return done.stdout


def as_user(user: str, argv: Sequence[str], env: dict[str, str] | None = None) -> list[str]:
    """``argv`` run as ``user`` by ``setpriv``, which execs (no extra process stays behind)."""
    prefix = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--reset-env"]
    extra = [f"{k}={v}" for k, v in (env or {}).items()]
    return [*prefix, *(["env", *extra] if extra else []), *argv]


def create_sparse(path: Path, size_bytes: int) -> dict[str, Any]:
    """A sparse file of ``size_bytes`` (no blocks are allocated until written); its identity
    (device, inode, size) taken from the very descriptor that created it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:  # O_EXCL: never truncate a file we did not create
        os.ftruncate(fd, size_bytes)
        return node(os.fstat(fd), size=True, generation=generation_of(fd))
    finally:
        os.close(fd)


def losetup_attach(image: Path, direct_io: bool = False) -> str:
    """Attach ``image`` to the first free loop device; its path (``/dev/loopN``).
    ``direct_io``: the loop driver opens the file with O_DIRECT and keeps several requests
    in flight (without it, it reads through the file's page cache, one request at a time)."""
    argv = ["losetup", "--find", "--show", *(["--direct-io=on"] if direct_io else []), str(image)]
    return run(argv, "attach loop device").strip()


def loop_backing_file(device: str) -> str | None:
    """The backing file of ``/dev/loopN`` from sysfs, or None when it is not attached."""
    name = os.path.basename(device)
    try:
        return (Path("/sys/block") / name / "loop" / "backing_file").read_text().strip()
    except OSError:
        return None


def loops_for(image: Path) -> list[str]:
    """Every loop device whose backing file is ``image`` (``/dev/loopN`` paths)."""
    target = os.path.realpath(image)
    found = []
    for backing in sorted(Path("/sys/block").glob("loop*/loop/backing_file")):
        try:
            text = backing.read_text().strip().removesuffix(" (deleted)")
        except OSError:
            continue
        if text == target:
            found.append("/dev/" + backing.parent.parent.name)
    return found


def device_number(device: str) -> str:
    """``MAJ:MIN`` of a block device node."""
    st = os.stat(device)
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def mkfs_ext4(device: str) -> None:
    """ext4 with inode tables and journal initialised now: the lazy initialisation thread
    would otherwise write to the device for minutes after mounting and pollute the counts."""
    run(
        ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", device],
        "make ext4",
    )


def mounted_source(mount_point: Path) -> str | None:
    """The device mounted at ``mount_point`` (from /proc/self/mounts), or None."""
    target = os.path.realpath(mount_point)
    source = None
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1].replace("\\040", " ") == target:
            source = fields[0]  # the last one wins: it hides the ones below
    return source


def mount(device: str, mount_point: Path) -> None:
    """Mount ext4 ``device`` at ``mount_point``."""
    run(["mount", "-t", "ext4", device, str(mount_point)], "mount")


def free_bytes(path: Path) -> int | None:
    """Bytes available to unprivileged users on the file system holding ``path``."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def read_data_extents(path: Path, chunk: int = 8 << 20) -> None:
    """Read the written parts of a sparse file (SEEK_DATA/SEEK_HOLE), so they sit in the page
    cache; the holes are skipped rather than filled with cached zero pages."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        offset = 0
        while offset < size:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError:  # ENXIO: no data after offset
                break
            end = os.lseek(fd, start, os.SEEK_HOLE)
            while start < end:
                read = len(os.pread(fd, min(chunk, end - start), start))
                if read == 0:
                    break
                start += read
            offset = end
    finally:
        os.close(fd)


def run_session_ahead(pid: int, nice: int) -> bool:
    """Give the session group of ``pid`` the CPU share of ``nice`` (:data:`AUTOGROUP`), when
    ``pid`` leads a session of its own (a detached server: never the caller's session, whose
    group holds whatever else the user runs) and the kernel groups by session. Root only;
    False, changing nothing, otherwise."""
    try:
        if os.getsid(pid) != pid:
            return False
        Path(AUTOGROUP.format(pid=pid)).write_text(f"{nice}\n")
    except OSError:  # no autogroup support, not root, or the process has gone
        return False
    return True


def start_session_ahead(nice: int) -> Callable[[], None]:
    """A ``preexec_fn`` that starts a child in a session of its own, run ahead at ``nice``
    (its own nice and its session group's, :func:`run_session_ahead`): for what must keep
    pace with the lab whatever else the host runs (root only; otherwise at the caller's)."""

    def ahead() -> None:
        os.setsid()
        with contextlib.suppress(PermissionError):
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        run_session_ahead(os.getpid(), nice)

    return ahead
