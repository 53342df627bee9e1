"""The user guide (docs/, mkdocs.yml) builds in strict mode, and its generated parts are current.

Strict mode turns every warning into a failure: a link to a page that does not exist (or to a
file outside docs/, which the site cannot serve), an anchor that no heading of the target page
has, a page left out of the nav. The last test breaks a copy of the guide on purpose, to prove
the build would catch it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sim.config.schema_doc import OUTPUT_PATH, REGENERATE, render_markdown

#: MkDocs builds the whole guide twice (a real tool, several seconds each): not a unit test.
pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 120


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of the guide at ``root``, with the tests' own Python.

    Never with ``--quiet``: it hides the warnings from the counter that strict mode checks,
    and a broken link then builds without complaint."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )


def test_scenario_reference_matches_the_schema() -> None:
    checked_in = (REPO / OUTPUT_PATH).read_text(encoding="utf-8")
    assert checked_in == render_markdown(), (
        f"{OUTPUT_PATH} is stale: the scenario schema changed. Regenerate it with\n"
        f"    {REGENERATE}\nand commit the result."
    )


def test_mkdocs_config_is_strict_and_validates_links_and_anchors() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True
    assert config["docs_dir"] == "docs"
    assert config["theme"]["name"] in ("mkdocs", "readthedocs")
    validation = config["validation"]
    for check in ("omitted_files", "absolute_links", "unrecognized_links", "anchors"):
        assert validation[check] == "warn", f"validation.{check} must be warn (fails in strict)"


def test_guide_builds_in_strict_mode(tmp_path: Path) -> None:
    result = _build(REPO, tmp_path / "site")
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "reference" / "scenario" / "index.html").is_file()


#: Each breakage and what the strict build names in its warning.
BREAKAGES = {
    "missing-page": ("[gone](no-such-page.md)", "no-such-page.md"),
    "missing-anchor": ("[anchor](report.md#no-such-heading)", "#no-such-heading"),
    "outside-docs": ("[outside](../README.md)", "../README.md"),
}


def test_each_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """One build of a copy broken in the three ways (one build, not one each: MkDocs reports
    every warning before strict mode aborts). Each breakage must be a WARNING of its own, and
    in strict mode one warning alone fails the build; the build warns of nothing else."""
    copy = tmp_path / "guide"
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copy2(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    index = copy / "docs" / "index.md"
    links = "".join(f"\n{breakage}\n" for breakage, _ in BREAKAGES.values())
    index.write_text(index.read_text(encoding="utf-8") + links, encoding="utf-8")
    result = _build(copy, tmp_path / "site")
    assert result.returncode != 0, f"the strict build accepted {list(BREAKAGES)}"
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    for name, (breakage, expected) in BREAKAGES.items():
        named = [line for line in warnings if expected in line]
        assert len(named) == 1, f"{name}: {breakage} gave no warning of its own:\n{result.stderr}"
    assert len(warnings) == len(BREAKAGES), result.stderr  # the copy's own: none else
