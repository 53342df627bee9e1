"""The user guide's blocks, run as a reader would copy them (issue #19).

Every shell block (``sh``, ``bash``, ``shell``, ``console``) of README.md and docs/**/*.md
runs in a fresh working directory per page, in page order, with ``dbsim`` and ``.venv/bin/dbsim``
resolving to this checkout, against the real SQLite, PostgreSQL (127.0.0.1:5432, trust) and
MariaDB of this machine. Every YAML scenario block and every examples/*.yaml gets
``dbsim validate``. A block that cannot run here carries ``<!-- docs-test: skip: REASON -->``
right above it (tests/docs/blocks.py lists the directives); nothing is skipped silently, and
the session ends with a count of what ran and what was skipped and why (tests/docs/conftest.py).

The reader's shell: no ``DBSIM_*`` or ``PG*`` variables, ``TMPDIR`` in the page's directory,
``examples/`` copied beside it, the page's named YAML blocks (``# name.yaml``) saved in it.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.cli import main as cli_main
from sim.config.scenario import ScenarioBase
from tests.docs.blocks import REPO, SHELL_LANGS, YAML_LANGS, Block, all_blocks, blocks_of
from tests.support import forked_dbsim

BLOCK_TIMEOUT_S = 120.0
VENV = REPO / ".venv"
SCENARIO_KEYS = frozenset(ScenarioBase.model_fields) | {"target", "workload"}
DEFAULT_BASE = "examples/quickstart.yaml"
#: Commands at the start of a line of an untagged block: it is a command, not output.
COMMAND_PREFIXES = ("$ ", "dbsim ", "sudo ", ".venv/bin/", "make ", "docker ")

BLOCKS = all_blocks()
SHELL = [b for b in BLOCKS if b.lang in SHELL_LANGS]
YAML = [b for b in BLOCKS if b.lang in YAML_LANGS]
Checks = tuple[pytest.MonkeyPatch, pytest.CaptureFixture[str]]
EXAMPLES = sorted(p.relative_to(REPO) for p in (REPO / "examples").glob("*.y*ml"))


def _reader_env(page_dir: Path, shim: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith(("DBSIM_", "PG")) and k not in ("COLUMNS", "LINES")
    }
    env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = str(page_dir / "tmp")
    return env


#: Directories outside its working directory that a page's blocks create, as they would a
#: reader's (the page names them): removed at the end of the session when the page made them.
MADE_OUTSIDE = {
    Path("docs/validation.md"): (Path("/var/tmp/dbsim-old"), Path("/var/tmp/dbsim-new")),
}


def _identity(path: Path) -> tuple[int, int] | None:
    """A directory of this user's, by device and inode (None: absent, or not ours)."""
    try:
        found = path.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
        return None
    return found.st_dev, found.st_ino


@pytest.fixture(scope="session")
def page_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[Path], Path]]:
    """The working directory of a page: made once, shared by its blocks in page order.

    ``page_dir.claim(page)``, after each block, notes which of the page's ``MADE_OUTSIDE``
    directories it has made (absent when the page's first block ran, there now); at the end
    of the session each is removed if it is still that directory (the same device and inode,
    this user's): never one that was there before, nor one another user put in its place."""
    made: dict[Path, Path] = {}
    absent: dict[Path, list[Path]] = {}
    created: dict[Path, tuple[int, int]] = {}
    shim = tmp_path_factory.mktemp("bin")
    # `dbsim` in a block: forked from this worker's pre-imported zygote (the same command,
    # without ~0.4 CPU-s of start-up each); `.venv/bin/dbsim` in a block is the real one.
    forked_dbsim.write_shim(shim / "dbsim", VENV / "bin" / "dbsim")

    def page_dir(page: Path) -> Path:
        if page not in made:
            absent[page] = [p for p in MADE_OUTSIDE.get(page, ()) if not os.path.lexists(p)]
            path = tmp_path_factory.mktemp(page.stem)
            (path / "tmp").mkdir()
            (path / ".venv").symlink_to(VENV)
            shutil.copytree(REPO / "examples", path / "examples")
            for block in blocks_of(page):
                if block.lang in YAML_LANGS and block.file_name:
                    (path / block.file_name).write_text(block.text, encoding="utf-8")
            made[page] = path
        return made[page]

    def claim(page: Path) -> None:
        for path in absent.get(page, []):
            if path not in created and (identity := _identity(path)) is not None:
                created[path] = identity

    page_dir.shim = shim  # type: ignore[attr-defined]
    page_dir.claim = claim  # type: ignore[attr-defined]
    yield page_dir
    for path, identity in created.items():
        if _identity(path) == identity:
            shutil.rmtree(path)


def _tail(text: str) -> str:
    return text[-3000:] if len(text) > 3000 else text


@pytest.mark.e2e
@pytest.mark.parametrize("block", SHELL, ids=[b.where for b in SHELL])
def test_shell_block(block: Block, page_dirs: Callable[[Path], Path]) -> None:
    if block.skip:
        pytest.skip(f"{block.where}: {block.skip}")
    cwd = page_dirs(block.page)
    script = block.script()
    try:
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=cwd,
            env=_reader_env(cwd, page_dirs.shim),  # type: ignore[attr-defined]
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: still running after {BLOCK_TIMEOUT_S} s:\n{script}")
    finally:
        page_dirs.claim(block.page)  # type: ignore[attr-defined]
    assert done.returncode == block.exit_code, (
        f"{block.where}: exit {done.returncode}, the page expects {block.exit_code}\n"
        f"--- script (in {cwd})\n{script}--- stdout\n{_tail(done.stdout)}\n"
        f"--- stderr\n{_tail(done.stderr)}"
    )


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _secret_variables(node: Any) -> dict[str, str]:
    """A value for every ``*_env`` variable the scenario names, as a reader exports them."""
    found: dict[str, str] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            if key.endswith("_env") and isinstance(value, str):
                found[value] = "docs-test-placeholder"
            else:
                found.update(_secret_variables(value))
    elif isinstance(node, list):
        for value in node:
            found.update(_secret_variables(value))
    return found


def _validate(scenario: dict[str, Any], cwd: Path, name: str, checks: Checks) -> None:
    """``dbsim validate`` in this process (the same entry point, without a second's start-up
    per block), in the page's directory, with the reader's variables."""
    monkeypatch, capsys = checks
    path = cwd / f"docs-test-{name}.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
    for variable in [k for k in os.environ if k.upper().startswith(("DBSIM_", "PG"))]:
        monkeypatch.delenv(variable)
    for variable, value in _secret_variables(scenario).items():
        monkeypatch.setenv(variable, value)
    monkeypatch.chdir(cwd)
    code = cli_main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code == 0, (
        f"dbsim validate refused it (exit {code}):\n{err}\n"
        f"--- scenario as validated\n{path.read_text(encoding='utf-8')}"
    )


@pytest.mark.parametrize("block", YAML, ids=[b.where for b in YAML])
def test_yaml_block(
    block: Block,
    page_dirs: Callable[[Path], Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if block.skip:
        pytest.skip(f"{block.where}: {block.skip}")
    data = yaml.safe_load(block.text)
    assert isinstance(data, dict) and data, f"{block.where}: not a YAML mapping"
    unknown = sorted(set(data) - SCENARIO_KEYS)
    assert not unknown, (
        f"{block.where}: keys {unknown} are not scenario keys; if the block is not a scenario, "
        "say what it is with <!-- docs-test: skip: REASON --> above it"
    )
    cwd = page_dirs(block.page)
    if "workload" not in data:  # a fragment: judged as part of a whole scenario
        base_text = (cwd / (block.over or DEFAULT_BASE)).read_text(encoding="utf-8")
        data = _merge(yaml.safe_load(base_text), data)
    _validate(data, cwd, f"{block.page.stem}-{block.line}", (monkeypatch, capsys))


@pytest.mark.parametrize("example", EXAMPLES, ids=[str(p) for p in EXAMPLES])
def test_example_file(
    example: Path,
    page_dirs: Callable[[Path], Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cwd = page_dirs(Path("README.md"))
    data = yaml.safe_load((REPO / example).read_text(encoding="utf-8"))
    _validate(data, cwd, example.stem, (monkeypatch, capsys))


def test_the_directories_made_outside_are_the_pages_own() -> None:
    """MADE_OUTSIDE removes only directories its page names and its shell blocks make."""
    for page, paths in MADE_OUTSIDE.items():
        scripts = "".join(b.script() for b in blocks_of(page) if b.lang in SHELL_LANGS)
        mkdirs = [line for line in scripts.splitlines() if line.startswith("mkdir -p ")]
        for path in paths:
            assert any(f" {path}/" in line for line in mkdirs), (page, path)


def test_untagged_blocks_hold_no_commands() -> None:
    """A block without a language is shown as output; a command there would escape the test."""
    hidden = [
        f"{b.where}: {line.strip()[:70]}"
        for b in BLOCKS
        if not b.lang
        for line in b.text.splitlines()[:1]
        if line.lstrip().startswith(COMMAND_PREFIXES)
    ]
    assert not hidden, (
        "untagged blocks that start with a command (tag them sh or console, or add a "
        "docs-test skip marker):\n" + "\n".join(hidden)
    )


def test_the_parser_reads_directives_indented_blocks_and_transcripts() -> None:
    page = Path("synthetic.md")
    text = (
        "intro\n\n<!-- docs-test: skip: needs an Oracle server -->\n\n```sh\ndbsim run o.yaml\n```\n"
        "1. item\n\n   <!-- docs-test: exit: 2 -->\n   ```console\n   $ dbsim validate x \\\n"
        "       --set a=b\n   error: a: bad\n   $ echo done\n   ```\n"
    )
    first, second = blocks_of(page, text)
    assert (first.line, first.lang, first.skip, first.exit_code) == (
        5,
        "sh",
        "needs an Oracle server",
        0,
    )
    assert (second.line, second.lang, second.skip, second.exit_code) == (11, "console", None, 2)
    assert second.script() == "dbsim validate x \\\n    --set a=b\necho done\n"
    with pytest.raises(ValueError, match="unknown docs-test directive"):
        blocks_of(page, "<!-- docs-test: skip-it -->\n```sh\ntrue\n```\n")


# --------------------------------------------------------------------------- prose vs output


@dataclass(frozen=True)
class Claim:
    """A figure the prose quotes from the output pasted on its page: ``prose`` matches in the
    page's text outside its blocks, ``output`` in the pasted block, and their named groups
    must be equal wherever the prose says it."""

    page: str
    #: Text right above the pasted block (the first fenced block after it is the output).
    after: str
    what: str
    prose: str
    output: str


_QUICKSTART_RUN = "This run used `COLUMNS=80 dbsim run --duration 8 2>&1`"
_VALIDATION_WARNING = "From a real run, 80 MiB of SLOB on the PostgreSQL of this machine:"
CLAIMS = [
    Claim(
        "docs/quickstart.md", _QUICKSTART_RUN, "the verdict",
        r"it was\s+\*(?P<call>[A-Z][\w -]+)\*",
        r"verdict \(analysis\.json\): (?P<call>[A-Z][\w -]+):",
    ),
    Claim(
        "docs/quickstart.md", _QUICKSTART_RUN, "dbsim's CPU",
        r"dbsim\s+itself was busy, (?P<cpu>\d+) % of its sessions' time",
        r"dbsim CPU % of session time (?P<cpu>\d+)\.\d+ ",
    ),
    Claim(
        "docs/quickstart.md", _QUICKSTART_RUN, "the device's reads",
        r"vda read (?P<r_s>[\d,.]+)\s+times a second", r"│ vda\s+│\s+(?P<r_s>[\d,.]+) │",
    ),
    Claim(
        "docs/quickstart.md", _QUICKSTART_RUN, "the sessions' reads",
        r"the sessions made (?P<ops>[\d,.]+) reads a second",
        r"│ read\s+│\s+[\d,]+ │\s+(?P<ops>[\d,.]+) │",
    ),
    Claim(
        "docs/quickstart.md", _QUICKSTART_RUN, "the device's IOPS",
        r"at (?P<iops>[\d,.]+) IOPS on vda \(the mean",
        r"│ vda\s+│\s+[\d,.]+ │\s+[\d,.]+ │\s+(?P<iops>[\d,.]+) │",
    ),
    Claim(
        "docs/quickstart.md", _QUICKSTART_RUN, "the data against the host's memory",
        r"the (?P<data>\d+ MiB) of this run fit in the host's\s+memory \((?P<ram>[\d.]+ GiB)",
        r"the data \((?P<data>\d+ MiB)\) is under 4 x \(host RAM (?P<ram>[\d.]+ GiB)\)",
    ),
    Claim(
        "docs/validation.md", _VALIDATION_WARNING, "the data and the offered cap",
        r"From a real run, (?P<data>\d+ MiB) of SLOB",
        r"the data \((?P<data>\d+ MiB)\) is under",
    ),
]  # fmt: skip


def _prose(page: Path) -> str:
    """The page's text without any fenced block."""
    lines = (REPO / page).read_text(encoding="utf-8").splitlines()
    fenced: set[int] = set()
    for block in blocks_of(page):
        fenced.update(range(block.line - 1, block.line + len(block.text.splitlines()) + 1))
    return "\n".join(line for i, line in enumerate(lines) if i not in fenced)


def _pasted(claim: Claim) -> tuple[str, str]:
    """The page's prose and the block pasted after ``claim.after``."""
    page = Path(claim.page)
    lines = (REPO / page).read_text(encoding="utf-8").splitlines()
    anchor = next((i for i, line in enumerate(lines) if claim.after in line), None)
    assert anchor is not None, f"{claim.page}: no line says {claim.after!r}"
    pasted = next(b for b in blocks_of(page) if b.line - 1 >= anchor)
    return _prose(page), pasted.text


@pytest.mark.parametrize("claim", CLAIMS, ids=[f"{c.page}: {c.what}" for c in CLAIMS])
def test_the_prose_says_what_the_pasted_output_shows(claim: Claim) -> None:
    """quickstart.md and validation.md quote figures of runs pasted above them (issue #27):
    a pasted output regenerated without its prose, or prose edited without its output, fails."""
    prose, output = _pasted(claim)
    said = [m.groupdict() for m in re.finditer(claim.prose, prose)]
    assert said, f"{claim.page}: the prose no longer says {claim.what} ({claim.prose!r})"
    shown = re.search(claim.output, output)
    assert shown is not None, f"{claim.page}: the pasted output has no {claim.what}"
    for words in said:
        assert words == shown.groupdict(), f"{claim.page}: {claim.what}: {words} vs {shown[0]!r}"


def test_the_quickstart_run_says_storage_not_exercised_first() -> None:
    """Its prose says the output opens with the line: the 80 MiB default sat in the page
    cache (a run whose device did read would need other prose)."""
    prose, output = _pasted(CLAIMS[0])
    assert re.search(r"this output opens with `STORAGE NOT\s+EXERCISED`", prose)
    lines = output.splitlines()
    first = next(i for i, line in enumerate(lines) if "STORAGE NOT EXERCISED" in line)
    assert first < next(i for i, line in enumerate(lines) if "┃ op " in line)


def test_the_cached_run_and_its_json_agree() -> None:
    """validation.md's console line of a cached run and the JSON section below it are one
    run's: the same device, reads and reading operations."""
    text = (REPO / "docs/validation.md").read_text(encoding="utf-8")
    blocks = blocks_of(Path("docs/validation.md"), text)
    console = next(b for b in blocks if "$ dbsim run cached.yaml" in b.text)
    section = next(b for b in blocks if b.line > console.line and b.lang == "json")
    headline = re.search(
        r"STORAGE NOT EXERCISED: (?P<dev>\w+) read (?P<r>[\d.]+)/s against (?P<ops>[\d,.]+) ",
        console.text,
    )
    assert headline is not None, console.text
    reason = re.search(r'"reason": "(?P<dev>\w+) read (?P<r>[\d.]+)/s against (?P<ops>[\d,.]+) ',
                       section.text)  # fmt: skip
    assert reason is not None and reason.groupdict() == headline.groupdict()
    data = re.search(r"(?P<mib>\d+) MiB just written", console.text)
    size = re.search(r'"data_bytes": (?P<bytes>\d+)', section.text)
    assert data and size and round(int(size["bytes"]) / 2**20) == int(data["mib"])


def test_the_slo_run_its_json_and_the_prose_agree() -> None:
    """validation.md's SLO run: every console verdict's margin is the JSON's, in order; the
    exit code shown is the one the verdicts give; the prose's margins are the JSON's."""
    page = Path("docs/validation.md")
    text = (REPO / page).read_text(encoding="utf-8")
    blocks = blocks_of(page, text)
    console = next(b for b in blocks if b.text.startswith("$ dbsim run validate.yaml\n"))
    section = next(b for b in blocks if b.line > console.line and b.text.startswith('"slos"'))
    said = re.findall(r"SLO (met|MISSED) \[[^]]+\]: .*\(margin ([+-][\d.]+) %\)", console.text)
    margins = re.findall(r'"met": (true|false), "margin_pct": (-?[\d.]+)', section.text)
    assert said and len(said) == len(margins), (said, margins)
    for (word, shown), (met, margin) in zip(said, margins, strict=True):
        assert (word == "met") == (met == "true") and float(shown) == float(margin)
    missed = any(word == "MISSED" for word, _ in said)
    assert console.text.rstrip().endswith("$ echo $?\n" + ("1" if missed else "0"))
    assert f'"met": {"false" if missed else "true"},' in section.text
    for quoted in re.findall(r"([+-]\d+\.\d) means", _prose(page)):
        assert any(float(quoted) == float(m) for _, m in margins), quoted
