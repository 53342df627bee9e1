"""The master's worker port keeps serving whatever arrives on it.

Locust's master reads its worker port in one greenlet (``MasterRunner.client_listener``): it
takes each message off the ZeroMQ ROUTER socket, decodes it with msgpack into a
``Message(type, data, node_id)`` and hands it to ``handle_message``. Any exception that loop
does not expect ends the greenlet for good: one byte ``0xc1`` (a code msgpack never uses)
raised ``FormatError``, the UI stayed up and no worker could join again, and a running
``--workers`` run lost its workers' reports. Without ``--master-secret`` (the loopback
default) anyone who can reach the port can send such a frame; with CURVE only a holder of the
secret gets a message through, but a secret is no excuse for a listener that dies.

:class:`GuardedMasterRunner` is Locust's master with two checks in front of Locust's handling:

* its server (:class:`GuardedServer`, also after Locust's own reset of the connection)
  returns only messages that are one frame, no larger than :data:`MAX_MESSAGE_BYTES`,
  msgpack that decodes to ``[type: str, data, node_id: str]``;
* :meth:`GuardedMasterRunner.handle_message` passes on only the types a dbsim worker sends
  (Locust's and those registered on the runner, dbsim's), with data of the shape Locust's
  handling indexes (:func:`data_problem`), and drops a message whose handling still fails
  rather than let it end the listener.

Every dropped message is counted per kind (:class:`DropLog`): the first of each kind is one
warning line, the rest are only counted, and the master says the totals when it quits. What is
checked is the framing and the shape; a well-formed message that lies (a worker's figures)
is not garbage to this module, and the port without a secret authenticates nobody
(docs/ui.md, "Remote workers").
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Container
from typing import Any

import gevent
import msgpack
import zmq
from locust.env import Environment
from locust.exception import RPCError
from locust.rpc import Message, protocol, zmqrpc
from locust.runners import MasterRunner

log = logging.getLogger(__name__)

#: Far above anything a dbsim worker sends (in a 20 s run of 2 workers x 2 SLOB sessions, 84
#: messages: at most 62 KB, a Locust stats report carrying dbsim's intervals; the final
#: report 14 KB) and small enough that decoding it cannot stall the hub for long.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

#: What each kind of dropped message is called in the warning and the totals.
KINDS = {
    "frames": "not a single frame",
    "identity": "a sender identity that is not UTF-8",
    "oversized": f"larger than {MAX_MESSAGE_BYTES // (1024 * 1024)} MiB",
    "undecodable": "not msgpack",
    "shape": "not a Locust message [type, data, node id]",
    "type": "a message type a dbsim worker never sends",
    "data": "data of the wrong shape for its type",
    "failed": "a message whose handling failed",
}

#: Locust's own messages a worker sends to its master, with the data each must have: the
#: Python types the data may be and the keys (with their types) Locust's handling reads.
#: ``locustfile`` is left out on purpose: dbsim's master has no locustfile to hand out and
#: Locust's handling of the request fails on an assertion.
_NUMBER = (int, float)
LOCUST_MESSAGES: dict[str, tuple[tuple[type, ...], dict[str, tuple[type, ...]]]] = {
    "client_ready": ((str, int, type(None)), {}),
    "client_stopped": ((object,), {}),
    "heartbeat": ((dict,), {"state": (str,), "current_cpu_usage": _NUMBER}),
    "stats": (
        (dict,),
        {
            "stats": (list,),
            "stats_total": (dict,),
            "errors": (dict,),
            "user_classes_count": (dict,),
        },
    ),
    "spawning": ((object,), {}),
    "spawning_complete": ((dict,), {"user_classes_count": (dict,), "user_count": (int,)}),
    "logs": ((dict,), {}),
    "quit": ((object,), {}),
    "exception": ((dict,), {"msg": (str,), "traceback": (str,)}),
}


class Malformed(Exception):
    """A message the master drops: ``kind`` (a key of :data:`KINDS`) and what was wrong."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{KINDS[kind]} ({detail})" if detail else KINDS[kind])
        self.kind = kind


class DropLog:
    """Counts dropped messages per kind; warns once per kind."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, problem: Malformed, sender: bytes | str) -> None:
        first = not self.counts[problem.kind]
        self.counts[problem.kind] += 1
        if first:
            if isinstance(sender, bytes):
                with contextlib.suppress(UnicodeDecodeError):  # else shown as bytes
                    sender = sender.decode("utf-8")
            log.warning(
                "worker port: dropped a message from %r: %s; further messages of this kind "
                "are dropped and counted, not logged",
                sender[:80],
                problem,
            )

    def totals(self) -> str:
        """``"3 not msgpack, 1 not a single frame"`` (most frequent first); "" for none."""
        return ", ".join(f"{n} {KINDS[kind]}" for kind, n in self.counts.most_common())


def read_message(frames: list[bytes]) -> tuple[str, Message]:
    """The sender and the message of what a ROUTER socket received, or :class:`Malformed`."""
    if len(frames) != 2:  # the ROUTER's identity frame, then what a worker sends: one frame
        raise Malformed("frames", f"{len(frames) - 1} frames")
    identity, payload = frames
    try:
        sender = identity.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed("identity", "") from None
    if len(payload) > MAX_MESSAGE_BYTES:
        raise Malformed("oversized", f"{len(payload)} bytes")
    try:
        decoded = msgpack.unpackb(
            payload, raw=False, strict_map_key=False, object_hook=protocol.decode
        )
    # The payload is anyone's bytes: whatever msgpack (or Locust's datetime hook) raises on
    # it means it cannot be read, and none of it may reach the listener.
    except Exception as exc:
        raise Malformed("undecodable", type(exc).__name__) from None
    if not (
        isinstance(decoded, list)
        and len(decoded) == 3
        and isinstance(decoded[0], str)
        and isinstance(decoded[2], str)
    ):
        size = f" of {len(decoded)}" if isinstance(decoded, list) else ""
        raise Malformed("shape", f"got {type(decoded).__name__}{size}")
    msg_type, data, node_id = decoded
    return sender, Message(msg_type, data, node_id)


def data_problem(msg_type: str, data: Any, custom: Container[str]) -> Malformed | None:
    """Why the master must not hand this message to Locust's handling, or None. ``custom``:
    the types registered on the runner (dbsim's own, sim.locust.roles: each carries a dict)."""
    if msg_type in custom:
        types: tuple[type, ...] = (dict,)
        keys: dict[str, tuple[type, ...]] = {}
    elif msg_type in LOCUST_MESSAGES:
        types, keys = LOCUST_MESSAGES[msg_type]
    else:
        return Malformed("type", repr(msg_type[:40]))
    if not isinstance(data, types):
        return Malformed("data", f"{msg_type} data is {type(data).__name__}")
    fields = data if isinstance(data, dict) else {}  # keys are only listed for dict data
    for key, key_types in keys.items():
        value = fields.get(key)
        if not isinstance(value, key_types) or isinstance(value, bool):
            return Malformed("data", f"{msg_type} data's {key} is {type(value).__name__}")
    return None


class GuardedServer(zmqrpc.Server):
    """Locust's bound ``Server`` whose receive drops malformed messages (see the module)."""

    def __init__(self, bound: zmqrpc.Server, drops: DropLog) -> None:
        # Not Server.__init__, which would bind again: this takes over the bound socket.
        self.__dict__.update(vars(bound))
        self.drops = drops

    def recv_from_client(self) -> tuple[str, Message]:
        while True:
            try:
                frames = self.socket.recv_multipart()
            except zmq.ZMQError as exc:  # what Locust's listener resets the server on
                raise RPCError("ZMQ network broken") from exc
            try:
                return read_message(frames)
            except Malformed as problem:
                self.drops.add(problem, frames[0] if frames else b"")
            gevent.sleep(0)  # a flood of garbage must not starve the rest of the hub


class GuardedMasterRunner(MasterRunner):
    """Locust's master whose worker port survives malformed messages (see the module)."""

    def __init__(self, environment: Environment, master_bind_host: str, master_bind_port: int):
        # Before MasterRunner.__init__, which assigns self.server (the property below).
        self.drops = DropLog()
        self._totals_said = False
        super().__init__(environment, master_bind_host, master_bind_port)

    @property
    def server(self) -> zmqrpc.Server:
        return self._guarded_server

    @server.setter
    def server(self, server: zmqrpc.Server) -> None:
        # MasterRunner binds in __init__ and again in reset_connection: both are guarded.
        if not isinstance(server, GuardedServer):
            server = GuardedServer(server, self.drops)
        self._guarded_server = server

    def handle_message(self, client_id: str, msg: Message) -> None:
        problem = data_problem(msg.type, msg.data, self.custom_messages)
        if problem is not None:
            self.drops.add(problem, client_id)
            return
        try:
            super().handle_message(client_id, msg)
        # A message of the right shape can still hold values Locust's handling trips on; it
        # is dropped like garbage rather than end the one greenlet that serves every worker.
        except Exception as exc:
            self.drops.add(Malformed("failed", f"{msg.type}: {type(exc).__name__}"), client_id)

    def quit(self) -> None:
        super().quit()
        if self.drops.counts and not self._totals_said:
            self._totals_said = True
            total = sum(self.drops.counts.values())
            log.warning(
                "worker port: dropped %d malformed messages: %s", total, self.drops.totals()
            )


def create_master_runner(environment: Environment, host: str, port: int) -> MasterRunner:
    """``environment.create_master_runner(host, port)`` with the guarded master."""
    # The factory Locust's create_master_runner itself calls: it registers the runner on the
    # environment exactly as Locust does for its own master.
    return environment._create_runner(
        GuardedMasterRunner, master_bind_host=host, master_bind_port=port
    )
