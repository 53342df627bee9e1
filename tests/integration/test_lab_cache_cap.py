"""The cache warning's cheaper way, taken on the lab's PostgreSQL (issue #27, point 7).

As root, a lab of the test's own (state, images, mount point, cgroup name, a free port) with
a throwaway PostgreSQL under the lab's default memory limit (256 MiB) and 16 MB of
shared_buffers. ``dbsim load`` of a 160 MiB SLOB table there warns that the caches may hold
the data and offers ``dbsim lab up --postgres --pg-cache-cap 40M`` (a quarter of the data).
That option, applied to the running lab, makes the memory group's limit 40 MiB and
shared_buffers 10 MB and restarts the cluster. A read-only ``dbsim run`` on the loaded table
then is not warned (the check reads the backend's memory cgroup: 4 x 40 MiB = the data) and
is **not** "storage not exercised": the lab's loop device read while the sessions read.

A new lab built with the cap starts its cluster under it (limit and shared_buffers).

No ceiling is set and no rate is asserted, only the run's verdict on the caches (the device
reads a share of the reads, however fast the host's disk is), so the test is not a timing
test. About a minute (the load, two server starts, a 6 s run in open loop at 200 ops/s).
"""

from __future__ import annotations

import json
import pwd
import re
from pathlib import Path

import pytest
import yaml

from sim.errors import ConfigError
from storage.lab import Lab
from storage.lab.pgcluster import PG_USER, pg_bin
from storage.lab.status import postgres_target, text_lines
from tests.integration.test_lab import _free_port, lab_env  # noqa: F401 - the fixture
from tests.integration.test_lab_volumes import _cli

pytestmark = [pytest.mark.integration, pytest.mark.root]

MiB = 1 << 20
ROWS = 20_480  # one 8 KiB block each: 160 MiB, so the recommended cap is 40 MiB


def test_a_run_on_the_cache_cap_the_warning_recommended_exercises_the_storage(
    lab_env: tuple[Lab, Path],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    lab, mount_point = lab_env
    try:
        pg_bin()
        pwd.getpwnam(PG_USER)
    except (ConfigError, KeyError) as exc:
        pytest.skip(f"!!! NOT RUN: no PostgreSQL server binaries or {PG_USER} user: {exc}")
    status = lab.up(512 * MiB, mount_point, postgres=True, pg_port=_free_port(55446))
    runs = tmp_path
    scenario = runs / "capped.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": "capped",
                "target": postgres_target(status, status["volumes"][0]),
                "workload": {
                    "name": "slob",
                    "parameters": {
                        "table_prefix": "capped",
                        "scale": ROWS,
                        "update_pct": 0,
                        "load_batch_rows": 4096,
                    },
                },
                # Open loop at 200 ops/s: the verdict is the device reads' share of the
                # reads (one SLOB read touches 63 rows on a table 4 x the cap), not a rate;
                # closed loop flat out spent the run's 6 s of 4 sessions and their backends.
                "load": {
                    "sessions": 4,
                    "duration_s": 5,
                    "warmup_s": 1,
                    "mode": "open",
                    "rate_ops_s": 200,
                },
            },
            sort_keys=False,
        )
    )
    loaded = _cli("load", str(scenario))
    warning = [line for line in loaded.stderr.splitlines() if "warning: cache: " in line]
    assert len(warning) == 1, loaded.stderr
    # Under the lab's 256 MiB memory group: the group's limit is the caches' bound, and the
    # cheaper way comes before the scale.
    assert "the memory cgroup's limit 256 MiB" in warning[0], warning[0]
    offered = re.search(r"dbsim lab up --postgres --pg-cache-cap (\d+)M", warning[0])
    assert offered is not None, warning[0]
    assert warning[0].index(offered.group(0)) < warning[0].index("or use scale: ")
    cap = int(offered.group(1)) * MiB
    assert cap == ROWS * 8192 // 4

    capped = lab.up(None, None, postgres=True, pg_cache_cap_bytes=cap)
    assert capped["memory_limit_bytes"] == cap and capped["postgres"]["running"], capped
    assert capped["postgres"]["cache_cap_bytes"] == cap
    shown = [line.strip() for line in text_lines(capped)]
    assert "cache cap 40.0 MiB: the memory limit, shared_buffers 10MB" in shown, shown

    out = runs / "bundles"
    ran = _cli("run", str(scenario), "--skip-load", "-o", str(out))
    assert "warning: cache: " not in ran.stderr + ran.stdout, ran.stderr
    assert "STORAGE NOT EXERCISED" not in ran.stdout, ran.stdout
    (bundle,) = [p for p in out.iterdir() if (p / "summary.json").is_file()]
    cache = json.loads((bundle / "summary.json").read_text())["cache"]
    assert cache["memory_limit_bytes"] == cap and cache["hidden_by_caches"] is False, cache
    assert cache["server_cache"]["bytes"] == cap // 4  # shared_buffers, a quarter of the cap
    exercised = cache["exercised"]
    print(f"capped at {cap // MiB} MiB: {exercised}")  # shown with -s
    assert exercised["exercised"] is True, exercised
    assert exercised["devices"] == [Path(status["device"]).name], exercised
    analysis = json.loads((bundle / "analysis.json").read_text())
    assert analysis["verdict"]["call"] != "not-exercised", analysis["verdict"]


def test_a_new_lab_with_a_cache_cap_starts_postgres_under_it(
    lab_env: tuple[Lab, Path],  # noqa: F811 - the fixture imported above
) -> None:
    """``dbsim lab up --postgres --pg-cache-cap 48M`` on no lab: the memory group's limit is
    48 MiB from the start and the cluster is initialised with shared_buffers of 12 MB."""
    import asyncio

    import asyncpg

    lab, mount_point = lab_env
    try:
        pg_bin()
        pwd.getpwnam(PG_USER)
    except (ConfigError, KeyError) as exc:
        pytest.skip(f"!!! NOT RUN: no PostgreSQL server binaries or {PG_USER} user: {exc}")
    cap = 48 * MiB
    status = lab.up(
        512 * MiB, mount_point, postgres=True, pg_port=_free_port(55447), pg_cache_cap_bytes=cap
    )
    assert status["memory_limit_bytes"] == cap and status["postgres"]["running"], status
    pg = status["postgres"]

    async def shared_buffers() -> str:
        conn = await asyncpg.connect(
            host="127.0.0.1",
            port=pg["port"],
            user="postgres",
            password=Path(pg["password_file"]).read_text().strip(),
        )
        try:
            return str(await conn.fetchval("SHOW shared_buffers"))
        finally:
            await conn.close()

    assert asyncio.run(shared_buffers()) == "12MB"
