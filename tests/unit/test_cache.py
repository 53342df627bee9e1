"""The cache arithmetic (sim.core.cache): data against EXERCISE_FACTOR x (server cache + host
RAM) before the load, device reads against the workload's reads after the run, and what the
verdict and the console make of a run that never reached the storage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sim.analysis.analyze import run_verdict
from sim.core.cache import (
    EXERCISE_FACTOR,
    cache_cap_mib,
    cache_section,
    exercised_section,
    host_ram_bytes,
    memory_cgroup_limit,
    not_exercised_headline,
    recipe_text,
    server_is_local,
)
from sim.core.metrics import OpStats
from sim.dialects import SqlDialect
from storage.targets.filetree import FileTreeTarget
from storage.targets.mysql_record import MYSQL_DIALECT
from storage.targets.oracle_record import ORACLE_DIALECT
from storage.targets.postgres_record import POSTGRES_DIALECT
from storage.targets.settings import FileTreeSettings, SqliteSettings
from storage.targets.sqlite import SQLITE_DIALECT, SqliteTarget
from workloads.eda.parameters import EdaParameters
from workloads.eda.workload import EdaWorkload
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload

MIB, GIB = 2**20, 2**30


def slob(**params: Any) -> SlobWorkload:
    return SlobWorkload(SlobParameters(**params), SqliteTarget(SqliteSettings()))


def ops(**counts: int) -> dict[str, OpStats]:
    out = {}
    for name, n in counts.items():
        stats = OpStats()
        for _ in range(n):
            stats.histogram.record_value(100)
        out[name] = stats
    return out


def test_data_under_the_factor_times_the_caches_is_warned_with_a_scale_that_reaches_it() -> None:
    workload = slob(scale="80M")
    section = cache_section(
        data_bytes=workload.data_bytes(),
        server_cache_name="shared_buffers",
        server_cache_bytes=128 * MIB,
        host_ram=1 * GIB,
        scale_for=workload.scale_for_bytes,
    )
    assert section["data_bytes"] == 80 * MIB
    assert section["needed_bytes"] == EXERCISE_FACTOR * (128 * MIB + GIB) == 4.5 * GIB
    assert section["hidden_by_caches"] is True
    assert section["recommended"].startswith("scale: 5G ")
    assert (
        "80 MiB" in section["warning"]
        and "shared_buffers 128 MiB + host RAM 1.0 GiB" in (section["warning"])
    )
    # The recommended setting, applied, builds at least the data that was asked for.
    bigger = slob(scale=section["recommended"].split()[1])
    assert bigger.data_bytes() >= section["needed_bytes"]


def test_data_at_the_factor_times_the_caches_is_not_warned() -> None:
    section = cache_section(
        data_bytes=EXERCISE_FACTOR * (128 * MIB + 256 * MIB),
        server_cache_name="shared_buffers",
        server_cache_bytes=128 * MIB,
        host_ram=256 * MIB,
        scale_for=lambda n: f"scale: {n}",
    )
    assert section["hidden_by_caches"] is False
    assert "warning" not in section and "recommended" not in section


def test_a_remote_server_is_judged_on_its_own_cache_and_says_the_host_ram_is_unknown() -> None:
    section = cache_section(
        data_bytes=256 * MIB,
        server_cache_name="innodb_buffer_pool_size",
        server_cache_bytes=128 * MIB,
        host_ram=None,
        scale_for=lambda n: None,
    )
    assert section["host_ram_bytes"] == "unknown"
    assert section["needed_bytes"] == 512 * MIB
    assert "host RAM unknown" in section["warning"] and "use" not in section["warning"]


def test_nothing_known_of_the_caches_gives_no_warning() -> None:
    section = cache_section(
        data_bytes=MIB,
        server_cache_name="the buffer pool",
        server_cache_bytes=None,
        host_ram=None,
        scale_for=lambda n: "x",
    )
    assert section["hidden_by_caches"] is False and "warning" not in section


def test_host_ram_is_memtotal_and_unknown_when_unreadable(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683584 kB\nMemFree:  1 kB\n")
    assert host_ram_bytes(meminfo) == 24683584 * 1024
    assert host_ram_bytes(tmp_path / "absent") is None
    real = host_ram_bytes()
    assert real is not None and real > 64 * MIB


@pytest.mark.parametrize(
    ("host", "local"),
    [(None, True), ("127.0.0.1", True), ("localhost", True), ("::1", True),
     ("/var/run/postgresql", True), ("db.example.net", False), ("10.0.0.5", False)],
)  # fmt: skip
def test_only_a_server_on_this_host_counts_this_hosts_ram(host: str | None, local: bool) -> None:
    assert server_is_local({"kind": "postgres", "host": host}) is local


def test_device_reads_under_one_percent_of_the_reads_is_storage_not_exercised() -> None:
    totals = ops(read=7000, update=700)
    section = exercised_section({"vda": {"r_s": 5.0}}, totals, {"read", "scan"}, 10.0)
    assert section["read_ops_s"] == 700.0 and section["device_reads_pct"] == pytest.approx(0.714)
    assert section["exercised"] is False
    assert section["reason"].startswith("vda read 5.0/s against 700.0 reading operations/s")
    busy = exercised_section({"vda": {"r_s": 104.0}}, totals, {"read"}, 10.0)
    assert busy["exercised"] is True and "reason" not in busy


def test_no_device_or_no_reads_cannot_be_judged() -> None:
    assert exercised_section({}, ops(read=100), {"read"}, 10.0)["exercised"] is None
    writes_only = exercised_section({"vda": {"r_s": 0.0}}, ops(update=100), {"read"}, 10.0)
    assert writes_only["exercised"] is None and writes_only["why"] == "the workload read too little"


def test_a_run_that_did_not_exercise_the_storage_gets_no_storage_call() -> None:
    reason = "vda read 0.0/s against 700.0 reading operations/s (0 %, under 1 %)"
    summary = {
        "errors": {"invalid": False},
        "cache": {"recommended": "scale: 95G", "exercised": {"exercised": False, "reason": reason}},
    }
    call = {"call": "storage-bound", "summary": "Storage-bound: …", "evidence": [{"check": "x"}]}
    verdict = run_verdict(summary, call)
    assert verdict["call"] == "not-exercised"
    assert verdict["storage_call_withheld"] == "storage-bound"
    assert reason in verdict["summary"] and verdict["evidence"] == [{"check": "x"}]
    headline = not_exercised_headline(summary)
    assert headline is not None and headline.startswith(f"STORAGE NOT EXERCISED: {reason}")
    assert headline.endswith("use scale: 95G")
    summary["cache"]["exercised"] = {"exercised": True}
    assert run_verdict(summary, call) is call and not_exercised_headline(summary) is None


def test_the_warning_offers_the_engines_cache_caps_first_then_the_scale() -> None:
    """The cheaper way where the user controls the box (caps on the caches at a quarter of the
    data, by the dialect record's recipe) comes before the scale that would outgrow them."""
    workload = slob(scale="80M")
    recipe = MYSQL_DIALECT.cache_recipe
    section = cache_section(
        data_bytes=workload.data_bytes(),
        server_cache_name="innodb_buffer_pool_size",
        server_cache_bytes=128 * MIB,
        host_ram=1 * GIB,
        scale_for=workload.scale_for_bytes,
        recipe=recipe,
    )
    assert section["cap_bytes"] == 20 * MIB and cache_cap_mib(80 * MIB) == 20
    assert section["recipe"] == recipe_text(recipe, 80 * MIB)
    assert "innodb_buffer_pool_size = 20M with innodb_flush_method = O_DIRECT" in section["recipe"]
    warning = section["warning"]
    assert warning.index("cap the caches at 20 MiB: ") < warning.index("or use scale: 5G")
    headline = not_exercised_headline(
        {"cache": {**section, "exercised": {"exercised": False, "reason": "vda read 0.0/s"}}}
    )
    assert headline is not None
    assert headline.index(section["recipe"]) < headline.index("use scale: 5G")


@pytest.mark.parametrize(
    ("dialect", "words"),
    [
        (POSTGRES_DIALECT, ["shared_buffers = 5MB", "memory cgroup of 20M", "debug_io_direct",
                            "--pg-cache-cap 20M"]),
        (MYSQL_DIALECT, ["innodb_buffer_pool_size = 20M", "O_DIRECT"]),
        (ORACLE_DIALECT, ["db_cache_size = 20M", "filesystemio_options = setall"]),
        (SQLITE_DIALECT, ["memory cgroup of its own memory + 20M"]),
    ],
)  # fmt: skip
def test_each_engine_has_its_recipe(dialect: SqlDialect, words: list[str]) -> None:
    text = recipe_text(dialect.cache_recipe, 80 * MIB)
    assert all(word in text for word in words), text


def test_direct_io_leaves_only_the_servers_cache_and_a_memory_cgroup_bounds_both() -> None:
    direct = cache_section(
        data_bytes=80 * MIB,
        server_cache_name="innodb_buffer_pool_size",
        server_cache_bytes=16 * MIB,
        host_ram=24 * GIB,
        scale_for=lambda n: "x",
        direct=True,
    )
    assert direct["needed_bytes"] == EXERCISE_FACTOR * 16 * MIB and not direct["hidden_by_caches"]
    capped = cache_section(
        data_bytes=80 * MIB,
        server_cache_name="shared_buffers",
        server_cache_bytes=16 * MIB,
        host_ram=24 * GIB,
        scale_for=lambda n: "x",
        memory_limit=64 * MIB,
    )
    assert capped["needed_bytes"] == EXERCISE_FACTOR * 64 * MIB and capped["hidden_by_caches"]
    assert "the memory cgroup's limit 64 MiB" in capped["warning"]
    assert "host RAM" not in capped["warning"]
    # A limit above the caches changes nothing.
    loose = cache_section(
        data_bytes=80 * MIB,
        server_cache_name="shared_buffers",
        server_cache_bytes=16 * MIB,
        host_ram=1 * GIB,
        scale_for=lambda n: "x",
        memory_limit=8 * GIB,
    )
    assert loose["needed_bytes"] == EXERCISE_FACTOR * (16 * MIB + GIB)


def test_the_memory_cgroup_limit_is_the_least_of_the_group_and_its_ancestors(
    tmp_path: Path,
) -> None:
    proc, root = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "cgroup").write_text("5:blkio:/lab\n4:memory:/outer/lab\n0::/\n")
    group = root / "memory" / "outer" / "lab"
    group.mkdir(parents=True)
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (root / "memory" / "outer" / "memory.limit_in_bytes").write_text(f"{GIB}\n")
    (group / "memory.limit_in_bytes").write_text(f"{64 * MIB}\n")
    assert memory_cgroup_limit(42, proc, root) == 64 * MIB
    (group / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert memory_cgroup_limit(42, proc, root) == GIB
    (root / "memory" / "outer" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert memory_cgroup_limit(42, proc, root) is None
    assert memory_cgroup_limit(43, proc, root) is None  # no such process
    # cgroup v2: memory.max, "max" for none.
    (proc / "7").mkdir()
    (proc / "7" / "cgroup").write_text("0::/system.slice/db.service\n")
    v2 = tmp_path / "v2"
    (v2 / "system.slice" / "db.service").mkdir(parents=True)
    (v2 / "cgroup.controllers").write_text("memory\n")
    (v2 / "system.slice" / "memory.max").write_text("max\n")
    (v2 / "system.slice" / "db.service" / "memory.max").write_text(f"{32 * MIB}\n")
    assert memory_cgroup_limit(7, proc, v2) == 32 * MIB


def test_an_eda_tree_offers_direct_io_first_and_direct_io_counts_no_page_cache() -> None:
    """EDA's own reads: the recipe names ``direct_io: true``, and a run with it set holds the
    data against no cache at all (a file tree has no server cache)."""
    target = FileTreeTarget(FileTreeSettings(path=Path("/nonexistent/eda")))
    buffered = EdaWorkload(EdaParameters.model_validate({"job_sets": 1}), target)
    assert buffered.reads_direct() is False
    section = cache_section(
        data_bytes=buffered.data_bytes(),
        server_cache_name="none (the host's page cache)",
        server_cache_bytes=None,
        host_ram=24 * GIB,
        scale_for=buffered.scale_for_bytes,
        recipe=buffered.cache_recipe(),
    )
    warning = section["warning"]
    assert warning.index("workload.parameters.direct_io: true") < warning.index("use job_sets: ")
    direct = EdaWorkload(EdaParameters.model_validate({"job_sets": 1, "direct_io": True}), target)
    assert direct.reads_direct() is True
    unwarned = cache_section(
        data_bytes=direct.data_bytes(),
        server_cache_name="none (the host's page cache)",
        server_cache_bytes=None,
        host_ram=24 * GIB,
        scale_for=direct.scale_for_bytes,
        direct=direct.reads_direct(),
    )
    assert unwarned["needed_bytes"] == 0 and unwarned["hidden_by_caches"] is False


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), (1, True), (0, False), ("1", True), ("0", False),
     ("t", True), ("f", False), ("true", True), ("off", False), (None, False)],
)  # fmt: skip
def test_a_drivers_boolean_is_read_as_it_means(value: object, expected: bool) -> None:
    """psqlODBC sends PostgreSQL's booleans as '0'/'1': bool('0') took PostgreSQL 15 through
    ODBC for a server reading with direct I/O ('no page cache: direct I/O')."""
    from sim.core.cache import truth

    assert truth(value) is expected
