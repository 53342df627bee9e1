"""PostgreSQL data placed on the volume under test (issue #19): ``target.tablespace`` live.

dbsim creates the tablespace on an ext4 loop device, the SLOB-like tables and index go there,
the block collector watches that loop device (and it is the run's primary device, with reads
on it), and ``dbsim drop`` removes the tablespace it made. A tablespace someone else made is
used and never dropped. Wrong directories are refused before anything is created: exit 2, one
``error:`` line, no bundle, the command that would fix it. Needs root (loop devices, chown)
and the server on this host, running as the OS user ``postgres``.

The first wrong directory goes through the real binary (``python -m sim.cli``), which proves
that the process reports what ``main`` returns; every other command (the loads, the run, the
drops, the other refusals) runs through ``sim.cli.entry.main`` in the test process
(``in_process``: the child's directory, environment and logging), as its subject is what the
command does to the server and the volume, not the process boundary.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import (
    CliResult,
    Dbsim,
    InProcessDbsim,
    bundle_dirs,
    clean_environment,
    single_bundle,
)
from tests.support.loopfs import loop_ext4
from tests.support.postgres import require_postgres

pytestmark = [pytest.mark.e2e, pytest.mark.root]

EXIT_OK, EXIT_BAD_INPUT = 0, 2
#: Above shared_buffers (128 MB here), so reads reach the device once its page cache is gone.
SCALE = "300M"
LOOP_MIB = 800


def sql(statement: str) -> list[str]:
    done = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-Atc", statement],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


@pytest.fixture
def server_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("!!! needs root: loop devices and chown to the server's OS user")
    require_postgres()
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("!!! no OS user postgres: the server does not run as it here")


@pytest.fixture
def in_process(work_dir: Path, child_tmp: Path) -> InProcessDbsim:
    """``dbsim`` through ``sim.cli.entry.main`` in this process, with the child's directories,
    environment and logging (a warning the command logs is on its stderr, as a child's is)."""
    return InProcessDbsim(work_dir, clean_environment(child_tmp), child_logging=True)


@pytest.fixture
def reachable_dir() -> Iterator[Path]:
    """A directory the server's OS user can traverse (pytest's tmp_path is mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="dbsim-ts-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def server_owned(path: Path, user: pwd.struct_passwd) -> Iterator[Path]:
    path.mkdir()
    os.chown(path, user.pw_uid, user.pw_gid)
    yield path


def scenario(dbsim: Dbsim, tablespace: dict[str, Any], prefix: str, scale: str = "80M") -> Path:
    data = {
        "name": "tablespace",
        "target": {"kind": "postgres", "database": "test", "tablespace": tablespace},
        "workload": {
            "name": "slob",
            "parameters": {"table_prefix": prefix, "update_pct": 20, "scale": scale},
        },
        # Open loop at a modest rate: the run's checks are where the data is and which device
        # is watched and read (the page cache evicted first, the data above shared_buffers),
        # not a rate; closed loop flat out spent 6 s of 4 server backends' CPU.
        "load": {"duration_s": 6, "sessions": 4, "mode": "open", "rate_ops_s": 400},
    }
    path = dbsim.cwd / f"{prefix}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def ok(result: CliResult) -> CliResult:
    assert result.rc == EXIT_OK, result.describe()
    return result


def tablespace_of(relation: str) -> str | None:
    rows = sql(
        "SELECT COALESCE(t.spcname, '') FROM pg_class c LEFT JOIN pg_tablespace t "
        f"ON t.oid = c.reltablespace WHERE c.relname = '{relation}'"
    )
    return rows[0] if rows else None


def evict_page_cache(directory: Path) -> None:
    """Written back, then dropped from the page cache: only these files, not the host's."""
    os.sync()
    for path in directory.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def test_tablespace_on_a_loop_device_is_watched_judged_and_dropped(
    in_process: InProcessDbsim,
    out_dir: Path,
    reachable_dir: Path,
    server_user: pwd.struct_passwd,
) -> None:
    name, prefix = f"dbsim_t{uuid.uuid4().hex[:8]}", f"t{uuid.uuid4().hex[:6]}"
    with loop_ext4(reachable_dir / "volume", LOOP_MIB) as mount:
        number = mount.stat().st_dev
        device = Path(f"/sys/dev/block/{os.major(number)}:{os.minor(number)}").resolve().name
        location = mount / "pg"
        with server_owned(location, server_user):
            path = scenario(
                in_process,
                {"name": name, "location": str(location), "create": True},
                prefix,
                SCALE,
            )
            try:
                ok(in_process("load", path, timeout=600))
                assert tablespace_of(f"{prefix}_1_cf1") == name
                assert tablespace_of(f"{prefix}_1_cf1_custid") == name  # the index too
                evict_page_cache(location)
                run = ok(in_process("run", "--skip-load", path, "-o", out_dir, timeout=300))
                assert f"data: {location} (tablespace {name})" in run.stdout + run.stderr
                bundle = single_bundle(out_dir)
                summary = json.loads((bundle / "summary.json").read_text())
                analysis = json.loads((bundle / "analysis.json").read_text())
                assert summary["target"]["data_location"] == {
                    "path": str(location),
                    "from": f"tablespace {name}",
                }
                watched = summary["storage"]["block"]
                assert list(watched) == [device], watched
                assert watched[device]["r_s"] > 0, watched
                assert analysis["primary_device"] == device
                dropped = ok(in_process("drop", path)).stdout
                assert f"tablespace {name}" in dropped and f"{prefix}_1_cf1" in dropped
                assert sql(f"SELECT count(*) FROM pg_tablespace WHERE spcname = '{name}'") == ["0"]
                assert not any(location.iterdir())
            finally:
                sql(f"DROP TABLE IF EXISTS {prefix}_1_cf1")
                sql(f"DELETE FROM dbsim_registry WHERE name = 'tablespace:{name}'")
                sql(f"DROP TABLESPACE IF EXISTS {name}")


def test_a_tablespace_dbsim_did_not_create_is_used_and_never_dropped(
    in_process: InProcessDbsim, reachable_dir: Path, server_user: pwd.struct_passwd
) -> None:
    name, prefix = f"dbsim_f{uuid.uuid4().hex[:8]}", f"f{uuid.uuid4().hex[:6]}"
    with server_owned(reachable_dir / "theirs", server_user) as location:
        sql(f"CREATE TABLESPACE {name} LOCATION '{location}'")
        try:
            for create in (False, True):
                path = scenario(in_process, {"name": name, "create": create}, prefix)
                if create:  # with a location, it must be where the tablespace is
                    path = scenario(
                        in_process,
                        {"name": name, "location": str(location), "create": True},
                        prefix,
                    )
                ok(in_process("load", path, timeout=300))
                assert tablespace_of(f"{prefix}_1_cf1") == name
                dropped = ok(in_process("drop", path)).stdout
                assert "tablespace" not in dropped and f"{prefix}_1_cf1" in dropped
                assert sql(f"SELECT count(*) FROM pg_tablespace WHERE spcname = '{name}'") == ["1"]
        finally:
            sql(f"DROP TABLE IF EXISTS {prefix}_1_cf1")
            sql(f"DROP TABLESPACE IF EXISTS {name}")


def refused(result: CliResult, out_dir: Path) -> str:
    assert result.rc == EXIT_BAD_INPUT, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    errors = [line for line in result.stderr_lines if line.startswith("error: ")]
    assert len(errors) == 1, result.describe()
    assert not bundle_dirs(out_dir), "a refused run left a bundle"
    return errors[0]


@pytest.mark.parametrize("problem", ["missing", "not empty", "not the server's", "unknown"])
def test_a_directory_create_tablespace_would_refuse_is_one_line_and_exit_2(
    dbsim: Dbsim,
    in_process: InProcessDbsim,
    out_dir: Path,
    reachable_dir: Path,
    server_user: pwd.struct_passwd,
    problem: str,
) -> None:
    if problem != "missing":  # the first case proves the real process says the same
        dbsim = in_process
    name, prefix = f"dbsim_r{uuid.uuid4().hex[:8]}", f"r{uuid.uuid4().hex[:6]}"
    location = reachable_dir / "pg"
    if problem == "not empty":
        location.mkdir()
        os.chown(location, server_user.pw_uid, server_user.pw_gid)
        (location / "someones.dat").write_text("precious\n")
    elif problem == "not the server's":
        location.mkdir()  # root's
    settings: dict[str, Any] = {"name": name, "location": str(location), "create": True}
    if problem == "unknown":
        settings = {"name": name}
    line = refused(dbsim("run", scenario(dbsim, settings, prefix), "-o", out_dir), out_dir)
    expected = {
        "missing": f"does not exist; create it on the server's host, e.g. `mkdir -p {location}",
        "not empty": "is not empty (someones.dat)",
        "not the server's": f"owned by root, not postgres (the server's OS user); if it is "
        f"yours to give: `chown postgres {location}`",
        "unknown": f"{name} does not exist on the server",
    }[problem]
    assert expected in line, line
    assert sql(f"SELECT count(*) FROM pg_tablespace WHERE spcname = '{name}'") == ["0"]
    assert tablespace_of(f"{prefix}_1_cf1") is None
    if problem == "not empty":
        assert (location / "someones.dat").read_text() == "precious\n"


def test_a_tablespace_still_holding_another_workloads_tables_is_kept_until_the_last_drop(
    in_process: InProcessDbsim, reachable_dir: Path, server_user: pwd.struct_passwd
) -> None:
    name, prefix = f"dbsim_s{uuid.uuid4().hex[:8]}", f"s{uuid.uuid4().hex[:6]}"
    with server_owned(reachable_dir / "shared", server_user) as location:
        settings = {"name": name, "location": str(location), "create": True}
        slob = scenario(in_process, settings, prefix)
        ssb = yaml.safe_load(slob.read_text())
        ssb["workload"] = {
            "name": "ssb",
            "parameters": {"tables": 1, "database_size": "1600K", "table_prefix": f"{prefix}b"},
        }
        ssb_path = in_process.cwd / "ssb.yaml"
        ssb_path.write_text(yaml.safe_dump(ssb), encoding="utf-8")
        try:
            ok(in_process("load", slob, timeout=300))
            ok(in_process("load", ssb_path, timeout=300))
            assert tablespace_of(f"{prefix}b_1") == name
            first = ok(in_process("drop", slob))
            assert "tablespace" not in first.stdout
            assert f"tablespace {name} kept: " in first.stderr, first.describe()
            assert tablespace_of(f"{prefix}b_1") == name  # the other workload's data is intact
            last = ok(in_process("drop", ssb_path)).stdout
            assert f"{prefix}b_1, tablespace {name}" in last
            assert sql(f"SELECT count(*) FROM pg_tablespace WHERE spcname = '{name}'") == ["0"]
        finally:
            sql(f"DROP TABLE IF EXISTS {prefix}_1_cf1, {prefix}b_1")
            sql(f"DELETE FROM dbsim_registry WHERE name = 'tablespace:{name}'")
            sql(f"DROP TABLESPACE IF EXISTS {name}")
