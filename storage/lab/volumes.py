"""The lab's volumes: each a sparse image on a loop device with ext4, mounted, with ceilings.

A lab has one volume (``default``, mounted at the lab's mount point: what ``dbsim lab up``
without ``--volume`` builds) or several named ones, mounted at ``<mount>/<name>``; the lab's
one blkio group holds a throttle rule per volume's device, so one PostgreSQL cluster's backends
are held to a different ceiling on each. Every step is recorded in the volume's dict the moment
it is done, so teardown removes exactly what was made.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.errors import ConfigError, TargetError
from storage.lab import array, identity, limits, system

DEFAULT_VOLUME = "default"
#: The PostgreSQL tablespace directory on each volume (the volume's root holds lost+found,
#: and CREATE TABLESPACE wants an empty directory owned by the server's user).
TABLESPACE_DIR = "tablespace"
#: Names a volume cannot take: the cluster's directory sits beside the volumes' mount points.
RESERVED = ("postgres",)
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
#: ``--volume`` keys (as typed) -> ceiling names.
SPEC_KEYS = {
    "read-iops": "read_iops",
    "write-iops": "write_iops",
    "read-bps": "read_bps",
    "write-bps": "write_bps",
}
BPS_KEYS = ("read_bps", "write_bps")


@dataclass(frozen=True)
class VolumeSpec:
    """A volume asked for: its name, the ceilings named (others: unlimited on a new lab,
    unchanged on one that is up), its size (None: the lab's ``--size``) and, for a volume on
    the lab array, the QoS policy named (``max_iops``, ``max_bps``, ``service_us``; None: not
    an array volume)."""

    name: str
    ceilings: Mapping[str, int | None] = field(default_factory=dict)
    size_bytes: int | None = None
    array: Mapping[str, int | None] | None = None


def check_name(name: str) -> str:
    """``name`` if it can name a volume (a file and directory name), else ConfigError."""
    if not _NAME.match(name) or name in RESERVED:
        raise ConfigError(
            f"lab volume name {limits.shown(name)!r}: lower-case letters, digits, '-' and '_' (up to 32, "
            f"not {', '.join(RESERVED)}), e.g. --volume old:read-iops=500"
        )
    return name


def parse_volume(text: str) -> VolumeSpec:
    """``old``, ``old:read-iops=500``, ``new:read-iops=2000,write-bps=20M,size=2G``; on the
    lab array: ``lun:array=1``, ``lun:qos-iops=500,qos-bps=40M,service-us=500``. Each key at
    most once, every number within :mod:`storage.lab.limits`."""
    name, _, rest = text.partition(":")
    name = check_name(name.strip())
    ceilings: dict[str, int | None] = {}
    size: int | None = None
    policy: dict[str, int | None] | None = None
    seen: set[str] = set()
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        option = f"--volume {name}: {key}"
        if not sep or not value:
            raise ConfigError(f"--volume {name}: {limits.shown(item)!r} is not key=value")
        if key in seen:
            raise ConfigError(f"--volume {name}: {key} is given twice")
        seen.add(key)
        if key == "size":
            size = limits.size(option, _size(option, value))
        elif key in SPEC_KEYS:
            ceilings[SPEC_KEYS[key]] = _ceiling_value(option, value, SPEC_KEYS[key])
        elif key == "array":
            if value not in ("1", "yes", "on"):
                raise ConfigError(f"{option}={limits.shown(value)}: say array=1 (or leave it out)")
            policy = policy or {}
        elif key == "service-us":
            policy = policy or {}
            policy["service_us"] = limits.whole(option, value, 1, limits.MAX_SERVICE_US)
        elif key in array.ARRAY_KEYS:
            kind = "read_bps" if key == "qos-bps" else "read_iops"  # a size, or a whole number
            policy = policy or {}
            policy[array.ARRAY_KEYS[key]] = _ceiling_value(option, value, kind)
        else:
            known = ", ".join([*SPEC_KEYS, "size", "array", *array.ARRAY_KEYS])
            raise ConfigError(f"--volume {name}: unknown {limits.shown(key)!r} (known: {known})")
    return VolumeSpec(name, ceilings, size, policy)


def _size(option: str, value: str) -> int:
    try:
        return system.parse_size(value)
    except ConfigError:
        raise ConfigError(
            f"{option}={limits.shown(value)}: expected bytes or a number with K/M/G/T, e.g. 2G"
        ) from None


def _ceiling_value(option: str, value: str, kind: str) -> int | None:
    if kind in BPS_KEYS:
        number = limits.ceiling(option, kind, _size(option, value))
    else:
        number = limits.whole(option, value, 0, limits.MAX_IOPS, zero="unlimited")
    return number or None


def check_specs(specs: Sequence[VolumeSpec]) -> None:
    """Refuse the same name twice."""
    names = [spec.name for spec in specs]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"--volume {', '.join(twice)} given twice")


def new_record(
    spec: VolumeSpec,
    image: Path,
    mount_point: Path,
    size_bytes: int,
    array_at: tuple[Path, Path, str] | None = None,
) -> dict[str, Any]:
    """The state record of a volume not built yet (``size_bytes``: unless the spec says);
    ``array_at``: for an array volume, its directory, FUSE mount point and fsname."""
    record = {
        "name": spec.name,
        "size_bytes": spec.size_bytes or size_bytes,
        "image_path": str(image),  # where it goes; "image" once it exists
        "image": None,
        "loop": None,
        "dev": None,
        "mount_point": str(mount_point),
        "mount_dir_created": False,
        "mounted": False,
        "ceilings": {kind: spec.ceilings.get(kind) or None for kind in SPEC_KEYS.values()},
        "tablespace_dir": None,
        "array": None,
        "identity": {},  # what build made, as the kernel identifies it (storage.lab.identity)
    }
    if spec.array is not None and array_at is not None:
        record["array"] = array.new_record(spec.name, spec.array, *array_at)
    return record


def attached_file(record: Mapping[str, Any]) -> str | None:
    """The file the volume's loop device is attached to: its image, or the array's LUN."""
    return array.lun(record["array"]) if record.get("array") else record.get("image")


def check_new(record: dict[str, Any]) -> None:
    """Refuse a volume that would be too small, hide files or a mount, or reuse an image."""
    mount_point, image = Path(record["mount_point"]), Path(record["image_path"])
    limits.size(f"lab volume {record['name']}: size", record["size_bytes"])
    if system.mounted_source(mount_point) is not None:
        raise ConfigError(f"{mount_point} is already a mount point; choose another --mount")
    if mount_point.is_dir() and any(mount_point.iterdir()):
        raise ConfigError(f"{mount_point} is not empty; mounting there would hide its files")
    if image.exists() or image.is_symlink():
        raise ConfigError(f"{image} exists and no lab is recorded; remove it or run down")
    if record.get("array"):
        array.check_new(record["array"])


def build(record: dict[str, Any], save: Callable[[], None]) -> None:
    """Image, loop device, ext4, mount point, mount; ``save`` after each step, with the
    identity of what it made (:mod:`storage.lab.identity`), so ``down`` can tell it from
    whatever later takes its name."""
    ids = record.setdefault("identity", {})
    image = Path(record["image_path"])
    ids["image"] = system.create_sparse(image, record["size_bytes"])
    record["image"] = str(image)
    save()
    if record.get("array"):  # the loop device goes on the array's LUN, in direct I/O
        array.start(record["array"], image, save)
        record["loop"] = system.losetup_attach(Path(array.lun(record["array"])), direct_io=True)
    else:
        record["loop"] = system.losetup_attach(image)
    record["dev"] = system.device_number(record["loop"])
    ids["loop"] = identity.loop_identity(record["loop"])
    save()
    if not _reads_image(record):
        raise TargetError(f"lab: {record['loop']} is not attached to the file the lab made")
    system.mkfs_ext4(record["loop"])
    mount_point = Path(record["mount_point"])
    if not mount_point.exists():
        mount_point.mkdir(parents=True)
        ids["mount_dir"] = identity.node_at(mount_point)
        record["mount_dir_created"] = True
        save()
    system.mount(record["loop"], mount_point)
    ids["mount"] = identity.mount_identity(os.path.realpath(mount_point))
    record["mounted"] = True
    save()
    if ids["mount"] is None or ids["mount"]["dev"] != record["dev"]:
        raise TargetError(f"lab: what is mounted at {mount_point} is not {record['loop']}")


def _reads_image(record: dict[str, Any]) -> bool:
    """Whether the loop device just attached reads the image (or the array's LUN) the lab
    made, by the device and inode the kernel reports."""
    loop, ids = record["identity"].get("loop"), record["identity"]
    if loop is None or loop["rdev"] != record["dev"]:
        return False
    if record.get("array"):  # the LUN, on the array's own mount
        fuse = record["array"].get("identity", {}).get("mount")
        return fuse is not None and loop["backing_dev"] == fuse["dev"]
    return (loop["backing_dev"], loop["backing_ino"]) == (ids["image"]["dev"], ids["image"]["ino"])


def find(
    volumes: Sequence[dict[str, Any]], name: str | None, adding: bool = False
) -> dict[str, Any]:
    """The volume called ``name``; with None, the only one (ConfigError when there are more).
    ``adding``: the error says that volumes cannot be added to a lab that is up."""
    names = [v["name"] for v in volumes]
    if name is None:
        if len(volumes) == 1:
            return volumes[0]
        raise ConfigError(
            f"the lab has volumes {', '.join(names)}: name one (--volume NAME, or `volume:` "
            "in a step's lab settings)"
        )
    for volume in volumes:
        if volume["name"] == name:
            return volume
    hint = "; volumes are made by `dbsim lab up` only: take the lab down first" if adding else ""
    raise ConfigError(f"the lab has no volume {name!r} (it has {', '.join(names)}){hint}")


def upgrade(state: dict[str, Any]) -> dict[str, Any]:
    """A version-1 state (one device, its facts at the top level) as version 2."""
    keys = ("size_bytes", "image", "loop", "dev", "mount_point", "mount_dir_created", "mounted")
    volume = {key: state.pop(key, None) for key in keys}
    volume.update(
        name=DEFAULT_VOLUME,
        image_path=volume["image"],
        ceilings=state.pop("ceilings", {}),
        tablespace_dir=None,
    )
    state.update(version=2, root=volume["mount_point"], root_dir_created=False, volumes=[volume])
    return state
