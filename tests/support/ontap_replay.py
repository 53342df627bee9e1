"""A stand-in ONTAP REST endpoint on 127.0.0.1 that replays documented response shapes.

The shapes follow the ONTAP REST API reference on docs.netapp.com:

* ``us-en/ontap-restapi/get-storage-volumes.html`` and ``get-storage-luns.html``: a record has
  ``uuid``, ``name`` (a LUN's name is its path), ``svm.name``; ``statistics`` holds cumulative
  ``iops_raw``/``latency_raw`` (microseconds)/``throughput_raw`` (bytes), each with ``read``,
  ``write``, ``other``, ``total``, plus ``timestamp`` and ``status``; ``metric`` holds averages
  ``iops``/``latency``/``throughput`` with ``duration`` (``PT15S``), ``timestamp``, ``status``;
* ``us-en/ontap-automation/rest/interpret_api_response.html``: a collection answer is
  ``{"records": [...], "num_records": n, "_links": {"self": ..., "next": {"href": ...}}}`` and
  an error answer ``{"error": {"message": ..., "code": ...}}``.

Figures and message texts are ours. Counters advance by one fixed *step* on every first-page GET
of a collection (a GET following a ``next`` link reads the same step), and ``statistics.timestamp``
advances by ``step_s`` seconds, so a test knows the expected rates exactly. Knobs: ``resets``
(counters of an entity restart from zero at a step: a takeover, a giveback, a counter manager
restart), ``mangle`` (edit one entity's record at one step: a malformed answer), ``stale_requests`` (the n-th first-page GET
repeats the previous step), ``hang_after`` (later requests never get an answer), ``page_size``,
``timestamps`` (leave ``statistics.timestamp`` out), ``fail_with`` (an error answer). TLS:
:func:`make_tls_files` creates a test CA and a server certificate for 127.0.0.1.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import shutil
import ssl
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
COLLECTIONS = {"/api/storage/volumes": "volume", "/api/storage/luns": "lun"}
IO = ("read", "write", "other")


@dataclass(frozen=True)
class Entity:
    """A volume or LUN whose counters grow by ``ops[i]`` operations of ``latency_us[i]``
    microseconds and ``bytes_per_op[i]`` bytes per step, for read, write, other."""

    kind: str  # "volume" or "lun"
    svm: str
    name: str  # a volume name, or a LUN path
    uuid: str
    ops: tuple[int, int, int]
    latency_us: tuple[int, int, int]
    bytes_per_op: tuple[int, int, int]
    raw: bool = True  # False: no statistics object (only metric), as on releases without it

    def counters(self, step: int, reset_at: int | None) -> dict[str, dict[str, int]]:
        """Cumulative counters after ``step`` steps (restarting from zero at ``reset_at``)."""
        n, base = step, 10**12  # a long-running system: large counters
        if reset_at is not None and step >= reset_at:
            n, base = step - reset_at + 1, 0
        out: dict[str, dict[str, int]] = {"iops_raw": {}, "latency_raw": {}, "throughput_raw": {}}
        for i, io in enumerate(IO):
            out["iops_raw"][io] = base + n * self.ops[i]
            out["latency_raw"][io] = base * 100 + n * self.ops[i] * self.latency_us[i]
            out["throughput_raw"][io] = base * 4096 + n * self.ops[i] * self.bytes_per_op[i]
        for group in out.values():
            group["total"] = sum(group.values())
        return out

    def metric(self, step_s: int) -> dict[str, dict[str, int]]:
        """The per-second averages ONTAP would report (integers, as in the documentation)."""
        ops = sum(self.ops)
        latency = sum(o * lat for o, lat in zip(self.ops, self.latency_us, strict=True))
        iops = {io: self.ops[i] // step_s for i, io in enumerate(IO)}
        lat = {io: self.latency_us[i] for i, io in enumerate(IO)}
        thr = {io: self.ops[i] * self.bytes_per_op[i] // step_s for i, io in enumerate(IO)}
        return {
            "iops": iops | {"total": ops // step_s},
            "latency": lat | {"total": latency // ops if ops else 0},
            "throughput": thr | {"total": sum(thr.values())},
        }


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the test CA's certificate, and the server's certificate and key."""

    ca_cert: Path
    cert: Path
    key: Path


class OntapReplay:
    """The server; use as a context manager. ``url`` is ``http(s)://127.0.0.1:<port>``;
    ``requests`` lists ``(path, query)`` of every GET received."""

    def __init__(
        self,
        entities: list[Entity],
        *,
        username: str = "monitor",
        password: str = "Repl4y-s3cret!",
        step_s: int = 5,
        tls: TlsFiles | None = None,
    ) -> None:
        self.entities = entities
        self.step_s = step_s
        self.resets: dict[str, int] = {}
        #: (entity name, step) -> an edit of the record served for it at that step.
        self.mangle: dict[tuple[str, int], Callable[[dict[str, Any]], None]] = {}
        self.stale_requests: set[int] = set()
        self.hang_after: int | None = None
        self.page_size: int | None = None
        self.timestamps = True
        self.fail_with: tuple[int, str, str] | None = None
        self.requests: list[tuple[str, dict[str, str]]] = []
        #: Tracebacks of what the server swallowed (a failed handler, a thread that would not
        #: start): printed at close, so a test failing on a dropped connection shows its cause.
        self.errors: list[str] = []
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        self._auth = f"Basic {token}"
        self._steps: dict[str, int] = {}
        self._first_pages: dict[str, int] = {}
        self._lock = threading.Lock()
        self.release = threading.Event()  # set on close: hung requests end
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.replay = self
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls.cert, tls.key)
            # Handshake in the handler thread, so a client that refuses the cert blocks nothing.
            self._server.socket = context.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self._server.server_address[1]}"
        # A short poll interval: close() waits for the serving loop to notice the shutdown.
        serve = lambda: self._server.serve_forever(poll_interval=0.02)  # noqa: E731
        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()

    def __enter__(self) -> OntapReplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        for error in self.errors:
            print(f"ontap replay swallowed: {error}", file=sys.stderr)

    def answer(self, target: str, authorization: str | None) -> tuple[int, dict[str, Any]] | None:
        """The status and JSON body for a GET, or None to leave it unanswered."""
        parts = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        with self._lock:
            self.requests.append((parts.path, query))
            if self.hang_after is not None and len(self.requests) > self.hang_after:
                return None
            if authorization != self._auth:
                return 401, _error("User is not authorized.", "6")
            if self.fail_with is not None:
                status, message, code = self.fail_with
                return status, _error(message, code)
            kind = COLLECTIONS.get(parts.path)
            if kind is None:
                return 404, _error(f"{parts.path} not found", "4")
            if "start.uuid" not in query:  # a first page: the counters advance one step
                n = self._first_pages[parts.path] = self._first_pages.get(parts.path, 0) + 1
                if n > 1 and n not in self.stale_requests:
                    self._steps[parts.path] = self._steps.get(parts.path, 0) + 1
            step = self._steps.get(parts.path, 0)
        fields = set(query.get("fields", "").split(","))
        chosen = [e for e in self.entities if e.kind == kind and _matches(e, query)]
        records = [self._record(e, step, fields) for e in chosen]
        body: dict[str, Any] = {"_links": {"self": {"href": target}}}
        if self.page_size is not None:
            first = 0
            if "start.uuid" in query:
                first = [e.uuid for e in chosen].index(query["start.uuid"])
            rest = chosen[first + self.page_size :]
            records = records[first : first + self.page_size]
            if rest:
                following = {k: v for k, v in query.items() if k != "start.uuid"}
                following["start.uuid"] = rest[0].uuid
                body["_links"]["next"] = {"href": f"{parts.path}?{urlencode(following)}"}
        return 200, body | {"records": records, "num_records": len(records)}

    def _record(self, entity: Entity, step: int, fields: set[str]) -> dict[str, Any]:
        record: dict[str, Any] = {
            "uuid": entity.uuid,
            "name": entity.name,
            "svm": {"name": entity.svm},
        }
        stamp = (T0 + timedelta(seconds=step * self.step_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
        if "statistics" in fields and entity.raw:
            stats: dict[str, Any] = entity.counters(step, self.resets.get(entity.name))
            stats["status"] = "ok"
            if self.timestamps:
                stats["timestamp"] = stamp
            record["statistics"] = stats
        if "metric" in fields:
            metric: dict[str, Any] = entity.metric(self.step_s)
            record["metric"] = metric | {"status": "ok", "duration": "PT15S", "timestamp": stamp}
        edit = self.mangle.get((entity.name, step))
        if edit is not None:
            edit(record)
        return record


def _error(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "code": code}}


def _matches(entity: Entity, query: dict[str, str]) -> bool:
    """ONTAP query semantics for ``name`` and ``svm.name``: ``|`` is or, ``*`` a wildcard."""
    for field, value in (("name", entity.name), ("svm.name", entity.svm)):
        if field in query and not any(
            fnmatch.fnmatchcase(value, p) for p in query[field].split("|")
        ):
            return False
    return True


class _Server(ThreadingHTTPServer):
    # Handler threads are joined by server_close() (close() sets ``release`` first, so a hung
    # answer ends at once): every connection the server accepted is closed before the test
    # that made it ends, never by a garbage collection during a later one (an "unclosed
    # <ssl.SSLSocket>" ResourceWarning failed a rehearsal's ONTAP test).
    daemon_threads = False
    replay: OntapReplay

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client refusing our certificate is what some tests expect: kept, not raised.
        self.replay.errors.append(traceback.format_exc())


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    #: A connection that sends nothing (a client gone mid-handshake) ends its thread in this
    #: many seconds, so server_close() never waits longer.
    timeout = 10

    def do_GET(self) -> None:
        answer = self.server.replay.answer(self.path, self.headers.get("Authorization"))
        if answer is None:
            self.server.replay.release.wait(30)
            self.close_connection = True
            return
        status, body = answer
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/hal+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def log_error(self, format: str, *args: Any) -> None:
        # http.server closes a connection without an answer on a read timeout or a bad request
        # line, and says so only here: kept beside the swallowed tracebacks.
        self.server.replay.errors.append(f"handler: {format % args}")


def make_tls_files(directory: Path, *, use_openssl: bool = False) -> TlsFiles:
    """A test CA and a server certificate for 127.0.0.1/localhost signed by it, with the
    ``cryptography`` package when available, else (or when asked) with ``openssl``."""
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    if not use_openssl:
        try:
            _with_cryptography(files)
            return files
        except ImportError:
            pass
    if shutil.which("openssl") is None:
        raise RuntimeError("neither the cryptography package nor openssl is available")
    _with_openssl(files, directory)
    return files


def _with_cryptography(files: TlsFiles) -> None:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.now(UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dbsim test CA")])

    def builder(subject: x509.Name, public_key: Any) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        )

    signing_only = x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    ca = (
        builder(ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(signing_only, critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    cert = (
        builder(subject, key.public_key())
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(aki, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _with_openssl(files: TlsFiles, directory: Path) -> None:
    ca_key, csr, ext = directory / "ca.key", directory / "server.csr", directory / "server.ext"
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\n"
        "extendedKeyUsage=serverAuth\n"
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ca = ["-keyout", ca_key, "-out", files.ca_cert, "-days", "1", "-subj", "/CN=dbsim test CA"]
    ca_ext = ["basicConstraints=critical,CA:TRUE", "keyUsage=critical,keyCertSign,cRLSign"]
    sign = ["-CA", files.ca_cert, "-CAkey", ca_key, "-CAcreateserial", "-days", "1"]
    for command in (
        ["req", "-x509", *ec, *ca, "-addext", ca_ext[0], "-addext", ca_ext[1]],
        ["req", *ec, "-keyout", files.key, "-out", csr, "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", csr, *sign, "-extfile", ext, "-out", files.cert],
    ):
        subprocess.run(["openssl", *map(str, command)], check=True, capture_output=True)
