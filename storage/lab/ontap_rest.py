"""The lab array's ONTAP REST endpoint: the counters the array really served, in the shapes
ONTAP documents, so the ONTAP collector (:mod:`storage.collectors.ontap`) runs live, unchanged.

Served by the array process on 127.0.0.1 over TLS (a self-signed certificate the lab makes,
which the collector trusts through its ``ca_file``), HTTP Basic auth with the user ``dbsim``
and a random password in a file. One "cluster" per array volume, with one SVM (``lab``), one
volume (the lab volume's name) and one LUN (``/vol/<name>/lun``), both carrying the array's
counters:

* ``GET /api/storage/volumes`` and ``/api/storage/luns`` (``name`` and ``svm.name`` filters,
  ``|`` and ``*`` as ONTAP reads them; ``fields``): a record has ``uuid``, ``name``,
  ``svm.name`` and, when asked, ``statistics`` with cumulative ``iops_raw``, ``latency_raw``
  (µs) and ``throughput_raw`` (bytes) for read, write, other (0: the array serves no other
  operations) and total, ``status: ok`` and ``timestamp`` — the moment the counters were read,
  to the microsecond (ONTAP gives whole seconds), so the collector's rates are exact;
* ``GET /api/cluster`` and ``/api/cluster/nodes``: identity (name, uuid, version);
* anything else: 404 with ONTAP's error shape; a wrong login: 401.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import secrets
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from storage.lab import system

USER = "dbsim"
SVM = "lab"
CERT_FILE, KEY_FILE, PASSWORD_FILE, ENDPOINT_FILE = (
    "cert.pem",
    "key.pem",
    "ontap-password",
    "ontap.json",
)
IO = ("read", "write", "other")

Snapshot = Callable[[], dict[str, dict[str, int]]]


def make_credentials(directory: Path) -> None:
    """A self-signed certificate for 127.0.0.1 (its own CA) and a random password, 0600."""
    system.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "30", "-subj", "/CN=dbsim lab array", "-addext",
         "subjectAltName=IP:127.0.0.1,DNS:localhost", "-addext", "basicConstraints=critical,CA:TRUE",
         "-keyout", str(directory / KEY_FILE), "-out", str(directory / CERT_FILE)],
        "make the array's TLS certificate",
    )  # fmt: skip
    (directory / KEY_FILE).chmod(0o600)
    password = directory / PASSWORD_FILE
    password.touch(mode=0o600)
    password.write_text(secrets.token_urlsafe(18) + "\n")


def statistics(counters: dict[str, dict[str, int]], now: float) -> dict[str, Any]:
    """ONTAP's ``statistics`` object from the array's cumulative counters."""
    groups: dict[str, Any] = {}
    for group, key in (
        ("iops_raw", "ops"),
        ("latency_raw", "latency_us"),
        ("throughput_raw", "bytes"),
    ):
        values = {io: int(counters.get(io, {}).get(key, 0)) for io in IO}
        groups[group] = values | {"total": sum(values.values())}
    stamp = datetime.fromtimestamp(now, UTC).isoformat()
    return groups | {"status": "ok", "timestamp": stamp}


class OntapEndpoint:
    """The HTTPS server, in threads of the array process."""

    def __init__(self, volume: str, snapshot: Snapshot, directory: Path, port: int = 0) -> None:
        self.volume = volume
        self.snapshot = snapshot
        password = (directory / PASSWORD_FILE).read_text().strip()
        self.auth = "Basic " + base64.b64encode(f"{USER}:{password}".encode()).decode()
        self.uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"dbsim-lab-array:{volume}"))
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.server.daemon_threads = True
        self.server.endpoint = self  # type: ignore[attr-defined]
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(directory / CERT_FILE, directory / KEY_FILE)
        self.server.socket = context.wrap_socket(
            self.server.socket, server_side=True, do_handshake_on_connect=False
        )
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, target: str, authorization: str | None) -> tuple[int, dict[str, Any]]:
        parts = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        if authorization != self.auth:
            return 401, _error("User is not authorized.", "6")
        path = parts.path.rstrip("/")
        if path == "/api/cluster":
            return 200, {
                "name": f"dbsim-lab-{self.volume}",
                "uuid": self.uuid,
                "version": {"full": "dbsim lab array"},
            }
        if path == "/api/cluster/nodes":
            return 200, _collection([{"uuid": self.uuid, "name": f"{self.volume}-01"}], target)
        names = {
            "/api/storage/volumes": self.volume,
            "/api/storage/luns": f"/vol/{self.volume}/lun",
        }
        if path not in names:
            return 404, _error(f"{parts.path} not found", "4")
        record: dict[str, Any] = {"uuid": self.uuid, "name": names[path], "svm": {"name": SVM}}
        if not _matches(record, query):
            return 200, _collection([], target)
        fields = set(query.get("fields", "").split(","))
        if fields & {"statistics", "*", "**"}:
            record["statistics"] = statistics(self.snapshot(), time.time())
        return 200, _collection([record], target)


def _collection(records: list[dict[str, Any]], target: str) -> dict[str, Any]:
    return {"records": records, "num_records": len(records), "_links": {"self": {"href": target}}}


def _error(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "code": code}}


def _matches(record: dict[str, Any], query: dict[str, str]) -> bool:
    for field, value in (("name", record["name"]), ("svm.name", record["svm"]["name"])):
        if field in query and not any(
            fnmatch.fnmatchcase(value, p) for p in query[field].split("|")
        ):
            return False
    return True


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        endpoint: OntapEndpoint = self.server.endpoint  # type: ignore[attr-defined]
        status, body = endpoint.answer(self.path, self.headers.get("Authorization"))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/hal+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return  # the array's log is for its own events
