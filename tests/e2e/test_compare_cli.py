"""``dbsim compare`` end to end on two real bundles: a closed-loop baseline and a candidate
held to a low open-loop rate (so its throughput is certainly lower), exit codes 0/1/2, JSON,
and a self-contained HTML page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.e2e.conftest import Dbsim, clean_environment, single_bundle

pytestmark = pytest.mark.e2e

EXIT_OK, EXIT_WORSE, EXIT_BAD_INPUT = 0, 1, 2
RUN_S = "2"
SLOW_RATE_OPS_S = 50  # the default closed loop runs at hundreds to thousands of ops/s


@dataclass(frozen=True)
class Runs:
    runner: Dbsim
    baseline: Path
    candidate: Path  # the slow one


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    base = tmp_path_factory.mktemp("compare")
    cwd, tmp = base / "cwd", base / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    runner = Dbsim(cwd, clean_environment(tmp))
    try:
        fast = runner("run", "--duration", RUN_S, "-o", base / "fast", "-q")
        assert fast.rc == 0, fast.describe()
        slow = runner(
            "run", "--duration", RUN_S, "-o", base / "slow", "-q",
            "--set", "load.mode=open", "--set", f"load.rate_ops_s={SLOW_RATE_OPS_S}",
        )  # fmt: skip
        assert slow.rc == 0, slow.describe()
        yield Runs(runner, single_bundle(base / "fast"), single_bundle(base / "slow"))
    finally:
        runner.cleanup()


def test_a_run_against_itself_is_equivalent_exit_0(runs: Runs) -> None:
    result = runs.runner("compare", runs.baseline, runs.baseline)
    assert result.rc == EXIT_OK, result.describe()
    assert "verdict: candidate equivalent" in result.stdout
    for figure in ("ops/s", "p50", "p99", "IOPS", "await", "I/Os per op"):
        assert f" {figure} " in result.stdout, figure


def test_a_slower_candidate_is_worse_exit_1(runs: Runs) -> None:
    result = runs.runner("compare", runs.baseline, runs.candidate, "--json")
    assert result.rc == EXIT_WORSE, result.describe()
    comparison = json.loads(result.stdout)
    assert comparison["verdict"]["call"] == "worse"
    read_ops = [r for r in comparison["rows"] if r["metric"] == "ops_s" and r["scope"] == "read"]
    assert read_ops[0]["change"] == "worse" and read_ops[0]["delta_pct"] < -50
    assert any(line.startswith("read ops/s −") or line.startswith("read ops/s -")
               for line in comparison["verdict"]["decided_by"])  # fmt: skip
    assert any(note.startswith("mode differs (closed → open)") for note in comparison["notes"])


def test_thresholds_file_judges_only_throughput_the_other_way_better(
    runs: Runs, tmp_path: Path
) -> None:
    thresholds = tmp_path / "throughput-only.yaml"
    thresholds.write_text(
        "max_p50_regression_pct: null\nmax_p99_regression_pct: null\n"
        "max_await_regression_pct: null\nmax_ops_s_regression_pct: 5\n",
        encoding="utf-8",
    )
    result = runs.runner(
        "compare", runs.candidate, runs.baseline, "--thresholds", thresholds, "--json"
    )
    assert result.rc == EXIT_OK, result.describe()
    assert json.loads(result.stdout)["verdict"]["call"] == "better"


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, dict(attrs)))


def test_html_page_is_self_contained(runs: Runs, tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    result = runs.runner("compare", runs.baseline, runs.candidate, "--html", page)
    assert result.rc == EXIT_WORSE, result.describe()
    assert f"html: {page}" in result.stdout
    html = page.read_text(encoding="utf-8")
    tags = Tags()
    tags.feed(html)
    names = {tag for tag, _ in tags.seen}
    assert {"table", "style"} <= names
    assert not names & {"script", "link", "img", "iframe", "object"}, names
    assert not any(k in ("src", "href") for _, attrs in tags.seen for k in attrs)
    assert "http://" not in html and "https://" not in html and "@import" not in html
    assert runs.baseline.name in html and runs.candidate.name in html


def test_bad_input_exits_2(runs: Runs, tmp_path: Path) -> None:
    missing = runs.runner("compare", runs.baseline, tmp_path / "nope")
    assert missing.rc == EXIT_BAD_INPUT, missing.describe()
    assert missing.stderr_lines[0].startswith("error: candidate: ")
    not_a_bundle = runs.runner("compare", runs.baseline.parent, runs.baseline)
    assert not_a_bundle.rc == EXIT_BAD_INPUT, not_a_bundle.describe()
    negative = runs.runner(
        "compare", runs.baseline, runs.candidate, "--max-p99-regression-pct", "-5"
    )
    assert negative.rc == EXIT_BAD_INPUT, negative.describe()
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_p99_regression_pct: lots\n", encoding="utf-8")
    result = runs.runner("compare", runs.baseline, runs.candidate, "--thresholds", bad)
    assert result.rc == EXIT_BAD_INPUT, result.describe()
    assert result.stderr_lines == [
        f"error: {bad}: max_p99_regression_pct: Input should be a valid number, unable to "
        "parse string as a number (got 'lots')"
    ], result.describe()
    for r in (missing, not_a_bundle, negative, result):
        assert "Traceback" not in r.stdout + r.stderr, r.describe()
