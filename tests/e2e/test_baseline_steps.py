"""``dbsim baseline`` beyond one fio run per point, end to end: ``--dry-run`` (no fio, nothing
written), the iodepth search and the iorate curve with the real fio on a small tree under the
test's temporary directory (runs of about a second)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from sim.baseline.strategy import SEARCH_DEPTHS, SearchStep, search_verdict
from tests.e2e.conftest import Dbsim, single_bundle
from tests.e2e.test_baseline_cli import assert_parsed_as_fio_reported, assert_refused, snapshot

pytestmark = [pytest.mark.e2e]
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
CPUS = os.cpu_count() or 1
JOB = re.compile(r"^## \[(\d+)/(\d+)\] (\S+): fio/\S+\.fio$", re.MULTILINE)


def job_files(stdout: str) -> dict[str, str]:
    """``--dry-run``'s output cut into one job file per point id."""
    marks = list(JOB.finditer(stdout))
    return {
        m.group(3): stdout[m.end() : marks[i + 1].start() if i + 1 < len(marks) else len(stdout)]
        for i, m in enumerate(marks)
    }


def setting(job: str, key: str) -> str:
    found = re.search(rf"^{key}=(.*)$", job, re.MULTILINE)
    assert found, f"no {key}= in\n{job}"
    return found.group(1)


def no_fio_env(base: Path) -> dict[str, str]:
    """A PATH with no fio on it (the child's python is started by its absolute path)."""
    empty = base / "bin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty)}


# --------------------------------------------------------------------------- --dry-run


def test_iscsi_dry_run_prints_each_tables_load(dbsim: Dbsim, tmp_path: Path) -> None:
    """Seed 000's iSCSI tables: 24 jobs per VM at iodepth 4 for 4 and 8 KiB random, 1 for 64
    and 256 KiB sequential, scaled as docs/baseline.md says (numjobs = min(24, CPUs), iodepth
    = ceil(24 × depth / numjobs)); all 20 points; no fio on PATH, nothing written."""
    target = tmp_path / "mine"
    target.mkdir()
    before = snapshot(target)
    result = dbsim("baseline", "--preset", "iscsi", "--dry-run", target, env=no_fio_env(tmp_path))
    assert result.rc == 0, result.describe()
    assert result.stderr == "", result.describe()
    # The cost on the second line (not only after 600 lines of job files), and again at the end.
    lines = result.stdout.splitlines()
    assert lines[1].startswith("# cost: 20 point(s); 20 fio run(s) of 30 s + 5 s ramp: about ")
    assert re.search(r"; 2 × [\d.]+ GiB = [\d.]+ GiB laid out first$", lines[1]), lines[1]
    assert lines[-1] == lines[1]
    jobs = job_files(result.stdout)
    assert len(jobs) == 20 and {i.rsplit("-r", 1)[0] for i in jobs} == {
        "rand-4k", "rand-8k", "seq-64k", "seq-256k"
    }  # fmt: skip
    numjobs = min(24, CPUS)
    for point_id, job in jobs.items():
        depth = 4 if point_id.startswith("rand") else 1
        assert f"iodepth definido como {depth}.»" in job, point_id
        assert "720 GiB para cada máquina virtual" in job, point_id
        assert int(setting(job, "numjobs")) == numjobs, point_id
        assert int(setting(job, "iodepth")) == math.ceil(24 * depth / numjobs), point_id
        assert f"in flight, for one seed client's 24 jobs × iodepth {depth}" in job
        assert "# working set:" in job and "per n2-standard-32 of 128 GiB memory" in job
        assert setting(job, "directory") == str(target / "dbsim-baseline")
    assert snapshot(target) == before, "a dry run wrote to the target"
    assert "# cost: 20 point(s); 20 fio run(s)" in result.stdout

    literal = dbsim("baseline", "--preset", "iscsi", "--dry-run", "--numjobs", "24",
                    "--only", "r50", tmp_path / "absent", env=no_fio_env(tmp_path))  # fmt: skip
    assert literal.rc == 0, literal.describe()
    depths = {i: int(setting(j, "iodepth")) for i, j in job_files(literal.stdout).items()}
    assert depths == {"rand-4k-r50": 4, "rand-8k-r50": 4, "seq-64k-r50": 1, "seq-256k-r50": 1}
    assert not (tmp_path / "absent").exists()


def test_dry_run_shows_the_search_and_the_curve(dbsim: Dbsim, tmp_path: Path) -> None:
    result = dbsim(
        "baseline", "--preset", "random-4k", "--preset", "four-corners", "--only", "r0",
        "--size", "1G", "--dry-run", tmp_path / "t", env=no_fio_env(tmp_path),
    )  # fmt: skip
    assert result.rc == 0, result.describe()
    jobs = job_files(result.stdout)
    assert set(jobs) == {"rand-4k-r0", "seq-64k-r0"}  # rand-4k-r0: random-4k names it first
    assert "# iodepth search: seed iodepth 1, 6, 11" in jobs["rand-4k-r0"]
    assert "«O parâmetro iodepth foi aumentado em cinco cada execução" in jobs["rand-4k-r0"]
    assert "# iorate curve: after this uncapped run, 12 runs at 10, 20" in jobs["seq-64k-r0"]
    assert "\nrate_iops=" not in jobs["seq-64k-r0"]  # the uncapped run comes first
    assert "# working set: 1 GiB" in result.stdout and "--size 1 GiB" in result.stdout
    assert "the target is on" in result.stdout and "not NFS" in result.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--iodepth", "deep"), "--iodepth"),
        (("--curve", "0,50"), "--curve"),
        (("--capacity", "lots"), "--capacity"),
        (("--capacity", "1TB"), "give --envelope"),  # a size with no figures to choose
        (("--capacity", "1TiB", "--envelope", "gcnv-extreme-nfsv3"), "not published per"),
        (("--preset", "iscsi-9k"), "--preset"),
    ],
)
def test_dry_run_bad_input(
    dbsim: Dbsim, tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    result = dbsim("baseline", "--dry-run", tmp_path / "t", *args, env=no_fio_env(tmp_path))
    assert_refused(result, tmp_path / "out", needle)
    assert not (tmp_path / "t").exists()


# --------------------------------------------------------------------------- the search


def _run(dbsim: Dbsim, tmp_path: Path, *args: str) -> tuple[dict[str, Any], Path, str]:
    out = tmp_path / "out"
    result = dbsim("baseline", tmp_path / "tree", "--size", "32M", "-o", out, *args, timeout=180)
    assert result.rc == 0, result.describe()
    bundle = single_bundle(out)
    baseline = json.loads((bundle / "baseline.json").read_text(encoding="utf-8"))
    (point,) = baseline["points"]
    return point, bundle, result.stdout


@needs_fio
def test_iodepth_search_with_fio(dbsim: Dbsim, tmp_path: Path) -> None:
    """GCNV's 4 KiB random read: the depth is searched by seed iodepth 1, 6, 11 … each scaled
    to this host's jobs; the recorded runs obey the stopping rule, and the point is the run
    with the most IOPS, its fio report adopted as fio/<point>.*."""
    point, bundle, stdout = _run(
        dbsim, tmp_path, "--preset", "random-4k", "--only", "r100", "--runtime", "0.6",
        "--ramp", "0.2",
    )  # fmt: skip
    search = point["search"]
    steps = search["steps"]
    jobs = point["numjobs"]
    assert [s["seed_iodepth"] for s in steps] == list(SEARCH_DEPTHS[: len(steps)])
    assert [s["iodepth"] for s in steps] == [
        math.ceil(8 * d / jobs) for d, _ in zip(SEARCH_DEPTHS, steps, strict=False)
    ]
    planned = [(d, math.ceil(8 * d / jobs)) for d in SEARCH_DEPTHS]
    recorded = [SearchStep(s["seed_iodepth"], s["iodepth"], s["iops"]) for s in steps]
    for k in range(1, len(recorded)):  # every earlier prefix said: go on
        assert not search_verdict(recorded[:k], planned).done, (k, steps)
    verdict = search_verdict(recorded, planned)
    assert verdict.done and verdict.why == search["why"]
    best = max(steps, key=lambda s: s["iops"])
    assert search["settled_iodepth"] == best["iodepth"] == point["iodepth"]
    assert point["iops"] == best["iops"]
    fio_dir = bundle / "fio"
    settled = f"rand-4k-r100.qd{best['iodepth']}"
    for suffix in (".fio", ".json", ".txt"):
        assert (fio_dir / f"rand-4k-r100{suffix}").read_bytes() == (
            fio_dir / f"{settled}{suffix}"
        ).read_bytes()
    assert_parsed_as_fio_reported(bundle, point)
    # The console wraps the search's line at its width, where a deeper search (104 at seed 26,
    # a CI run on a busy host) put a break inside this phrase: read as words.
    said = " ".join(stdout.split())
    assert f"settled on {best['iodepth']} (seed iodepth {best['seed_iodepth']})" in said
    assert "(search)" in stdout


# --------------------------------------------------------------------------- the curve


@pytest.mark.timing
@needs_fio
def test_iorate_curve_with_fio(dbsim: Dbsim, tmp_path: Path) -> None:
    """Four corners' 4 KiB random read: the uncapped run, then fio capped per job at 20, 60
    and 120 % of its IOPS; the low steps get what they asked for, and the curve is printed and
    drawn."""
    point, bundle, stdout = _run(
        dbsim, tmp_path, "--preset", "four-corners", "--only", "rand-4k-r100",
        "--curve", "20,60,120", "--runtime", "1", "--ramp", "0.3",
    )  # fmt: skip
    curve = point["curve"]
    assert curve["max_iops"] == point["iops"] > 0
    steps = {s["pct"]: s for s in curve["steps"]}
    assert set(steps) == {20, 60, 120}
    for pct, step in steps.items():
        rate = max(1, round(point["iops"] * pct / 100 / point["numjobs"]))
        job = (bundle / "fio" / f"rand-4k-r100.iorate{pct}.fio").read_text(encoding="utf-8")
        assert setting(job, "rate_iops") == str(rate) and setting(job, "rate_process") == "poisson"
        assert int(setting(job, "numjobs")) == point["numjobs"]
        assert setting(job, "iodepth") == str(point["iodepth"])
        assert step["target_iops"] == rate * point["numjobs"]
        report = json.loads((bundle / "fio" / f"rand-4k-r100.iorate{pct}.json").read_text())
        assert step["iops"] == report["jobs"][0]["read"]["iops"]
    # fio's poisson arrivals over the 1 s run: a count's relative error is 1/sqrt(target), 3 %
    # at 1,000 IOPS (the uncapped 4 KiB read runs at thousands here, so 20 % of it at hundreds
    # or more); 15 % also covers the ramp's edges and fio falling behind on a loaded host.
    assert steps[20]["iops"] == pytest.approx(steps[20]["target_iops"], rel=0.15)
    assert "rand-4k-r100: iorate curve (uncapped" in stdout
    html = (bundle / "report.html").read_text(encoding="utf-8")
    assert "iorate curves" in html and "rand-4k-r100: latency against IOPS" in html
