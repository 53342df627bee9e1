"""``--workers auto``'s plan (sim.core.workers): which runs are spread over local processes."""

from __future__ import annotations

import pytest

from sim.config.resolve import validate
from sim.core.workers import CLIENT_CPU_US_PER_FILE_OP, CORE_SHARE, parse_workers, plan_workers
from sim.errors import ConfigError


def scenario(kind: str = "filetree", **load: object) -> object:
    target = {"kind": kind, "path": "/tmp/x"} if kind != "postgres" else {"kind": "postgres"}
    workload = "eda" if kind == "filetree" else "slob"
    return validate({"name": "w", "target": target, "workload": {"name": workload}, "load": load})


def test_parse() -> None:
    assert parse_workers("auto") is None and parse_workers(" AUTO ") is None
    assert parse_workers("0") == 0 and parse_workers("3") == 3
    for bad in ("-1", "two", ""):
        with pytest.raises(ConfigError, match="--workers"):
            parse_workers(bad)


def test_a_closed_file_loop_gets_one_worker_per_cpu_at_most_one_per_session() -> None:
    assert plan_workers(scenario(mode="closed"), sessions=8, cpus=2).workers == 2
    assert plan_workers(scenario(mode="closed"), sessions=3, cpus=16).workers == 3
    assert plan_workers(scenario(mode="closed"), sessions=1, cpus=16).workers == 0
    assert plan_workers(scenario(mode="closed"), sessions=8, cpus=1).workers == 0


def test_an_open_file_loop_is_spread_only_past_what_one_process_carries() -> None:
    per_process = CORE_SHARE * 1e6 / CLIENT_CPU_US_PER_FILE_OP
    low = scenario(mode="open", rate_ops_s=per_process * 0.9)
    high = scenario(mode="open", rate_ops_s=per_process * 2.5)
    assert plan_workers(low, sessions=8, cpus=4).workers == 0
    assert plan_workers(high, sessions=8, cpus=4).workers == 3
    assert plan_workers(high, sessions=8, cpus=2).workers == 2  # never more than the CPUs


def test_database_targets_stay_in_one_process() -> None:
    plan = plan_workers(scenario("postgres", mode="closed", sessions=8), sessions=8, cpus=8)
    assert plan.workers == 0 and "server" in plan.reason
