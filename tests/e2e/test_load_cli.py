"""``dbsim load`` says what it built in a few lines (the JSON report with ``--json``), and
``dbsim drop`` on SQLite gives the dropped tables' space back to the file system (issue #27,
point 8: ~60 lines of JSON; a dropped database file left at full size)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import Dbsim

ROWS = 10_000  # the least SLOB allows: 78 MiB at one 8 KiB row per page


def test_load_prints_a_short_summary_json_on_asking_and_drop_shrinks_the_file(
    dbsim: Dbsim, tmp_path: Path
) -> None:
    database = tmp_path / "slob.db"
    sets = ["--set", f"target.path={database}", "--set", f"workload.parameters.scale={ROWS}"]
    built = dbsim("load", *sets, "--set", "workload.parameters.schemas=2")
    assert built.rc == 0, built.describe()
    lines = built.stdout.splitlines()
    assert len(lines) <= 12 and not built.stdout.lstrip().startswith("{"), built.stdout
    assert lines[0] == f"loaded on sqlite {database}: built", built.stdout
    for table in ("slob_1_cf1", "slob_2_cf1"):
        assert f"  {table}: rows {ROWS:,} (built)" in lines, built.stdout
        assert (
            f"  {table}: rows {ROWS:,}, max key {ROWS:,}, blocks {ROWS:,}, max rows per block 1"
            in lines
        )
    # 156 MiB against this host's RAM: the caches may hold it; the warning (stderr) says how.
    assert "data: 156 MiB, the caches may hold it" in built.stdout
    assert "dbsim load: warning: cache: " in built.stderr

    again = dbsim("load", *sets, "--set", "workload.parameters.schemas=2", "--json")
    assert again.rc == 0, again.describe()
    report = json.loads(again.stdout)
    assert report["load"]["built"] is False
    assert [t["rows"] for t in report["verify"]["tables"]] == [ROWS, ROWS]
    assert report["cache"]["data_bytes"] == 2 * ROWS * 8192

    loaded_bytes = database.stat().st_size
    assert loaded_bytes >= 2 * ROWS * 8192
    dropped = dbsim("drop", *sets, "--set", "workload.parameters.schemas=2")
    assert dropped.rc == 0 and dropped.stdout.startswith("dropped: slob_1_cf1, slob_2_cf1")
    # VACUUM and a truncating WAL checkpoint: the file keeps its registry, not the 156 MiB.
    left = database.stat().st_size + sum(
        p.stat().st_size for p in tmp_path.glob("slob.db-*") if p.is_file()
    )
    assert left < 1 << 20, (loaded_bytes, left)
