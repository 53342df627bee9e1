"""``dbsim size`` end to end: fits and does-not-fit verdicts naming their source, one-line
errors with exit 2, and a real bundle as input.

The first case runs the real binary (``python -m sim.cli size``), which proves that the process
reports what ``main`` returns; every other ``dbsim size`` runs the same command through
``sim.cli.entry.main`` in the test process (``dbsim_in_process``: the same directories and
environment, ~0.3 CPU-s of interpreter start and imports less each), since what they check is
the command's decision: its verdict, its lines, its exit code. The runs that make a bundle to
size (``dbsim run``) stay child processes."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.e2e.conftest import CliResult, Dbsim, InProcessDbsim, single_bundle

pytestmark = pytest.mark.e2e

EXIT_OK, EXIT_DOES_NOT_FIT, EXIT_BAD_INPUT, EXIT_NO_VERDICT = 0, 1, 2, 4
VERDICTS = {EXIT_OK: "fits", EXIT_DOES_NOT_FIT: "does_not_fit", EXIT_NO_VERDICT: "no_verdict"}
ISSUE_SOURCE = "Nível de serviço extremo › Tamanho do bloco de 4 KiB (E/S aleatória)"
# The runs made to be sized are paced (issue #25): what is sized is the block device's means
# (or the score's file operations), whatever rate the sessions reached; closed loop, two
# sessions take ~1.4 CPUs while they run. A sweep of sessions stays closed loop, with a think
# time (~100 ops/s a session), as tests/e2e/test_exit_codes.py's sweeps.
PACED = ("--set", "load.mode=open", "--set", "load.rate_ops_s=400")
THINK = "think: {min_ms: 8, max_ms: 12}"


def dbsim_size(
    dbsim: Dbsim, *args: str | os.PathLike[str], env: dict[str, str] | None = None
) -> CliResult:
    """``dbsim size ARGS`` with ``dbsim``'s directories and environment: in this process
    (``InProcessDbsim``) or as a child (``Dbsim``, the real binary)."""
    return dbsim("size", *args, env=env, timeout=60)


def assert_one_error_line(result: CliResult) -> str:
    assert result.rc == EXIT_BAD_INPUT, result.describe()
    assert "Traceback" not in result.stdout + result.stderr, result.describe()
    lines = result.stderr_lines
    assert len(lines) == 1 and lines[0].startswith("error: "), result.describe()
    return lines[0]


def test_issue_case_fits_and_names_the_seed_table(dbsim: Dbsim) -> None:
    # The real binary: the one case that proves the process says what main returns.
    result = dbsim_size(
        dbsim,
        "--envelope",
        "gcnv-extreme-nfsv3",
        "--read-iops",
        "150000",
        "--write-iops",
        "50000",
        "--block-size",
        "4KiB",
    )
    assert result.rc == EXIT_OK, result.describe()
    assert "FITS: the IOPS limit binds" in result.stdout
    assert "229,300 IOPS (172,000 read + 57,300 write)" in result.stdout
    assert "utilisation 87.2 %, headroom 12.8 %" in result.stdout
    assert "seed 000_86fde6e6690b0d9c.txt" in result.stdout
    assert ISSUE_SOURCE in result.stdout
    assert "6 n2-standard-32 virtual machines" in result.stdout  # the published test's clients


def test_issue_case_does_not_fit_at_250k(dbsim_in_process: InProcessDbsim) -> None:
    result = dbsim_size(
        dbsim_in_process,
        "-e",
        "gcnv-extreme-nfsv3",
        "--read-iops",
        "250000",
        "--write-iops",
        "83333",
        "--block-size",
        "4k",
        "--json",
    )
    assert result.rc == EXIT_DOES_NOT_FIT, result.describe()
    answer = json.loads(result.stdout)
    assert answer["fits"] is False and answer["binding"] == "iops"
    assert answer["utilisation_pct"] == pytest.approx(333_333 / 229_300 * 100, abs=1e-3)
    assert any(ISSUE_SOURCE in s for s in answer["source"])


def test_capacity_makes_throughput_bind_and_names_the_smallest(
    dbsim_in_process: InProcessDbsim,
) -> None:
    result = dbsim_size(
        dbsim_in_process,
        "-e",
        "gcnv-extreme-nfsv3",
        "--capacity",
        "5TiB",
        "--read-iops",
        "150000",
        "--write-iops",
        "50000",
        "--block-size",
        "4KiB",
    )
    assert result.rc == EXIT_DOES_NOT_FIT, result.describe()
    assert "the throughput limit binds" in result.stdout
    assert "smallest capacity that fits: 6,250 GiB" in result.stdout
    assert "seed 002_26a53d12d47323af.txt" in result.stdout


def test_outside_the_published_mixes_exits_4_without_allow_extrapolation(
    dbsim_in_process: InProcessDbsim,
) -> None:
    # SSB publishes 100 % and 80 % read only: 60/40 has no published point around it.
    args = ("-e", "gcnv-iscsi-ssb", "--read-iops", "60000", "--write-iops", "40000")
    refused = dbsim_size(dbsim_in_process, *args, "--block-size", "8KiB", "--json")
    assert refused.rc == EXIT_NO_VERDICT, refused.describe()
    answer = json.loads(refused.stdout)
    assert (answer["fits"], answer["verdict"], answer["certainty"]) == (
        None,
        "no_verdict",
        "outside",
    )
    allowed = dbsim_size(dbsim_in_process, *args, "--block-size", "8KiB", "--allow-extrapolation")
    assert allowed.rc == EXIT_OK, allowed.describe()
    # 60.000 + 40.000 is exactly the held 80/20 figure (~100.000): at it, and said so.
    assert "FITS, at the held limit (extrapolated: --allow-extrapolation)" in allowed.stdout
    assert "figure: outside" in allowed.stdout


def test_list_names_every_envelope_with_its_source(dbsim_in_process: InProcessDbsim) -> None:
    result = dbsim_size(dbsim_in_process, "--list", "--json")
    assert result.rc == EXIT_OK, result.describe()
    rows = json.loads(result.stdout)
    names = {row["name"] for row in rows}
    assert {"gcnv-extreme-nfsv3", "anf-linux-volume", "oci-bv-balanced", "aff-a800-nvmeof"} <= names
    assert all(row["seeds"] for row in rows)
    text = dbsim_size(dbsim_in_process, "--list")
    assert text.rc == EXIT_OK and "seed 004_2edda23bd904e66d.txt" in text.stdout
    # At 80 columns every line fits but a page's address, which is never broken.
    narrow = dbsim_size(dbsim_in_process, "--list", env={"COLUMNS": "80"})
    assert narrow.rc == EXIT_OK, narrow.describe()
    wide = [line for line in narrow.stdout.splitlines() if len(line) > 80]
    assert all(line.split()[0].startswith("https://") for line in wide), wide
    assert all(name in narrow.stdout for name in names)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-e", "gcnv-ultra", "--read-iops", "1", "--block-size", "8KiB"], "unknown envelope"),
        (["-e", "gcnv-extreme-nfsv3", "--read-iops", "1", "--block-size", "8 furlongs"], "unit"),
        (
            [
                "-e",
                "gcnv-extreme-nfsv3",
                "--capacity",
                "10",
                "--read-iops",
                "1",
                "--block-size",
                "8k",
            ],
            "capacity",
        ),
        (["-e", "gcnv-extreme-nfsv3", "--read-iops", "1000"], "--block-size"),
        (["-e", "gcnv-extreme-nfsv3"], "no workload"),
        (["--read-iops", "1", "--block-size", "8k"], "--envelope"),
        (["-e", "gcnv-extreme-nfsv3", "--read-iops", "lots"], "--read-iops"),
        (["-e", "gcnv-extreme-nfsv3", "--bundle", "nowhere"], "not a run bundle"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    dbsim: Dbsim, dbsim_in_process: InProcessDbsim, args: list[str], expected: str
) -> None:
    # The first refusal on the real binary: the process prints the one line and exits 2.
    runner = dbsim if expected == "unknown envelope" else dbsim_in_process
    line = assert_one_error_line(dbsim_size(runner, *args))
    assert expected in line


def test_sizing_a_real_bundle(
    dbsim: Dbsim, dbsim_in_process: InProcessDbsim, out_dir: Path
) -> None:
    run = dbsim("run", "--duration", "3", *PACED, "-o", out_dir, "--quiet")
    assert run.rc == EXIT_OK, run.describe()
    bundle = single_bundle(out_dir)
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    block = (summary.get("storage") or {}).get("block") or {}
    if not any((d.get("r_s") or 0) + (d.get("w_s") or 0) > 0 for d in block.values()):
        result = dbsim_size(dbsim_in_process, "-e", "gcnv-extreme-nfsv3", "--bundle", bundle)
        assert "no block-device means" in assert_one_error_line(result) or result.rc == 2
        pytest.skip("this machine's run recorded no block-device I/O to size")
    busiest = max(block, key=lambda d: (block[d].get("r_s") or 0) + (block[d].get("w_s") or 0))
    result = dbsim_size(dbsim_in_process, "-e", "gcnv-extreme-nfsv3", "--bundle", bundle, "--json")
    # A run's mean request size may lie outside the published sizes: then no verdict (4).
    assert result.rc in VERDICTS, result.describe()
    answer = json.loads(result.stdout)
    assert answer["verdict"] == VERDICTS[result.rc]
    assert f"device {busiest}" in answer["workload"]["origin"]
    assert answer["workload"]["read_iops"] == pytest.approx(block[busiest]["r_s"])
    assert answer["workload"]["write_mibps"] == pytest.approx(block[busiest]["wkB_s"] / 1024)
    assert answer["source"] and all("seed " in s for s in answer["source"])
    text = dbsim_size(dbsim_in_process, "-e", "gcnv-extreme-nfsv3", "--bundle", bundle)
    assert text.rc == result.rc and bundle.name in text.stdout
    # Numbers and a bundle together are refused.
    both = dbsim_size(
        dbsim_in_process, "-e", "gcnv-extreme-nfsv3", "--bundle", bundle, "--read-iops", "1"
    )
    assert "not both" in assert_one_error_line(both)


def test_a_stepped_bundle_is_sized_by_one_step_never_by_the_mix(
    dbsim: Dbsim, dbsim_in_process: InProcessDbsim, out_dir: Path, tmp_path: Path
) -> None:
    # A sweep of two 2-second steps (1 and 2 sessions) with an SLO every step meets.
    scenario = tmp_path / "sweep.yaml"
    scenario.write_text(
        "target: {kind: sqlite}\nworkload: {name: slob}\n"
        "load: {warmup_s: 0, sweep: {vary: sessions, start: 1, step: 1, max: 2, "
        f"step_duration_s: 2}}, {THINK}}}\n"
        "slos: [{op: read, p99_us_max: 60000000}]\n",
        encoding="utf-8",
    )
    run = dbsim("run", scenario, "-o", out_dir, "--quiet")
    assert run.rc == EXIT_OK, run.describe()
    bundle = single_bundle(out_dir)
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    sweep = summary["sweep"]
    highest = sweep["highest_passing"]
    if not (highest["device_rates"]["r_s"] or 0) + (highest["device_rates"]["w_s"] or 0):
        pytest.skip("this machine's sweep recorded no block-device I/O in its passing step")
    result = dbsim_size(dbsim_in_process, "-e", "gcnv-extreme-nfsv3", "--bundle", bundle, "--json")
    assert result.rc in VERDICTS, result.describe()
    workload = json.loads(result.stdout)["workload"]
    step = highest["step"] + 1
    assert f"step {step} (the sweep's highest load meeting every SLO)" in workload["origin"]
    assert f"device {sweep['device']}" in workload["origin"]
    # The sweep's point is rounded to 0.1 IOPS; the sizing takes the same window unrounded.
    assert workload["read_iops"] == pytest.approx(highest["device_rates"]["r_s"], abs=0.051)
    # --step picks another step, named as chosen; a step the run never had is refused.
    first = dbsim_size(
        dbsim_in_process, "-e", "gcnv-extreme-nfsv3", "--bundle", bundle, "--step", "1", "--json"
    )
    assert "step 1 (chosen with --step)" in json.loads(first.stdout)["workload"]["origin"]
    beyond = dbsim_size(
        dbsim_in_process, "-e", "gcnv-extreme-nfsv3", "--bundle", bundle, "--step", "9"
    )
    assert "has steps 1..2" in assert_one_error_line(beyond)
    # Without a sweep's answer, a stepped run's whole-run means are refused, not averaged.
    del summary["sweep"]
    (bundle / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    mixed = dbsim_size(dbsim_in_process, "-e", "gcnv-extreme-nfsv3", "--bundle", bundle)
    assert "has 2 steps and its whole-run means mix them: give --step 1..2" in (
        assert_one_error_line(mixed)
    )


def _eda_bundle(dbsim: Dbsim, out_dir: Path, tmp_path: Path) -> Path:
    """A 3-second EDA_BLENDED run of one job set on a local tree (open loop, 450 ops/s), its
    backend files of 1 MiB: a tree of 100 MiB, not the reference's 1 GiB, written each run
    (what is sized is the run's file operations and MiB/s, whatever the files' size)."""
    scenario = tmp_path / "eda.yaml"
    scenario.write_text(
        f"target: {{kind: filetree, path: {tmp_path / 'tree'}}}\n"
        "workload: {name: eda, parameters: {component: EDA_BLENDED, job_sets: 1, "
        "backend: {file_size_bytes: 1M}}}\n"
        "load: {mode: open, warmup_s: 0.5, duration_s: 3, sessions: 5, rate_ops_s: 450}\n",
        encoding="utf-8",
    )
    run = dbsim("run", scenario, "-o", out_dir, "--quiet")
    assert run.rc == EXIT_OK, run.describe()
    return single_bundle(out_dir)


def test_an_eda_bundle_is_sized_in_file_operations_never_block_iops(
    dbsim: Dbsim, dbsim_in_process: InProcessDbsim, out_dir: Path, tmp_path: Path
) -> None:
    bundle = _eda_bundle(dbsim, out_dir, tmp_path)
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    point = summary["workload"]["score"]["load_points"][0]
    result = dbsim_size(
        dbsim_in_process, "-e", "gcnv-large-volume-eda", "--bundle", bundle, "--json"
    )
    assert result.rc == EXIT_OK, result.describe()
    answer = json.loads(result.stdout)
    workload = answer["workload"]
    # The demand is the score's file operations and MiB/s, not the disk under the tree.
    assert workload["unit"] == "file ops/s"
    assert workload["read_iops"] + workload["write_iops"] == pytest.approx(point["achieved_ops_s"])
    assert workload["read_mibps"] + workload["write_mibps"] == pytest.approx(point["mib_s"])
    assert "device" not in workload["origin"] and bundle.name in workload["origin"]
    assert "1 job set(s)" in workload["note"]
    iops = next(c for c in answer["limits"] if c["kind"] == "iops")
    assert iops["demand"] == pytest.approx(point["achieved_ops_s"])
    text = dbsim_size(dbsim_in_process, "-e", "gcnv-large-volume-eda", "--bundle", bundle)
    assert text.rc == EXIT_OK, text.describe()
    out = text.stdout
    assert f"{point['achieved_ops_s']:,.1f} file ops/s" in out
    assert "file ops/s)" in out and "demand" in out and " IOPS)" not in out.split("limits:")[1]
    # Percentages as a person writes them: far from the limit says so, never 6 digits.
    assert "utilisation under 0.1 %, headroom over 99.9 %" in out
    assert "could carry more than 1,000 times its load" in out
    decimals = [float(v.replace(",", "")) for v in re.findall(r"(\d[\d,]*\.\d+) %", out)]
    assert decimals and all(v < 1000 for v in decimals), decimals
    # The vendor page by its English title and address, its figures with English separators.
    assert '"Performance benchmarks", Google Cloud NetApp Volumes documentation, https://' in out
    assert "«Comparativos de mercado de desempenho»" in out
    assert "21.5 GiBps, 1,350,000 IOPS" in out
    assert 'section in English: "Electronic design automation workload benchmarks"' in out
    # A block device makes no sense for a file run: one line, exit 2.
    wrong = dbsim_size(
        dbsim_in_process, "-e", "gcnv-large-volume-eda", "--bundle", bundle, "--device", "x"
    )
    assert "sized by its file operations" in assert_one_error_line(wrong)


def test_every_page_is_named_by_its_english_title(dbsim_in_process: InProcessDbsim) -> None:
    result = dbsim_size(dbsim_in_process, "--list", "--json")
    assert result.rc == EXIT_OK, result.describe()
    for row in json.loads(result.stdout):
        assert row["pages"], row["name"]
        for page in row["pages"]:
            assert page["title_en"] and page["publisher"] and page["title"], page
            assert page["url"] is None or page["url"].startswith("https://"), page


@pytest.mark.parametrize(
    "row",
    [
        # Issue #30: the page's own rows, read as interpolated and DOES NOT FIT before
        # (seed 000 lines 101-102 and 256-257).
        ("gcnv-extreme-nfsv3", "--read-mibps", "2284", "--write-mibps", "764", "64KiB"),
        ("gcnv-extreme-nfsv3", "--read-mibps", "610", "--write-mibps", "1835", "64KiB"),
        ("gcnv-extreme-smb", "--read-iops", "65700", "--write-iops", "65900", "8KiB"),
    ],
)
def test_a_published_row_asked_as_printed_fits_at_the_published_limit(
    dbsim_in_process: InProcessDbsim, row: tuple[str, ...]
) -> None:
    name, read_opt, read, write_opt, write, block = row
    args = ("-e", name, read_opt, read, write_opt, write, "--block-size", block)
    result = dbsim_size(dbsim_in_process, *args, "--json")
    assert result.rc == EXIT_OK, result.describe()
    answer = json.loads(result.stdout)
    assert (answer["verdict"], answer["certainty"], answer["basis"], answer["at_limit"]) == (
        "fits",
        "published",
        "published",
        True,
    )
    assert (answer["utilisation_pct"], answer["headroom_pct"]) == (100.0, 0.0)
    text = dbsim_size(dbsim_in_process, *args)
    assert text.rc == EXIT_OK, text.describe()
    assert "FITS, at the published limit: " in text.stdout
    assert "utilisation 100.0 %, headroom 0 %" in text.stdout and "-0.0 %" not in text.stdout


def test_an_untested_fit_exits_0_and_says_so(dbsim_in_process: InProcessDbsim) -> None:
    # ANF prints pure read and pure write only: 50/50 fits on an untested interpolation.
    args = ("-e", "anf-linux-volume", "--read-iops", "50000", "--write-iops", "50000")
    result = dbsim_size(dbsim_in_process, *args, "--block-size", "4KiB")
    assert result.rc == EXIT_OK, result.describe()
    assert "FITS (on an interpolation its page cannot test)" in result.stdout
    assert "\ncaveat: this verdict rests on an interpolation that no published point" in (
        result.stdout
    )


@pytest.mark.parametrize(
    ("args", "rc", "certainty", "said"),
    [
        # 781,25 MiB/s on 5 TiB Extreme: 128 MiBps per TiB binds, derived from seed 002's
        # pool example (line 139), never published.
        (
            ("-e", "gcnv-extreme-nfsv3", "--capacity", "5TiB", "--read-iops", "150000"),
            EXIT_DOES_NOT_FIT,
            "derived",
            "(seed 002_26a53d12d47323af.txt, line 139), not a rate per TiB",
        ),
        # The EDA maxima are 'up to' figures of one mixed run (seed 000 line 393).
        (
            ("-e", "gcnv-large-volume-eda", "--read-iops", "1000000"),
            EXIT_OK,
            "estimate",
            "not stated: the read/write mix, the request size",
        ),
    ],
)
def test_the_certainty_is_the_same_in_text_and_json(
    dbsim_in_process: InProcessDbsim, args: tuple[str, ...], rc: int, certainty: str, said: str
) -> None:
    full = (*args, "--write-iops", "50000", "--block-size", "4KiB")
    answer_json = dbsim_size(dbsim_in_process, *full, "--json")
    assert answer_json.rc == rc, answer_json.describe()
    answer = json.loads(answer_json.stdout)
    assert answer["certainty"] == certainty
    assert said in json.dumps(answer, ensure_ascii=False)
    text = dbsim_size(dbsim_in_process, *full)
    assert text.rc == rc and said in text.stdout
    assert "figure: published (a stored point" not in text.stdout
