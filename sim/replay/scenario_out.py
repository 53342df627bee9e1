"""``dbsim replay --write-scenario FILE``: each scale's derived workload written out, to be
reviewed, versioned and rerun (docs/capture.md, "The derived scenario").

What a scale ran is already in the replay's directory; this copies it where the user asked,
with a header saying where it came from:

- a replay on a database (``--on SCENARIO.yaml``) or of file production: the scenario ``dbsim
  run`` ran for the scale (the user's scenario with the derived parameters and load), which
  ``dbsim run FILE`` reruns and ``dbsim validate FILE`` checks;
- a replay of block-level production: the fio job the scale ran, without the IOPS logs the
  replay read back (:data:`sim.replay.runner.RERUN_NAME`), which ``fio FILE`` reruns. dbsim has
  no fio workload of its own for ``dbsim run``, so this one is fio's file, named ``.fio``.

Every destination is checked before anything runs (a replay takes minutes): the name of each
scale (``{scale}`` in it when there are several), a suffix that says what the file is, a parent
directory that exists, and nothing at the name, not even a link. The write itself creates the
file (``O_EXCL|O_NOFOLLOW``): what appeared meanwhile is refused, never written over.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

from sim.errors import ConfigError
from sim.safeio import create_text

PLACEHOLDER = "{scale}"
SCENARIO_SUFFIXES = (".yaml", ".yml")
FIO_SUFFIX = ".fio"


def destinations(option: Path, scales: tuple[float, ...], fio: bool) -> dict[float, Path]:
    """Per scale, where its derived workload goes; ConfigError (exit 2) naming the first
    problem. ``fio``: the replay runs fio jobs (block-level production), not scenarios."""
    flag = f"--write-scenario {option}"
    if PLACEHOLDER in str(option.parent):
        raise ConfigError(f"{flag}: {PLACEHOLDER} goes in the file's name, not its directory")
    if len(scales) > 1 and PLACEHOLDER not in option.name:
        raise ConfigError(
            f"{flag}: {len(scales)} scales are replayed, each with its own workload: put "
            f"{PLACEHOLDER} in the name (e.g. replay-{PLACEHOLDER}x{_suffixes(fio)[0]})"
        )
    if not option.name.endswith(_suffixes(fio)):
        what = "a fio job (fio FILE reruns it)" if fio else "a scenario (dbsim run FILE)"
        raise ConfigError(
            f"{flag}: this replay writes {what}: name it {' or '.join(_suffixes(fio))}"
        )
    if not os.path.isdir(option.parent or "."):
        raise ConfigError(f"{flag}: no directory {option.parent}")
    out = {s: option.with_name(option.name.replace(PLACEHOLDER, f"{s:g}")) for s in scales}
    for path in out.values():
        if os.path.lexists(path):
            raise ConfigError(f"{flag}: {path} exists; dbsim never writes over a file")
    return out


def _suffixes(fio: bool) -> tuple[str, ...]:
    return (FIO_SUFFIX,) if fio else SCENARIO_SUFFIXES


def derived_file(entry: dict[str, Any]) -> Path:
    """What the scale ran: its scenario (a database or file replay), else its fio job."""
    found = (
        entry.get("scenario") or (entry.get("run") or {}).get("scenario") or entry.get("job_file")
    )
    if not found:
        raise ValueError(f"replay scale {entry.get('scale')}: no derived scenario recorded")
    return Path(found)


def header(doc: dict[str, Any], entry: dict[str, Any], path: Path, fio: bool) -> str:
    """Comment lines: the capture, the scale, the replay it was derived in, whether that
    replay was faithful, and the command that reruns it."""
    target = doc.get("target") or {}
    on = target.get("scenario") or target.get("directory")
    judged = entry.get("fidelity") or {}
    fidelity = "faithful" if judged.get("faithful") else f"UNFAITHFUL ({judged.get('cause')})"
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    rerun = f"fio {path.name}" if fio else f"dbsim run {path.name}"
    lines = [
        f"Derived by dbsim replay at {when} from the capture {doc['capture']['bundle']}",
        f"at {entry['scale']:g}x on {on}; replay {doc['directory']}.",
        f"That replay was {fidelity} at this scale (replay.json).",
        f"Rerun: {rerun}",
    ]
    return "".join(f"# {line}\n" for line in lines)


def write(doc: dict[str, Any], where: dict[float, Path], fio: bool) -> list[dict[str, str]]:
    """Each scale's derived workload at its destination, created new; what was written."""
    written = []
    for entry in doc["scales"]:
        path = where[entry["scale"]]
        text = derived_file(entry).read_text(encoding="utf-8")
        create_text(path, header(doc, entry, path, fio) + text, "--write-scenario")
        written.append({"scale": f"{entry['scale']:g}", "path": str(path)})
    return written
