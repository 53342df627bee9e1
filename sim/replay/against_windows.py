"""Where a replay's bundles are and which intervals each side of its comparison with the
capture is taken over (:mod:`sim.replay.against`): the capture's window as the replay chose it,
and a scale's as ``replay.json`` says it judged it; a path ``replay.json`` names, found."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import ConfigError
from sim.replay.shape import Shape, between, device_series, shape_over


def _ran_in(doc: dict[str, Any], replay: Path) -> Path | None:
    """The directory the replay ran in, when ``replay.json``'s own relative ``directory`` is
    the tail of ``replay``'s path (its names were written relative to it)."""
    written = Path(os.path.normpath(str(doc.get("directory") or "")))
    if not doc.get("directory") or written.is_absolute():
        return None
    here = Path(os.path.abspath(replay))
    tail = len(written.parts)
    if here.parts[-tail:] != written.parts:
        return None
    return Path(*here.parts[:-tail])


def locate(text: str, doc: dict[str, Any], replay: Path) -> Path:
    """A path ``replay.json`` names: one under its own directory is read in ``replay`` as it
    is now; an absolute one as it is; a relative one from the directory the replay ran in
    (else from here)."""
    named = Path(text)
    home = str(doc.get("directory") or "")
    if home:
        try:
            return replay / named.relative_to(home)
        except ValueError:
            pass
    if named.is_absolute():
        return named
    base = _ran_in(doc, replay)
    return Path(os.path.abspath(base / named if base else named))


@dataclass(frozen=True)
class Window:
    """A side's recomputed shape with the series and the intervals it was taken over."""

    shape: Shape
    series: dict[str, list[Any]]
    picked: list[int]


def capture_window(capture: Path) -> Window:
    from sim.profile import build_profile
    from sim.replay.shape import production_window

    profile = build_profile(capture)
    shape = production_window(profile)
    series = device_series(profile)
    return Window(shape, series, between(series, shape.window.first_t, shape.window.last_t))


def replay_window(bundle: Path, stored: dict[str, Any]) -> Window:
    """A scale's bundle's shape over the window ``replay.json`` says it judged."""
    from sim.profile import build_profile

    window = stored.get("window") or {}
    if "first_t" not in window or "last_t" not in window:
        raise ConfigError(f"{bundle}: replay.json holds no window for this scale")
    series = device_series(build_profile(bundle))
    picked = between(series, float(window["first_t"]), float(window["last_t"]))
    return Window(shape_over(series, picked, str(window.get("how", ""))), series, picked)
