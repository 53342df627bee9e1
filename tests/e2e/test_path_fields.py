"""``target.path`` refused the same by ``dbsim validate`` and by the web UI's start form.

dbsim issue #24, item 5: the start form took a FIFO, ``/dev/zero``, a directory or another
user's file as the path and failed later, in loading. Each is now refused before anything is
opened, by the targets' own ``check_paths``, which ``validate``, ``run`` and the form share:
``dbsim validate`` (a child process) exits 2 with one ``error: target.path: …`` line, and the
form (:func:`sim.live.start_form.scenario_from_form`, as ``POST /dbsim/start`` calls it) shows
the very same line under ``target.path``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.config.resolve import resolve
from sim.live.start_form import FormErrors, scenario_from_form
from tests.e2e.conftest import clean_environment
from tests.support import forked_dbsim

pytestmark = [pytest.mark.e2e]

NOBODY = 65534
SQLITE_HEADER = b"SQLite format 3\x00"


def _validate_line(cwd: Path, sets: dict[str, str]) -> str:
    args = [a for name, value in sets.items() for a in ("--set", f"{name}={value}")]
    done = forked_dbsim.run(
        [sys.executable, "-m", "sim.cli", "validate", *args],
        cwd=cwd, env=clean_environment(cwd), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("error: target.path: "), lines
    return lines[0][len("error: ") :]


def _form_line(sets: dict[str, str]) -> str:
    with pytest.raises(FormErrors) as caught:
        scenario_from_form(resolve(None, environ={}), sets)
    assert list(caught.value.by_field) == ["target.path"], caught.value.lines
    (line,) = caught.value.lines
    return line


def _places(tmp: Path) -> dict[str, tuple[dict[str, str], str]]:
    """name -> (the form's values, a word its refusal must hold)."""
    os.mkfifo(tmp / "fifo")
    (tmp / "dir").mkdir()
    (tmp / "file").write_text("not a tree\n")
    (tmp / "link").symlink_to(tmp / "dir")
    sqlite = {"target.kind": "sqlite", "workload.name": "slob"}
    tree = {"target.kind": "filetree", "workload.name": "eda"}
    places = {
        "sqlite on a FIFO": ({**sqlite, "target.path": str(tmp / "fifo")}, "fifo"),
        "sqlite on /dev/zero": ({**sqlite, "target.path": "/dev/zero"}, "character device"),
        "sqlite on a directory": ({**sqlite, "target.path": str(tmp / "dir")}, "directory"),
        "tree on a file": ({**tree, "target.path": str(tmp / "file")}, "regular file"),
        "tree on a FIFO": ({**tree, "target.path": str(tmp / "fifo")}, "fifo"),
        "tree on a link": ({**tree, "target.path": str(tmp / "link")}, "symbolic link"),
    }
    if os.geteuid() == 0:  # only root can give a file to another user
        theirs = tmp / "theirs.sqlite"
        theirs.write_bytes(SQLITE_HEADER + b"\0" * 100)
        (tmp / "their-tree").mkdir()
        for path in (theirs, tmp / "their-tree"):
            os.chown(path, NOBODY, NOBODY)
        places["sqlite of another user"] = ({**sqlite, "target.path": str(theirs)}, "nobody")
        places["tree of another user"] = (
            {**tree, "target.path": str(tmp / "their-tree")},
            "nobody",
        )
    return places


def test_validate_and_the_form_refuse_the_same_paths_with_the_same_line(tmp_path: Path) -> None:
    places = _places(tmp_path)
    assert len(places) >= 6
    for what, (sets, word) in places.items():
        cwd = tmp_path / what.replace(" ", "-").replace("/", "")
        cwd.mkdir()
        line = _validate_line(cwd, sets)
        assert word in line, (what, line)
        assert _form_line(sets) == line, what
    # Looked at only: nothing was opened, written or created.
    assert (tmp_path / "file").read_text() == "not a tree\n"
    assert sorted(p.name for p in (tmp_path / "dir").iterdir()) == []
