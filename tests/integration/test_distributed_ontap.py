"""The array's counters in a distributed run are sampled once, not once per worker (issue #32).

``dbsim run --workers 2`` (a master and two local workers) with ``collectors.ontap`` pointed at
the recorded ONTAP replay (tests/support/ontap_replay.py: the REST API's documented answer
shapes on 127.0.0.1; each first-page GET of a collection advances the counters one step of
5 s). The master tells only its lowest-numbered worker to sample collectors of ``shared``
scope (sim.locust.master, ``shared_collectors``); before, both workers sampled the array and
the master kept one view (sim.live.worker_samples), doubling the array's REST requests.

Counted here: the replay's first-page GETs of the volumes (one per sample of one collector:
its start's reading and one per interval), against the intervals the merged bundle holds;
and the array's rates in the bundle, one row per interval, equal to the replay's steps (vol_data:
500 reads, 250 writes, 50 others per 5 s step: 160 IOPS). The workers share this host, whose
block devices the bundle keeps once beside the array's volume.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim import registry
from tests.support.ontap_replay import Entity, OntapReplay

pytestmark = pytest.mark.integration

USER, PASSWORD = "monitor", "Repl4y-s3cret!"
VOL_DATA = Entity(
    "volume", "svm1", "vol_data", "a1", (500, 250, 50), (200, 400, 100), (8192, 16384, 0)
)
RUN_TIMEOUT_S = 150.0


def test_the_array_is_sampled_by_one_worker_only(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBSIM_")}
    env.update(TMPDIR=str(tmp_path), ONTAP_T_USER=USER, ONTAP_T_PASSWORD=PASSWORD)
    with OntapReplay([VOL_DATA], username=USER, password=PASSWORD) as replay:
        ontap = (
            f"collectors.ontap={{cluster: '{replay.url}', username_env: ONTAP_T_USER, "
            "password_env: ONTAP_T_PASSWORD, svm: svm1, volumes: [vol_data]}"
        )
        argv = [sys.executable, "-m", "sim.locust", "run", "--workers", "2", "--sessions", "2",
                "--duration", "5", "--warmup", "0", "--set", ontap, "-o", str(out), "--json"]  # fmt: skip
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
        requests = [path for path, query in replay.requests if "start.uuid" not in query]
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads(done.stdout)
    assert summary["status"] == "completed"
    workers = summary["distributed"]["workers"]
    assert len(workers) == 2 and summary["distributed"]["lost"] == []

    bundle = Path(summary["bundle"])
    source = registry.collector_with_role(registry.ROLE_ARRAY)
    assert source is not None
    lines = (bundle / "timeseries" / f"{source}.csv").read_text().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]
    intervals = max(int(w["intervals_received"]) for w in workers)
    # One view of the array per interval (a worker's first interval may come before a reading
    # spans one: at most one interval without a row), and from one worker's readings only.
    assert intervals - 1 <= len(rows) <= intervals, (len(rows), intervals)
    assert {r["entity"] for r in rows} == {"volume:svm1/vol_data"}
    volume_gets = [p for p in requests if p == "/api/storage/volumes"]
    # One reading at the collector's start and one per interval, by one worker; two workers
    # sampling it would double them.
    assert len(volume_gets) <= intervals + 2, (len(volume_gets), intervals)
    assert len(volume_gets) >= intervals
    for row in rows:
        assert float(row["total_iops"]) == pytest.approx(160.0)
        assert float(row["read_iops"]) == pytest.approx(100.0)
    # Beside the array, this host's block devices, once (one host, no per-host names).
    assert summary["storage"][source]["volume:svm1/vol_data"]["total_iops"] == pytest.approx(160)
    device = registry.collector_with_role(registry.ROLE_DEVICE)
    assert device is not None and summary["storage"].get(device)
    print(f"array: {len(volume_gets)} volume readings for {intervals} intervals of 2 workers "
          f"(measured, the replay's request log)")  # fmt: skip
