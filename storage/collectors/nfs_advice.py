"""Seed 002's NFS client advice, and the mount options and host tunables it is checked on.

``describe()`` of the NFS collector (:mod:`storage.collectors.nfs`) lists the options in force
(:func:`option_summary`) and a plain sentence wherever they, or the host's NFS tunables
(:func:`read_tunables`), differ from the advice tabled in :data:`ADVICE` with the seed's own
words (:func:`option_warnings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage.collectors.mountstats import MountStats

SEED_SOURCE = (
    "shared/seeds/002_26a53d12d47323af.txt: Google Cloud NetApp Volumes, 'Otimizar o "
    "desempenho' (pt-BR), sections 'Ajustar o cliente' and 'Cargas de trabalho de computação "
    "de alto desempenho e alta simultaneidade'"
)


@dataclass(frozen=True)
class Advice:
    """One piece of seed 002's client advice: what it is about, the value it recommends,
    its words (pt-BR, quoted), what they say in English, and when the seed gives it."""

    key: str
    value: int | str
    quote: str
    meaning: str
    scope: str


_EXAMPLE = (
    "sudo mount -t nfs -o rw,hard,intr,rsize=1048576,wsize=1048576,vers=3,tcp,actimeo=600,"
    "nconnect=8 SERVER:/SHARE /mnt/netapp"
)
_HPC = "high-concurrency HPC/EDA NFS workloads (the seed's example mount)"

ADVICE: dict[str, Advice] = {
    a.key: a
    for a in (
        Advice(
            "nconnect", 8,
            "nconnect=8: usa várias conexões TCP por montagem, melhorando a largura de banda. "
            "[…] permite aumentar o número de sessões TCP compatíveis até um máximo de 16. "
            "[…] cada sessão TCP adicional adiciona uma fila para 128 solicitações pendentes",
            "use nconnect=8 (at most 16) TCP connections per mount; each adds a queue of 128 "
            "outstanding requests", _HPC,
        ),
        Advice("nconnect_max", 16, "até um máximo de 16", "nconnect goes up to 16", "Linux"),
        Advice(
            "actimeo", 600,
            "actimeo=600: aumenta o tempo em que os atributos são armazenados em cache no "
            "cliente, reduzindo as chamadas GETATTR.",
            "cache attributes for 600 s to cut GETATTR calls", _HPC,
        ),
        Advice("rsize", 1048576, _EXAMPLE, "read in 1 MiB transfers", _HPC),
        Advice("wsize", 1048576, _EXAMPLE, "write in 1 MiB transfers", _HPC),
        Advice("hard", "hard", _EXAMPLE, "a hard mount", _HPC),
        Advice("proto", "tcp", _EXAMPLE, "NFS over TCP (nconnect opens TCP sessions)", _HPC),
        Advice(
            "sunrpc.tcp_max_slot_table_entries", 128,
            "Recomendamos definir sunrpc.max_tpc_slot_table_enteries como 128 solicitações ou "
            "por conexão e não exceder 10.000 slots para todos os clientes NFS",
            "128 outstanding requests per connection (the seed misspells the sysctl, which "
            "Linux names sunrpc.tcp_max_slot_table_entries)", "Linux clients",
        ),
        Advice(
            "nfs.max_session_slots", 180,
            "Recomendamos mudar o valor compatível máximo por sessão para 180.",
            "raise the NFSv4.1 client's session slots from the default 64 to 180",
            "NFSv4.1 and later mounts",
        ),
        Advice(
            "net.ipv4.tcp_keepalive_time", 60,
            "sudo sysctl -w net.ipv4.tcp_keepalive_time=60",
            "detect unresponsive connections after 60 s", _HPC,
        ),
    )
}  # fmt: skip
"""Seed 002's NFS client advice (source: :data:`SEED_SOURCE`). The seed says nothing about
``nocto``, ``vers`` (its example uses 3 without recommending it) or ``timeo``; ``intr`` in
its example has been ignored by Linux since 2.6.25. No warning is given for those."""

TUNABLE_FILES: dict[str, tuple[str, str]] = {
    "sunrpc.tcp_max_slot_table_entries": ("proc_sys", "sunrpc/tcp_max_slot_table_entries"),
    "nfs.max_session_slots": ("sys_module", "nfs/parameters/max_session_slots"),
    "net.ipv4.tcp_keepalive_time": ("proc_sys", "net/ipv4/tcp_keepalive_time"),
}


def read_tunables(
    proc_sys: Path = Path("/proc/sys"), sys_module: Path = Path("/sys/module")
) -> dict[str, int]:
    """The host tunables seed 002 talks about, those that are readable here."""
    roots = {"proc_sys": Path(proc_sys), "sys_module": Path(sys_module)}
    out: dict[str, int] = {}
    for name, (root, rel) in TUNABLE_FILES.items():
        try:
            out[name] = int((roots[root] / rel).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return out


def _int(options: dict[str, str], key: str) -> int | None:
    value = options.get(key, "")
    return int(value) if value.isdigit() else None


def option_summary(stats: MountStats) -> dict[str, Any]:
    """The options that matter for performance, typed. ``nconnect`` is 1 when not set (the
    kernel prints it only when given); ``actimeo`` is set when the four attribute-cache
    timeouts (seconds) are equal; ``timeo`` is in tenths of a second."""
    opts = dict(stats.options)
    cache = {k: _int(opts, k) for k in ("acregmin", "acregmax", "acdirmin", "acdirmax")}
    soft = "soft" in opts or "softerr" in opts
    return {
        "vers": opts.get("vers"),
        "proto": opts.get("proto"),
        "nconnect": _int(opts, "nconnect") or 1,
        "rsize": _int(opts, "rsize"),
        "wsize": _int(opts, "wsize"),
        **cache,
        "actimeo": cache["acregmin"] if len(set(cache.values())) == 1 else None,
        "nocto": "nocto" in opts,
        "noac": "noac" in opts,
        "hard": not soft,
        "soft": soft,
        "timeo": _int(opts, "timeo"),
        "retrans": _int(opts, "retrans"),
        "sec": opts.get("sec"),
    }


def option_warnings(stats: MountStats, tunables: dict[str, int] | None = None) -> list[str]:
    """Plain sentences where ``stats``' options, or the host ``tunables``, differ from
    :data:`ADVICE`; an empty list when they follow it."""
    o = option_summary(stats)
    advised = {key: a.value for key, a in ADVICE.items()}
    out: list[str] = []
    n = o["nconnect"]
    if n < advised["nconnect"]:
        now = "nconnect is not set (one connection)" if n == 1 else f"nconnect={n}"
        out.append(
            f"{now}: seed 002 advises nconnect={advised['nconnect']} (at most "
            f"{advised['nconnect_max']}), each connection adding a queue of 128 outstanding "
            "requests."
        )
    for key in ("rsize", "wsize"):
        if o[key] is not None and o[key] < advised[key]:
            out.append(
                f"{key}={o[key]} is below the {key}={advised[key]} of seed 002's example mount."
            )
    short = {k: o[k] for k in ("acregmin", "acregmax", "acdirmin", "acdirmax")}
    if "noac" in stats.options or any(
        v is not None and v < advised["actimeo"] for v in short.values()
    ):
        shown = ", ".join(f"{k}={v}" for k, v in short.items() if v is not None)
        out.append(
            f"attribute caching ({shown or 'noac'}) is shorter than seed 002's "
            f"actimeo={advised['actimeo']} for high-concurrency HPC/EDA workloads, which cuts "
            "GETATTR calls (a database shared by several clients may need short caching)."
        )
    if o["proto"] and not str(o["proto"]).startswith(("tcp", "rdma")):  # tcp6, rdma6 too
        out.append(f"proto={o['proto']}: seed 002's example mount uses TCP, which nconnect needs.")
    if o["soft"]:
        out.append(
            "the mount is soft: seed 002's example mount is hard (a soft mount returns EIO to the "
            "application when the server does not answer in time)."
        )
    out.extend(_tunable_warnings(o, tunables or {}, advised))
    return out


def _tunable_warnings(
    o: dict[str, Any], tunables: dict[str, int], advised: dict[str, int | str]
) -> list[str]:
    out: list[str] = []
    slots = tunables.get("sunrpc.tcp_max_slot_table_entries")
    if slots is not None and slots > int(advised["sunrpc.tcp_max_slot_table_entries"]):
        out.append(
            f"sunrpc.tcp_max_slot_table_entries is {slots}: seed 002 recommends 128 outstanding "
            "requests per connection."
        )
    session = tunables.get("nfs.max_session_slots")
    vers = str(o["vers"] or "")
    v41 = vers.startswith("4.") and vers != "4.0"  # sessions arrived with NFSv4.1
    if v41 and session is not None and session < int(advised["nfs.max_session_slots"]):
        out.append(
            f"nfs max_session_slots is {session} for this NFSv{vers} mount: seed 002 "
            f"recommends {advised['nfs.max_session_slots']}."
        )
    keepalive = tunables.get("net.ipv4.tcp_keepalive_time")
    if keepalive is not None and keepalive > int(advised["net.ipv4.tcp_keepalive_time"]):
        out.append(
            f"net.ipv4.tcp_keepalive_time is {keepalive} s: seed 002 recommends 60 for "
            "high-concurrency HPC/EDA clients, to notice unresponsive connections sooner."
        )
    return out
