"""Connections as DBAs write them (issue #28): what the Oracle and SQL Server settings accept
and refuse, the connection parameters and ODBC connection strings they become, and the one
line each SQL Server TLS failure is explained by. The texts matched are Microsoft ODBC Driver
18's own (OpenSSL 1.1 and 3 spellings), as users reported them (dbt-msft/dbt-sqlserver#219,
mkleehammer/pyodbc#610, TPC-Council/HammerDB#390 and #651)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

import storage.targets  # noqa: F401  (registers the kinds)
from storage.targets.odbc import OdbcTarget, SqlServerTarget, translate_error
from storage.targets.odbc_support import TLS_DOCS, microsoft_driver, tls_explanation
from storage.targets.oracle_connect import address, connect_params
from storage.targets.settings import OdbcSettings, OracleSettings, SqlServerSettings


def _words(target: SqlServerTarget | OdbcTarget) -> dict[str, str]:
    return target.keywords()


# --------------------------------------------------------------------------- Oracle


def test_oracle_host_port_service_by_default() -> None:
    s = OracleSettings(host="db1", port=1522, service_name="SALES")
    params = connect_params(s, "pw", None)
    assert params["host"] == "db1" and params["port"] == 1522
    assert params["service_name"] == "SALES" and "sid" not in params and "dsn" not in params
    assert params["protocol"] == "tcp" and params["program"] == "dbsim"
    assert address(s) == "db1:1522/SALES"


def test_oracle_sid_replaces_the_service_name() -> None:
    params = connect_params(OracleSettings(sid="ORCL"), None, None)
    assert params["sid"] == "ORCL" and "service_name" not in params


def test_oracle_easy_connect_plus_with_a_wallet() -> None:
    dsn = "tcps://db.example.com:2484/sales.example.com?ssl_server_dn_match=true"
    s = OracleSettings(dsn=dsn, wallet_location=Path("/etc/wallet"), wallet_password_env="WPW")
    params = connect_params(s, "pw", "wallet-secret")
    assert params["dsn"] == dsn and "host" not in params and "port" not in params
    assert params["wallet_location"] == "/etc/wallet"
    assert params["wallet_password"] == "wallet-secret"
    assert address(s) == dsn


def test_oracle_tns_alias_with_config_dir() -> None:
    s = OracleSettings(dsn="SALES_HA", config_dir=Path("/etc/oracle"))
    params = connect_params(s, None, None)
    assert params["dsn"] == "SALES_HA" and params["config_dir"] == "/etc/oracle"


def test_oracle_tcps_on_host_and_port() -> None:
    s = OracleSettings(host="db1", port=2484, protocol="tcps")
    assert connect_params(s, None, None)["protocol"] == "tcps"
    assert address(s) == "tcps://db1:2484/FREEPDB1"


def test_oracle_thick_takes_its_wallet_and_config_from_the_client() -> None:
    s = OracleSettings(driver_mode="thick", lib_dir=Path("/opt/instantclient"), dsn="SALES")
    params = connect_params(s, None, None)
    assert "config_dir" not in params and "wallet_location" not in params


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"dsn": "x", "host": "h"}, "dsn replaces host"),
        ({"dsn": "x", "service_name": "S", "port": 1}, "dsn replaces port, service_name"),
        ({"sid": "A", "service_name": "B"}, "sid and service_name"),
        ({"lib_dir": "/opt/ic"}, "needs driver_mode: thick"),
        ({"wallet_password_env": "W"}, "needs wallet_location"),
        ({"wallet_location": "/w", "wallet_password_env": "not a name"}, "NAME of an env"),
        ({"driver_mode": "thick", "wallet_location": "/w"}, "sqlnet.ora"),
        ({"protocol": "https"}, "'tcp' or 'tcps'"),
        ({"dsn": ""}, "at least 1 character"),
    ],
)
def test_oracle_refuses(fields: dict[str, object], says: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=says):
        OracleSettings.model_validate(fields)


# --------------------------------------------------------------------------- SQL Server


def test_sqlserver_driver_18_defaults_encrypt_and_check_the_certificate() -> None:
    words = _words(SqlServerTarget(SqlServerSettings()))
    assert words["SERVER"] == "127.0.0.1,1433" and "PORT" not in words
    assert words["Encrypt"] == "yes" and words["TrustServerCertificate"] == "no"
    assert words["UID"] == "sa" and words["APP"] == "dbsim"


@pytest.mark.parametrize(
    ("given", "sent"),
    [("strict", "strict"), ("mandatory", "yes"), ("optional", "no"), (True, "yes"), (False, "no")],
)
def test_sqlserver_encrypt_levels(given: object, sent: str) -> None:
    settings = SqlServerSettings.model_validate({"encrypt": given})
    assert _words(SqlServerTarget(settings))["Encrypt"] == sent


def test_sqlserver_every_tls_and_login_keyword() -> None:
    s = SqlServerSettings(
        encrypt="strict",
        host_name_in_certificate="sql01.corp.example.com",
        server_certificate=Path("/etc/ssl/sql01.pem"),
        authentication="ActiveDirectoryServicePrincipal",
        user="00000000-1111-2222-3333-444444444444",
        extra={"MultiSubnetFailover": "Yes", "ApplicationIntent": "ReadOnly"},
    )
    words = _words(SqlServerTarget(s))
    assert words["HostNameInCertificate"] == "sql01.corp.example.com"
    assert words["ServerCertificate"] == "/etc/ssl/sql01.pem"
    assert words["Authentication"] == "ActiveDirectoryServicePrincipal"
    assert words["MultiSubnetFailover"] == "Yes" and words["ApplicationIntent"] == "ReadOnly"


def test_sqlserver_trusted_connection_sends_no_uid() -> None:
    words = _words(SqlServerTarget(SqlServerSettings(trusted_connection=True)))
    assert words["Trusted_Connection"] == "yes" and "UID" not in words


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"extra": {"PWD": "x"}}, "literal PWD"),
        ({"extra": {"ClientSecret": "x"}}, "literal ClientSecret"),
        ({"extra": {"Encrypt": "no"}}, "set by dbsim"),
        ({"extra": {"Trust Server Certificate": "yes"}}, "set by dbsim"),
        ({"extra": {"Server": "other,1433"}}, "set by dbsim"),
        ({"extra": {"A;PWD": "x"}}, "not ODBC keywords"),
        ({"encrypt": "sometimes"}, "'strict', 'mandatory' or 'optional'"),
        ({"authentication": "Kerberos"}, "ActiveDirectoryPassword"),
        ({"trusted_connection": True, "authentication": "ActiveDirectoryMsi"}, "two ways in"),
        ({"trusted_connection": True, "password_env": "P"}, "sends no password"),
    ],
)
def test_sqlserver_refuses(fields: dict[str, object], says: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=says):
        SqlServerSettings.model_validate(fields)


def test_odbc_sends_no_port_keyword_to_microsofts_driver() -> None:
    ms = OdbcSettings(driver="ODBC Driver 18 for SQL Server", dialect="sqlserver", port=1434)
    words = _words(OdbcTarget(ms))
    assert words["SERVER"] == "127.0.0.1,1434" and "PORT" not in words
    pg = _words(OdbcTarget(OdbcSettings(driver="PostgreSQL Unicode", port=5433)))
    assert pg["SERVER"] == "127.0.0.1" and pg["PORT"] == "5433"
    assert microsoft_driver("ODBC Driver 17 for SQL Server") and not microsoft_driver("FreeTDS")


# --------------------------------------------------------------------------- TLS failures

SELF_SIGNED_3 = (
    "[Microsoft][ODBC Driver 18 for SQL Server]SSL Provider: [error:0A000086:SSL routines::"
    "certificate verify failed:self-signed certificate] (-1) (SQLDriverConnect)"
)
SELF_SIGNED_11 = (
    "[Microsoft][ODBC Driver 18 for SQL Server]SSL Provider: [error:1416F086:SSL routines:"
    "tls_process_server_certificate:certificate verify failed:self signed certificate]"
)
UNTRUSTED = (
    "[Microsoft][ODBC Driver 18 for SQL Server]SSL Provider: The certificate chain was issued "
    "by an authority that is not trusted."
)
GENERIC = (
    "[Microsoft][ODBC Driver 18 for SQL Server]Client unable to establish connection. For "
    "solutions related to encryption errors, see https://go.microsoft.com/fwlink/?linkid=2226722"
)


@pytest.mark.parametrize(
    ("message", "fix"),
    [
        (SELF_SIGNED_3, "trust_server_certificate"),
        (SELF_SIGNED_11, "trust_server_certificate"),
        (UNTRUSTED, "update-ca-certificates"),
        ("SSL Provider: The target principal name is incorrect.", "host_name_in_certificate"),
        ("SSL Provider: [error:0A000086:SSL routines::certificate has expired]", "renew"),
        ("SSL Provider: [error:0A000102:SSL routines::unsupported protocol]", "TLS 1.2"),
        (GENERIC, "check encrypt"),
    ],
)
def test_each_tls_failure_is_one_line_with_its_fix(message: str, fix: str) -> None:
    line = tls_explanation(message)
    assert line is not None and fix in line and line.endswith(f"see {TLS_DOCS}")
    assert "\n" not in line


def test_the_translated_error_keeps_the_drivers_words_and_no_password() -> None:
    exc = Exception("08001", f"{SELF_SIGNED_3} PWD=hunter2")
    error = translate_error(
        exc, "sqlserver: cannot connect to db:1433", lambda t: t.replace("hunter2", "***")
    )
    text = str(error)
    assert text.startswith(
        "sqlserver: cannot connect to db:1433: the server's certificate is self-signed"
    )
    assert "0A000086" in text and "hunter2" not in text and "SQLSTATE 08001" in text


def test_a_non_tls_error_gets_no_tls_explanation() -> None:
    assert tls_explanation("Login failed for user 'sa'.") is None


@pytest.mark.parametrize(
    ("dsn", "host"),
    [
        ("localhost:1521/FREEPDB1", "localhost"),
        ("tcps://db.example.com:2484/sales?wallet_location=/w", "db.example.com"),
        ("SALES_HA", "SALES_HA"),
        (
            "(DESCRIPTION=(ADDRESS=(PROTOCOL=TCP)(HOST=db9)(PORT=1521))(CONNECT_DATA=(SID=X)))",
            "db9",
        ),
        ("[::1]:1521/x", "::1"),
    ],
)
def test_a_dsn_names_its_host_for_the_locality_check(dsn: str, host: str) -> None:
    """sim.core.cache treats a target without a host as this machine's: a dsn must not be."""
    from sim.core.cache import server_is_local
    from storage.targets.oracle import OracleTarget

    facts = OracleTarget(OracleSettings(dsn=dsn)).describe()
    assert facts["host"] == host and facts["address"] == dsn
    assert server_is_local(facts) == (host in ("localhost", "::1"))


def test_the_summary_states_the_driver_mode() -> None:
    from storage.targets.oracle import OracleTarget

    thin = OracleTarget(OracleSettings()).describe()
    assert thin["driver_mode"] == "thin" and thin["driver"].endswith("thin (async)")
    thick = OracleTarget(OracleSettings(driver_mode="thick", lib_dir=Path("/opt/ic"))).describe()
    assert thick["driver_mode"] == "thick" and "thick (Oracle Client" in thick["driver"]
    assert thick["lib_dir"] == "/opt/ic" and "password" not in str(thick).replace(
        "password_from", ""
    )
