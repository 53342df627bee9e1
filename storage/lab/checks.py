"""What ``dbsim lab up`` checks before it makes anything: every value in its range, a new
lab's place free, a lab that is up asked for nothing it cannot change."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sim.errors import ConfigError
from storage.lab import limits, system, volumes
from storage.lab.pgcluster import pg_bin, port_free
from storage.lab.volumes import VolumeSpec


def ceiling(kind: str, value: int | None, label: str | None = None) -> None:
    """A ceiling in its range; the error names ``label`` (default: the ``up`` option)."""
    limits.ceiling(label or f"--{kind.replace('_', '-')}", kind, value)


def new_lab(root: Path, records: list[dict[str, Any]], named: bool, pg_port: int | None) -> None:
    """Refuse a new lab that would be too small, hide files or a mount, reuse an image, or
    start PostgreSQL (``pg_port`` given) without its binaries or on a port in use. With
    named volumes, ``root`` holds their mount points and must be empty."""
    if named:
        if system.mounted_source(root) is not None:
            raise ConfigError(f"{root} is already a mount point; choose another --mount")
        if root.is_dir() and any(root.iterdir()):
            raise ConfigError(f"{root} is not empty; the volumes are mounted inside it")
    for record in records:
        volumes.check_new(record)
    if pg_port is not None:
        pg_bin()
        if not port_free(pg_port):
            raise ConfigError(f"lab postgres: 127.0.0.1:{pg_port} is in use (--pg-port)")


def given_values(
    given: dict[str, int | None],
    specs: Sequence[VolumeSpec],
    size_bytes: int | None,
    mount_point: Path | None,
    memory_limit_bytes: int | None,
) -> None:
    """Every value in its range (:mod:`storage.lab.limits`), before anything is looked at."""
    for key, value in given.items():
        ceiling(key, value)
    volumes.check_specs(specs)
    for spec in specs:
        for key, value in spec.ceilings.items():
            limits.ceiling(f"--volume {spec.name}: {key.replace('_', '-')}", key, value)
        if spec.size_bytes is not None:
            limits.size(f"--volume {spec.name}: size", spec.size_bytes)
    if size_bytes is not None:
        limits.size("--size", size_bytes)
    if memory_limit_bytes is not None:
        limits.memory(memory_limit_bytes)
    if mount_point is not None and not Path(mount_point).is_absolute():
        raise ConfigError(f"--mount {mount_point}: give an absolute path (e.g. /mnt/dbsim-lab)")
    if specs and any(value is not None for value in given.values()):
        raise ConfigError(
            "with --volume, give each volume's ceilings in it (--volume old:read-iops=500), "
            "not --read-iops/--write-iops/--read-bps/--write-bps beside it"
        )


def same_place(
    state: dict[str, Any],
    size_bytes: int | None,
    mount_point: Path | None,
    specs: Sequence[VolumeSpec],
) -> None:
    """A lab that is up keeps its place and sizes: refuse another rather than ignore it."""
    how = "take the lab down first (dbsim lab down)"
    if mount_point is not None and os.path.abspath(mount_point) != state["root"]:
        raise ConfigError(f"--mount {mount_point}: the lab is up at {state['root']}; {how}")
    size = state.get("size_bytes", state["volumes"][0]["size_bytes"])
    if size_bytes is not None and size_bytes != size:
        raise ConfigError(f"--size {size_bytes:,}: the lab is up with {size:,} bytes; {how}")
    for spec in specs:
        record = volumes.find(state["volumes"], spec.name, adding=True)
        if spec.size_bytes is not None and spec.size_bytes != record["size_bytes"]:
            raise ConfigError(
                f"--volume {spec.name}: size {spec.size_bytes:,}: the volume has "
                f"{record['size_bytes']:,} bytes; {how}"
            )


def cache_cap(cap_bytes: int | None, postgres: bool, memory_limit_bytes: int | None) -> None:
    """``--pg-cache-cap``: with ``--postgres``, instead of ``--memory-limit`` (it sets the
    memory group's limit itself), from the lab's least memory to the host's."""
    if cap_bytes is None:
        return
    if not postgres:
        raise ConfigError("--pg-cache-cap caps the lab's PostgreSQL: give --postgres too")
    if memory_limit_bytes is not None:
        raise ConfigError(
            "--pg-cache-cap sets the lab's memory limit itself: give it or --memory-limit"
        )
    limits.memory(cap_bytes, option="--pg-cache-cap")
