"""How ``kind: oracle`` reaches the server: python-oracledb's connection parameters from
``OracleSettings``, the wallet's password, and thick mode's client libraries.

Thin mode (the default) speaks Oracle Net itself: host/port with a service name or SID, or a
``dsn`` (Easy Connect Plus, e.g. ``tcps://db.example.com:2484/sales?wallet_location=/w``, or
a TNS alias from ``config_dir``'s tnsnames.ora), TLS with ``protocol: tcps`` and a wallet
(ewallet.pem, opened with the password named by ``wallet_password_env``). Thick mode
(``driver_mode: thick``) loads the Oracle Client libraries once per process
(``init_oracle_client``) for what thin mode lacks, Native Network Encryption above all
(a server that requires it refuses thin clients with DPY-3001); its wallet and sqlnet.ora
settings come from ``config_dir``.

The lowest python-oracledb with every call dbsim makes is :data:`ORACLEDB_FLOOR`: ``program=``
(the name a DBA sees in ``v$session.program``) arrived in 2.5.0; ``create_pool_async`` and
the asyncio classes in 2.0. pyproject.toml declares the same floor, and
tests/integration/test_oracledb_floor.py installs it and connects to a closed port.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import oracledb

from sim.errors import ConfigError, TargetError
from sim.secrets import remember
from storage.targets.settings import OracleSettings

if TYPE_CHECKING:
    from sim.protocols import Statement

ORACLEDB_FLOOR = "2.5.0"
#: ``v$session.program`` of dbsim's sessions.
PROGRAM = "dbsim"

_thick_lock = threading.Lock()
_thick_started: dict[str, Any] = {}


def address(s: OracleSettings) -> str:
    """Where the scenario points: the dsn as written, or [tcps://]host:port/service (or SID)."""
    if s.dsn is not None:
        return s.dsn
    scheme = "tcps://" if s.protocol == "tcps" else ""
    return f"{scheme}{s.host}:{s.port}/{s.sid or s.service_name}"


_DESCRIPTOR_HOST = re.compile(r"\(\s*HOST\s*=\s*([^)\s]+)\s*\)", re.IGNORECASE)
_EASY_CONNECT = re.compile(r"^(?:[a-z]+://)?(\[[^\]]+\]|[^:/?,\s]+)", re.IGNORECASE)


def dsn_host(dsn: str) -> str:
    """The server's host named by a dsn, for what needs to know whether it is this machine:
    the first HOST of a connect descriptor, the host of an Easy Connect string, or the dsn
    itself for a TNS alias (whose host is in tnsnames.ora: never taken for this machine)."""
    text = dsn.strip()
    if text.startswith("("):
        match = _DESCRIPTOR_HOST.search(text)
        return match.group(1) if match else text
    if not any(ch in text for ch in ":/?"):
        return text  # a TNS alias
    match = _EASY_CONNECT.match(text)
    return match.group(1).strip("[]") if match else text


def wallet_password(s: OracleSettings) -> str | None:
    """The wallet's password from the variable ``wallet_password_env`` names (None: unset)."""
    name = s.wallet_password_env
    if name is None:
        return None
    value = os.environ.get(name)
    if value is None:
        raise ConfigError(f"target.wallet_password_env: environment variable {name} is not set")
    return remember(value)


def connect_params(
    s: OracleSettings, password: str | None, wallet_secret: str | None
) -> dict[str, Any]:
    """Keyword arguments for ``create_pool`` / ``create_pool_async`` (pool sizes apart)."""
    params: dict[str, Any] = {
        "user": s.user,
        "password": password,
        "tcp_connect_timeout": s.connect_timeout_s,
        "program": PROGRAM,
    }
    if s.dsn is not None:
        params["dsn"] = s.dsn
    else:
        params.update(host=s.host, port=s.port, protocol=s.protocol)
        if s.sid is not None:
            params["sid"] = s.sid
        else:
            params["service_name"] = s.service_name
    if s.driver_mode == "thin":
        # Thick mode takes these from init_oracle_client and sqlnet.ora instead.
        if s.config_dir is not None:
            params["config_dir"] = str(s.config_dir)
        if s.wallet_location is not None:
            params["wallet_location"] = str(s.wallet_location)
        if wallet_secret is not None:
            params["wallet_password"] = wallet_secret
    return params


def error_text(exc: BaseException) -> str:
    """The driver's message (``ORA-nnnnn: …``, ``DPY-nnnn: …``, ``DPI-nnnn: …``) on one line."""
    detail = exc.args[0] if exc.args else exc
    return " ".join(str(getattr(detail, "message", detail)).split())


def start_thick(s: OracleSettings) -> None:
    """Load the Oracle Client libraries (once per process, with the first thick target's
    lib_dir and config_dir; a second target asking for others is refused)."""
    wanted = {"lib_dir": s.lib_dir, "config_dir": s.config_dir}
    with _thick_lock:
        if _thick_started:
            if _thick_started != wanted:
                raise ConfigError(
                    "target.lib_dir: the Oracle Client libraries are loaded already from "
                    f"{_thick_started['lib_dir'] or 'the library path'}; one process loads "
                    "them once"
                )
            return
        try:
            oracledb.init_oracle_client(
                lib_dir=str(s.lib_dir) if s.lib_dir is not None else None,
                config_dir=str(s.config_dir) if s.config_dir is not None else None,
            )
        except oracledb.Error as exc:
            text = error_text(exc)
            hint = ""
            if "DPI-1047" in text:
                hint = (
                    " (install Oracle Instant Client and set target.lib_dir to its directory, "
                    "or use driver_mode: thin)"
                )
            raise TargetError(f"oracle: thick mode: {text}{hint}") from exc
        _thick_started.update(wanted)


def driver_label(s: OracleSettings) -> str:
    """The driver as the run's summary states it: version and mode (thick with its client)."""
    label = f"python-oracledb {oracledb.__version__} {s.driver_mode}"
    if s.driver_mode == "thick":
        try:
            client = ".".join(map(str, oracledb.clientversion()))
        except oracledb.Error:
            client = "not loaded"
        return f"{label} (Oracle Client {client}, sessions in threads)"
    return f"{label} (async)"


def bind_dict(statement: Statement, params: Sequence[Any]) -> dict[str, Any]:
    """Named binds from positional parameters in ``statement.param_names`` order.

    Surplus trailing parameters are dropped: a workload passes the same arguments to every
    dialect's version of a statement, and this dialect's may not use them all.
    """
    names = statement.param_names
    if len(params) < len(names):
        raise TargetError(
            f"oracle: {statement.name}: {len(params)} parameter(s) for binds {', '.join(names)}"
        )
    return dict(zip(names, params, strict=False))
