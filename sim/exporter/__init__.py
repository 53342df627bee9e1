"""dbsim's figures for Prometheus (docs/prometheus.md).

:class:`~sim.exporter.metrics.RunExporter` turns the engine's per-interval events into
Prometheus metrics; :class:`~sim.exporter.server.MetricsServer` serves them on a port of their
own (``dbsim run --metrics-port``); the web UI serves them at ``/metrics`` on its own port.
Importing this package imports ``prometheus_client``: only those two paths do.
"""

from __future__ import annotations

from sim.exporter.metrics import RunExporter, run_info
from sim.exporter.server import MetricsServer, basic_auth_ok

__all__ = ["MetricsServer", "RunExporter", "basic_auth_ok", "run_info"]
