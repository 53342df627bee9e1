"""``dbsim capture``: watch production's storage with the collectors alone, change nothing, and
write a capture bundle (docs/capture.md, "Capturing live")."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from sim.cli.app import EXIT_SIGINT, EXIT_SIGTERM, SetOpt, app, overrides, print_error
from sim.errors import EXIT_OK, EXIT_RUN_FAILED, ConfigError
from sim.safeio import strict_json

ScenarioOpt = Annotated[
    Path | None,
    typer.Argument(
        help="Scenario YAML whose target and collectors say what to watch (its workload, "
        "load and slos are ignored). Omitted: the options below say it."
    ),
]
PathOpt = Annotated[
    list[Path] | None,
    typer.Option("--path", help="Watch the devices under this path (repeatable)."),
]
KindOpt = Annotated[
    str | None, typer.Option("--target-kind", help="target.kind: postgres, mysql, oracle …")
]
HostOpt = Annotated[str | None, typer.Option("--host", help="target.host")]
PortOpt = Annotated[int | None, typer.Option("--port", help="target.port")]
DatabaseOpt = Annotated[str | None, typer.Option("--database", help="target.database")]
UserOpt = Annotated[str | None, typer.Option("--user", help="target.user")]
PasswordEnvOpt = Annotated[
    str | None,
    typer.Option("--password-env", help="target.password_env: the variable holding it."),
]
DurationOpt = Annotated[
    float | None,
    typer.Option("--duration", help="capture.duration_s (default: until SIGINT or SIGTERM)."),
]
IntervalOpt = Annotated[
    float | None, typer.Option("--interval", help="collectors.interval_s (default 1 s).")
]
MaxBytesOpt = Annotated[
    str | None,
    typer.Option(
        "--max-bytes",
        help="capture.max_bytes, e.g. 500M or 2G: past half of it the interval doubles, and "
        "so on; when nothing more fits the capture stops.",
    ),
]
OutputOpt = Annotated[Path | None, typer.Option("--output", "-o", help="output.directory")]
NameOpt = Annotated[str | None, typer.Option("--name", help="output.name")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the bundle path.")]
AsJsonOpt = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]


@app.command()
def capture(
    scenario: ScenarioOpt = None,
    path: PathOpt = None,
    target_kind: KindOpt = None,
    host: HostOpt = None,
    port: PortOpt = None,
    database: DatabaseOpt = None,
    user: UserOpt = None,
    password_env: PasswordEnvOpt = None,
    duration: DurationOpt = None,
    interval: IntervalOpt = None,
    max_bytes: MaxBytesOpt = None,
    output: OutputOpt = None,
    name: NameOpt = None,
    set_: SetOpt = None,
    quiet: QuietOpt = False,
    as_json: AsJsonOpt = False,
) -> None:
    """Capture what production does to its storage: the collectors alone, read-only, into a
    capture bundle (`dbsim profile BUNDLE` reads it)."""
    from sim.capture.budget import parse_size
    from sim.capture.plan import resolve_capture

    size: int | None = None
    if max_bytes is not None:
        try:
            size = parse_size(max_bytes)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    pairs = overrides(
        set_,
        **{
            "target.kind": target_kind,
            "target.host": host,
            "target.port": port,
            "target.database": database,
            "target.user": user,
            "target.password_env": password_env,
            "capture.duration_s": duration,
            "capture.max_bytes": size,
            "collectors.interval_s": interval,
            "output.directory": str(output) if output else None,
            "output.name": name,
        },
    )
    plan = resolve_capture(scenario, pairs, path)
    raise typer.Exit(_execute(plan, quiet=quiet, as_json=as_json))


def _execute(plan: Any, *, quiet: bool, as_json: bool) -> int:
    import asyncio  # here: `dbsim --help`, which imports this module, needs no event loop

    from sim.capture.loop import Capture
    from sim.capture.watch import watched_target
    from sim.core.loops import new_event_loop

    target = watched_target(plan.target, list(plan.section.paths))
    run = Capture(plan, target)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        run.request_stop(f"stopped by {signal.Signals(signum).name}")

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    if not (quiet or as_json):
        run.on_started = lambda started: _say_start(plan, started)
    try:
        summary = loop.run_until_complete(run.run())
    finally:
        loop.close()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
    _print_end(summary, quiet=quiet, as_json=as_json)
    return _exit_code(summary, received)


def _say_start(plan: Any, started: dict[str, Any]) -> None:
    """One line on stderr once the capture runs: what it watches, how often, until when."""
    target = started["target"]
    watched = ", ".join(target.get("watched_paths") or []) or "no local path"
    kind = target.get("kind")
    what = f"devices under {watched}" if kind == "path" else f"{kind}; devices under {watched}"
    until = (
        f"for {plan.section.duration_s:g} s"
        if plan.section.duration_s
        else "until Ctrl-C or SIGTERM"
    )
    lines = [
        f"dbsim capture: {what}; sources {', '.join(started['sources'])}; every "
        f"{plan.interval_s:g} s, {until}; bundle {started['bundle']}"
    ]
    if plan.ignored:
        lines.append(f"dbsim capture: ignored scenario sections: {', '.join(plan.ignored)}")
    lines += [
        f"dbsim capture: {source} did not start: {why}" for source, why in started["not_started"]
    ]
    sys.stderr.write("\n".join(lines) + "\n")


def _print_end(summary: dict[str, Any], *, quiet: bool, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(strict_json(summary) + "\n")
        return
    if quiet:
        sys.stdout.write(summary["bundle"] + "\n")
        return
    own = summary.get("capture", {}).get("own", {})
    lines = [
        f"bundle: {summary['bundle']}",
        f"status: {summary['status']} ({summary.get('reason') or 'no reason given'})",
        f"intervals: {summary.get('intervals_written', 0)} over "
        f"{summary.get('timing', {}).get('measured_s', 0):g} s",
        f"sources: {', '.join(sorted(summary.get('storage') or {})) or 'none'}",
        f"capture's own cost (measured): {own.get('cpu_s', 0):g} CPU s, "
        f"{own.get('cpu_pct_of_core', 0):.2f} % of one core, "
        f"peak memory {own.get('rss_max_kB', 0):,} kB",
    ]
    lines += [f"note: {message}" for message in summary.get("messages") or []]
    sys.stdout.write("\n".join(lines) + "\n")


def _exit_code(summary: dict[str, Any], received: list[int]) -> int:
    from sim.core.result import OUTCOME_COMPLETED, OUTCOME_INTERRUPTED

    status = summary.get("status")
    if status == OUTCOME_COMPLETED:
        return EXIT_OK
    if status == OUTCOME_INTERRUPTED:
        return EXIT_SIGTERM if received and received[-1] == signal.SIGTERM else EXIT_SIGINT
    if summary.get("error"):
        print_error(str(summary["error"]))
    return EXIT_RUN_FAILED
