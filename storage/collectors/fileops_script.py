"""The ``fileops`` collector's bpftrace program and the arithmetic on what it prints.

**What is counted.** The system calls that act on a file system, classed as an NFS client
would send them (:data:`CLASSES`), counted when they return: a success counts its class, a
path call that failed with ``ENOENT`` counts a ``LOOKUP`` (a name looked up and not found,
what a build's include search makes by the thousand), any other failure nothing. Reads and
writes add the bytes they returned, so a class's mean size is its bytes over its calls.

**Which file system.** A call is counted for a watched file system (its ``s_dev``, the
device ``stat`` gives its files) when the kernel objects it names are on it:

- a descriptor (``read``, ``fstat``, ``getdents64``, ``ftruncate`` …): the file the
  process's descriptor table holds;
- a path relative to a directory descriptor (``*at`` calls): that directory's file system;
  relative to the working directory (``AT_FDCWD``, and the calls without ``*at``): the
  working directory's; an empty path with ``AT_EMPTY_PATH``: the descriptor's;
- an absolute path: the watched mount point it starts with (a mount nested inside a
  watched one is counted as the watched one); ``/proc/self/fd/N``: descriptor ``N``'s;
- an ``open``: the new descriptor's file, at its return.

A path is compared with a mount point in chunks of :data:`CHUNK` bytes (bpftrace's strings
hold 64): a mount point longer than
:data:`MAX_MOUNT_CHARS` is refused by the collector. A relative path that leaves its
directory's file system (``..`` across a mount, a symbolic link) is counted on the
directory's.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

PRINT_SIGNAL = signal.SIGWINCH
#: The markers the shared reader (storage.collectors.blocklatency_reader) waits for.
READY = "blocklatency-ready"
TICK = "blocklatency-tick"
MAX_MOUNT_CHARS = 180
#: bpftrace's string literals and reads hold 64 bytes: a mount point is compared in chunks.
CHUNK = 60
ENOENT = 2
AT_FDCWD = -100
O_CREAT = 0o100

#: Class codes -> names (NFS's operation names where one matches).
CLASSES = {
    1: "READ",
    2: "WRITE",
    3: "GETATTR",
    4: "ACCESS",
    5: "SETATTR",
    6: "CREATE",
    7: "MKDIR",
    8: "REMOVE",
    9: "RENAME",
    10: "READDIR",
    11: "OPEN",
    12: "LOOKUP",
    13: "LINK",
}
CODE = {name: code for code, name in CLASSES.items()}
#: Classes whose calls carry bytes.
SIZED = ("READ", "WRITE")

#: x86_64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl) -> (name, class,
#: how the file is named): ``("fd", i)`` descriptor argument ``i``; ``("path", d, i)`` path
#: argument ``i`` relative to directory descriptor argument ``d`` (None: the working
#: directory); ``("open", d, i, f)`` likewise, with the flags in argument ``f`` (None: creat).
X86_64_CALLS: dict[int, tuple[str, str, tuple[int | None, ...]]] = {
    0: ("read", "READ", (0,)),
    17: ("pread64", "READ", (0,)),
    19: ("readv", "READ", (0,)),
    295: ("preadv", "READ", (0,)),
    327: ("preadv2", "READ", (0,)),
    1: ("write", "WRITE", (0,)),
    18: ("pwrite64", "WRITE", (0,)),
    20: ("writev", "WRITE", (0,)),
    296: ("pwritev", "WRITE", (0,)),
    328: ("pwritev2", "WRITE", (0,)),
    5: ("fstat", "GETATTR", (0,)),
    217: ("getdents64", "READDIR", (0,)),
    91: ("fchmod", "SETATTR", (0,)),
    93: ("fchown", "SETATTR", (0,)),
    77: ("ftruncate", "SETATTR", (0,)),
    4: ("stat", "GETATTR", (None, 0)),
    6: ("lstat", "GETATTR", (None, 0)),
    262: ("newfstatat", "GETATTR", (0, 1)),
    332: ("statx", "GETATTR", (0, 1)),
    21: ("access", "ACCESS", (None, 0)),
    269: ("faccessat", "ACCESS", (0, 1)),
    439: ("faccessat2", "ACCESS", (0, 1)),
    90: ("chmod", "SETATTR", (None, 0)),
    268: ("fchmodat", "SETATTR", (0, 1)),
    452: ("fchmodat2", "SETATTR", (0, 1)),
    92: ("chown", "SETATTR", (None, 0)),
    94: ("lchown", "SETATTR", (None, 0)),
    260: ("fchownat", "SETATTR", (0, 1)),
    76: ("truncate", "SETATTR", (None, 0)),
    280: ("utimensat", "SETATTR", (0, 1)),
    235: ("utimes", "SETATTR", (None, 0)),
    132: ("utime", "SETATTR", (None, 0)),
    261: ("futimesat", "SETATTR", (0, 1)),
    83: ("mkdir", "MKDIR", (None, 0)),
    258: ("mkdirat", "MKDIR", (0, 1)),
    87: ("unlink", "REMOVE", (None, 0)),
    263: ("unlinkat", "REMOVE", (0, 1)),
    84: ("rmdir", "REMOVE", (None, 0)),
    82: ("rename", "RENAME", (None, 0)),
    264: ("renameat", "RENAME", (0, 1)),
    316: ("renameat2", "RENAME", (0, 1)),
    86: ("link", "LINK", (None, 1)),
    265: ("linkat", "LINK", (2, 3)),
    88: ("symlink", "LINK", (None, 1)),
    266: ("symlinkat", "LINK", (1, 2)),
    2: ("open", "OPEN", (None, 0, 1)),
    257: ("openat", "OPEN", (0, 1, 2)),
    85: ("creat", "OPEN", (None, 0, None)),
}

_LINE = re.compile(r"^@(ops|bytes)\[(\d+), (\d+)\]: (\d+)$")
FD, PATH, OPEN = 1, 2, 3
#: The device an open's entry carries: none is (a kernel dev_t has 32 bits).
OPEN_MARK = 0xFFFFFFFF


def _fd_dev(fd: str) -> str:
    """bpftrace statements setting ``$d`` to the s_dev of descriptor ``fd`` (0: none)."""
    return (
        f"$fdt = curtask->files->fdt; $fd = (uint64)({fd});"
        " if ($fd < (uint64)$fdt->max_fds) {"
        " $d = (uint64)(*($fdt->fd + $fd))->f_inode->i_sb->s_dev; }"
    )


def _arg(i: int | None) -> str:
    return "0" if i is None else f"args->args[{i}]"


def _dispatch() -> str:
    """The if-chain setting, per call number: ``$k`` its class, ``$m`` how it names its file
    (:data:`FD`, :data:`PATH`, :data:`OPEN`), ``$a`` the descriptor (or directory
    descriptor, :data:`AT_FDCWD` for none), ``$s`` the path, ``$o`` the open's flags."""
    groups: dict[tuple[str, tuple[int | None, ...]], list[int]] = {}
    for nr, (_, cls, how) in X86_64_CALLS.items():
        groups.setdefault((cls, how), []).append(nr)
    out = []
    for (cls, how), nrs in groups.items():
        test = " || ".join(f"$id == {nr}" for nr in sorted(nrs))
        if len(how) == 1:
            body = f"$k = {CODE[cls]}; $m = {FD}; $a = (int64){_arg(how[0])};"
        else:
            dfd = f"(int64)(int32){_arg(how[0])}" if how[0] is not None else str(AT_FDCWD)
            body = f"$k = {CODE[cls]}; $m = {PATH if len(how) == 2 else OPEN}; $a = {dfd};"
            body += f" $s = {_arg(how[1])};"
            if len(how) == 3:
                body += f" $o = {_arg(how[2])} & {O_CREAT};" if how[2] is not None else " $o = 1;"
        out.append(f"if ({test}) {{ {body} }}")
    return " else ".join(out)


def _starts(text: str) -> str:
    """Whether the path at ``$s`` starts with ``text``, compared :data:`CHUNK` bytes at a
    time."""
    parts = [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]
    return (
        "("
        + " && ".join(
            f'strncmp(str(uptr($s + {i * CHUNK})), "{part}", {len(part)}) == 0'
            for i, part in enumerate(parts)
        )
        + ")"
    )


def _path_dev(mounts: Mapping[int, str]) -> str:
    """Statements setting ``$d`` to the s_dev the path ``$s`` names relative to ``$a``."""
    prefixes = " ".join(
        f"if ({_starts(m.rstrip('/') + '/')} || ({_starts(m.rstrip('/') or '/')}"
        f" && *(uint8 *)uptr($s + {len(m.rstrip('/') or '/')}) == 0)) {{ $d = (uint64){dev}; }}"
        for dev, m in sorted(mounts.items(), key=lambda kv: len(kv[1]))
    )
    proc = (
        "$n = (uint64)0; $i = 14;"
        " while ($i < 19) {"
        " $c = *(uint8 *)uptr($s + $i);"
        " if ($c < 48 || $c > 57) { break; }"
        " $n = $n * 10 + $c - 48; $i = $i + 1; }"
        f" {_fd_dev('$n')}"
    )
    return (
        "$p = str(uptr($s));"
        f' if (strncmp($p, "/proc/self/fd/", 14) == 0) {{ {proc} }}'
        f' else if (strncmp($p, "/", 1) == 0) {{ {prefixes} }}'
        f" else if ($a == {AT_FDCWD}) {{ $d = (uint64)curtask->fs->pwd.mnt->mnt_sb->s_dev; }}"
        f" else {{ {_fd_dev('$a')} }}"
    )


def bpftrace_script(mounts: Mapping[int, str], requester: int) -> str:
    """The program for the file systems ``mounts`` (kernel s_dev -> mount point), printing
    when process ``requester`` sends :data:`PRINT_SIGNAL`: two probes on the raw system
    call tracepoints (one per call would take bpftrace 13 s to attach here)."""
    devs = " || ".join(f"$d == {dev}" for dev in sorted(mounts)) or "0"
    lookup, create, opened = CODE["LOOKUP"], CODE["CREATE"], CODE["OPEN"]
    return f"""BEGIN {{ printf("{READY}\\n"); }}
tracepoint:raw_syscalls:sys_enter {{
  $id = args->id; $k = 0; $m = 0; $a = (int64)0; $s = (uint64)0; $o = (uint64)0; $d = (uint64)0;
  {_dispatch()}
  if ($m == {FD}) {{ {_fd_dev("$a")} }}
  if ($m >= {PATH}) {{ {_path_dev(mounts)} }}
  if ($m == {OPEN}) {{ @call[tid] = ((uint64){OPEN_MARK}, (uint64)($o ? {create} : {opened}), $d); }}
  else if ($k != 0 && ({devs})) {{ @call[tid] = ($d, (uint64)$k, $d); }}
}}
tracepoint:raw_syscalls:sys_exit /@call[tid].0/ {{
  $c = @call[tid]; delete(@call[tid]); $r = args->ret; $d = (uint64)0;
  if ($c.0 == {OPEN_MARK}) {{
    if ($r >= 0) {{
      {_fd_dev("$r")}
      if ({devs}) {{ @ops[$d, {opened}] = count();
        if ($c.1 == {create}) {{ @ops[$d, {create}] = count(); }} }}
    }} else if ($r == -{ENOENT}) {{ $d = $c.2; if ({devs}) {{ @ops[$d, {lookup}] = count(); }} }}
  }} else if ($r >= 0) {{
    @ops[$c.0, $c.1] = count();
    if ($c.1 <= 2) {{ @bytes[$c.0, $c.1] = sum($r); }}
  }} else if ($r == -{ENOENT} && $c.1 > 2) {{ @ops[$c.0, {lookup}] = count(); }}
}}
tracepoint:signal:signal_generate /pid == {requester} && args->sig == {int(PRINT_SIGNAL)}/ {{
  print(@ops); print(@bytes); clear(@ops); clear(@bytes); printf("{TICK}\\n");
}}
END {{ clear(@ops); clear(@bytes); clear(@call); }}
"""


@dataclass
class OpCounts:
    """Calls and bytes per class of one file system over some prints."""

    calls: dict[str, int] = field(default_factory=dict)
    nbytes: dict[str, int] = field(default_factory=dict)

    def merge(self, other: OpCounts) -> None:
        for name, n in other.calls.items():
            self.calls[name] = self.calls.get(name, 0) + n
        for name, n in other.nbytes.items():
            self.nbytes[name] = self.nbytes.get(name, 0) + n


def parse_tick(lines: Iterable[str]) -> dict[int, OpCounts]:
    """One print's maps, per s_dev; lines that are not map entries are skipped."""
    out: dict[int, OpCounts] = {}
    for line in lines:
        found = _LINE.match(line.strip())
        if not found or int(found[3]) not in CLASSES:
            continue
        counts = out.setdefault(int(found[2]), OpCounts())
        name, value = CLASSES[int(found[3])], int(found[4])
        target = counts.calls if found[1] == "ops" else counts.nbytes
        target[name] = target.get(name, 0) + value
    return out


def figures(counts: OpCounts, seconds: float) -> dict[str, float]:
    """Per class its calls per second (``<class>_s``, lower case), the mean size of reads
    and writes (``read_kib``, ``write_kib``) and ``ops_s``, every class together."""
    out: dict[str, float] = {}
    total = 0
    for name in CLASSES.values():
        n = counts.calls.get(name, 0)
        total += n
        out[f"{name.lower()}_s"] = n / seconds
    for name in SIZED:
        n = counts.calls.get(name, 0)
        if n:
            out[f"{name.lower()}_kib"] = counts.nbytes.get(name, 0) / n / 1024
    out["ops_s"] = total / seconds
    return out


def class_columns() -> Sequence[str]:
    return [f"{name.lower()}_s" for name in CLASSES.values()]
