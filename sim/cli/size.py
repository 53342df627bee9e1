"""``dbsim size``: does a workload fit a published envelope, which limit binds, how much
headroom is left, and the smallest capacity or service level that fits, citing the seed table.

Importing this module registers the command on :data:`sim.cli.app`. The workload comes from a
run bundle (the measured window's block-device means of the busiest device, or ``--device``)
or from the command line. Exit 0 when it fits, 1 when it does not, 4 when there is no verdict
(the binding figure lies outside every published point and ``--allow-extrapolation`` was not
given), 2 for bad input. A verdict on an estimate or an untested interpolation exits as any
verdict and carries a ``caveat:`` line (its certainty: :mod:`storage.envelopes.certainty`).
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sim.cli.app import app, output_width
from sim.errors import EXIT_NOT_COMPARABLE, EXIT_OK, EXIT_SLO_MISSED, ConfigError

if TYPE_CHECKING:
    from storage.envelopes.model import Envelope
    from storage.envelopes.sizing import SizingAnswer, Workload

BLOCK_FIELDS = ("r_s", "w_s", "rkB_s", "wkB_s")


EnvelopeOpt = Annotated[
    str | None, typer.Option("--envelope", "-e", help="Envelope name (see --list).")
]
ListOpt = Annotated[bool, typer.Option("--list", help="List the envelopes and their sources.")]
CapacityOpt = Annotated[
    str | None,
    typer.Option("--capacity", help="Volume capacity, e.g. 10TiB or 500GB (default: tested)."),
]
ServiceLevelOpt = Annotated[
    str | None,
    typer.Option("--service-level", help="Service level (per-TiB envelopes), e.g. Premium."),
]
BundleOpt = Annotated[
    Path | None, typer.Option("--bundle", help="Run bundle directory to take the load from.")
]
DeviceOpt = Annotated[
    str | None, typer.Option("--device", help="Block device of the bundle (default: busiest).")
]
StepOpt = Annotated[
    int | None,
    typer.Option(
        "--step",
        min=1,
        help="Step of a stepped bundle to take the load from (1 = first; default for a sweep: "
        "its highest load meeting every SLO).",
    ),
]
BlockSizeOpt = Annotated[str | None, typer.Option("--block-size", help="Request size, e.g. 8KiB.")]
PoolIopsOpt = Annotated[
    float | None, typer.Option("--pool-iops", help="Custom-performance IOPS provisioned.")
]
ExtrapolateOpt = Annotated[
    bool,
    typer.Option(
        "--allow-extrapolation",
        help="Give a verdict even when the binding figure lies outside every published point "
        "(held from the nearest one, not extrapolated); without it such answers exit 4.",
    ),
]
PoolMibpsOpt = Annotated[
    float | None, typer.Option("--pool-mibps", help="Custom-performance MiB/s provisioned.")
]


@app.command("size")
def size_command(
    envelope: EnvelopeOpt = None,
    list_: ListOpt = False,
    capacity: CapacityOpt = None,
    service_level: ServiceLevelOpt = None,
    bundle: BundleOpt = None,
    device: DeviceOpt = None,
    step: StepOpt = None,
    read_iops: Annotated[float | None, typer.Option("--read-iops", help="Read IOPS.")] = None,
    write_iops: Annotated[float | None, typer.Option("--write-iops", help="Write IOPS.")] = None,
    read_mibps: Annotated[float | None, typer.Option("--read-mibps", help="Read MiB/s.")] = None,
    write_mibps: Annotated[float | None, typer.Option("--write-mibps", help="Write MiB/s.")] = None,
    block_size: BlockSizeOpt = None,
    pool_iops: PoolIopsOpt = None,
    pool_mibps: PoolMibpsOpt = None,
    allow_extrapolation: ExtrapolateOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
) -> None:
    """Size a workload against a published performance envelope (see docs/sizing.md)."""
    from storage.envelopes import envelopes, get_envelope, size
    from storage.envelopes.sizing import Workload
    from storage.envelopes.units import parse_block_size, parse_capacity

    if list_:
        _list(envelopes(), as_json)
        raise typer.Exit(EXIT_OK)
    if envelope is None:
        raise ConfigError("size: --envelope NAME is required (see dbsim size --list)")
    env = get_envelope(envelope)
    capacity_tib = parse_capacity(capacity) if capacity is not None else None
    numbers = (read_iops, write_iops, read_mibps, write_mibps, block_size)
    if bundle is not None:
        if any(n is not None for n in numbers):
            raise ConfigError("size: give --bundle or the workload's numbers, not both")
        workload = workload_from_bundle(bundle, device, step)
    else:
        if device is not None or step is not None:
            raise ConfigError("size: --device and --step only go with --bundle")
        workload = Workload.from_numbers(
            read_iops=read_iops,
            write_iops=write_iops,
            read_mibps=read_mibps,
            write_mibps=write_mibps,
            block_kib=parse_block_size(block_size) if block_size is not None else None,
        )
    answer = size(
        env,
        workload,
        capacity_tib=capacity_tib,
        service_level=service_level,
        pool_iops=pool_iops,
        pool_mibps=pool_mibps,
        allow_extrapolation=allow_extrapolation,
    )
    sys.stdout.write((json.dumps(answer.to_dict(), indent=2) if as_json else render(answer)) + "\n")
    raise typer.Exit(exit_code(answer))


def exit_code(answer: SizingAnswer) -> int:
    """0 fits, 1 does not fit, 4 no verdict (outside the published points)."""
    if answer.fits is None:
        return EXIT_NOT_COMPARABLE
    return EXIT_OK if answer.fits else EXIT_SLO_MISSED


def workload_from_bundle(run_dir: Path, device: str | None, step: int | None = None) -> Workload:
    """The load of ``run_dir`` as a Workload: the measured window's block-device means, or
    one step's when the run had several (the whole-run means would mix the steps)."""
    from sim.bundle.reader import read_summary
    from storage.envelopes.fileload import file_workload, is_file_run

    summary = read_summary(run_dir, label="size: ")  # bounded, checked against its schema
    name = run_dir.absolute().name
    if is_file_run(summary):
        if device is not None:
            raise ConfigError(
                f"size: --device {device}: bundle {name} ran on a file tree and is sized by its "
                f"file operations, not by a block device"
            )
        return file_workload(summary, name, step)
    stages = [s for s in summary.get("stages") or [] if isinstance(s, dict)]
    measured = [s for s in stages if s.get("phase") == "measure" and isinstance(s.get("step"), int)]
    if step is None and len(measured) <= 1:
        return workload_from_summary(summary, device, name)
    if step is None:
        passing = (summary.get("sweep") or {}).get("highest_passing") or {}
        if not isinstance(passing.get("step"), int):
            raise ConfigError(
                f"size: bundle {run_dir.name} has {len(measured)} steps and its whole-run means "
                f"mix them: give --step 1..{len(measured)}"
            )
        step, why = passing["step"] + 1, "the sweep's highest load meeting every SLO"
    else:
        why = "chosen with --step"
    steps = {s["step"] + 1 for s in measured}
    if step not in steps:
        raise ConfigError(
            f"size: --step {step}: bundle {run_dir.name} has steps 1..{max(steps, default=0)}"
        )
    return _step_workload(run_dir, measured, step, device, why)


def _step_workload(
    run_dir: Path, measured: list[dict[str, Any]], step: int, device: str | None, why: str
) -> Workload:
    """One step's block-device means (from the bundle's time series) as a Workload."""
    from sim.judge.slo import device_source
    from sim.judge.sweep import step_windows

    window = step_windows(run_dir, measured).get(step - 1)
    devices = window.devices if window is not None else {}
    label = f"step {step} ({why})"
    return workload_from_summary(
        {"storage": {device_source(): devices}}, device, f"{run_dir.name}, {label}"
    )


def workload_from_summary(summary: Any, device: str | None, name: str) -> Workload:
    """A Workload from a summary's ``storage.block.<device>`` means: reads and writes per
    second and kB/s (iostat's kB = KiB); the busiest device unless ``device`` names one."""
    from sim.judge.slo import device_source
    from storage.envelopes.sizing import Workload

    source = device_source()
    storage = summary.get("storage") if isinstance(summary, dict) else None
    block = storage.get(source) if isinstance(storage, dict) else None
    if not isinstance(block, dict) or not block:
        raise ConfigError(
            f"size: bundle {name} has no block-device means (storage.{source} in summary.json); "
            f"give the numbers with --read-iops/--write-iops/--block-size instead"
        )
    devices = {k: v for k, v in block.items() if isinstance(v, dict)}
    if device is not None:
        if device not in devices:
            raise ConfigError(
                f"size: --device {device}: not in bundle {name} (has {', '.join(sorted(devices))})"
            )
        chosen = device
    else:
        chosen = max(devices, key=lambda d: _number(devices[d], "r_s") + _number(devices[d], "w_s"))
    figures = devices[chosen]
    missing = [f for f in BLOCK_FIELDS if not isinstance(figures.get(f), int | float)]
    if missing:
        raise ConfigError(f"size: bundle {name}, device {chosen}: no {', '.join(missing)}")
    reads, writes = float(figures["r_s"]), float(figures["w_s"])
    if reads + writes <= 0:
        raise ConfigError(f"size: bundle {name}, device {chosen}: no reads or writes measured")
    others = sorted(set(devices) - {chosen})
    window = "that step's means" if ", step " in name else "measured-window means"
    origin = f"bundle {name}, device {chosen}, {window}" + (
        f"; other devices: {', '.join(others)}" if others else ""
    )
    return Workload(
        read_iops=reads,
        write_iops=writes,
        read_mibps=float(figures["rkB_s"]) / 1024 if reads > 0 else 0.0,
        write_mibps=float(figures["wkB_s"]) / 1024 if writes > 0 else 0.0,
        origin=origin,
    )


def _number(figures: dict[str, Any], key: str) -> float:
    value = figures.get(key)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0


def _list(found: dict[str, Envelope], as_json: bool) -> None:
    from storage.envelopes.pages import describe_page, pages_json

    rows: list[dict[str, Any]] = []
    for name, env in found.items():
        seeds = sorted({s for s in _seeds(env)})
        pages = pages_json(env, seeds)
        rows.append(
            {
                "name": name,
                "title": env.spec.title,
                "seeds": seeds,
                "data": env.file,
                "pages": pages,
            }
        )
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    width = max(len(r["name"]) for r in rows)
    columns = output_width(sys.stdout) or shutil.get_terminal_size().columns
    for r in rows:
        env = found[r["name"]]
        lines = [
            r["title"],
            f"source: {', '.join(r['seeds'])} (storage/envelopes/data/{r['data']})",
            *(f"page: {describe_page(env.seeds[p['seed']])}" for p in r["pages"]),
        ]
        sys.stdout.write(_folded(r["name"], width, lines, columns))


def _folded(name: str, width: int, lines: list[str], columns: int) -> str:
    """An envelope's lines beside its name, each folded to ``columns`` under the name's column
    (a page's address is never broken: a line holding only it may be longer)."""
    indent = " " * (width + 2)
    out = []
    for index, line in enumerate(lines):
        first = f"{name:<{width}}  " if index == 0 else indent
        out.extend(
            textwrap.wrap(
                line,
                max(columns, len(indent) + 20),
                initial_indent=first,
                subsequent_indent=indent,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(out) + "\n"


def _seeds(env: Envelope) -> list[str]:
    from storage.envelopes.schema import iter_sources

    return [f"seed {s.seed}" for s in iter_sources(env.spec)]


def _certainty_lines(answer: SizingAnswer) -> list[str]:
    """What kind of number the verdict rests on: published, interpolated (the rule and its
    leave-one-out band) or outside (and what --allow-extrapolation would do)."""
    from storage.envelopes.units import fmt

    limit = answer.binding.limit
    said = [f"caveat: {answer.certainty_caveat}"] if answer.certainty_caveat else []
    if limit.basis == "published" and answer.certainty == "estimate":
        assumed = [f.message for f in (*limit.flags, *answer.flags) if f.kind == "estimate"]
        return [f"figure: published, applied where the page does not say — {assumed[0]}", *said]
    if limit.basis == "published":
        return ["figure: published (a stored point of the page, unchanged)", *said]
    if limit.basis == "derived":
        return [f"figure: derived — {limit.derivation}", *said]
    if limit.basis == "outside":
        held = "held from the nearest published point, not extrapolated"
        if answer.fits is None:
            return [
                f"figure: outside — no published point brackets it ({held}); no verdict "
                f"without --allow-extrapolation (exit 4)"
            ]
        return [
            f"figure: outside — no published point brackets it ({held}); verdict given "
            f"because of --allow-extrapolation"
        ]
    band = limit.band
    assert band is not None
    lines = [f"figure: interpolated — {band.describe()}"]
    if band.tested:
        low, high = band.lowest_ceiling(limit.value), band.highest_ceiling(limit.value)
        lines.append(
            f"  at that band the ceiling is {fmt(low)} to {fmt(high)} {limit.unit}"
            + (" (the rule never overshot here)" if band.conservative else "")
        )
    return [*lines, *said]


def _conditions(env: Envelope) -> str:
    """The published test set-up in one line (clients, tool and jobs, iodepth, volume …)."""
    cond = env.spec.conditions
    return "; ".join(
        part
        for part in (
            "clients not stated" if cond.clients == "not stated" else cond.clients,
            cond.tool and f"{cond.tool}" + (f", {cond.jobs}" if cond.jobs else ""),
            cond.iodepth and f"iodepth {cond.iodepth}",
            cond.volume and f"volume {cond.volume}",
            cond.working_set and f"working set {cond.working_set}",
            cond.mount,
        )
        if part
    )


def render(answer: SizingAnswer) -> str:
    """The answer as text: verdict, binding limit, every limit, smallest fits, flags, source."""
    from storage.envelopes.pages import page_lines
    from storage.envelopes.scaling import capacity_unit
    from storage.envelopes.units import fmt, fmt_capacity, growth, pct

    env, spec = answer.envelope, answer.envelope.spec
    published = _conditions(answer.envelope)
    capacity = (
        fmt_capacity(answer.capacity_tib, capacity_unit(env))
        if answer.capacity_tib is not None
        else "as tested"
    )
    level = f", service level {answer.service_level}" if answer.service_level else ""
    binding = answer.binding.limit
    kind = "IOPS" if binding.kind == "iops" else "throughput"
    lines = [
        f"envelope: {spec.name} — {spec.title}",
        f"published with: {published}",
        f"workload: {answer.workload.describe()}",
        f"capacity: {capacity}{level}",
        f"{answer.verdict_text()}: the {kind} limit binds — {binding.label}: "
        f"{binding.describe()}; utilisation {pct(answer.utilisation_pct)}, headroom "
        f"{pct(answer.headroom_pct)}"
        + (
            f" (the workload {growth(answer.binding.utilisation)})"
            if answer.fits and not answer.at_limit
            else ""
        ),
        *_unit_lines(answer),
        *_certainty_lines(answer),
        *(
            [f"latency published at that figure: {'; '.join(binding.latency)}"]
            if binding.latency
            else []
        ),
        "limits:",
    ]
    for check in sorted(answer.checks, key=lambda c: -c.utilisation):
        mark = "*" if check is answer.binding else " "
        unit = answer.workload.op_unit if check.limit.kind == "iops" else check.limit.unit
        lines.append(
            f" {mark} {pct(check.utilisation * 100):>11}  {check.limit.describe()} — "
            f"{check.limit.label} (demand {fmt(check.demand, 0 if check.demand >= 100 else 1)} "
            f"{unit})"
        )
    caveats = env.caveats()
    if caveats:
        lines.append("caveats:")
        lines.extend(
            f"  - {c.text}" + (f" ({c.source.path()})" if c.source else "") for c in caveats
        )
    lines.append(f"smallest capacity that fits: {answer.smallest_capacity}")
    lines.append(f"smallest service level that fits: {answer.smallest_level_text}")
    if answer.flags:
        lines.append("flags:")
        lines.extend(f"  ! {flag}" for flag in answer.flags)
    lines.append("source: " + "; ".join(answer.source))
    lines.extend(page_lines(env, answer.source))
    return "\n".join(lines)


def _unit_lines(answer: SizingAnswer) -> list[str]:
    """For a file workload: what its operations are compared with."""
    unit = answer.workload.op_unit
    if unit == "IOPS":
        return []
    return [
        f"units: the workload's {unit} are compared with the envelope's IOPS figures, which for "
        f"an NFS or file page are operations of the protocol (metadata included), not disk "
        f"requests; the local disk under the tree is not sized"
    ]
