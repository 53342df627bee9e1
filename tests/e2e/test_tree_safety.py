"""File trees and bundles never follow a link nor trust a forged marker (issues #20, #13).

Every trap is laid for a *victim*: files outside the tree (or inside another tree) that dbsim
must not write, truncate, chmod or delete. Each test hashes the victims, runs the ``dbsim``
command a user would, and asserts exit 2, exactly one ``error:`` line naming the object and
why, and the victims unchanged, byte for byte and mode for mode.

The first trap's commands run the real binary (``python -m sim.cli``); the others run the same
commands through ``sim.cli.entry.main`` in the test process (``dbsim_in_process``: the same
directories and environment, about a second less each), as does building the trees: what is
checked is what the command decided and left on disk, not the process boundary.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import CliResult, Dbsim, InProcessDbsim, single_bundle

pytestmark = pytest.mark.e2e

TREE = "EDA_FRONTEND-001-1"
FILE = f"{TREE}/dir_00/file_00"
EMPTY = f"{TREE}/dir_00/empty_00"


def scenario(path: Path, root: Path, size: str = "16K") -> Path:
    """One small front-end process (2 directories × 2 data + 2 empty files), one second."""
    path.write_text(
        f"""\
name: tree-safety
target: {{kind: filetree, path: {root}}}
workload:
  name: eda
  parameters:
    component: EDA_FRONTEND
    frontend: {{processes_per_job_set: 1, dirs: 2, files_per_dir: 2, empty_files_per_dir: 2,
               file_size_bytes: {size}}}
load: {{duration_s: 1, warmup_s: 0}}
collectors: {{enabled: none}}
"""
    )
    return path


def digest(paths: list[Path]) -> dict[str, tuple[str, int, int]]:
    """sha256, mode and link count of every file under ``paths`` (followed: what a victim is)."""
    out: dict[str, tuple[str, int, int]] = {}
    for top in paths:
        for path in sorted([top, *top.rglob("*")] if top.is_dir() else [top]):
            if path.is_file():
                info = path.stat()
                data = hashlib.sha256(path.read_bytes()).hexdigest()
                out[str(path)] = (data, info.st_mode, info.st_nlink)
    return out


def refused(result: CliResult, *needles: str) -> str:
    """Exit 2 and one ``error:`` line holding every needle; no traceback."""
    assert result.rc == 2, result.describe()
    assert "Traceback" not in result.stdout + result.stderr, result.describe()
    errors = [line for line in result.stderr_lines if line.startswith("error: ")]
    assert len(errors) == 1, result.describe()
    for needle in needles:
        assert needle in errors[0], (needle, result.describe())
    return errors[0]


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A user's directory outside any tree, with a file in it."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "design.v").write_bytes(b"module top; endmodule\n" * 100)
    (home / "notes.txt").write_text("precious\n")
    return home


@pytest.fixture
def built(dbsim_in_process: InProcessDbsim, tmp_path: Path) -> tuple[Path, Path]:
    """A tree dbsim built (root, scenario)."""
    root = tmp_path / "eda"
    spec = scenario(tmp_path / "eda.yaml", root)
    done = dbsim_in_process("load", spec)
    assert done.rc == 0, done.describe()
    return root, spec


def run_load_drop(dbsim: Dbsim, spec: Path, out: Path, *needles: str) -> None:
    """``run``, ``run --skip-load`` and ``drop`` are all refused with the same reason."""
    for args in (("run", spec, "-o", out), ("run", spec, "--skip-load", "-o", out), ("drop", spec)):
        refused(dbsim(*args), *needles)


# --------------------------------------------------------------------------- links in a tree


def test_a_data_file_swapped_for_a_symlink_is_never_written_or_removed(
    dbsim: Dbsim, built: tuple[Path, Path], victim: Path, tmp_path: Path
) -> None:
    root, spec = built
    (root / FILE).unlink()
    (root / FILE).symlink_to(victim / "design.v")
    before = digest([victim])
    run_load_drop(dbsim, spec, tmp_path / "out", f"{root / FILE} is a symbolic link")
    assert digest([victim]) == before
    assert (root / FILE).is_symlink()  # left for the user to look at


def test_a_data_file_swapped_for_a_hard_link_is_never_written_or_removed(
    dbsim_in_process: InProcessDbsim, built: tuple[Path, Path], victim: Path, tmp_path: Path
) -> None:
    root, spec = built
    (root / FILE).unlink()
    os.link(victim / "design.v", root / FILE)
    (root / EMPTY).unlink()
    os.link(victim / "notes.txt", root / EMPTY)  # chmod and append target empty files
    before = digest([victim])
    run_load_drop(dbsim_in_process, spec, tmp_path / "out", "has 2 hard links")
    assert digest([victim]) == before


def test_a_directory_swapped_for_a_symlink_to_a_foreign_one_is_never_entered(
    dbsim_in_process: InProcessDbsim, built: tuple[Path, Path], victim: Path, tmp_path: Path
) -> None:
    root, spec = built
    # The foreign directory looks exactly like the one it replaces.
    for name in ("file_00", "file_01", "empty_00", "empty_01"):
        shutil.copy(victim / "design.v", victim / name)
    shutil.rmtree(root / TREE / "dir_00")
    (root / TREE / "dir_00").symlink_to(victim)
    before = digest([victim])
    run_load_drop(
        dbsim_in_process, spec, tmp_path / "out", f"{root / TREE / 'dir_00'} is a symbolic link"
    )
    assert digest([victim]) == before and sorted(os.listdir(victim)) == sorted(
        ["design.v", "notes.txt", "file_00", "file_01", "empty_00", "empty_01"]
    )


def test_a_file_moved_into_the_tree_in_place_of_dbsims_is_refused(
    dbsim_in_process: InProcessDbsim, built: tuple[Path, Path], victim: Path, tmp_path: Path
) -> None:
    """One link, a regular file, the right size — but not the inode dbsim wrote."""
    root, spec = built
    size = (root / FILE).stat().st_size
    mine = victim / "moved.bin"
    mine.write_bytes(b"x" * size)
    os.replace(mine, root / FILE)
    before = digest([root / FILE])
    run_load_drop(
        dbsim_in_process, spec, tmp_path / "out", f"{root / FILE} is not the one dbsim made"
    )
    assert digest([root / FILE]) == before


# --------------------------------------------------------------------------- markers


def test_skip_load_on_a_foreign_tree_without_marker_names_it_and_dbsim_load(
    dbsim_in_process: InProcessDbsim, tmp_path: Path
) -> None:
    root = tmp_path / "projects"
    (root / TREE / "dir_00").mkdir(parents=True)
    for name in ("file_00", "file_01", "empty_00", "empty_01"):
        (root / TREE / "dir_00" / name).write_text("a user's file\n")
    spec = scenario(tmp_path / "eda.yaml", root)
    before = digest([root])
    line = refused(
        dbsim_in_process("run", spec, "--skip-load", "-o", tmp_path / "out"),
        f"{root} has no .dbsim-tree marker",
        "dbsim load <scenario>",
    )
    assert line.startswith("error: --skip-load:")
    assert digest([root]) == before
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    # Nothing there at all: the same refusal, naming the root.
    spec = scenario(tmp_path / "none.yaml", tmp_path / "nowhere")
    refused(
        dbsim_in_process("run", spec, "--skip-load"), "nowhere: no EDA trees there", "dbsim load"
    )


def test_skip_load_on_a_tree_loaded_with_other_parameters_asks_for_a_load(
    dbsim_in_process: InProcessDbsim, built: tuple[Path, Path], tmp_path: Path
) -> None:
    root, _ = built
    other = scenario(tmp_path / "other.yaml", root, size="32K")
    refused(
        dbsim_in_process("run", other, "--skip-load", "-o", tmp_path / "out"),
        f"{TREE} (loaded with other parameters)",
        "dbsim load <scenario>",
    )


def test_a_forged_marker_makes_nothing_deletable(
    dbsim_in_process: InProcessDbsim, tmp_path: Path
) -> None:
    root = tmp_path / "foreign"
    (root / TREE / "dir_00").mkdir(parents=True)
    (root / FILE).write_text("a user's netlist\n")
    forged = {"owner": "dbsim", "version": 2, "trees": {TREE: {"state": "loaded"}}}
    (root / ".dbsim-tree").write_text(json.dumps(forged))
    spec = scenario(tmp_path / "eda.yaml", root)
    before = digest([root])
    for args in (("drop", spec), ("load", spec), ("run", spec, "--skip-load")):
        refused(dbsim_in_process(*args), f"{root / '.dbsim-tree'} carries no dbsim tree id")
    assert digest([root]) == before


def test_a_real_marker_copied_into_a_foreign_directory_is_refused(
    dbsim_in_process: InProcessDbsim, built: tuple[Path, Path], tmp_path: Path
) -> None:
    real, _ = built
    root = tmp_path / "foreign"
    (root / TREE / "dir_00").mkdir(parents=True)
    (root / FILE).write_text("a user's netlist\n")
    shutil.copy(real / ".dbsim-tree", root / ".dbsim-tree")
    spec = scenario(tmp_path / "foreign.yaml", root)
    before = digest([root])
    for args in (("drop", spec), ("load", spec)):
        refused(dbsim_in_process(*args), "was written for another directory")
    assert digest([root]) == before


def test_a_tree_nested_in_another_survives_the_outer_trees_rebuild_and_drop(
    dbsim_in_process: InProcessDbsim, built: tuple[Path, Path], tmp_path: Path
) -> None:
    outer, spec = built
    inner_spec = scenario(tmp_path / "inner.yaml", tmp_path / "inner")
    assert dbsim_in_process("load", inner_spec).rc == 0
    nested = outer / TREE / "dir_00" / "inner"
    os.rename(tmp_path / "inner", nested)  # the same inodes: still a valid tree of its own
    (outer / FILE).write_bytes(b"short")  # damaged: the outer load wants to rebuild it
    before = digest([nested])
    for args in (("load", spec), ("drop", spec)):
        refused(dbsim_in_process(*args), f"{nested} holds another dbsim tree")
    assert digest([nested]) == before
    done = dbsim_in_process("drop", scenario(tmp_path / "moved.yaml", nested))
    assert done.rc == 0 and "dropped: EDA_FRONTEND-001-1" in done.stdout, done.describe()


# --------------------------------------------------------------------------- temporary files


def test_a_planted_marker_tmp_symlink_is_refused_by_load_and_drop(
    dbsim_in_process: InProcessDbsim, built: tuple[Path, Path], victim: Path, tmp_path: Path
) -> None:
    root, _ = built
    (root / ".dbsim-tree.tmp").symlink_to(victim / "notes.txt")
    rebuild = scenario(tmp_path / "bigger.yaml", root, size="32K")  # load writes the marker
    before = digest([victim])
    for args in (("load", rebuild), ("drop", rebuild)):
        refused(dbsim_in_process(*args), f"{root / '.dbsim-tree.tmp'} it is a symbolic link")
    assert digest([victim]) == before
    # A plain leftover (a crash) is ours to remove: the drop goes through.
    (root / ".dbsim-tree.tmp").unlink()
    (root / ".dbsim-tree.tmp").write_text("half a marker")
    done = dbsim_in_process("drop", rebuild)
    assert done.rc == 0 and not root.exists(), done.describe()


def test_report_refuses_planted_tmp_symlinks_in_a_bundle(
    dbsim_in_process: InProcessDbsim, built: tuple[Path, Path], victim: Path, tmp_path: Path
) -> None:
    _, spec = built
    done = dbsim_in_process("run", spec, "-o", tmp_path / "out")
    assert done.rc == 0, done.describe()
    bundle = single_bundle(tmp_path / "out")
    for name in ("report.html", "analysis.json"):
        tmp = bundle / f".{name}.tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(victim / "notes.txt")
        before = digest([victim, bundle / name])
        refused(dbsim_in_process("report", bundle), f"{tmp}", "symbolic link", "refusing to write")
        assert digest([victim, bundle / name]) == before
        tmp.unlink()
    assert dbsim_in_process("report", bundle).rc == 0
