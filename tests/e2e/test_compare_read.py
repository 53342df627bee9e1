"""``dbsim compare`` as a person reads it, on real bundles of short real runs: SQLite on
tmpfs (no block device, so nothing here depends on what the host's disk is doing) and
PostgreSQL on the local server. The runs are child processes; every ``dbsim compare`` runs
through ``sim.cli.entry.main`` in the test process (``inside``: the runs' directories and
environment, COLUMNS included, ~0.6 CPU-s of start-up less each), since what it checks is what
the command prints and writes (test_compare_cli keeps a compare on the real binary). At 80 columns no figure is cut; runs at other sessions are
compared at the matched delivered load; repeated runs are combined; two PostgreSQL runs
whose data the server's cache held are said to be "storage not exercised" first, in the
console, --json and the HTML page; the CSV holds every figure."""

from __future__ import annotations

import csv
import io
import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sim.judge.compare_rows import LABELS
from sim.report.compare import table_rows
from tests.e2e.conftest import CliResult, Dbsim, InProcessDbsim, clean_environment, single_bundle

pytestmark = pytest.mark.e2e

RUN_S = "3"
RATE_OPS_S = 100  # open loop: both load shapes deliver it, whatever the sessions
PG_TARGET = "{kind: postgres, host: 127.0.0.1, port: 5432, database: test, user: postgres}"


@dataclass(frozen=True)
class Runs:
    runner: Dbsim
    two: Path  # open loop at RATE_OPS_S with 2 sessions, on tmpfs
    four: Path  # the same rate with 4 sessions
    two_again: Path

    @property
    def inside(self) -> InProcessDbsim:
        """``runner``'s directories and environment, the command run in this process."""
        return InProcessDbsim(self.runner.cwd, self.runner.env)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    base = tmp_path_factory.mktemp("compare-read")
    cwd, tmp = base / "cwd", base / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    shm = Path(tempfile.mkdtemp(prefix="dbsim-compare-", dir="/dev/shm"))
    runner = Dbsim(cwd, clean_environment(tmp))
    try:
        for name, sessions in (("two", 2), ("four", 4), ("two_again", 2)):
            run = runner(
                "run", "--duration", RUN_S, "--warmup", "1", "-o", base / name, "-q",
                "--sessions", str(sessions),
                "--set", f"target.path={shm / name}.db", "--set", "load.mode=open",
                "--set", f"load.rate_ops_s={RATE_OPS_S}",
            )  # fmt: skip
            assert run.rc == 0, run.describe()
        yield Runs(
            runner,
            single_bundle(base / "two"),
            single_bundle(base / "four"),
            single_bundle(base / "two_again"),
        )
    finally:
        runner.cleanup()
        shutil.rmtree(shm, ignore_errors=True)


#: The lines that name a file written: a path is printed whole, never wrapped.
FILE_LINES = ("html: ", "csv: ")


def assert_fits(result: CliResult, width: int = 80) -> None:
    """Every line within ``width`` and no figure cut by an ellipsis; a line naming a file
    written (``html: PATH``) holds its path whole, as long as the path is (a temporary
    directory's name alone can pass 80 columns under a parallel run)."""
    lines = [line for line in result.stdout.splitlines() if not line.startswith(FILE_LINES)]
    assert max(len(line) for line in lines) <= width, result.describe()
    assert "…" not in result.stdout, result.describe()


def assert_every_figure_whole(runner: Dbsim, args: list[str | Path], stdout: str) -> None:
    """Each table cell of the comparison (as --json gives it) is in the console whole."""
    data = json.loads(runner("compare", *args, "--json").stdout)
    for cells in table_rows(data):
        for value in cells:
            assert f" {value} " in stdout, (value, stdout)


def test_other_sessions_at_one_rate_are_compared_at_the_matched_load(runs: Runs) -> None:
    result = runs.inside("compare", runs.two, runs.four, "--json")
    assert result.rc in (0, 1), result.describe()
    data = json.loads(result.stdout)
    assert data["levels"]["matched"] == 1
    [level] = data["levels"]["baseline"]
    assert level["load_unit"] == "ops/s"  # tmpfs: no block device, the load is ops/s
    assert level["load"] == pytest.approx(RATE_OPS_S, rel=0.15)
    [sessions] = [c for c in data["caveats"] if c["what"] == "sessions"]
    assert (sessions["baseline"], sessions["candidate"], sessions["invalidates"]) == (2, 4, False)
    labels = {r["level"]["candidate"] for r in data["rows"]}
    assert labels == {f"sessions 4, rate {RATE_OPS_S} ops/s"}
    assert data["verdict"]["call"] != "invalid"


def test_at_80_columns_no_figure_is_cut(runs: Runs) -> None:
    for args in ([runs.two, runs.four], [runs.two, runs.two_again]):
        result = runs.inside("compare", *args, env={"COLUMNS": "80"})
        assert result.rc in (0, 1), result.describe()
        assert_fits(result)
        assert_every_figure_whole(runs.inside, list(args), result.stdout)
        assert "figures (continued)" in result.stdout  # eight columns fold into two parts


def test_repeated_runs_are_combined(runs: Runs, tmp_path: Path) -> None:
    out = tmp_path / "figures.csv"
    result = runs.inside(
        "compare", runs.two, runs.two_again, "vs", runs.two_again, runs.two,
        "--json", "--csv", out,
    )  # fmt: skip
    assert result.rc in (0, 1), result.describe()
    data = json.loads(result.stdout)
    assert [r["run"] for r in data["baseline"]["runs"]] == [runs.two.name, runs.two_again.name]
    assert "levels" not in data  # one load shape on both sides: the whole runs, combined
    intervals = data["baseline"]["intervals"]
    assert intervals == data["candidate"]["intervals"] and intervals >= 4
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert [(r["scope"], r["figure"]) for r in rows] == [
        (r["scope"], LABELS[r["metric"]]) for r in data["rows"]
    ]
    for r in rows:  # the same runs on both sides: every figure's change is 0
        assert float(r["delta"] or 0) == pytest.approx(0, abs=1e-6), r


# --------------------------------------------------------------------------- PostgreSQL


@dataclass(frozen=True)
class PgRuns:
    runner: Dbsim
    first: Path
    second: Path

    @property
    def inside(self) -> InProcessDbsim:
        """``runner``'s directories and environment, the command run in this process."""
        return InProcessDbsim(self.runner.cwd, self.runner.env)


@pytest.fixture(scope="module")
def pg_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgRuns]:
    pytest.importorskip("asyncpg")
    base = tmp_path_factory.mktemp("compare-pg")
    cwd, tmp = base / "cwd", base / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    scenario = base / "pg.yaml"
    prefix = f"cmp{uuid.uuid4().hex[:8]}"
    scenario.write_text(
        f"name: compare-pg\ntarget: {PG_TARGET}\n"
        f"workload: {{name: slob, parameters: {{scale: 80M, table_prefix: {prefix}}}}}\n"
        "load: {duration_s: 3, warmup_s: 1, sessions: 2}\n",
        encoding="utf-8",
    )
    runner = Dbsim(cwd, clean_environment(tmp))
    try:
        for name in ("first", "second"):
            run = runner("run", scenario, "-o", base / name, "-q")
            assert run.rc in (0, 1), run.describe()
        yield PgRuns(runner, single_bundle(base / "first"), single_bundle(base / "second"))
    finally:
        InProcessDbsim(runner.cwd, runner.env)("drop", scenario)
        runner.cleanup()


def test_postgresql_runs_at_80_columns_with_their_caveats_first(
    pg_runs: PgRuns, tmp_path: Path
) -> None:
    page = tmp_path / "pg.html"
    args: list[str | Path] = [pg_runs.first, pg_runs.second]
    result = pg_runs.inside("compare", *args, "--html", page, env={"COLUMNS": "80"})
    assert result.rc in (0, 1), result.describe()
    assert_fits(result)
    assert_every_figure_whole(pg_runs.inside, args, result.stdout)
    assert f"html: {page}" in result.stdout.splitlines()
    data = json.loads(pg_runs.inside("compare", *args, "--json").stdout)
    summaries = [json.loads((b / "summary.json").read_text()) for b in args]
    cached = [(s.get("cache") or {}).get("exercised", {}).get("exercised") is False
              for s in summaries]  # fmt: skip
    html = page.read_text(encoding="utf-8")
    if all(cached):
        # 80 MiB of data in the server's buffers: both runs read the cache, not the storage.
        assert result.stdout.startswith("caveat: both runs: storage not exercised"), result
        assert data["caveats"][0]["run"] == "both"
        assert html.index("Both runs: storage not exercised") < html.index("<h2>Figures</h2>")
    else:
        named = [c["run"] for c in data["caveats"] if c["what"] == "storage not exercised"]
        assert named == [r for r, c in zip(("baseline", "candidate"), cached, strict=True) if c]
    assert "than the baseline" not in html or "worse than" in html or "better than" in html
