"""``dbsim replay --write-scenario FILE``: the destinations checked before the replay runs,
and each scale's derived workload copied there, new, with where it came from."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from sim.errors import ConfigError
from sim.replay.scenario_out import destinations, write


def test_one_scale_is_written_at_the_name_given(tmp_path: Path) -> None:
    assert destinations(tmp_path / "new.yaml", (1.0,), fio=False) == {1.0: tmp_path / "new.yaml"}


def test_each_scale_gets_its_own_name_from_the_placeholder(tmp_path: Path) -> None:
    got = destinations(tmp_path / "replay-{scale}x.fio", (0.5, 1.0, 2.0), fio=True)
    assert got == {
        0.5: tmp_path / "replay-0.5x.fio",
        1.0: tmp_path / "replay-1x.fio",
        2.0: tmp_path / "replay-2x.fio",
    }


@pytest.mark.parametrize(
    ("name", "scales", "fio", "said"),
    [
        ("replay.yaml", (1.0, 2.0), False, "2 scales are replayed, each with its own workload"),
        ("replay-{scale}.fio", (1.0,), False, "this replay writes a scenario (dbsim run FILE)"),
        ("replay-{scale}.yaml", (1.0,), True, "this replay writes a fio job"),
    ],
)
def test_a_name_that_cannot_hold_what_is_written_is_refused(
    tmp_path: Path, name: str, scales: tuple[float, ...], fio: bool, said: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(said)):
        destinations(tmp_path / name, scales, fio)


def test_the_placeholder_is_refused_in_the_directory(tmp_path: Path) -> None:
    (tmp_path / "{scale}").mkdir()
    with pytest.raises(ConfigError, match="goes in the file's name, not its directory"):
        destinations(tmp_path / "{scale}" / "r-{scale}.yaml", (1.0, 2.0), fio=False)


def test_a_missing_directory_is_refused_before_the_replay(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no directory"):
        destinations(tmp_path / "absent" / "r.yaml", (1.0,), fio=False)


def test_an_existing_file_or_a_link_at_a_scale_s_name_is_refused(tmp_path: Path) -> None:
    (tmp_path / "r-2x.yaml").write_text("mine\n")
    with pytest.raises(ConfigError, match=r"r-2x\.yaml exists; dbsim never writes over a file"):
        destinations(tmp_path / "r-{scale}x.yaml", (1.0, 2.0), fio=False)
    os.symlink(tmp_path / "nowhere", tmp_path / "l-1x.yaml")  # dangling: still refused
    with pytest.raises(ConfigError, match=r"l-1x\.yaml exists"):
        destinations(tmp_path / "l-{scale}x.yaml", (1.0,), fio=False)
    assert (tmp_path / "r-2x.yaml").read_text() == "mine\n"


def _doc(tmp_path: Path) -> dict[str, Any]:
    """A replay.json's fields that ``write`` reads: a database scale (its scenario), a file
    scale (its run's scenario), as dbplan and fileplan record them."""
    (tmp_path / "1x.yaml").write_text("name: 1x\nworkload:\n  name: slob\n")
    (tmp_path / "2x.yaml").write_text("name: 2x\nworkload:\n  name: eda\n")
    return {
        "directory": str(tmp_path / "replay-1"),
        "capture": {"bundle": "/captures/prod"},
        "target": {"scenario": "/etc/dbsim/new.yaml"},
        "scales": [
            {"scale": 1.0, "scenario": str(tmp_path / "1x.yaml"), "fidelity": {"faithful": True}},
            {
                "scale": 2.0,
                "run": {"scenario": str(tmp_path / "2x.yaml")},
                "fidelity": {"faithful": False, "cause": "write IOPS +41 %"},
            },
        ],
    }


def test_each_scale_s_own_scenario_is_written_new_below_its_provenance(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    where = destinations(out / "d-{scale}x.yaml", (1.0, 2.0), fio=False)
    written = write(_doc(tmp_path), where, fio=False)
    assert written == [
        {"scale": "1", "path": str(out / "d-1x.yaml")},
        {"scale": "2", "path": str(out / "d-2x.yaml")},
    ]
    one = (out / "d-1x.yaml").read_text()
    head = [line for line in one.splitlines() if line.startswith("# ")]
    assert head[0].endswith("from the capture /captures/prod")
    assert head[1] == f"# at 1x on /etc/dbsim/new.yaml; replay {tmp_path / 'replay-1'}."
    assert head[2] == "# That replay was faithful at this scale (replay.json)."
    assert head[3] == "# Rerun: dbsim run d-1x.yaml"
    assert one.endswith("name: 1x\nworkload:\n  name: slob\n")
    two = (out / "d-2x.yaml").read_text()
    assert "# That replay was UNFAITHFUL (write IOPS +41 %) at this scale" in two
    assert two.endswith("name: 2x\nworkload:\n  name: eda\n")


def test_a_file_that_appeared_during_the_replay_is_left_as_it_was(tmp_path: Path) -> None:
    where = destinations(tmp_path / "d-{scale}x.yaml", (1.0, 2.0), fio=False)
    (tmp_path / "d-2x.yaml").write_text("theirs\n")  # made while the replay ran
    with pytest.raises(
        ConfigError, match=r"d-2x\.yaml: exists \(or is a link\); dbsim writes only a new file"
    ):
        write(_doc(tmp_path), where, fio=False)
    assert (tmp_path / "d-2x.yaml").read_text() == "theirs\n"
