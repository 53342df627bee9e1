"""The ``dbsim-worker-report {json}`` lines local workers write on the stderr they share with
their master (sim.locust.roles): what each worker's engine counted.

Found anywhere in a line, not only at its start: the master and both workers write to one
stream, and another process's unfinished line (a gevent monitor report, a log line written in
parts) can stand in front of a report (seen in CI: a worker's report "missing")."""

from __future__ import annotations

import json
import re
from typing import Any

PREFIX = "dbsim-worker-report "
_LINE = re.compile(re.escape(PREFIX) + r"(\{[^\n]*\})")


def worker_reports(stderr: str) -> list[dict[str, Any]]:
    """Every worker report in ``stderr``, in order."""
    return [json.loads(found.group(1)) for found in _LINE.finditer(stderr)]
