"""``dbsim sql-from-stats``: a ``sql`` workload scenario skeleton from a database's own
statement statistics (pg_stat_statements, MariaDB's digest summary, SQL Server's Query
Store) or an Oracle AWR text report (docs/workloads/sql.md, "From pg_stat_statements")."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from sim.cli.app import SetOpt, app, overrides
from sim.cli.capture import DatabaseOpt, HostOpt, KindOpt, PasswordEnvOpt, PortOpt, UserOpt
from sim.errors import ConfigError, ScenarioError

NOTHING_TO_READ = (
    "give a scenario with a target, --target-kind (postgres, mysql, sqlserver) or --awr REPORT"
)

ScenarioOpt = Annotated[
    Path | None,
    typer.Argument(
        help="Scenario YAML whose target is read (its other sections are ignored). "
        "Omitted: --target-kind and the options below say it."
    ),
]
AwrOpt = Annotated[
    Path | None,
    typer.Option(
        "--awr",
        help="Read an Oracle AWR report's (text or HTML) 'SQL ordered by Executions' instead "
        "of a server (the target, if given, is only written into the skeleton).",
    ),
]
TopOpt = Annotated[int, typer.Option("--top", min=1, max=1000, help="How many statements to keep.")]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", help="Write the skeleton to this new file (never an existing one)."
    ),
]
NameOpt = Annotated[str, typer.Option("--name", help="The skeleton's scenario name.")]


@app.command("sql-from-stats")
def sql_from_stats(
    scenario: ScenarioOpt = None,
    awr: AwrOpt = None,
    target_kind: KindOpt = None,
    host: HostOpt = None,
    port: PortOpt = None,
    database: DatabaseOpt = None,
    user: UserOpt = None,
    password_env: PasswordEnvOpt = None,
    set_: SetOpt = None,
    top: TopOpt = 10,
    output: OutOpt = None,
    name: NameOpt = "sql-from-stats",
) -> None:
    """Write a `sql` workload skeleton of the top statements a server counted (read-only):
    weights = their calls, a placeholder per parameter to fill in (or a proposed sample of
    the column it is compared with), and their captured calls/s, mean time and reads."""
    from sim.sqlstats.skeleton import build

    if output is not None:
        _check_new(output)
    settings = _target(
        scenario, set_, awr is None, target_kind, host, port, database, user, password_env
    )
    if awr is not None:
        from sim.sqlstats.awr import read_report

        captured = read_report(awr)
    elif settings is None:
        raise ConfigError(f"sql-from-stats: nothing to read: {NOTHING_TO_READ}")
    else:
        from sim.sqlstats.servers import read_server

        captured = read_server(settings)
    section = None
    if settings is not None:
        section = {"kind": settings.kind, **settings.model_dump(mode="json", exclude_unset=True)}
    skeleton = build(captured, section, top, name=name)
    if output is None:
        sys.stdout.write(skeleton.text)
    else:
        _write_new(output, skeleton.text)
    where = "stdout" if output is None else str(output)
    sys.stderr.write(
        f"sql-from-stats: {len(skeleton.entries)} "
        f"statement{'' if len(skeleton.entries) == 1 else 's'} to {where}\n"
        f"  weights = the calls the source counted; {skeleton.placeholders} parameters "
        "to fill in\n"
    )


def _target(
    scenario: Path | None, sets: list[str] | None, required: bool, kind: str | None, *rest: Any
) -> Any:
    """The target settings (validated as ``dbsim capture`` does), or None when neither a
    scenario nor --target-kind was given, or (not ``required``: --awr) the scenario has none."""
    if scenario is None and kind is None and not sets:
        return None
    from sim.capture.plan import resolve_capture

    host, port, database, user, password_env = rest
    pairs = overrides(
        sets,
        **{
            "target.kind": kind,
            "target.host": host,
            "target.port": port,
            "target.database": database,
            "target.user": user,
            "target.password_env": password_env,
        },
    )
    try:
        plan = resolve_capture(scenario, pairs)
    except ScenarioError as exc:
        if any("nothing to watch" in line for line in exc.problems):
            if not required:
                return None
            raise ConfigError(f"{scenario}: no target section: {NOTHING_TO_READ}") from None
        raise
    return plan.target


def _check_new(path: Path) -> None:
    """Refuse before reading anything when ``--output`` names something that exists (a
    link included) or a directory that does not; the write itself is O_EXCL all the same."""
    if os.path.lexists(path):
        raise ConfigError(f"--output {path}: exists (or is a link); dbsim writes only a new file")
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise ConfigError(f"--output {path}: its directory does not exist")


def _write_new(path: Path, text: str) -> None:
    from sim.safeio import create_text

    create_text(path, text, "--output")
