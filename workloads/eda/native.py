"""EDA sessions on the native file loop (storage/targets/native/fileloop.c).

Python keeps what decides the run's semantics: the decks are dealt here, exactly as
:class:`~workloads.eda.operations.Deck` deals them (so :func:`count_dealt` recounts a native
run's operations the same way), and the tree's directories are opened and checked by the
session's :class:`~storage.targets.filetree.FileSession` (component by component, O_NOFOLLOW,
the guard's inodes). The C loop gets the outcome: dirfds, packed name tables (every path as
its parent's dirfd and its last name), the recorded inodes, the seeded write pattern. Then it
runs whole batches of operations with the GIL released and returns each one's latency, errno
and, on failure, which path it was about.

Every EDA operation runs natively; nothing is left to Python per operation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.nofollow import kind_of
from storage.targets import fileloop
from workloads.eda.deal import deal
from workloads.eda.tree import CREATED_PREFIX, SCRATCH_PREFIX

if TYPE_CHECKING:
    from workloads.eda.operations import BackendSession, EdaSession, FrontendSession

#: More directories than this and the native loop would hold too many descriptors per session.
MAX_NATIVE_DIRS = 1024
FSYNC_CODES = {"none": 0, "close": 1, "each": 2}
#: Which table an error's argument indexes (fileloop.c's T_* order).
T_ANY, T_EMPTY, T_DATA, T_DIRS, T_CREATED, T_SCRATCH = range(6)
#: The call each operation's error message names, as FileSession's messages do.
WHAT = {
    "stat": "stat",
    "access": "access",
    "chmod": "chmod",
    "mkdir": "mkdir",
    "create": "create",
    "unlink": "unlink",
    "unlink2": "unlink",
    "write_file": "write",
    "read_file": "read",
    "random_read": "read",
    "random_write": "write",
    "append": "append",
    "readdir": "readdir",
    "seq_read": "read",
    "seq_write": "write",
}
#: The tables an operation picks from (a mix dealing one from an empty table cannot run).
NEEDS = {
    "stat": "any",
    "access": "empty",
    "chmod": "empty",
    "append": "empty",
    "write_file": "data",
    "read_file": "data",
    "random_read": "data",
    "random_write": "data",
    "seq_read": "data",
    "seq_write": "data",
    "readdir": "dirs",
    "mkdir": "dirs",
    "create": "dirs",
}


class NativeUnsupported(Exception):
    """This session cannot run natively; the message says why (the session uses threads)."""


class DeckCodes:
    """A session's deck as operation codes, dealt ahead of the native loop and consumed as
    it completes operations (the unconsumed rest carries over to the next batch)."""

    def __init__(self, weights: dict[str, int], base: str) -> None:
        self.weights = weights
        self.base = base
        self._k = -1
        self._codes = np.zeros(0, dtype=np.int32)
        self._pos = 0
        live = [name for name, w in weights.items() if w > 0]
        # One operation only: every deck is that card repeated; no shuffle needed.
        self._constant = fileloop.CODES[live[0]] if len(live) == 1 else None
        self._size = sum(weights.values())

    @property
    def constant(self) -> int | None:
        """The one operation code of every deck, or None for a mix."""
        return self._constant

    def _deck(self) -> np.ndarray:
        self._k += 1
        codes = fileloop.CODES
        cards = deal(self.weights, f"{self.base}:{self._k}")
        return np.fromiter((codes[c] for c in cards), dtype=np.int32, count=len(cards))

    def ahead(self, n: int) -> np.ndarray:
        """The next ``n`` codes (not consumed): a contiguous int32 array."""
        if self._constant is not None:
            # Every code is the same: one array serves every batch. Refilling it (a
            # concatenate and a fill) each batch cost ~25 us of the hand-over, which runs on a
            # cold CPU after a batch of blocking reads (sim.core.session_native).
            if len(self._codes) < n:
                self._codes = np.full(n, self._constant, dtype=np.int32)
            return self._codes[:n]
        if len(self._codes) - self._pos < n:
            rest = self._codes[self._pos :]
            self._codes = np.concatenate([rest, *self._more(n - len(rest))])
            self._pos = 0
        return self._codes[self._pos : self._pos + n]

    def _more(self, need: int) -> list[np.ndarray]:
        if self._constant is not None:
            # Whole decks at once: a stat-only deck of one card would cost a deal per op.
            decks = -(-need // self._size)
            self._k += decks
            return [np.full(decks * self._size, self._constant, dtype=np.int32)]
        dealt: list[np.ndarray] = []
        while need > 0:
            dealt.append(self._deck())
            need -= len(dealt[-1])
        return dealt

    def consume(self, n: int) -> None:
        if self._constant is None:
            self._pos += n


class NativeProgram:
    """One EDA session's native loop: its tables, its deck codes, its counters."""

    #: How many operations of the last batch failed (the C loop counts them as it runs:
    #: sim.core.session_native folds a batch without scanning it when this is 0).
    failed: int | None = None

    def __init__(
        self, session: EdaSession, tables: dict[str, Sequence[str]], *, backend: bool
    ) -> None:
        self.session = session
        fs = session.fs
        why = fileloop.unavailable()
        if why:
            raise NativeUnsupported(why)
        mix = {name: w for name, w in session.deck.weights.items() if w > 0}
        for name in mix:
            if name not in fileloop.CODES:
                raise NativeUnsupported(f"native loop has no {name} operation")
            table = NEEDS.get(name)
            if table is not None and not tables.get(table):
                raise NativeUnsupported(f"{name} has no {table} files to work on")
        if len(tables["dirs"]) > MAX_NATIVE_DIRS:
            raise NativeUnsupported(f"more than {MAX_NATIVE_DIRS} directories per session")
        self.names: tuple[str, ...] = fileloop.OPS
        self.tables = tables
        self.deck = DeckCodes(session.deck.weights, session.deck.base)
        self._fds: list[int] = []
        self._fd_index: dict[str, int] = {}
        token = getattr(session, "token", "x")
        self.created_stem = f"{CREATED_PREFIX}{token}_"
        self.scratch_stem = f"{SCRATCH_PREFIX}{token}_"
        try:
            packed = {name: self._pack(paths) for name, paths in tables.items()}
            dir_self = np.array([self._fd_of(d) for d in tables["dirs"]], dtype=np.int32)
            io = session.io
            self.loop = fileloop.new_loop(
                dirfds=np.array(self._fds, dtype=np.int32).tobytes(),
                any_names=packed["any"][0],
                any_parents=packed["any"][1],
                empty_names=packed["empty"][0],
                empty_parents=packed["empty"][1],
                empty_inos=self._inos(tables["empty"]),
                data_names=packed["data"][0],
                data_parents=packed["data"][1],
                data_inos=self._inos(tables["data"]),
                dir_names=packed["dirs"][0],
                dir_parents=packed["dirs"][1],
                dir_self=dir_self.tobytes(),
                created_stem=self.created_stem,
                scratch_stem=self.scratch_stem,
                pattern=fs.write_pattern(),
                direct=int(io.direct_io),
                fsync=FSYNC_CODES[io.fsync],
                backend=int(backend),
                transfer=io.transfer_size_bytes,
                block=session.p.block_size_bytes,
                file_size=session.tree.file_size_bytes,
                seed=hash_seed(session.deck.base),
                **create_kinds(session),
            )
        except BaseException:
            self._close_fds()
            raise
        self._fds = []  # the loop owns them now
        self._counted = (tuple(0 for _ in self.names), 0, 0)
        fs.at_close(self.loop.close)

    # ------------------------------------------------------------------ set-up

    def _fd_of(self, directory: str) -> int:
        index = self._fd_index.get(directory)
        if index is None:
            index = self._fd_index[directory] = len(self._fds)
            self._fds.append(self.session.fs.dir_descriptor(directory))
        return index

    def _pack(self, paths: Sequence[str]) -> tuple[bytes, bytes]:
        """Names (NUL-separated) and each one's parent dirfd index."""
        names, parents = [], []
        for path in paths:
            parent, _, name = path.rpartition("/")
            parents.append(self._fd_of(parent))
            names.append(os.fsencode(name))
        blob = b"".join(n + b"\0" for n in names)
        return blob, np.array(parents, dtype=np.int32).tobytes()

    def _inos(self, paths: Sequence[str]) -> bytes:
        fs = self.session.fs
        inos = []
        for path in paths:
            recorded = fs.recorded_inode(path)
            inos.append(0 if recorded is None else recorded or fileloop.UNRECORDED_INODE)
        return np.array(inos, dtype=np.uint64).tobytes()

    def _close_fds(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []

    # ------------------------------------------------------------------ batches

    def run(self, *args: Any) -> tuple[int, int]:
        done, due_ns, self.failed = self.loop.run(*args)
        return done, due_ns

    def advance(self, codes: np.ndarray, done: int) -> None:
        """``done`` operations of ``codes`` completed: consume them, count them as dealt and
        move the loop's byte counters into the session's."""
        self.deck.consume(done)
        session = self.session
        dealt = session.dealt
        constant = self.deck.constant
        if constant is not None:  # one operation: nothing to count by code (no numpy call)
            name = self.names[constant]
            dealt[name] = dealt.get(name, 0) + done
        else:
            counts = np.bincount(codes[:done], minlength=len(self.names)).tolist()
            for code, n in enumerate(counts):
                if n:
                    name = self.names[code]
                    dealt[name] = dealt.get(name, 0) + n
        by_op, read, written = self.loop.counters()
        old_by_op, old_read, old_written = self._counted
        # An operation moves only its own byte counter: one to look at for a constant deck.
        for code in range(len(by_op)) if constant is None else (constant,):
            new, old = by_op[code], old_by_op[code]
            if new != old:
                name = self.names[code]
                session.bytes_by_op[name] = session.bytes_by_op.get(name, 0) + new - old
        session.fs.bytes_read += read - old_read
        session.fs.bytes_written += written - old_written
        self._counted = (by_op, read, written)

    @staticmethod
    def error_class(error: int) -> str:
        """The class a failure is counted under, as the Python path names it."""
        if error > 0:
            return fileloop.errno_class(error)
        return "WorkloadError" if error == fileloop.NOTHING_TO_REMOVE else "OwnershipError"

    def message(self, code: int, error: int, arg: int) -> str:
        """A failed operation's one-line message, as the Python path words it (a refusal
        looks at the object again, without following it, to name what it found)."""
        name = self.names[code]
        path = self._path(arg >> 32, arg & 0xFFFFFFFF)
        if error > 0:
            return fileloop.errno_message(WHAT[name], path, error)
        if error == fileloop.NOTHING_TO_REMOVE:
            return f"{name}: no file of this session to remove (a create failed)"
        try:
            info = os.lstat(path)
        except OSError:
            return f"filetree: {path} changed while dbsim looked at it; refusing to write to it"
        if error == fileloop.REFUSED_LINKS:
            return (
                f"filetree: {path} has {info.st_nlink} hard links (dbsim makes one); "
                f"refusing to write to it"
            )
        if error == fileloop.REFUSED_KIND:
            return (
                f"filetree: {path} is {kind_of(info.st_mode)}, not a file dbsim made; "
                f"refusing to chmod it"
            )
        return (
            f"filetree: {path} is not the file dbsim wrote (inode {info.st_ino}); "
            f"refusing to write to it"
        )

    def _path(self, table: int, index: int) -> str:
        dirs = self.tables["dirs"]
        if table == T_CREATED:
            return os.path.join(dirs[index % len(dirs)], f"{self.created_stem}{index:08d}")
        if table == T_SCRATCH:
            return os.path.join(dirs[index % len(dirs)], f"{self.scratch_stem}{index:06d}")
        names = ("any", "empty", "data", "dirs")
        paths = self.tables[names[table]] if table < len(names) else ()
        return paths[index] if index < len(paths) else "?"

    def held(self) -> tuple[list[str], list[str], list[str]]:
        """Paths of the files (empty, with data) and scratch directories still there."""
        empty, data, scratch = self.loop.held()
        return (
            [self._path(T_CREATED, n) for n in empty],
            [self._path(T_CREATED, n) for n in data],
            [self._path(T_SCRATCH, n) for n in scratch],
        )


def hash_seed(text: str) -> int:
    """A 64-bit seed from a session's deck base (stable across processes, unlike hash())."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def create_kinds(session: EdaSession) -> dict[str, int]:
    """The create ranks of a deck (see FrontendSession.create): empty, then with data."""
    unlink, unlink2 = session.deck.create_kinds()
    return {
        "create_empty_first": unlink,
        "create_data_end": unlink + unlink2,
        "creates_per_deck": session.deck.weights.get("create", 0),
    }


def frontend_program(session: FrontendSession) -> NativeProgram:
    return NativeProgram(
        session,
        {
            "any": session.any_file,
            "empty": session.empty,
            "data": session.data,
            "dirs": session.dirs,
        },
        backend=False,
    )


def backend_program(session: BackendSession) -> NativeProgram:
    return NativeProgram(
        session, {"any": [], "empty": [], "data": session.data, "dirs": []}, backend=True
    )


Factory = Callable[[Any], NativeProgram]
