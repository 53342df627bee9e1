"""``dbsim import`` as a user runs it (a child process): the bundle's path on stdout and what
was dropped on stderr; a file that cannot be imported refused with exit 2 and one ``error:``
line naming the file, the line and the field, no traceback and no bundle left."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import Dbsim

DATA = Path(__file__).resolve().parents[1] / "data"


def bundles(out: Path) -> list[Path]:
    return sorted(out.iterdir()) if out.exists() else []


def test_import_prints_the_bundle_and_what_it_dropped(dbsim: Dbsim, out_dir: Path) -> None:
    source = DATA / "iostat" / "iostatplot_object1_indented.out"
    result = dbsim("import", "iostat", source, "-o", out_dir, "--name", "object1")
    assert result.rc == 0, result.describe()
    (bundle,) = bundles(out_dir)
    assert result.stdout == f"{bundle}\n"
    assert bundle.name == "20160315-205435-object1"
    assert result.stderr.splitlines() == [
        "imported 3 intervals of 2 entities from 1 path(s); dropped 1 record(s)",
        f"dropped: {source}:3: first report of an iostat run: averages since boot, not an interval",
    ]
    assert (bundle / "timeseries" / "block.csv").is_file()
    # Importing again never replaces the first bundle: a new directory beside it.
    again = dbsim("import", "iostat", source, "-o", out_dir, "--name", "object1")
    assert again.rc == 0 and len(bundles(out_dir)) == 2


@pytest.mark.parametrize(
    ("fmt", "content", "line"),
    [
        # a device report before any time line (iostat run without -t)
        ("iostat", "Linux 6.1 (db1) \t01/15/24 \t_x86_64_\t(2 CPU)\n\nDevice r/s w/s\nsda 1 2\n",
         "{path}:3: time: a device report before any time line (run iostat with -t)"),
        # JSON cut in its third line
        ("sadf", '{"sysstat": {\n "hosts": [\n  {"nodename": "h", "statis',
         "{path}:3: JSON: Unterminated string starting at (column 21)"),
        # nfsiostat output without --start/--interval
        ("nfsiostat", (DATA / "nfsiostat/made_here_nfsv3_statvers10.out").read_text(),
         "{path}:2: --start: nfsiostat prints no time: give --start (when it started) and "
         "--interval"),
        # a single mountstats snapshot: no interval
        ("mountstats", "1705312800\n" + (DATA / "mountstats/nfsv3_statvers10.before").read_text(),
         "{path}: snapshots: 1 snapshot(s); an interval needs two or more"),
    ],
)  # fmt: skip
def test_a_file_that_cannot_be_imported_is_refused(
    dbsim: Dbsim, tmp_path: Path, out_dir: Path, fmt: str, content: str, line: str
) -> None:
    path = tmp_path / f"input.{fmt}"
    path.write_text(content)
    result = dbsim("import", fmt, path, "-o", out_dir)
    assert result.rc == 2, result.describe()
    assert result.stderr == f"error: {line.format(path=path)}\n"
    assert result.stdout == "" and bundles(out_dir) == []


def test_every_line_dropped_is_a_refusal_naming_the_first(
    dbsim: Dbsim, tmp_path: Path, out_dir: Path
) -> None:
    path = tmp_path / "prefixed.log"
    shutil.copyfile(DATA / "iostat" / "iostatplot_pdsh_prefixed.out", path)
    result = dbsim("import", "iostat", path, "-o", out_dir)
    assert result.rc == 2, result.describe()
    assert result.stderr.startswith(
        f"error: {path}:1: Device: no device report (iostat -x -t output); line 1: not a line "
        "of an iostat report: 'object3: Linux 3.13.0-76-generic (object3)"
    )
    assert len(result.stderr.splitlines()) == 1 and bundles(out_dir) == []


def test_what_is_not_a_file_to_import(dbsim: Dbsim, tmp_path: Path, out_dir: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = {
        ("iostat", str(fifo)): f"error: {fifo}: a FIFO, not a regular file; a file to import "
        "must be one",
        ("iostat", str(tmp_path / "missing")): f"error: {tmp_path / 'missing'}: no such file "
        "to import",
        ("iostat", str(tmp_path)): f"error: {tmp_path}: a directory; this format is read from "
        "files",
        ("nosuch", str(fifo)): "error: FORMAT: unknown format 'nosuch' (known: awr, iostat, "
        "sadf, nfsiostat, mountstats, pg-views, mssql-views, mariadb-views, ontap-rest, "
        "ontap-qos)",
    }
    for (fmt, path), line in cases.items():
        result = dbsim("import", fmt, path, "-o", out_dir)
        assert (result.rc, result.stderr) == (2, line + "\n"), result.describe()
    named = dbsim("import", "iostat", DATA / "iostat/made_here_sysstat12.log", "--name", "../x")
    assert named.rc == 2 and named.stderr.startswith("error: --name: '../x' is not a bundle name")
    clock = dbsim("import", "iostat", DATA / "iostat/made_here_sysstat12.log", "--interval", "5")
    assert clock.rc == 2
    assert clock.stderr == "error: --start/--interval: iostat files carry their own times\n"


def test_an_output_that_is_a_file_is_refused_and_left_alone(dbsim: Dbsim, tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    result = dbsim("import", "iostat", DATA / "iostat/made_here_sysstat12.log", "-o", taken)
    assert result.rc == 2, result.describe()
    assert result.stderr.startswith(f"error: -o: cannot create {taken}")
    assert taken.read_text() == "mine\n"
