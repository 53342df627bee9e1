"""A throwaway PostgreSQL cluster on the lab's file system, inside the lab's cgroups.

``initdb`` runs as the ``postgres`` user with the data directory on the lab mount; the server
is started by a launcher (``sh``) that first writes its own PID into the lab's groups and then
execs ``nice … setpriv … pg_ctl start``, so the postmaster and every backend it forks inherit the
groups: their reads are throttled and their page cache is charged to the small memory group.
Started by root, they also run ahead of the host's other work and behind the lab array's
(``DATABASE_NICE``, storage.lab.system): a server with processors of its own.

Authentication: peer on the Unix socket, scram-sha-256 on 127.0.0.1 with a random password
kept in a root-only file (a scenario names it as ``target.password_file``). Trust on TCP would
let any local user become a superuser, and through ``COPY … TO PROGRAM`` the ``postgres``
operating-system user, which also owns the system cluster.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shlex
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path

from sim.errors import ConfigError, TargetError
from storage.lab.system import DATABASE_NICE, as_user, run, run_session_ahead

PG_USER = "postgres"
PG_BIN_ENV = "DBSIM_LAB_PG_BIN"
KILL_WAIT_S = 5.0
START_TIMEOUT_S = 60
SETTINGS = {
    "shared_buffers": "16MB",  # small, so reads reach the device instead of the buffer cache
    "fsync": "on",
    "listen_addresses": "'127.0.0.1'",
    # The database's own read wait per block: the one measure that sees a throttle's queue
    # (blk-throttle holds requests above the device, where iostat's await cannot).
    "track_io_timing": "on",
    # An ANALYZE of SLOB's wide rows needs ~100 MB: inside the lab's memory limit the OOM
    # killer then crash-restarts the cluster mid-run.
    "autovacuum": "off",
}


def cache_cap_settings(cap_bytes: int | None) -> dict[str, str]:
    """The settings ``dbsim lab up --pg-cache-cap`` adds: shared_buffers a quarter of the cap
    (the memory group's limit is the cap itself: it holds shared_buffers, the page cache of
    the server's files and its processes), or none without a cap (the lab's 16MB stays)."""
    if cap_bytes is None:
        return {}
    return {"shared_buffers": f"{max(cap_bytes // 4 >> 20, 1)}MB"}


def pg_bin() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``: ``$DBSIM_LAB_PG_BIN``, else the newest
    ``/usr/lib/postgresql/<v>/bin`` (Debian keeps them off PATH)."""
    override = os.environ.get(PG_BIN_ENV)
    candidates = [Path(override)] if override else []
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates.extend(versions)
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    raise ConfigError(
        f"dbsim lab --postgres needs initdb and pg_ctl (set {PG_BIN_ENV} or install "
        "postgresql); none found under /usr/lib/postgresql/*/bin"
    )


def launcher(task_files: Sequence[Path], argv: Sequence[str]) -> list[str]:
    """``argv`` started by a shell that first joins the groups whose ``cgroup.procs`` files
    are ``task_files`` and then execs ``argv`` (same PID), so children inherit the groups."""
    if not task_files:  # no groups to join (a cluster outside the lab)
        return list(argv)
    joins = " && ".join(f"echo $$ > {shlex.quote(str(f))}" for f in task_files)
    return ["sh", "-c", f'{joins} && exec "$@"', "dbsim-lab-launcher", *argv]


def make_server_dir(path: Path, entry: pwd.struct_passwd | None = None) -> None:
    """``path`` (made if missing) owned by the cluster's user, mode 0700: what initdb and
    CREATE TABLESPACE want."""
    if entry is None:
        try:
            entry = pwd.getpwnam(PG_USER)
        except KeyError as exc:
            raise ConfigError(f"dbsim lab --postgres needs the {PG_USER} user") from exc
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    path.chmod(0o700)


def port_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the server does: closed connections in TIME_WAIT must not make a restart fail.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Cluster:
    """Paths and life cycle of the throwaway cluster rooted at ``root`` (on the lab mount)."""

    def __init__(self, root: Path, port: int, bin_dir: Path | None = None) -> None:
        self.root = Path(root)
        self.port = port
        self.bin_dir = bin_dir
        self.data = self.root / "data"
        self.socket_dir = self.root / "run"
        self.log = self.root / "postgres.log"

    def _bin(self, tool: str) -> str:
        if self.bin_dir is None:
            self.bin_dir = pg_bin()
        return str(self.bin_dir / tool)

    def init(self, password_file: Path, extra: dict[str, str] | None = None) -> None:
        """``initdb`` as ``postgres``, the lab settings (and ``extra``) appended, the password
        written to ``password_file`` (mode 0600, owned by root)."""
        try:
            entry = pwd.getpwnam(PG_USER)
        except KeyError as exc:
            raise ConfigError(f"dbsim lab --postgres needs the {PG_USER} user") from exc
        for directory in (self.root, self.socket_dir):
            make_server_dir(directory, entry)
        # postgres must be able to reach its directory through every parent (a mount point
        # under a 0700 directory such as pytest's tmp_path is not).
        try:
            run(as_user(PG_USER, ["test", "-w", str(self.root)]), "check access")
        except TargetError as exc:
            raise ConfigError(
                f"user {PG_USER} cannot write {self.root}: choose a mount point whose parent "
                "directories others may search (chmod o+x)"
            ) from exc
        password = secrets.token_urlsafe(24)
        password_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password + "\n")
        # initdb reads the password as postgres: a copy it can read, removed right after.
        pwfile = self.root / ".pwfile"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password + "\n")
        os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        try:
            argv = [
                self._bin("initdb"),
                *("-D", str(self.data), "-U", PG_USER, "-E", "UTF8", "--locale=C"),
                *("--auth-local=peer", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"),
                "--no-instructions",
            ]
            run(as_user(PG_USER, argv), "initdb", cwd=str(self.root))
        finally:
            pwfile.unlink(missing_ok=True)
        settings = {
            **SETTINGS,
            "port": str(self.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
            **(extra or {}),
        }
        self.append_settings(settings)

    def append_settings(self, settings: dict[str, str]) -> None:
        """Append ``settings`` to postgresql.conf (read at the next start)."""
        # Appending keeps the file's owner (postgres); the last setting in the file wins.
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as f:
            f.write("\n# dbsim lab\n")
            f.writelines(f"{key} = {value}\n" for key, value in settings.items())

    def start(self, task_files: Sequence[Path]) -> int:
        """Start the server inside the groups; the postmaster's PID."""
        if not port_free(self.port):
            raise ConfigError(f"lab postgres: port 127.0.0.1:{self.port} is in use (--pg-port)")
        argv = [self._bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log)]
        argv += ["-w", "-t", str(START_TIMEOUT_S), "start"]
        argv = as_user(PG_USER, argv)
        if os.geteuid() == 0:  # the postmaster and every backend it forks run ahead
            argv = ["nice", "-n", str(DATABASE_NICE), *argv]
        try:
            run(launcher(task_files, argv), "start postgres", cwd=str(self.root))
        except TargetError as exc:
            raise TargetError(f"{exc} (see {self.log})") from exc
        pid = self.pid()
        if pid is None:
            raise TargetError(f"lab: postgres started but wrote no postmaster.pid (see {self.log})")
        if os.geteuid() == 0:  # pg_ctl starts the postmaster in a session of its own
            run_session_ahead(pid, DATABASE_NICE)
        return pid

    def pid(self) -> int | None:
        """The running postmaster's PID (from ``postmaster.pid``), or None. The process must
        be a postgres whose working directory is this data directory (the postmaster changes
        into it): a PID taken since by another server, the system's own cluster included,
        is not this cluster's and is never signalled."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if _runs_in(pid, self.data) else None

    def backends(self) -> list[int]:
        """PIDs of the postmaster's children (checkpointer, walwriter, client backends …)."""
        parent = self.pid()
        if parent is None:
            return []
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                # The command name may hold spaces and parentheses: split after the last ")".
                ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
                if ppid == parent:
                    children.append(int(stat.parent.name))
        return sorted(children)

    def stop(self) -> None:
        """``pg_ctl stop -m fast``; if that fails, an immediate shutdown (SIGQUIT), then
        SIGKILL, so the file system can always be unmounted."""
        pid = self.pid()
        if pid is None:
            return
        argv = [self._bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]
        with contextlib.suppress(TargetError):
            run(as_user(PG_USER, argv), "stop postgres", cwd=str(self.root))
        for sig in (signal.SIGQUIT, signal.SIGKILL):
            if _wait_gone(pid, KILL_WAIT_S):
                return
            if _runs_in(pid, self.data):  # still this cluster's, not a PID taken since
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        if not _wait_gone(pid, KILL_WAIT_S):
            raise TargetError(f"lab: postgres (pid {pid}) did not stop")


def _is_postgres(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() in ("postgres", "postmaster")
    except OSError:
        return False


def _runs_in(pid: int, data: Path) -> bool:
    """Whether ``pid`` is a postgres working in ``data``: that cluster's postmaster."""
    if not _is_postgres(pid):
        return False
    try:
        cwd, own = os.stat(f"/proc/{pid}/cwd"), os.stat(data)
    except OSError:
        return False
    return (cwd.st_dev, cwd.st_ino) == (own.st_dev, own.st_ino)


def _wait_gone(pid: int, seconds: float) -> bool:
    # Until the process has gone, not only its working directory (released early in exit).
    deadline = time.monotonic() + seconds
    while _is_postgres(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
