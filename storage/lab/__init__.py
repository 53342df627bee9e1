"""The storage lab: a real block device with a known IOPS ceiling, root only.

A sparse file on a loop device carries an ext4 file system; the processes that do the I/O
(dbsim itself for file trees, or a throwaway PostgreSQL cluster whose data directory is on the
device) run in a cgroup v1 ``blkio`` group whose ``blkio.throttle.*_device`` rules cap the loop
device's IOPS and bandwidth, and in a ``memory`` group with a small limit so the page cache
cannot hide the ceiling. The ceilings can be changed while a run is going (see
:func:`apply_step_ceiling`). See docs/lab.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sim.errors import ConfigError

if TYPE_CHECKING:
    from storage.lab.array import POLICY_KEYS
    from storage.lab.lifecycle import (
        CEILING_KEYS,
        DEFAULT_IMAGE_DIR,
        DEFAULT_MEMORY_LIMIT,
        DEFAULT_NAME,
        DEFAULT_PG_PORT,
        DEFAULT_STATE_ROOT,
        KEEP,
        Ceiling,
        Keep,
        Lab,
        require_root,
    )
    from storage.lab.volumes import DEFAULT_VOLUME, VolumeSpec, parse_volume

#: The package's names -> the module defining them, imported at the first use of one (PEP 562):
#: importing a light submodule (``storage.lab.limits``, for the ``lab`` command's options, which
#: ``dbsim --help`` registers) then does not import the lab's machinery (~0.03 CPU-s).
_LAZY = {
    "POLICY_KEYS": "storage.lab.array",
    **dict.fromkeys(
        (
            "CEILING_KEYS",
            "DEFAULT_IMAGE_DIR",
            "DEFAULT_MEMORY_LIMIT",
            "DEFAULT_NAME",
            "DEFAULT_PG_PORT",
            "DEFAULT_STATE_ROOT",
            "KEEP",
            "Ceiling",
            "Keep",
            "Lab",
            "require_root",
        ),
        "storage.lab.lifecycle",
    ),
    **dict.fromkeys(("DEFAULT_VOLUME", "VolumeSpec", "parse_volume"), "storage.lab.volumes"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:  # a submodule not imported yet (``from storage.lab import system``) too
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups (and a test's replacement of Lab) are plain
    return value


__all__ = [
    "CEILING_KEYS",
    "DEFAULT_IMAGE_DIR",
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_NAME",
    "DEFAULT_PG_PORT",
    "DEFAULT_STATE_ROOT",
    "DEFAULT_VOLUME",
    "KEEP",
    "POLICY_KEYS",
    "Ceiling",
    "Keep",
    "Lab",
    "VolumeSpec",
    "apply_step_ceiling",
    "parse_volume",
    "require_root",
]


def apply_step_ceiling(lab: Lab, step_settings: Mapping[str, Any] | None) -> dict[str, int | None]:
    """Apply one scenario step's ``lab:`` settings at a stage boundary.

    ``step_settings`` maps ceiling names (``read_iops``, ``write_iops``, ``read_bps``,
    ``write_bps``) to an integer (0 or ``None``: unlimited); names not given keep their value,
    so a step that says nothing about the lab (``None`` or ``{}``) changes nothing. ``volume``
    names the volume (needed when the lab has several). ``qos_iops``, ``qos_bps`` and
    ``service_us`` change an array volume's QoS policy. Returns the ceilings (and policy) in
    force afterwards (empty when nothing was applied).
    """
    from storage.lab.array import POLICY_KEYS, policy_changes  # here: see _LAZY
    from storage.lab.lifecycle import CEILING_KEYS, KEEP

    if not step_settings:
        return {}
    step_settings = dict(step_settings)
    volume = step_settings.pop("volume", None)
    if volume is not None and not isinstance(volume, str):
        raise ConfigError(f"lab step settings: volume={volume!r} is not a volume name")
    unknown = sorted(set(step_settings) - set(CEILING_KEYS) - set(POLICY_KEYS))
    if unknown:
        known = ", ".join([*CEILING_KEYS, *POLICY_KEYS])
        raise ConfigError(f"lab step settings: unknown {', '.join(unknown)} (known: {known})")
    policy = {
        key: _whole(key, step_settings.pop(key)) for key in POLICY_KEYS if key in step_settings
    }
    applied: dict[str, int | None] = {}
    if policy:  # the array's QoS policy: max_iops, max_bps, service_us in force afterwards
        applied = dict(lab.set_policy(volume, policy_changes(policy)))
        if not step_settings:
            return applied
    values: dict[str, Ceiling] = {
        key: _whole(key, step_settings[key]) if key in step_settings else KEEP
        for key in CEILING_KEYS
    }
    return {**applied, **lab.set_ceiling(*(values[key] for key in CEILING_KEYS), volume=volume)}


def _whole(key: str, value: Any) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"lab step settings: {key}={value!r} is not a whole number")
    return value
