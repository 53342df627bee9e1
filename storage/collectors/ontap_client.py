"""The ONTAP REST client of the ``ontap`` collector (:mod:`storage.collectors.ontap`): the
cluster's URL, blocking GETs of a collection page by page, failures as one-line
:class:`CollectorError` s without secrets.

``http.client`` and ``ssl`` are imported by the methods that use them: the registry imports the
collector, and so this module, to read any scenario, which needs neither (dbsim validate,
report, import; issue #25).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sim.errors import CollectorError, ConfigError
from sim.secrets import SecretRef, redact, resolve_secret

if TYPE_CHECKING:
    import ssl

    from storage.collectors.ontap import OntapSettings

#: The collector's logger: the client's warnings are the collector's.
log = logging.getLogger("storage.collectors.ontap")
_warned_insecure: set[str] = set()


def cluster_url(cluster: str, port: int) -> urllib.parse.SplitResult:
    """The cluster's ``scheme://host:port``, from a host, an address or a URL; plain http only
    on loopback (test servers), since it would carry the password in clear."""
    text = cluster.strip()
    if "://" not in text:
        text = f"https://[{text}]:{port}" if ":" in text else f"https://{text}:{port}"
    parts = urllib.parse.urlsplit(text)
    if not parts.hostname or parts.path not in ("", "/") or parts.query or parts.username:
        raise ValueError("cluster: give a host name, an address or https://host[:port]")
    h = parts.hostname
    loopback = h in ("localhost", "::1") or (h.startswith("127.") and h.replace(".", "").isdigit())
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise ValueError("cluster: use https (plain http would send the password in clear)")
    host = f"[{h}]" if ":" in h else h
    return urllib.parse.urlsplit(f"{parts.scheme}://{host}:{parts.port or port}")


def dig(node: Any, *keys: str) -> Any:
    """``node[k1][k2]…``, None where a level is missing or not an object."""
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


class OntapClient:
    """Blocking GETs of ONTAP collections (in a worker thread); failures become one-line
    :class:`CollectorError` s without secrets. Plain ``http.client`` follows no redirect and
    uses no proxy, so the credentials go to the configured cluster only."""

    def __init__(self, settings: OntapSettings) -> None:
        import ssl  # here: see the module's docstring

        self.settings = settings
        self.url = cluster_url(settings.cluster, settings.port)
        self.base_url = self.url.geturl()
        if not (username := os.environ.get(settings.username_env)):
            raise ConfigError(f"collectors.ontap.username_env: {settings.username_env} is not set")
        ref = SecretRef(password_env=settings.password_env, password_file=settings.password_file)
        password = resolve_secret(ref, "collectors.ontap") or ""  # ConfigError names the ref
        token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
        self._secrets = [password, token]
        self._headers = {"Authorization": f"Basic {token}", "Accept": "application/json"}
        self._context: ssl.SSLContext | None = None
        if self.url.scheme == "https":  # verification on (system CAs or ca_file) unless refused
            cafile = str(settings.ca_file) if settings.ca_file else None
            try:
                self._context = ssl.create_default_context(cafile=cafile)
            except (OSError, ssl.SSLError) as exc:
                raise CollectorError(f"collectors.ontap.ca_file: cannot load it: {exc}") from exc
        if self._context is not None and not settings.verify_tls:
            self._context.check_hostname = False
            self._context.verify_mode = ssl.CERT_NONE
            if self.base_url not in _warned_insecure:  # once per cluster and process
                _warned_insecure.add(self.base_url)
                log.warning("ontap %s: verify_tls false, server not authenticated", self.base_url)

    def error(self, problem: str) -> CollectorError:
        text = " ".join(f"ontap {self.base_url}: {problem}".split())
        return CollectorError(redact(text, self._secrets))

    def get_records(self, path: str, params: Mapping[str, str]) -> list[dict[str, Any]]:
        """Every record of a collection, following ``_links.next.href`` page by page."""
        target = f"{path}?{urllib.parse.urlencode(params, safe=',|*/')}"
        records: list[dict[str, Any]] = []
        for _ in range(1000):
            body = self._get(target, path)
            if not isinstance(body.get("records"), list):
                raise self.error(f"GET {path}: the answer holds no records")
            records.extend(r for r in body["records"] if isinstance(r, dict))
            href = dig(body, "_links", "next", "href")
            if not href:
                return records
            link = urllib.parse.urlsplit(urllib.parse.urljoin(self.base_url, str(href)))
            if link.hostname != self.url.hostname or (link.port or self.url.port) != self.url.port:
                raise self.error(f"GET {path}: the next-page link leaves the cluster")
            target = f"{link.path}?{link.query}"
        raise self.error(f"GET {path}: more than 1000 pages")

    def _get(self, target: str, path: str) -> dict[str, Any]:
        import http.client  # here: see the module's docstring
        import ssl

        host, port, timeout = self.url.hostname or "", self.url.port, self.settings.timeout_s
        if self._context is None:
            conn: http.client.HTTPConnection = http.client.HTTPConnection(host, port, timeout)
        else:
            conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=self._context)
        response: http.client.HTTPResponse | None = None
        try:
            conn.request("GET", target, headers=self._headers)
            response = conn.getresponse()
            body = json.loads(response.read() or b"null")
        except ssl.SSLCertVerificationError as exc:  # a ValueError too: caught first
            raise self.error(
                f"TLS certificate verification failed ({exc.verify_message}); set ca_file to the "
                "CA that signed the cluster's certificate, or verify_tls: false on a lab system"
            ) from exc
        except TimeoutError as exc:
            raise self.error(f"GET {path}: no answer within {timeout:g} s") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise self.error(f"GET {path}: {type(exc).__name__}: {exc}") from exc
        except ValueError:  # not JSON; the status says more
            body = None
        finally:
            # The response too: an answer that closes its connection (HTTP/1.0, ONTAP's and
            # the test replay's) is handed to the response, which conn.close() then leaves
            # open, its socket held until a garbage collection (when a read failed, by the
            # traceback): a CI rehearsal's ResourceWarning, "unclosed <ssl.SSLSocket>".
            if response is not None:
                response.close()
            conn.close()
        if response is None:  # a ValueError raised before any answer (not the body's JSON)
            raise self.error(f"GET {path}: the request could not be sent")
        if response.status != 200:
            raise self.error(self._http_problem(response.status, path, dig(body, "error")))
        if not isinstance(body, dict):
            raise self.error(f"GET {path}: the answer is not a JSON object")
        return body

    def _http_problem(self, status: int, path: str, error: Any) -> str:
        s = self.settings
        detail = ""
        if isinstance(error, dict):  # ONTAP's own words help the user most
            detail = f": {error.get('message')} (code {error.get('code')})"
        secret = f"${s.password_env}" if s.password_env else str(s.password_file)
        return {
            401: f"authentication failed (HTTP 401), check ${s.username_env} and {secret}",
            403: f"permission denied (HTTP 403) on GET {path}; needs read-only access",
        }.get(status, f"GET {path}: HTTP {status}") + detail
