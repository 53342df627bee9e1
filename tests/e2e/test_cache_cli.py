"""``dbsim run`` on data the host's page cache holds: the pre-load warning names the scale
that would exercise the storage, and the run is "storage not exercised" before any figure.

The SQLite file lives on a loop device of its own, so nobody else's reads land on the device
the block collector watches: the data was just written, so every read is served from memory
and the device reads nothing.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import Dbsim, read_summary, single_bundle
from tests.support.loopfs import loop_ext4

# timing: both tests judge whether a run's reads reached its device, which holds only while the
# file stays in the page cache; when a lab's `lab up` still dropped every cache of the host
# (echo 3 > drop_caches), a CI run's loop device read 1,953.7/s beside 460 reading
# operations/s in the parallel phase. A lab now drops only its own files' pages
# (storage/lab/pagecache.py); beside the eight workers of the parallel phase memory pressure
# could still evict the file, so it runs in the timing phase.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timing,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("losetup"), reason="needs root"),
]


def cached_scenario(where: Path, disk: Path, name: str, duration_s: int) -> Path:
    """A read-only SLOB run on 78 MiB of SQLite on ``disk``, just written (so page-cached)."""
    scenario = where / f"{name}.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "target": {"kind": "sqlite", "path": str(disk / "slob.db")},
                "workload": {"name": "slob", "parameters": {"update_pct": 0, "scale": 10000}},
                "load": {"duration_s": duration_s, "warmup_s": 1},
            }
        )
    )
    return scenario


@contextlib.contextmanager
def held_in_memory(path: Path) -> Iterator[None]:
    """Keep every page of ``path`` in the page cache: mapped, each page touched once.

    This machine's kernel runs DAMON with a ``pageout`` scheme (kdamond: unmapped page-cache
    pages in physical regions it samples as rarely accessed are paged out, up to 128 MiB a
    second; tests/README.md): a file just written lands in long-idle memory, is taken for cold,
    and parts of it were evicted during the run and read back from the device (bursts of
    35-100 reads of 8 KiB; beside four other timing workers and stress-ng, over 1 % of the
    sessions' reads). The scheme leaves mapped pages alone, so a mapping held by the test
    makes "the page cache holds the data" true for the whole run on such a host too."""
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        for offset in range(0, len(mapped), mmap.PAGESIZE):
            mapped[offset]  # fault the page in: its mapping is what the scheme skips
        yield


def test_a_page_cached_sqlite_run_is_storage_not_exercised(
    dbsim: Dbsim, tmp_path: Path, out_dir: Path
) -> None:
    with loop_ext4(tmp_path / "disk", size_mib=256) as disk:
        scenario = cached_scenario(tmp_path, disk, "cached", duration_s=4)
        loaded = dbsim("load", scenario, timeout=180)  # the run finds the data just loaded
        assert loaded.rc == 0, loaded.describe()
        with held_in_memory(disk / "slob.db"):
            result = dbsim("run", scenario, "-o", out_dir, timeout=180)
    assert result.rc == 0, result.describe()
    summary = read_summary(single_bundle(out_dir))
    cache = summary["cache"]
    # Before the load: 80 MiB against this host's RAM (SQLite has no cache of its own).
    assert cache["data_bytes"] == 10000 * 8192 and cache["server_cache"]["bytes"] is None
    assert cache["hidden_by_caches"] is True and cache["recommended"].startswith("scale: ")
    warning = [line for line in result.stderr_lines if line.startswith("dbsim warning: cache: ")]
    assert len(warning) == 1 and cache["recommended"] in warning[0], result.describe()
    # After the run: the loop device read (almost) nothing while the sessions read.
    exercised = cache["exercised"]
    assert exercised["exercised"] is False, exercised
    assert exercised["devices"] and all(d.startswith("loop") for d in exercised["devices"])
    assert exercised["read_ops_s"] > 100 and exercised["device_reads_pct"] < 1
    assert any(m.startswith("storage not exercised: ") for m in summary["messages"])
    # Said before any figure: the headline comes before the operations table.
    out = result.stdout
    assert out.index("STORAGE NOT EXERCISED: ") < out.index("ops/s"), result.describe()
    analysis = json.loads((single_bundle(out_dir) / "analysis.json").read_text())
    assert analysis["verdict"]["call"] == "not-exercised"
    assert analysis["verdict"]["storage_call_withheld"] != "not-exercised"
    report = (single_bundle(out_dir) / "report.html").read_text()
    assert report.index("STORAGE NOT EXERCISED") < report.index("<table")


def test_quiet_prints_the_path_and_still_says_storage_not_exercised(
    dbsim: Dbsim, tmp_path: Path, out_dir: Path
) -> None:
    """``old=$(dbsim run … --quiet)`` (docs/validation.md's recipe) takes the path from stdout;
    the line that says the run measured the caches goes to stderr, not nowhere."""
    with loop_ext4(tmp_path / "disk", size_mib=256) as disk:
        scenario = cached_scenario(tmp_path, disk, "cached-quiet", duration_s=3)
        result = dbsim("run", scenario, "-o", out_dir, "--quiet", timeout=180)
    assert result.rc == 0, result.describe()
    bundle = single_bundle(out_dir)
    assert result.stdout.strip() == str(bundle), result.describe()
    said = [line for line in result.stderr_lines if "STORAGE NOT EXERCISED: " in line]
    # Said exactly when the summary says so: memory pressure (or anyone's cache drop) beside
    # this test can empty the page cache mid-run, and then the device did read.
    if read_summary(bundle)["cache"]["exercised"]["exercised"] is not False:
        assert said == [], result.describe()
        return
    assert len(said) == 1 and said[0].startswith("dbsim: STORAGE NOT EXERCISED: loop"), said
    assert "its figures describe the caches" in said[0] and "use scale: " in said[0]
    # The cheaper way first: the SQLite recipe caps the page cache dbsim's reads go through.
    assert said[0].index("cap the caches: dbsim run in a memory cgroup") < said[0].index("scale")
