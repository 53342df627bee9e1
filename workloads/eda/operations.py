"""EDA sessions: the deck that deals each session's operations, and the operations themselves.

**Decks.** A component's mix (name → integer weight) is a deck of that many cards. Session
``s`` deals deck ``k`` shuffled by its own seed (``deck_rng``), so any run of whole decks holds
the mix exactly and any range of operations can be recounted afterwards
(:func:`count_dealt`). Within a deck, the create/unlink/unlink2 cards are re-dealt so that
every create comes before every removal: a removal always finds a file its session made.

**Operations** (one transaction each, timed as one latency; each is a blocking call, made in
place on the session's own thread or handed to the pool from the event loop):

* front-end — ``stat`` (any file), ``access`` (an empty file, read+write permission),
  ``chmod`` (an empty file, alternating 0644/0664), ``mkdir`` (a scratch directory; once the
  session holds :data:`SCRATCH_RING` of them the oldest is removed in the same operation),
  ``create`` (a new file, ``O_CREAT|O_EXCL``), ``unlink`` (remove an empty file this session
  created), ``unlink2`` (remove a file with data this session created: freeing data blocks is
  a different, costlier path on the server than removing an empty inode), ``write_file``
  (rewrite a whole data file), ``read_file`` (read a whole data file), ``random_read`` /
  ``random_write`` (one block at a random block-aligned offset), ``append`` (one block at the
  end of an empty file, wrapping to empty at the data-file size), ``readdir`` (list a
  directory);
* back-end — ``seq_read`` / ``seq_write``: one transfer of a sequential pass over the
  process's large files (the descriptor stays open from the first transfer to the last, then
  the pass moves to the next file). One operation is one transfer, not one file: the
  reference's published rates (~742,000 ops/s with a third of them back-end) would otherwise
  mean terabytes per second.

Creates made for ``unlink`` are empty; those made for ``unlink2`` get one block of data.
Files and directories a session created are removed when it closes, so the tree's file count
stays the same from run to run.
"""

from __future__ import annotations

import os
import random
import secrets
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from sim.errors import WorkloadError
from sim.protocols import Connection
from storage.targets.filetree import FileSession, IoOptions, StreamCursor
from workloads.eda.deal import deal
from workloads.eda.parameters import FRONTEND, EdaParameters
from workloads.eda.tree import CREATED_PREFIX, SCRATCH_PREFIX, ProcessTree

if TYPE_CHECKING:
    from workloads.eda.native import NativeProgram

SCRATCH_RING = 8  # scratch directories a session keeps before mkdir removes the oldest
CHMOD_MODES = (0o664, 0o644)


# --------------------------------------------------------------------------- decks


def deck_base(p: EdaParameters, component: str, session_seed: int) -> str:
    """The seed prefix of a session's decks (deck ``k`` is seeded ``f"{base}:{k}"``)."""
    return f"eda-deck:{p.seed}:{session_seed}:{component}"


def count_dealt(weights: Mapping[str, int], base: str, first: int, end: int) -> dict[str, int]:
    """How many of each operation a session dealt as its operations ``first`` .. ``end`` - 1:
    whole decks count their weights, partial ones are dealt again."""
    size = sum(weights.values())
    counts = dict.fromkeys(weights, 0)
    if end <= first:
        return counts
    first_deck, last_deck = first // size, (end - 1) // size
    for k in (first_deck, last_deck) if last_deck > first_deck else (first_deck,):
        lo = max(first, k * size) - k * size
        hi = min(end, (k + 1) * size) - k * size
        for card in deal(weights, f"{base}:{k}")[lo:hi]:
            counts[card] += 1
    whole = max(last_deck - first_deck - 1, 0)
    for name, weight in weights.items():
        counts[name] += whole * weight
    return counts


class Deck:
    """A session's endless sequence of operation names."""

    def __init__(self, weights: Mapping[str, int], base: str) -> None:
        self.weights = dict(weights)
        self.base = base
        self._k = -1
        self._cards: list[str] = []
        self._pos = 0

    def next(self) -> str:
        if self._pos == len(self._cards):
            self._k += 1
            self._cards = deal(self.weights, f"{self.base}:{self._k}")
            self._pos = 0
        card = self._cards[self._pos]
        self._pos += 1
        return card

    def create_kinds(self) -> tuple[int, int]:
        """(empty, with data): the kinds of the deck's creates, in order — the first ``unlink``
        weight of them empty, the next ``unlink2`` weight with data, the rest empty."""
        return self.weights.get("unlink", 0), self.weights.get("unlink2", 0)


# --------------------------------------------------------------------------- sessions


class EdaSession:
    """One EDA process: its tree, its deck, its I/O options and its byte counts per op."""

    def __init__(
        self,
        p: EdaParameters,
        tree: ProcessTree,
        paths: Mapping[str, Any],
        fs: FileSession,
        session_seed: int,
    ) -> None:
        self.p = p
        self.tree = tree
        self.fs = fs
        component = p.of(tree.component)
        self.deck = Deck(component.mix, deck_base(p, tree.component, session_seed))
        self.rng = random.Random(f"eda-ops:{p.seed}:{session_seed}")
        self.random = self.rng.random
        self.bytes_by_op: dict[str, int] = dict.fromkeys(component.mix, 0)
        self.dealt: dict[str, int] = dict.fromkeys(component.mix, 0)
        #: Operation name -> its blocking call (one transaction each).
        self.ops: dict[str, Callable[[], None]] = {}
        self.dirs: list[str] = list(paths["dirs"])
        self.data: list[str] = list(paths["data"])
        self.empty: list[str] = list(paths["empty"])
        self.io = IoOptions(p.direct_io, p.fsync, p.transfer_size_bytes, session_seed)
        #: The session's native loop once it has one (workloads.eda.native).
        self.native: NativeProgram | None = None
        self._attach(fs)

    def _attach(self, fs: FileSession) -> None:
        fs.configure(self.io, max(self.p.block_size_bytes, self.p.transfer_size_bytes))
        self.fs = fs

    def next_call(self) -> tuple[str, Callable[[], None]]:
        """The next operation as a blocking call: made in place by a session on its own
        thread (sim.core.session_threads), the engine's default for file trees."""
        name = self.deck.next()
        self.dealt[name] += 1
        return name, self.ops[name]

    def native_program(self) -> NativeProgram:
        """Blocking: this session's native loop (raises NativeUnsupported saying why not)."""
        if self.native is None:
            self.native = self._native_program()
        return self.native

    def _native_program(self) -> NativeProgram:
        from workloads.eda.native import NativeUnsupported

        raise NativeUnsupported(f"{type(self).__name__} has no native loop")

    def next_transaction(self) -> tuple[str, Awaitable[Any]]:
        """The same, for a session on the event loop: the call goes through the pool."""
        name, call = self.next_call()
        return name, self.fs.call(call)

    def replace_connection(self, connection: Connection) -> None:
        """Carry on over a new file session after the engine reconnected: the old one's
        close removed what this session had created, and stream passes reopen their file at
        the same offset."""
        if not isinstance(connection, FileSession):
            raise WorkloadError(f"eda got a {type(connection).__name__}, not a file session")
        self._attach(connection)


class FrontendSession(EdaSession):
    """A front-end process: metadata and small-file operations over its own tree."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.any_file = self.data + self.empty
        self.block = self.p.block_size_bytes
        self.file_size = self.tree.file_size_bytes
        self.blocks_per_file = max(self.file_size // self.block, 1)
        # Names of created files and scratch directories carry a token unique to this run's
        # session, so leftovers of a killed run never collide with new names.
        self.token = secrets.token_hex(4)
        self.created = 0
        self.created_empty: deque[str] = deque()
        self.created_data: deque[str] = deque()
        self.scratch: deque[str] = deque()
        self.chmods = 0
        self.dirs_made = 0
        unlink, unlink2 = self.deck.create_kinds()
        self._create_kinds = (unlink, unlink + unlink2, self.deck.weights.get("create", 0))
        self.ops = {
            "stat": self.stat,
            "access": self.access,
            "chmod": self.chmod,
            "mkdir": self.mkdir,
            "create": self.create,
            "unlink": self.unlink,
            "unlink2": self.unlink2,
            "write_file": self.write_file,
            "read_file": self.read_file,
            "random_read": self.random_read,
            "random_write": self.random_write,
            "append": self.append,
            "readdir": self.readdir,
        }

    def _attach(self, fs: FileSession) -> None:
        super()._attach(fs)
        fs.at_close(self._cleanup)

    def replace_connection(self, connection: Connection) -> None:
        super().replace_connection(connection)
        for held in (self.created_empty, self.created_data, self.scratch):
            held.clear()

    def _pick(self, files: list[str]) -> str:
        # random() scaled: a third of randrange()'s cost on the hot path, as uniform for this.
        return files[int(self.random() * len(files))]

    def _offset(self) -> int:
        return int(self.random() * self.blocks_per_file) * self.block

    def stat(self) -> None:
        self.fs.stat(self._pick(self.any_file))

    def access(self) -> None:
        self.fs.access(self._pick(self.empty))

    def chmod(self) -> None:
        self.chmods += 1
        self.fs.chmod(self._pick(self.empty), CHMOD_MODES[self.chmods & 1])

    def mkdir(self) -> None:
        self.dirs_made += 1
        parent = self.dirs[self.dirs_made % len(self.dirs)]
        path = os.path.join(parent, f"{SCRATCH_PREFIX}{self.token}_{self.dirs_made:06d}")
        old = self.scratch.popleft() if len(self.scratch) >= SCRATCH_RING else None
        self.fs.replace_dir(old, path)
        self.scratch.append(path)

    def create(self) -> None:
        n = self.created
        self.created = n + 1
        empty_first, data_end, creates = self._create_kinds
        # The n-th create of a deck: its position among the deck's creates decides its kind.
        rank = n % creates if creates else 0
        with_data = empty_first <= rank < data_end
        parent = self.dirs[n % len(self.dirs)]
        path = os.path.join(parent, f"{CREATED_PREFIX}{self.token}_{n:08d}")
        written = self.fs.create(path, self.block if with_data else 0)
        self.bytes_by_op["create"] += written
        (self.created_data if with_data else self.created_empty).append(path)

    def unlink(self) -> None:
        self._remove(self.created_empty, "unlink")

    def unlink2(self) -> None:
        self._remove(self.created_data, "unlink2")

    def _remove(self, queue: deque[str], name: str) -> None:
        if not queue:
            raise WorkloadError(f"{name}: no file of this session to remove (a create failed)")
        self.fs.unlink(queue.popleft())

    def write_file(self) -> None:
        self.bytes_by_op["write_file"] += self.fs.write_file(self._pick(self.data), self.file_size)

    def read_file(self) -> None:
        self.bytes_by_op["read_file"] += self.fs.read_file(self._pick(self.data))

    def random_read(self) -> None:
        self.bytes_by_op["random_read"] += self.fs.pread(
            self._pick(self.data), self._offset(), self.block
        )

    def random_write(self) -> None:
        self.bytes_by_op["random_write"] += self.fs.pwrite(
            self._pick(self.data), self._offset(), self.block
        )

    def append(self) -> None:
        self.bytes_by_op["append"] += self.fs.append(
            self._pick(self.empty), self.block, self.file_size
        )

    def readdir(self) -> None:
        self.fs.readdir(self._pick(self.dirs))

    def _native_program(self) -> NativeProgram:
        from workloads.eda.native import frontend_program  # the loop's module needs this one

        return frontend_program(self)

    def _cleanup(self) -> None:
        """Blocking, at close: remove what this session created (by name in the session's
        own directory descriptors: never through a link)."""
        empty, data, scratch = self.native.held() if self.native is not None else ([], [], [])
        for path in (*self.created_empty, *self.created_data, *empty, *data):
            self.fs.remove_now(path)
        for path in (*self.scratch, *scratch):
            self.fs.remove_now(path, directory=True)


class BackendSession(EdaSession):
    """A back-end process: a read pass and a write pass over its large files, half the tree
    apart, one transfer per operation."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.transfer = self.p.transfer_size_bytes
        self.size = self.tree.file_size_bytes
        self.read_at = 0
        self.write_at = len(self.data) // 2
        self.reader = StreamCursor(self.data[self.read_at], self.size, write=False)
        self.writer = StreamCursor(self.data[self.write_at], self.size, write=True)
        self.ops = {"seq_read": self.seq_read, "seq_write": self.seq_write}

    def _native_program(self) -> NativeProgram:
        from workloads.eda.native import backend_program  # the loop's module needs this one

        return backend_program(self)

    def replace_connection(self, connection: Connection) -> None:
        super().replace_connection(connection)
        for cursor in (self.reader, self.writer):
            cursor.fd = None  # closed with the old session; reopened at the same offset

    def _next(self, at: int, other: int) -> int:
        at = (at + 1) % len(self.data)
        if at == other and len(self.data) > 1:
            at = (at + 1) % len(self.data)  # never stream the file the other pass is on
        return at

    def seq_read(self) -> None:
        self.bytes_by_op["seq_read"] += self.fs.stream(self.reader, self.transfer)
        if self.reader.done:
            self.read_at = self._next(self.read_at, self.write_at)
            self.reader = StreamCursor(self.data[self.read_at], self.size, write=False)

    def seq_write(self) -> None:
        self.bytes_by_op["seq_write"] += self.fs.stream(self.writer, self.transfer)
        if self.writer.done:
            self.write_at = self._next(self.write_at, self.read_at)
            self.writer = StreamCursor(self.data[self.write_at], self.size, write=True)


def new_session(
    p: EdaParameters,
    tree: ProcessTree,
    paths: Mapping[str, Any],
    fs: FileSession,
    session_seed: int,
) -> EdaSession:
    """The session class for ``tree``'s component."""
    cls = FrontendSession if tree.component == FRONTEND else BackendSession
    return cls(p, tree, paths, fs, session_seed)
