"""A baseline's figures as text: the console line after each point, ``baseline.csv``, and the
search and curve summaries the command prints after its table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.bundle.files import atomic_write

CSV_COLUMNS = (
    "id", "access", "block_kib", "read_pct", "numjobs", "iodepth", "status",
    "read_iops", "write_iops", "iops", "read_mib_s", "write_mib_s", "mib_s",
    "read_p50_us", "read_p99_us", "read_p99_9_us", "write_p50_us", "write_p99_us",
    "write_p99_9_us", "t_measure_start", "t_end", "published_iops", "ratio",
    "working_set_bytes", "searched", "curve_steps",
)  # fmt: skip


def line(result: dict[str, Any]) -> str:
    """One point's figures, as the console prints them after the point."""
    read, write = result["read"], result["write"]
    parts = [f"{result['iops']:,.0f} IOPS", f"{result['mib_s']:,.1f} MiB/s"]
    if read["ios"]:
        parts.append(f"read p99 {read['p99_us'] / 1000:.2f} ms")
    if write["ios"]:
        parts.append(f"write p99 {write['p99_us'] / 1000:.2f} ms")
    printed = "; ".join(f"{d}: {t}" for d, t in result.get("printed", {}).items())
    return ", ".join(parts) + (f"   (fio printed {printed})" if printed else "")


def write_csv(path: Path, baseline: dict[str, Any]) -> None:
    ratios = {row["id"]: row for row in (baseline.get("comparison") or {}).get("rows", [])}
    lines = [",".join(CSV_COLUMNS)]
    for r in baseline["points"]:
        read, write = r.get("read") or {}, r.get("write") or {}
        compared = ratios.get(r["id"]) or {}
        values = {
            **{k: r.get(k) for k in ("id", "access", "block_kib", "read_pct", "numjobs", "iodepth",
                                     "status", "iops", "mib_s", "t_measure_start", "t_end")},
            "read_iops": read.get("iops"), "write_iops": write.get("iops"),
            "read_mib_s": read.get("mib_s"), "write_mib_s": write.get("mib_s"),
            "read_p50_us": read.get("p50_us"), "read_p99_us": read.get("p99_us"),
            "read_p99_9_us": read.get("p99_9_us"), "write_p50_us": write.get("p50_us"),
            "write_p99_us": write.get("p99_us"), "write_p99_9_us": write.get("p99_9_us"),
            "published_iops": (compared.get("published") or {}).get("iops"),
            "ratio": compared.get("ratio"),
            "working_set_bytes": (r.get("working_set") or {}).get("bytes"),
            "searched": len((r.get("search") or {}).get("steps", [])) or None,
            "curve_steps": len((r.get("curve") or {}).get("steps", [])) or None,
        }  # fmt: skip
        lines.append(",".join("" if values[c] is None else str(values[c]) for c in CSV_COLUMNS))
    atomic_write(path, "\n".join(lines) + "\n")


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.3f}"


def search_lines(points: list[dict[str, Any]]) -> list[str]:
    """Per searched point: the depths tried, their IOPS, where it settled and why."""
    out = []
    for p in points:
        search = p.get("search")
        if not search:
            continue
        tried = ", ".join(
            f"{s['iodepth']}→{s['iops']:,.0f}" if s.get("iops") is not None else f"{s['iodepth']}→-"
            for s in search["steps"]
        )
        out.append(
            f"{p['id']}: iodepth search {tried} IOPS; settled on {search['settled_iodepth']} "
            f"(seed iodepth {search['settled_seed_iodepth']}): {search['why']}"
        )
    return out


def curve_lines(points: list[dict[str, Any]]) -> list[str]:
    """Per curved point: its latency-versus-IOPS curve, one line per step."""
    out = []
    for p in points:
        curve = p.get("curve")
        if not curve:
            continue
        out.append(f"{p['id']}: iorate curve (uncapped {curve['max_iops']:,.0f} IOPS)")
        out.append("    %     asked IOPS   measured IOPS   p50 ms    p99 ms")
        for s in curve["steps"]:
            direction = "read" if s.get("read_p99_us") is not None else "write"
            measured = "-" if s.get("iops") is None else f"{s['iops']:,.0f}"
            out.append(
                f"    {s['pct']:>3}   {s['target_iops']:>10,}   {measured:>13}   "
                f"{_ms(s.get(direction + '_p50_us')):>7}   {_ms(s.get(direction + '_p99_us')):>7}"
            )
    return out
