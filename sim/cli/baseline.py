"""``dbsim baseline``: the seeds' fio tests on the user's own volume or LUN (docs/baseline.md).

Importing this module registers the command on :data:`sim.cli.app`. Exit codes: 0 every
point measured, 2 bad input or a refused target (nothing written), 3 fio or the target failed
(the bundle keeps what was measured), 130/143 stopped by SIGINT/SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from sim.cli.app import EXIT_SIGINT, EXIT_SIGTERM, app, output_width, print_error
from sim.errors import EXIT_OK, EXIT_RUN_FAILED
from sim.safeio import strict_json

if TYPE_CHECKING:
    from sim.baseline.options import BaselineOptions


TargetOpt = Annotated[
    Path | None,
    typer.Argument(help="A directory (new, empty or dbsim-marked) or a raw block device."),
]
PresetOpt = Annotated[
    list[str] | None,
    typer.Option("--preset", "-p", help="Test matrix (repeatable; see --list). Default random-4k."),
]
OnlyOpt = Annotated[
    list[str] | None,
    typer.Option("--only", help="Run only matching points, e.g. r75, 4k, seq, rand-4k-r100."),
]
RawDeviceOpt = Annotated[
    str | None,
    typer.Option("--raw-device", help="Confirms a raw device target: name the same device."),
]
EnvelopeOpt = Annotated[
    str | None, typer.Option("--envelope", "-e", help="Compare with this published envelope.")
]
SizeOpt = Annotated[
    str | None,
    typer.Option(
        "--size", help="Working set or device span, e.g. 4G (default: the seed's, scaled)."
    ),
]
KeepFilesOpt = Annotated[
    bool, typer.Option("--keep-files", help="Keep fio's files (else removed at the end).")
]
OutputOpt = Annotated[Path, typer.Option("--output", "-o", help="Directory for the run bundle.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the bundle path.")]
IodepthOpt = Annotated[
    str | None,
    typer.Option(
        "--iodepth", help="Queue depth per job, or 'search' (default: each seed table's)."
    ),
]
CurveOpt = Annotated[
    str | None,
    typer.Option(
        "--curve", help="iorate curve, % of the uncapped run (e.g. 10,50,100,120) or none."
    ),
]
CapacityOpt = Annotated[
    str | None,
    typer.Option("--capacity", help="The volume's size, for envelopes published per size."),
]
DryRunOpt = Annotated[
    bool,
    typer.Option("--dry-run", help="Print each point's fio job file; run and write nothing."),
]


@app.command("baseline")
def baseline_command(
    target: TargetOpt = None,
    preset: PresetOpt = None,
    only: OnlyOpt = None,
    raw_device: RawDeviceOpt = None,
    envelope: EnvelopeOpt = None,
    runtime: Annotated[float, typer.Option("--runtime", help="Measured seconds per point.")] = 30.0,
    ramp: Annotated[float, typer.Option("--ramp", help="Seconds before measuring.")] = 5.0,
    size: SizeOpt = None,
    numjobs: Annotated[int | None, typer.Option("--numjobs", help="fio jobs per point.")] = None,
    iodepth: IodepthOpt = None,
    curve: CurveOpt = None,
    capacity: CapacityOpt = None,
    dry_run: DryRunOpt = False,
    lab: Annotated[bool, typer.Option("--lab", help="Run fio inside the lab's cgroups.")] = False,
    keep_files: KeepFilesOpt = False,
    output: OutputOpt = Path("runs"),
    name: Annotated[str | None, typer.Option("--name", help="Bundle name.")] = None,
    fio_binary: Annotated[str | None, typer.Option("--fio", help="fio binary to use.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the presets and exit.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Measure the storage with fio as the vendors did, beside their published figures."""
    from sim.baseline.matrix import PRESETS, parse_curve, parse_depth
    from sim.baseline.options import BaselineOptions

    if list_:
        _list_presets(PRESETS, as_json)
        raise typer.Exit(EXIT_OK)
    if target is None:
        from sim.errors import ConfigError

        raise ConfigError(
            "baseline: give the TARGET directory or device (see dbsim baseline --help)"
        )
    opts = BaselineOptions(
        target=target,
        presets=list(preset or ["random-4k"]),
        raw_device=raw_device,
        only=list(only or []),
        numjobs=numjobs,
        iodepth=parse_depth(iodepth),
        curve=parse_curve(curve),
        capacity_tib=_capacity_option(capacity),
        runtime_s=runtime,
        ramp_s=ramp,
        size_bytes=_size_option(size),
        envelope=envelope,
        lab=lab,
        keep_files=keep_files,
        directory=output,
        name=name,
        fio_binary=fio_binary,
    )
    if dry_run:
        raise typer.Exit(_dry_run(opts, as_json))
    raise typer.Exit(execute(opts, quiet=quiet, as_json=as_json))


def _dry_run(opts: BaselineOptions, as_json: bool) -> int:
    from sim.baseline import dryrun

    if as_json:
        sys.stdout.write(json.dumps(dryrun.as_json(opts), indent=2) + "\n")
    else:
        sys.stdout.write(dryrun.render(opts))
    return EXIT_OK


def _capacity_option(text: str | None) -> float | None:
    """``--capacity`` in TiB, the error naming the option."""
    from sim.errors import ConfigError
    from storage.envelopes.units import parse_capacity

    if text is None:
        return None
    try:
        return parse_capacity(text)
    except ConfigError as exc:
        raise ConfigError(f"baseline --capacity: {exc}") from None


def _size_option(text: str | None) -> int | None:
    """``--size`` in bytes. The error names the option (parse_size's own message says only
    "size 'x'"), and 0 is refused rather than silently meaning the default working set."""
    from sim.errors import ConfigError
    from storage.lab.system import parse_size

    if text is None:
        return None
    try:
        size = parse_size(text)
    except ConfigError as exc:
        raise ConfigError(f"baseline --size: {exc}") from None
    if size <= 0:
        raise ConfigError(f"baseline --size: {text!r} must be > 0")
    return size


def execute(opts: BaselineOptions, *, quiet: bool, as_json: bool) -> int:
    import asyncio  # here: `dbsim --help`, which imports this module, needs no event loop

    from sim.baseline.run import BaselineRun

    console = Console(stderr=True, width=output_width(sys.stderr))
    chatty = not (quiet or as_json)
    run = BaselineRun(
        opts,
        on_line=(lambda s: console.print(s, markup=False, highlight=False))
        if chatty
        else (lambda s: None),
    )
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        summary, path = loop.run_until_complete(run.run(stop))
    finally:
        loop.close()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
    summary["bundle"] = str(path)
    if as_json:
        sys.stdout.write(strict_json(summary) + "\n")  # as summary.json: no Infinity/NaN
    elif quiet:
        sys.stdout.write(f"{path}\n")
    else:
        out = Console(width=output_width(sys.stdout))
        out.print(results_table(summary["baseline"]))
        _print_after(out, summary["baseline"])
        out.print(f"bundle: {path}", markup=False, highlight=False)
        if (path / "report.html").exists():
            out.print(f"report: {path / 'report.html'}", markup=False, highlight=False)
    if summary["status"] == "interrupted":
        return EXIT_SIGTERM if received and received[-1] == signal.SIGTERM else EXIT_SIGINT
    if summary["status"] != "completed":
        print_error(str(summary.get("error") or "the baseline failed"))
        return EXIT_RUN_FAILED
    return EXIT_OK


def _print_after(out: Console, baseline: dict[str, Any]) -> None:
    """Below the table: the searches and curves, then what qualifies the comparison (the
    clients the page used, the mount options beside the page's)."""
    from sim.baseline.results import curve_lines, search_lines

    for text in search_lines(baseline["points"]) + curve_lines(baseline["points"]):
        out.print(text, markup=False, highlight=False)
    comparison = baseline.get("comparison")
    if comparison:
        out.print(f"note: {comparison['caveat']}", markup=False, highlight=False)
        if comparison.get("volume"):
            out.print(
                f"note: published figures for a {comparison['volume']} volume (--capacity)",
                markup=False,
                highlight=False,
            )
    for table in (baseline.get("mount") or {}).get("tables", []):
        for said in table["said"]:
            out.print(f"note: {said}", markup=False, highlight=False)
    for said in baseline.get("advice") or []:
        out.print(f"note: {said}", markup=False, highlight=False)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value / 1000:.2f}"


def results_table(baseline: dict[str, Any]) -> Table:
    """One row per point: fio's figures, the device's iostat figures, the published one."""
    from sim.bundle.figures import primary_device_figures

    comparison = {r["id"]: r for r in (baseline.get("comparison") or {}).get("rows", [])}
    title = "fio baseline" + (
        f" vs {baseline['comparison']['envelope']}" if baseline.get("comparison") else ""
    )
    table = Table(title=title)
    for column in (
        "point", "jobs×qd", "read IOPS", "write IOPS", "MiB/s", "read p50/p99 ms",
        "write p50/p99 ms", "device r/s + w/s", "published IOPS", "measured/published",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column == "point" else "right")
    for r in baseline["points"]:
        if r.get("status") != "completed":
            table.add_row(r["id"], f"{r['numjobs']}×{r['iodepth']}", r.get("status", "?"))
            continue
        read, write = r["read"], r["write"]
        device = r.get("device") or {}
        busiest = primary_device_figures(device)
        row = comparison.get(r["id"]) or {}
        published = row.get("published") or {}
        flag = " *" if published.get("flags") else ""
        table.add_row(
            r["id"],
            f"{r['numjobs']}×{r['iodepth']}" + (" (search)" if r.get("search") else ""),
            f"{read['iops']:,.0f}",
            f"{write['iops']:,.0f}",
            f"{r['mib_s']:,.1f}",
            f"{_ms(read['p50_us'])}/{_ms(read['p99_us'])}" if read["ios"] else "-",
            f"{_ms(write['p50_us'])}/{_ms(write['p99_us'])}" if write["ios"] else "-",
            f"{busiest.get('r_s', 0):,.0f} + {busiest.get('w_s', 0):,.0f}" if busiest else "-",
            f"{published['iops']:,.0f}{flag}" if published else "-",
            f"{row['ratio']:.3f}" if "ratio" in row else "-",
        )
    return table


def _list_presets(presets: dict[str, Any], as_json: bool) -> None:
    """Each preset, and per seed table its points, load and citations."""
    if as_json:
        data = {
            name: {
                "title": p.title,
                "points": [pt.id for pt in p.points],
                "curve": list(p.curve),
                "tables": [
                    {"table": load.table, "points": [pt.id for pt in points],
                     "seed": load.describe(), "cites": [str(c) for c in load.cites],
                     "notes": list(load.notes),
                     "mount": {m.name: m.value for m in load.mount}}
                    for load, points in p.tables
                ],
            }
            for name, p in presets.items()
        }  # fmt: skip
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    for name, p in presets.items():
        unit = "point " if len(p.points) == 1 else "points"
        sys.stdout.write(f"{name:14} {len(p.points):3} {unit}  {p.title}\n")
        for load, points in p.tables:
            mount = ", ".join(f"{m.name}={m.value}" for m in load.mount)
            sys.stdout.write(
                f"{'':14} {load.table} ({len(points)}): {load.describe()}"
                + (f"; mount {mount}" if mount else "")
                + "\n"
            )
        if p.curve:
            sys.stdout.write(f"{'':14} iorate curve: {', '.join(map(str, p.curve))} % of the max\n")
