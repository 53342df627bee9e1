"""The per-op lines the kernel prints for an NFS mount: a section whose list ends early was cut.

``rpc_clnt_show_stats`` (``net/sunrpc/stats.c``) prints one line for every procedure of the
mount's RPC program version, ``for (op = 0; op < maxproc; op++)``, in procedure order, with
or without calls: the list is fixed by the program version and the kernel, never by what the
mount did. So a reading that lists fewer is a cut one (a read that stopped at a line boundary,
a capture cut short), and its missing ops would later be counted from zero — every call since
the mount was made, as if it happened in one interval (issue #30).

- NFSv2 (``p/v: 100003/2``): the 18 procedures of RFC 1094 in ``fs/nfs/nfs2xdr.c`` order.
- NFSv3 (``100003/3``): the 22 of RFC 1813 (``fs/nfs/nfs3xdr.c``), as nfs-utils' ``mountstats``
  lists them. Both lists have not changed since the procedures were defined.
- NFSv4 (``100003/4``): the client's compound procedures (``NFSPROC4_CLNT_*``,
  ``include/linux/nfs4.h``), a list that grew with the kernel (NFSv4.1 and 4.2 procedures were
  appended, some only with the matching ``CONFIG_NFS_V4_*``; old kernels printed fewer). What
  every client kernel prints is checked: the NFSv4.0 procedures up to ``DELEGRETURN`` in that
  order (:data:`NFS4_CORE`), and the procedures known here in kernel order. A list cut later
  than the core cannot be told from an older kernel's by itself: the collector finds it when
  the next reading lists ops the cut one lacked (:mod:`storage.collectors.nfs`).

Names the kernel prints by number (a procedure without a name: ``"%12u"``) and names unknown
here (a newer kernel's) are accepted after the checked ones; other program versions are not
checked.
"""

from __future__ import annotations

from collections.abc import Iterable

NFS2_OPS: tuple[str, ...] = (
    "NULL", "GETATTR", "SETATTR", "ROOT", "LOOKUP", "READLINK", "READ", "WRITECACHE", "WRITE",
    "CREATE", "REMOVE", "RENAME", "LINK", "SYMLINK", "MKDIR", "RMDIR", "READDIR", "STATFS",
)  # fmt: skip
NFS3_OPS: tuple[str, ...] = (
    "NULL", "GETATTR", "SETATTR", "LOOKUP", "ACCESS", "READLINK", "READ", "WRITE", "CREATE",
    "MKDIR", "SYMLINK", "MKNOD", "REMOVE", "RMDIR", "RENAME", "LINK", "READDIR", "READDIRPLUS",
    "FSSTAT", "FSINFO", "PATHCONF", "COMMIT",
)  # fmt: skip
NFS4_OPS: tuple[str, ...] = (
    "NULL", "READ", "WRITE", "COMMIT", "OPEN", "OPEN_CONFIRM", "OPEN_NOATTR", "OPEN_DOWNGRADE",
    "CLOSE", "SETATTR", "FSINFO", "RENEW", "SETCLIENTID", "SETCLIENTID_CONFIRM", "LOCK", "LOCKT",
    "LOCKU", "ACCESS", "GETATTR", "LOOKUP", "LOOKUP_ROOT", "REMOVE", "RENAME", "LINK", "SYMLINK",
    "CREATE", "PATHCONF", "STATFS", "READLINK", "READDIR", "SERVER_CAPS", "DELEGRETURN",
    "GETACL", "SETACL", "FS_LOCATIONS", "RELEASE_LOCKOWNER", "SECINFO", "FSID_PRESENT",
    "EXCHANGE_ID", "CREATE_SESSION", "DESTROY_SESSION", "SEQUENCE", "GET_LEASE_TIME",
    "RECLAIM_COMPLETE", "LAYOUTGET", "GETDEVICEINFO", "LAYOUTCOMMIT", "LAYOUTRETURN",
    "SECINFO_NO_NAME", "TEST_STATEID", "FREE_STATEID", "GETDEVICELIST", "BIND_CONN_TO_SESSION",
    "DESTROY_CLIENTID", "SEEK", "ALLOCATE", "DEALLOCATE", "LAYOUTSTATS", "CLONE", "COPY",
    "OFFLOAD_CANCEL", "LOOKUPP", "LAYOUTERROR", "COPY_NOTIFY", "GETXATTR", "SETXATTR",
    "LISTXATTRS", "REMOVEXATTR", "READ_PLUS",
)  # fmt: skip
"""In ``NFSPROC4_CLNT_*`` order, as a 6.x kernel prints them (69 lines)."""
NFS4_CORE: tuple[str, ...] = NFS4_OPS[: NFS4_OPS.index("DELEGRETURN") + 1]
"""The first 32, which every NFSv4 client kernel prints."""

_EXACT = {"100003/2": NFS2_OPS, "100003/3": NFS3_OPS}
_V4 = "100003/4"
_V4_ORDER = {name: i for i, name in enumerate(NFS4_OPS)}


def _missing(expected: tuple[str, ...], names: list[str]) -> str:
    gone = [op for op in expected if op not in names]
    shown = ", ".join(gone[:3]) + (f" and {len(gone) - 3} more" if len(gone) > 3 else "")
    return f"{len(gone)} missing: {shown}"


def op_list_problem(program: str | None, ops: Iterable[str]) -> str | None:
    """Why the per-op list of a mount of RPC ``program`` (``"100003/3"``) is not one the
    kernel prints (see the module docstring), or None."""
    names = list(ops)
    if program in _EXACT:
        expected = _EXACT[program]
        if names[: len(expected)] == list(expected):
            return None
        vers = program.split("/")[1]
        if set(expected) <= set(names):
            return f"NFSv{vers} ops out of the kernel's order"
        return (
            f"the kernel lists NFSv{vers}'s {len(expected)} ops; "
            f"{_missing(expected, names)} (a cut read?)"
        )
    if program != _V4:
        return None
    if names[: len(NFS4_CORE)] != list(NFS4_CORE):
        if set(NFS4_CORE) <= set(names):
            return "NFSv4 ops out of the kernel's order"
        return (
            f"every kernel lists NFSv4's first {len(NFS4_CORE)} ops; "
            f"{_missing(NFS4_CORE, names)} (a cut read?)"
        )
    known = [_V4_ORDER[n] for n in names if n in _V4_ORDER]
    if known != sorted(known):
        return "NFSv4 ops out of the kernel's order"
    return None
