"""The lab: a loop-mounted ext4 file system whose I/O is capped by cgroup v1 ``blkio`` throttles.

Everything the lab creates is written to a JSON state file the moment it exists, so ``down``
removes exactly that (and nothing that merely has the same name), even after a crash halfway
through ``up``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from sim.errors import ConfigError, SimError, TargetError
from storage.lab import array, cgroups, checks, identity, pagecache, system, volumes
from storage.lab.limits import DEFAULT_MOUNT, DEFAULT_PG_PORT
from storage.lab.outcome import Outcome
from storage.lab.pgcluster import PG_USER, Cluster, cache_cap_settings, launcher, make_server_dir
from storage.lab.status import describe
from storage.lab.teardown import take_down
from storage.lab.volumes import DEFAULT_VOLUME, TABLESPACE_DIR, VolumeSpec

DEFAULT_STATE_ROOT = Path("/run/dbsim-lab")
DEFAULT_IMAGE_DIR = Path("/var/tmp/dbsim-lab")
DEFAULT_NAME = "dbsim-lab"
DEFAULT_SIZE = 1 << 30
DEFAULT_MEMORY_LIMIT = 256 << 20
CEILING_KEYS = ("read_iops", "write_iops", "read_bps", "write_bps")
STATE_VERSION = 2


class Keep(Enum):
    """Marker for "leave this ceiling as it is" in :meth:`Lab.set_ceiling`."""

    KEEP = "keep"


KEEP = Keep.KEEP
Ceiling = int | None | Keep


def require_root() -> None:
    """:class:`ConfigError` unless running as root."""
    if os.geteuid() != 0:
        raise ConfigError(
            "dbsim lab needs root: it attaches a loop device, mounts a file system and writes "
            "cgroup files; run it with sudo"
        )


class Lab:
    """One lab, described by the state file ``<state_root>/state.json``.

    ``name`` names the cgroups (and the image file, ``<image_dir>/<name>.img``); tests use
    their own ``state_root``, ``image_dir`` and ``name`` so they never meet a user's lab.
    """

    def __init__(
        self,
        state_root: Path = DEFAULT_STATE_ROOT,
        image_dir: Path = DEFAULT_IMAGE_DIR,
        name: str = DEFAULT_NAME,
    ) -> None:
        self.state_root = Path(state_root)
        self.image_dir = Path(image_dir)
        self.name = name
        self.state_file = self.state_root / "state.json"
        self.password_file = self.state_root / "pg-password"

    # ------------------------------------------------------------------ state file

    def load_state(self) -> dict[str, Any] | None:
        """The recorded state, or None when no lab is recorded."""
        try:
            state = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"lab state {self.state_file} is unreadable: {exc}") from exc
        if isinstance(state, dict) and state.get("version") == 1:
            return volumes.upgrade(state)  # a lab brought up before volumes existed
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ConfigError(
                f"lab state {self.state_file}: not a dbsim lab state (version {STATE_VERSION})"
            )
        return state

    def _save(self, state: dict[str, Any]) -> None:
        # Written to a temporary name and renamed, so a crash never leaves half a file.
        self.state_root.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.chmod(0o644)
        os.replace(tmp, self.state_file)

    @staticmethod
    def check_environment() -> None:
        """Refuse clearly: not root, cgroup v1 blkio/memory missing, or tools missing."""
        require_root()
        cgroups.lab_groups(DEFAULT_NAME)
        missing = system.missing_tools()
        if missing:
            raise ConfigError(f"dbsim lab needs {', '.join(missing)} (util-linux, e2fsprogs)")

    # ------------------------------------------------------------------ up

    def up(
        self,
        size_bytes: int | None,
        mount_point: Path | None,
        read_iops: int | None = None,
        write_iops: int | None = None,
        read_bps: int | None = None,
        write_bps: int | None = None,
        memory_limit_bytes: int | None = None,
        postgres: bool = False,
        pg_port: int = DEFAULT_PG_PORT,
        volumes: Sequence[VolumeSpec] = (),
        pg_cache_cap_bytes: int | None = None,
    ) -> dict[str, Any]:
        """Create the lab (or, when it is up, apply the ceilings given and start PostgreSQL if
        asked) and return :meth:`status`. Ceilings of ``None`` or 0 are unlimited; on an
        existing lab ``None`` leaves a ceiling unchanged. Without ``volumes`` the lab has one
        volume mounted at ``mount_point`` with the ceilings given; with them, one per spec,
        mounted at ``mount_point/<name>``. ``size_bytes`` and ``mount_point`` None: the
        defaults for a new lab, the lab's own for one that is up (a lab that is up refuses
        another size or place). ``pg_cache_cap_bytes`` (with ``postgres``): the memory limit
        and a quarter of it as shared_buffers, so the server's caches together hold at most
        that much (a running cluster is restarted with them). A failure undoes what was made."""
        self.check_environment()
        given = dict(zip(CEILING_KEYS, (read_iops, write_iops, read_bps, write_bps), strict=True))
        specs = list(volumes)
        checks.given_values(given, specs, size_bytes, mount_point, memory_limit_bytes)
        checks.cache_cap(pg_cache_cap_bytes, postgres, memory_limit_bytes)
        memory_limit_bytes = pg_cache_cap_bytes or memory_limit_bytes
        state = self.load_state()
        if state is not None:
            checks.same_place(state, size_bytes, mount_point, specs)
            if pg_cache_cap_bytes:  # stopped first: the limit may be under what it holds
                state["pg_cache_cap_bytes"] = pg_cache_cap_bytes
                self._stop_postgres(state)
            return self._up_again(state, given, specs, memory_limit_bytes, postgres, pg_port)
        root = Path(os.path.abspath(mount_point or DEFAULT_MOUNT))
        size_bytes = size_bytes or DEFAULT_SIZE
        records = self._new_records(root, size_bytes, given, specs)
        # Checked before anything is built, so a refusal leaves nothing to undo.
        checks.new_lab(root, records, bool(specs), pg_port if postgres else None)
        groups = cgroups.lab_groups(self.name)
        state = self._new_state(root, size_bytes, records, memory_limit_bytes, pg_cache_cap_bytes)
        try:
            self._build(state, root, groups, named=bool(specs))
            if postgres:
                self._start_postgres(state, pg_port)
            else:
                pagecache.drop_lab_caches(state)
        except (SimError, OSError) as exc:
            problems = self.down()  # what is found not to be the lab's is left, not undone
            note = "; undone" if not problems else "; could not undo: " + "; ".join(problems)
            kind = ConfigError if isinstance(exc, ConfigError) else TargetError
            raise kind(f"{exc}{note}") from exc
        return self.status()

    def _new_state(
        self,
        root: Path,
        size_bytes: int,
        records: list[dict[str, Any]],
        memory_limit_bytes: int | None,
        pg_cache_cap_bytes: int | None,
    ) -> dict[str, Any]:
        """The record of a lab about to be built (saved as each part is made)."""
        return {
            "version": STATE_VERSION,
            "name": self.name,
            "created_at": time.time(),
            "root": str(root),
            "root_dir_created": False,
            "size_bytes": size_bytes,
            "identity": {"cgroups": {}},
            "volumes": records,
            "cgroups": {},
            "memory_limit_bytes": memory_limit_bytes or DEFAULT_MEMORY_LIMIT,
            "postgres": None,
            "pg_cache_cap_bytes": pg_cache_cap_bytes,
        }

    def _new_records(
        self,
        root: Path,
        size_bytes: int,
        given: dict[str, int | None],
        specs: list[VolumeSpec],
    ) -> list[dict[str, Any]]:
        if not specs:  # one volume at the mount point itself, as before volumes existed
            spec = VolumeSpec(DEFAULT_VOLUME, given)
            image = self.image_dir / f"{self.name}.img"
            return [volumes.new_record(spec, image, root, size_bytes)]
        return [
            volumes.new_record(
                spec,
                self.image_dir / f"{self.name}-{spec.name}.img",
                root / spec.name,
                size_bytes,
                (
                    self.state_root / f"array-{spec.name}",
                    self.image_dir / f"{self.name}-{spec.name}.array",
                    f"{self.name}-{spec.name}-array",
                ),
            )
            for spec in specs
        ]

    def _build(
        self, state: dict[str, Any], root: Path, groups: dict[str, Path], named: bool
    ) -> None:
        ids = state["identity"]
        if named and not root.exists():
            root.mkdir(parents=True)
            ids["root_dir"] = identity.node_at(root)
            state["root_dir_created"] = True
            self._save(state)
        if not self.image_dir.exists():
            self.image_dir.mkdir(parents=True)
            ids["image_dir"] = {**identity.node_at(self.image_dir), "path": str(self.image_dir)}
            self._save(state)
        for record in state["volumes"]:
            volumes.build(record, lambda: self._save(state))
        for controller, path in groups.items():
            cgroups.create(path)
            ids["cgroups"][controller] = identity.node_at(path)
            state["cgroups"][controller] = str(path)
            self._save(state)
        memory = Path(state["cgroups"]["memory"])
        cgroups.write(memory / "memory.limit_in_bytes", str(state["memory_limit_bytes"]))
        for record in state["volumes"]:
            self._apply(state, record, record["ceilings"])

    def _up_again(
        self,
        state: dict[str, Any],
        given: dict[str, int | None],
        specs: list[VolumeSpec],
        memory_limit_bytes: int | None,
        postgres: bool,
        pg_port: int,
    ) -> dict[str, Any]:
        current = self.status()
        if not current["up"]:
            raise ConfigError(
                f"a lab is recorded in {self.state_file} but is incomplete "
                f"({'; '.join(current['problems'])}); run `dbsim lab down` first"
            )
        for spec in specs:  # every name checked before any ceiling changes
            volumes.find(state["volumes"], spec.name, adding=True)
        changes: list[tuple[str | None, dict[str, int | None]]] = []
        if any(v is not None for v in given.values()):
            changes.append((None, given))
        changes += [(spec.name, dict(spec.ceilings)) for spec in specs]
        for spec in specs:
            if spec.array:
                self.set_policy(spec.name, spec.array)
        for name, ceilings in changes:
            keep: dict[str, Ceiling] = {k: KEEP if v is None else v for k, v in ceilings.items()}
            self.set_ceiling(*(keep.get(key, KEEP) for key in CEILING_KEYS), volume=name)
        state = self._require_up()  # as set_ceiling saved it
        if memory_limit_bytes:
            memory = Path(state["cgroups"]["memory"])
            cgroups.write(memory / "memory.limit_in_bytes", str(memory_limit_bytes))
            state["memory_limit_bytes"] = memory_limit_bytes
            self._save(state)
        pg = state.get("postgres")
        if postgres and not (pg and Cluster(Path(pg["root"]), pg["port"]).pid()):
            self._start_postgres(state, pg["port"] if pg else pg_port)
        result = self.status()
        result["already_up"] = True
        return result

    def _start_postgres(self, state: dict[str, Any], port: int) -> None:
        cluster = Cluster(Path(state["root"]) / "postgres", port)
        if state.get("postgres") is None:
            state["postgres"] = {
                "root": str(cluster.root),
                "port": port,
                "data_dir": str(cluster.data),
                "socket_dir": str(cluster.socket_dir),
                "log": str(cluster.log),
                "password_file": str(self.password_file),
                "user": PG_USER,
                # With named volumes the cluster's directory is on the host's file system
                # (in the lab's empty root), so down removes it; else it goes with the volume.
                "remove_root": not _on_a_volume(state, cluster.root),
            }
            self._save(state)
            if state["postgres"]["remove_root"]:
                _make_cluster_dir(state, cluster.root)
                self._save(state)
            cluster.init(self.password_file, cache_cap_settings(state.get("pg_cache_cap_bytes")))
        elif state.get("pg_cache_cap_bytes") and not cluster.pid():
            cluster.append_settings(cache_cap_settings(state["pg_cache_cap_bytes"]))
        for record in state["volumes"]:
            if record.get("tablespace_dir") is None:
                path = Path(record["mount_point"]) / TABLESPACE_DIR
                make_server_dir(path)
                record["tablespace_dir"] = str(path)
                self._save(state)
        # The lab's files dropped from the cache now, so what the server reads from here on
        # comes from the lab's devices and is charged to the lab's groups.
        pagecache.drop_lab_caches(state)
        cluster.start(self._task_files(state))

    def _stop_postgres(self, state: dict[str, Any]) -> None:
        pg = state.get("postgres")
        if pg:
            Cluster(Path(pg["root"]), pg["port"]).stop()
        self._save(state)

    # ------------------------------------------------------------------ run-time control

    def _require_up(self) -> dict[str, Any]:
        require_root()
        state = self.load_state()
        if state is None or len(state.get("cgroups", {})) < len(cgroups.CONTROLLERS):
            raise ConfigError(f"no lab is up ({self.state_file}); run `dbsim lab up` first")
        return state

    def _apply(
        self, state: dict[str, Any], record: dict[str, Any], ceilings: dict[str, int | None]
    ) -> None:
        blkio = Path(state["cgroups"]["blkio"])
        for kind, value in ceilings.items():
            cgroups.set_throttle(blkio, kind, record["dev"], value)

    def set_ceiling(
        self,
        read_iops: Ceiling = KEEP,
        write_iops: Ceiling = KEEP,
        read_bps: Ceiling = KEEP,
        write_bps: Ceiling = KEEP,
        *,
        volume: str | None = None,
    ) -> dict[str, int | None]:
        """Change one volume's throttles now (``None`` or 0: unlimited; :data:`KEEP`:
        unchanged); ``volume`` may be None when the lab has one. The ceilings in force
        afterwards, read back from the kernel."""
        state = self._require_up()
        record = volumes.find(state["volumes"], volume)
        wanted = dict(zip(CEILING_KEYS, (read_iops, write_iops, read_bps, write_bps), strict=True))
        changes: dict[str, int | None] = {}
        for kind, value in wanted.items():
            if isinstance(value, Keep):
                continue
            checks.ceiling(kind, value, f"lab ceiling {kind}")
            changes[kind] = value or None
        self._apply(state, record, changes)
        record["ceilings"].update(changes)
        self._save(state)
        return cgroups.read_throttles(Path(state["cgroups"]["blkio"]), record["dev"])

    def set_policy(
        self, volume: str | None, changes: Mapping[str, int | None]
    ) -> dict[str, int | None]:
        """Change an array volume's QoS policy now (``max_iops``, ``max_bps``: 0 or None
        unlimited; ``service_us``); names not given stay. The policy in force afterwards."""
        state = self._require_up()
        record = volumes.find(state["volumes"], volume)
        if not record.get("array"):
            raise ConfigError(
                f"volume {record['name']} is not on the lab array: qos-iops, qos-bps and "
                "service-us apply to volumes made with --volume NAME:array=1"
            )
        policy = array.set_policy(record["array"], changes)
        self._save(state)
        return policy

    def volume_names(self) -> list[str]:
        """The recorded volumes' names (empty when no lab is recorded)."""
        state = self.load_state()
        return [v["name"] for v in state["volumes"]] if state else []

    def _task_files(self, state: dict[str, Any]) -> list[Path]:
        # Memory first: pages the process touches from the moment it is throttled are charged.
        return [Path(state["cgroups"][c]) / "cgroup.procs" for c in ("memory", "blkio")]

    def join(self, pid: int, drop_caches: bool = True) -> None:
        """Put process ``pid`` (e.g. dbsim itself for a file-tree workload) into the lab's
        groups, after dropping the lab's files from the page cache unless told not to."""
        state = self._require_up()
        if drop_caches:
            pagecache.drop_lab_caches(state)
        for procs in self._task_files(state):
            cgroups.write(procs, str(pid))

    def leave(self, pid: int) -> None:
        """Move process ``pid`` back to the groups the lab's groups were made in."""
        state = self._require_up()
        for procs in self._task_files(state):
            cgroups.write(procs.parent.parent / "cgroup.procs", str(pid))

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` wrapped by the launcher that joins the lab's groups before exec'ing."""
        return launcher(self._task_files(self._require_up()), argv)

    def sync(self) -> None:
        """Write back the dirty pages of the lab's own file systems, not the host's."""
        pagecache.sync_lab_files(self._require_up())

    def drop_caches(self) -> None:
        """Drop the lab's own files and devices from the page cache (root only): the next
        reads of them come from the lab's devices. Nobody else's cache is touched
        (:mod:`storage.lab.pagecache`)."""
        pagecache.drop_lab_caches(self._require_up())

    def cold_cache(self) -> None:
        """Start the next run from the devices: the lab's own file systems synced (not the
        host's: :mod:`storage.lab.pagecache`), then ``memory.force_empty`` empties the
        lab's own page cache (the files on its volumes), and the volumes' images are read
        through so they sit in the host's page cache (the loop driver charges them to the
        root memory group): below a ceiling a volume then answers at memory speed, whatever
        the host's disk is doing. Other users' caches are left alone."""
        state = self._require_up()
        pagecache.sync_lab_files(state)
        cgroups.write(Path(state["cgroups"]["memory"]) / "memory.force_empty", "0")
        for record in state["volumes"]:
            system.read_data_extents(Path(record["image"]))

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        """What the lab is and what the kernel says about it now; ``up`` is true when the
        device is attached, mounted and both groups exist; ``problems`` lists mismatches."""
        state = self.load_state()
        if state is None:
            return {"up": False, "state_file": str(self.state_file), "problems": []}
        return describe(state, self.state_file)

    # ------------------------------------------------------------------ down

    def down(self, warnings: list[str] | None = None) -> list[str]:
        """Undo everything the state records, newest first, each step only on the lab's own
        object (:mod:`storage.lab.teardown`); each step is tried whatever happened before
        it. Returns what of the lab's could not be undone (empty: all gone); what was found
        in the place of the lab's objects and left alone is appended to ``warnings``."""
        require_root()
        state = self.load_state()
        if state is None:
            return []
        outcome = Outcome()
        take_down(state, self.password_file, outcome)
        if warnings is not None:
            warnings.extend(outcome.warnings)
        if outcome.problems:
            state["down_problems"] = outcome.problems
            self._save(state)
        else:
            self.state_file.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.state_root.rmdir()  # only when empty
        return outcome.problems


def _on_a_volume(state: dict[str, Any], path: Path) -> bool:
    return any(
        path == Path(v["mount_point"]) or Path(v["mount_point"]) in path.parents
        for v in state["volumes"]
    )


def _make_cluster_dir(state: dict[str, Any], root: Path) -> None:
    """The cluster's directory on the host (in the lab's root), made now and recorded, so
    ``down`` removes that one and never a directory someone put there since."""
    try:
        root.mkdir()
    except FileExistsError as exc:
        raise ConfigError(f"{root} exists and the lab did not make it; remove it first") from exc
    state["postgres"]["root_id"] = identity.node_at(root)
