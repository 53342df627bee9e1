"""``dbsim replay BUNDLE --on DIR --scale 1,2,3``: the captured workload reproduced on the
storage under test at each scale, fidelity judged before the verdict (docs/capture.md,
"Replaying")."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sim.cli.app import EXIT_SIGINT, app, print_error
from sim.errors import ConfigError, SimError

if TYPE_CHECKING:
    import asyncio

OnOpt = Annotated[
    Path,
    typer.Option(
        "--on",
        help="The storage under test: a directory on it (new, empty, or dbsim's), where fio "
        "writes one file it lays out and removes; or a scenario (.yaml) whose workload is "
        "slob: the capture replayed on its database.",
    ),
]
ScaleOpt = Annotated[str, typer.Option("--scale", help="Scales of the captured load, e.g. 1,2,3.")]
DurationOpt = Annotated[
    float, typer.Option("--duration", help="Seconds of fio per scale (after a 1 s ramp).")
]
IntervalOpt = Annotated[
    float, typer.Option("--interval", help="Seconds between the replay capture's samples.")
]
SizeOpt = Annotated[
    str | None,
    typer.Option("--size", help="The replay file's size, e.g. 512M (default: 1G, at most "
                 "half the free space)."),
]  # fmt: skip
SloOpt = Annotated[
    list[str] | None,
    typer.Option("--slo", help="Device latency objective KEY=MS: read_p99, write_p99, "
                 "read_await, write_await (repeatable)."),
]  # fmt: skip
OutputOpt = Annotated[
    Path, typer.Option("--output", "-o", help="Where the replay's directory is made.")
]
AsJsonOpt = Annotated[bool, typer.Option("--json", help="Print replay.json instead.")]
CompressOpt = Annotated[
    float | None,
    typer.Option("--compress", help="Replay the day shape: the whole captured curve, this "
                 "many times faster (48: a day in 30 minutes), instead of the peak."),
]  # fmt: skip
WriteScenarioOpt = Annotated[
    Path | None,
    typer.Option("--write-scenario", help="Also write each scale's derived workload here, "
                 "new (a scenario for dbsim run; a fio job for block-level production); "
                 "{scale} in the name when several scales are replayed."),
]  # fmt: skip
StepOpt = Annotated[
    float | None,
    typer.Option("--step", help="With --compress: seconds of replay per step (default: at "
                 "least 2, at most 120 steps)."),
]  # fmt: skip


def _stoppable_loop() -> tuple[asyncio.AbstractEventLoop, asyncio.Event]:
    """A new event loop, the thread's, and the event SIGINT or SIGTERM sets on it. asyncio is
    imported here, not at the top: `dbsim --help` imports this module, and needs no loop."""
    import asyncio

    from sim.core.loops import new_event_loop

    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    return loop, stop


@app.command()
def replay(
    bundle: Annotated[
        Path, typer.Argument(help="A capture bundle (dbsim capture, dbsim import) or a run's.")
    ],
    on: OnOpt,
    scale: ScaleOpt = "1",
    duration: DurationOpt = 30.0,
    interval: IntervalOpt = 1.0,
    size: SizeOpt = None,
    slo: SloOpt = None,
    output: OutputOpt = Path("replays"),
    as_json: AsJsonOpt = False,
    compress: CompressOpt = None,
    step: StepOpt = None,
    write_scenario: WriteScenarioOpt = None,
) -> None:
    """Replay the captured profile on the storage under test at each scale: fidelity first,
    then the latency verdict and the headroom."""
    from sim.capture.budget import parse_size
    from sim.replay import scenario_out
    from sim.replay.plan import execute, make_plan, runs_fio

    size_bytes = None
    if size is not None:
        try:
            size_bytes = parse_size(size)
        except ValueError as exc:
            raise ConfigError(f"--size: {exc}") from None
    plan = make_plan(
        bundle, on, scale, duration_s=duration, interval_s=interval, size_bytes=size_bytes,
        slos=slo, output=output, compress=compress, step_s=step,
    )  # fmt: skip
    fio = runs_fio(plan)
    where = scenario_out.destinations(write_scenario, plan.scales, fio) if write_scenario else {}
    loop, stop = _stoppable_loop()

    def say(text: str) -> None:
        if not as_json:
            sys.stderr.write(text + "\n")

    try:
        doc = loop.run_until_complete(execute(plan, stop, say))
    except SimError:
        if not stop.is_set():
            raise
        doc = None
    finally:
        loop.close()
    if doc is None or stop.is_set():
        print_error("replay stopped by a signal; the bundles written so far are kept")
        raise typer.Exit(EXIT_SIGINT)
    _answer(doc, where, fio, as_json)
    raise typer.Exit(int(doc["exit_code"]))


def _answer(doc: dict[str, Any], where: dict[float, Path], fio: bool, as_json: bool) -> None:
    """The derived workloads written where asked, replay.json (kept even when a write is
    refused), and the console's answer or the JSON."""
    from sim.bundle.files import atomic_write
    from sim.replay import scenario_out
    from sim.replay.console import lines
    from sim.safeio import strict_json

    refused = None
    if where:
        try:
            doc["scenarios_written"] = scenario_out.write(doc, where, fio)
        except ConfigError as exc:  # the replay's own answer is kept all the same
            refused = exc
    text = strict_json(doc) + "\n"
    atomic_write(Path(doc["directory"]) / "replay.json", text)
    if refused is not None:
        raise ConfigError(f"{refused} (the replay: {doc['directory']}/replay.json)")
    said = lines(doc)
    if where:  # before the last line, replay.json's path
        said[-1:-1] = [f"Derived, rerun each with {'fio' if fio else 'dbsim run'} FILE:"] + [
            f"  {w['scale']}x: {w['path']}" for w in doc["scenarios_written"]
        ]
    sys.stdout.write(text if as_json else "\n".join(said) + "\n")
