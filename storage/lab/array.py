"""The lab's array volumes: the FUSE array process (:mod:`storage.lab.arrayfs`) under a loop
device, started, described, re-policied and stopped from the volume's state record.

An array volume's record has an ``array`` dict: the directory holding the policy, counters,
log and pid file (``dir``), the FUSE mount point (``mount``) whose ``lun`` file the loop
device is attached to, the file-system name it is mounted under (``fsname``: a mount of that
name at that place is the lab's, nothing else is), the process's ``pid`` and the policy.
Every step is recorded the moment it is done, so :func:`stop` removes only what was made,
also after the array process was killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sim.errors import ConfigError, TargetError
from storage.lab import identity, ontap_rest, system
from storage.lab.outcome import Outcome
from storage.lab.qos import LUN, POLICY_FILE, Policy, read_counters, read_policy, write_json

#: ``--volume`` keys (as typed) -> policy names; any of them makes the volume an array.
ARRAY_KEYS = {"qos-iops": "max_iops", "qos-bps": "max_bps", "service-us": "service_us"}
#: The same as step settings / :meth:`Lab.set_policy` keywords.
POLICY_KEYS = ("qos_iops", "qos_bps", "service_us")
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0
PID_FILE = "pid"
LOG_FILE = "array.log"


def new_record(
    volume: str, policy: Mapping[str, int | None], directory: Path, mount: Path, fsname: str
) -> dict[str, Any]:
    """The array part of a volume's record, before anything is made."""
    return {
        "volume": volume,
        "dir": str(directory),
        "dir_created": False,
        "mount": str(mount),
        "mount_dir_created": False,
        "fsname": fsname,
        "pid": None,
        "policy": Policy.from_dict(dict(policy)).as_dict(),
        "ontap": None,
    }


def lun(record: Mapping[str, Any]) -> str:
    """The file the loop device is attached to."""
    return str(Path(record["mount"]) / LUN)


def check_new(record: Mapping[str, Any]) -> None:
    """Refuse an array whose directories exist already (another lab's, or the user's)."""
    for key in ("dir", "mount"):
        path = Path(record[key])
        if system.mounted_source(path) is not None or path.exists():
            raise ConfigError(f"{path} exists and no lab is recorded; remove it or run down")
    if system.missing_tools(("fusermount3",)) or not Path("/dev/fuse").exists():
        raise ConfigError(
            "a lab array needs FUSE: /dev/fuse and fusermount3 (apt-get install fuse3)"
        )
    try:
        import mfusepy  # noqa: F401  (loads libfuse: a missing library is told here, not later)
    except (ImportError, OSError) as exc:
        raise ConfigError(
            f"a lab array needs mfusepy and libfuse3 (pip install mfusepy): {exc}"
        ) from exc


def start(record: dict[str, Any], image: Path, save: Callable[[], None]) -> None:
    """Make the directories, write the policy and start the array process on ``image``;
    returns once its file system is mounted."""
    directory, mount = Path(record["dir"]), Path(record["mount"])
    ids = record.setdefault("identity", {})
    directory.mkdir(parents=True)
    ids["dir"] = identity.node_at(directory)
    record["dir_created"] = True
    save()
    mount.mkdir(parents=True)
    ids["mount_dir"] = identity.node_at(mount)
    record["mount_dir_created"] = True
    save()
    write_json(directory / POLICY_FILE, record["policy"])
    ontap_rest.make_credentials(directory)
    argv = [sys.executable, "-m", "storage.lab.arrayfs", "--backing", str(image)]
    argv += ["--dir", str(directory), "--mount", str(mount), "--fsname", record["fsname"]]
    argv += ["--volume", record.get("volume", "lun")]
    argv += ["--pidfile", str(directory / PID_FILE)]
    with open(directory / LOG_FILE, "ab") as log:
        # The process detaches itself (forks, new session) and writes its pid file, so it is
        # no child of ours: nobody's zombie when it dies.
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, timeout=30, check=False
        )
    if done.returncode != 0:
        raise TargetError(f"lab: array process did not start: {_log_tail(directory)}")
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        pid = _read_pid(directory)
        if pid and record["pid"] is None:
            record["pid"] = pid
            save()
        if mounted(record) and (endpoint := _read_endpoint(directory)):
            ids["mount"] = identity.mount_identity(os.path.realpath(mount))
            record["ontap"] = endpoint
            save()
            return
        if pid and not running(record):
            break
        time.sleep(0.05)
    raise TargetError(f"lab: array file system not mounted at {mount}: {_log_tail(directory)}")


def _read_endpoint(directory: Path) -> dict[str, Any] | None:
    """The array's ONTAP REST endpoint, once it listens: what a collector needs to reach it."""
    try:
        port = int(json.loads((directory / ontap_rest.ENDPOINT_FILE).read_text())["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {
        "cluster": f"https://127.0.0.1:{port}",
        "port": port,
        "user": ontap_rest.USER,
        "password_file": str(directory / ontap_rest.PASSWORD_FILE),
        "ca_file": str(directory / ontap_rest.CERT_FILE),
        "svm": ontap_rest.SVM,
    }


def _read_pid(directory: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int((directory / PID_FILE).read_text())
    return None


def _log_tail(directory: Path) -> str:
    with contextlib.suppress(OSError):
        lines = (directory / LOG_FILE).read_text().strip().splitlines()
        if lines:
            return lines[-1]
    return "no message"


def mounted(record: Mapping[str, Any]) -> bool:
    """Whether the lab's array file system is the mount on top at its place: the recorded
    mount (ID, device, 64-bit ID) once it is recorded, until then one of its fsname."""
    recorded = record.get("identity", {}).get("mount")
    if recorded is not None:
        return identity.mount_differs(recorded) is None
    return system.mounted_source(Path(record["mount"])) == record["fsname"]


def running(record: Mapping[str, Any]) -> bool:
    """Whether the recorded pid is alive and is this array's process (its command line
    names the array's mount point), not a process that took the number since."""
    pid = record.get("pid")
    if not pid:
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and b"storage.lab.arrayfs" in argv and record["mount"].encode() in argv


def stop(record: dict[str, Any], outcome: Outcome) -> None:
    """Stop the process (TERM, then KILL), unmount its file system if it is still the one the
    lab mounted, and remove the directories made if they are still the lab's; what fails is
    a problem of ``outcome``, what is not the lab's any more a warning."""
    outcome.attempt("stop array process", lambda: _stop_process(record))
    ids = record.get("identity", {})
    mount = Path(record["mount"])
    recorded = ids.get("mount")
    why = identity.mount_differs(recorded) if recorded else None
    if recorded and why not in (None, identity.GONE):
        outcome.warn(f"array of volume {record.get('volume')}: {mount}: {why}: left mounted")
    elif mounted(record):
        outcome.attempt("unmount array", lambda: identity.umount(os.path.realpath(mount)))
    if identity.top_mount(os.path.realpath(mount)) is not None:
        return
    for key, kind, path in (("mount_dir", "dir", mount), ("dir", "tree", Path(record["dir"]))):
        if not record.get(f"{key}_created") or (kind == "tree" and running(record)):
            continue
        try:
            why = _remove(path, ids.get(key), kind)
        except OSError as exc:
            why = exc.strerror
        if why:
            outcome.warn(f"{path} is not the array directory the lab made ({why}): left alone")


def _remove(path: Path, recorded: Mapping[str, Any] | None, kind: str) -> str | None:
    if recorded is None:  # a state from before identities: the directory there now
        if not path.is_dir() or path.is_symlink():
            return None
        recorded = identity.node_at(path)
    return identity.remove_own(path, recorded, kind)


def _stop_process(record: dict[str, Any]) -> None:
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, STOP_TIMEOUT_S)):
        if not running(record):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(record["pid"], sig)
        deadline = time.monotonic() + wait
        while running(record) and time.monotonic() < deadline:
            time.sleep(0.05)
    if running(record):
        raise TargetError(f"lab: array process {record['pid']} did not stop")


def set_policy(record: dict[str, Any], changes: Mapping[str, int | None]) -> dict[str, int | None]:
    """Change the policy (``max_iops``, ``max_bps``: None or 0 unlimited; ``service_us``);
    the array process reads it within a quarter of a second. The policy in force."""
    policy = {**record["policy"], **changes}
    record["policy"] = Policy.from_dict(policy).as_dict()
    write_json(Path(record["dir"]) / POLICY_FILE, record["policy"])
    return dict(record["policy"])


def describe(record: Mapping[str, Any], problems: list[str], volume: str) -> dict[str, Any]:
    """The array layer now: process, mount, the policy on file, the last counters."""
    alive, is_mounted = running(record), mounted(record)
    if not alive:
        problems.append(f"volume {volume}: array process {record.get('pid')} is not running")
    if not is_mounted:
        problems.append(f"volume {volume}: array file system is not mounted at {record['mount']}")
    return {
        "pid": record.get("pid"),
        "running": alive,
        "mount": record["mount"],
        "mounted": is_mounted,
        "lun": lun(record),
        "dir": record["dir"],
        "policy": read_policy(Path(record["dir"])).as_dict(),
        "counters": read_counters(Path(record["dir"])),
        "ontap": record.get("ontap"),
    }


def text_lines(array: Mapping[str, Any]) -> list[str]:
    """The array layer for people."""
    policy = array["policy"]
    iops = f"{policy['max_iops']} IOPS" if policy["max_iops"] else "IOPS unlimited"
    bps = (
        f"{system.format_size(policy['max_bps'])}/s" if policy["max_bps"] else "bandwidth unlimited"
    )
    state = "running" if array["running"] else "NOT running"
    lines = [
        f"array       FUSE process {array['pid']} {state}, {array['lun']}"
        + ("" if array["mounted"] else " (NOT mounted)"),
        f"qos policy  {iops}, {bps}, base service time {policy['service_us']} µs",
    ]
    ontap = array.get("ontap")
    if ontap:
        lines.append(
            f"ontap rest  {ontap['cluster']} (user {ontap['user']}, password_file "
            f"{ontap['password_file']}, ca_file {ontap['ca_file']}, svm {ontap['svm']})"
        )
    counters = array.get("counters") or {}
    for kind in ("read", "write"):
        c = counters.get(kind)
        if c and c["ops"]:
            lines.append(
                f"array {kind:<5} {c['ops']} ops, {system.format_size(c['bytes'])}, "
                f"mean latency {c['latency_us'] / c['ops'] / 1000:.2f} ms, mean QoS delay "
                f"{c['qos_delay_us'] / c['ops'] / 1000:.2f} ms (measured by the array, cumulative)"
            )
    return lines


def policy_changes(values: Mapping[str, int | None]) -> dict[str, int | None]:
    """Step-setting / keyword names (``qos_iops`` …) -> policy names (``max_iops`` …)."""
    names = dict(zip(POLICY_KEYS, ("max_iops", "max_bps", "service_us"), strict=True))
    return {names[key]: value for key, value in values.items()}
