"""Several "hosts" on this machine: network namespaces joined by a bridge (root only).

:func:`netns_hosts` builds, for one test, ``count`` hosts named ``h0, h1 …``: each a network
namespace with its own address on a private /24 (10.X.Y.0/24, X and Y drawn per test), a veth
pair whose outer end is on a bridge of the test's own, its loopback up, and — for each host
asked ``lun=True`` — its own loop device (a sparse image, ext4) mounted at a directory of the
test's tmp dir: the host's "LUN". Commands run in a host through ``ip netns exec`` and
``unshare --uts`` (each host has its own host name, as separate machines do:
``socket.gethostname()`` is per UTS namespace, not per network namespace).

Names carry a random tag (``dbs<tag>…``), so tests on parallel xdist workers never collide;
everything is torn down when the ``with`` block ends, however it ends: the hosts' processes
killed, namespaces, bridge and veths deleted, the file systems unmounted (lazily if held), the
loop devices detached and the images removed. :meth:`Host.destroy` tears one host down
mid-test (a machine cut off: its processes killed, its namespace and link gone).

Only the hosts' own addresses (and 127.0.0.0/8 inside each) are ever used: nothing here routes
to the outside, and the bridge has no address of the root namespace's.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PREFIX = "dbs"
LUN_MIB = 2048


def require_root() -> None:
    """Skip, saying why, unless this process can build namespaces (root, ``ip``, ``unshare``)."""
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: netns hosts need root (ip netns, losetup, mount)")
    for tool in ("ip", "unshare", "losetup", "mkfs.ext4"):
        if subprocess.run(["which", tool], capture_output=True).returncode:
            pytest.skip(f"SKIPPED LOUDLY: netns hosts need {tool}")


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class Host:
    """One host: its namespace, address, host name and (if asked) its LUN."""

    name: str
    netns: str
    address: str
    hostname: str
    veth: str
    lun: Path | None = None
    device: str | None = None
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    destroyed: bool = False

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as run on this host (its network namespace and its own host name)."""
        inner = 'hostname "$0" && exec "$@"'
        return ["ip", "netns", "exec", self.netns, "unshare", "--uts", "sh", "-c", inner,
                self.hostname, *argv]  # fmt: skip

    def popen(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        stdout: Path,
        stderr: Path,
    ) -> subprocess.Popen[str]:
        """Start ``argv`` on this host, its output into files (nobody reads pipes meanwhile)."""
        with stdout.open("w") as out, stderr.open("w") as err:
            proc = subprocess.Popen(
                self.argv(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
                stdout=out, stderr=err, text=True, start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)
        return proc

    def run(self, argv: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(argv), capture_output=True, text=True, timeout=timeout)

    def kill_all(self) -> None:
        """Every process in this host's namespace, and every one started here, killed."""
        pids = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True, text=True)
        for pid in pids.stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)

    def destroy(self) -> None:
        """The host goes away: its processes killed, its link and namespace deleted."""
        if self.destroyed:
            return
        self.destroyed = True
        self.kill_all()
        subprocess.run(["ip", "link", "del", self.veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)


def _subnet() -> str:
    return f"10.{random.randint(64, 250)}.{random.randint(1, 254)}"


@contextlib.contextmanager
def netns_hosts(tmp: Path, count: int, luns: Sequence[int] = ()) -> Iterator[list[Host]]:
    """``count`` hosts joined by a bridge; the hosts numbered in ``luns`` get a loop device
    mounted at ``tmp/<name>-lun``. Torn down whatever happens (see the module)."""
    require_root()
    tag = secrets.token_hex(3)
    bridge = f"{PREFIX}{tag}br"
    subnet = _subnet()
    hosts: list[Host] = []
    mounted: list[tuple[Path, str, Path]] = []
    try:
        _run("ip", "link", "add", bridge, "type", "bridge")
        _run("ip", "link", "set", bridge, "up")
        for i in range(count):
            host = Host(
                name=f"h{i}",
                netns=f"{PREFIX}{tag}h{i}",
                address=f"{subnet}.{10 + i}",
                hostname=f"{PREFIX}{tag}-h{i}",
                veth=f"{PREFIX}{tag}v{i}",
            )
            hosts.append(host)
            _run("ip", "netns", "add", host.netns)
            _run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", f"{host.veth}p")
            _run("ip", "link", "set", host.veth, "master", bridge, "up")
            _run("ip", "link", "set", f"{host.veth}p", "netns", host.netns)
            inside = ("ip", "netns", "exec", host.netns, "ip")
            _run(*inside, "link", "set", f"{host.veth}p", "name", "eth0")
            _run(*inside, "addr", "add", f"{host.address}/24", "dev", "eth0")
            _run(*inside, "link", "set", "eth0", "up")
            _run(*inside, "link", "set", "lo", "up")
            if i in luns:
                host.lun, host.device = _lun(tmp, f"{host.name}-lun", mounted)
        yield hosts
    finally:
        for host in hosts:
            host.destroy()
        for where, device, image in reversed(mounted):
            if subprocess.run(["umount", str(where)], capture_output=True).returncode:
                subprocess.run(["umount", "-l", str(where)], capture_output=True)
            subprocess.run(["losetup", "-d", device], capture_output=True)
            image.unlink(missing_ok=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


def _lun(tmp: Path, name: str, mounted: list[tuple[Path, str, Path]]) -> tuple[Path, str]:
    """A sparse image, ext4, on a loop device of its own, mounted at ``tmp/name``."""
    image = tmp / f"{name}.img"
    with open(image, "wb") as handle:
        handle.truncate(LUN_MIB * 2**20)
    _run("mkfs.ext4", "-q", "-F", str(image))
    device = _run("losetup", "--find", "--show", str(image)).strip()
    where = tmp / name
    where.mkdir()
    try:
        _run("mount", device, str(where))
    except RuntimeError:
        subprocess.run(["losetup", "-d", device], capture_output=True)
        image.unlink(missing_ok=True)
        raise
    mounted.append((where, device, image))
    return where, device
