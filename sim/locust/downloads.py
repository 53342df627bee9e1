"""The web UI's downloads of the latest run's bundle: ``report.html``, ``summary.json``, the
time series (``timeseries.zip``) and the whole bundle (``bundle.zip``).

Everything is read by :mod:`sim.bundle.archive` in gevent's native thread pool (a big bundle
must not stall the hub) and sent from memory: nothing through a link, at any level (a planted
``timeseries`` link to another directory is refused, not zipped), no hard-linked file. Paths
are made absolute first: a relative ``-o runs`` is the working directory's, not Flask's
package directory's. Each zip holds the bundle's directory, so it unpacks as ``<run>/…``
like the bundle on disk.
"""

from __future__ import annotations

import io
from pathlib import Path

import gevent
from flask import Response, make_response, send_file

from sim.bundle.archive import fetch

#: name in the URL -> what it is (the Run tab's link text).
DOWNLOADS = {
    "report.html": "the run's report",
    "summary.json": "the run's summary",
    "timeseries.zip": "every time series (CSV) of the run",
    "bundle.zip": "the whole run bundle",
}
ZIPPED = {"timeseries.zip": "timeseries", "bundle.zip": ""}
MIMETYPES = {".zip": "application/zip", ".html": "text/html", ".json": "application/json"}


def download(bundle: str | None, name: str) -> Response:
    """The response for ``/dbsim/run/<name>``: the file, a zip, or a one-line 404 (not there
    yet) or 403 (something that is not the bundle's own file is in its place)."""
    if name not in DOWNLOADS:
        return make_response(f"no such download: {name} (one of {', '.join(DOWNLOADS)})\n", 404)
    if not bundle:
        return make_response("no run yet: start a run first\n", 404)
    path = Path(bundle).absolute()
    label = f"{path.name}-{name}"
    # Read in gevent's thread pool (a big bundle must not stall the hub), never through a
    # link at any level (sim.bundle.archive).
    data, problem = gevent.get_hub().threadpool.apply(fetch, (path, name, ZIPPED.get(name)))
    if isinstance(problem, FileNotFoundError):
        missing = f"{path / ZIPPED[name]} does not exist (yet)" if name in ZIPPED else ""
        return make_response(f"{name}: {missing or 'written when the run ends'}\n", 404)
    if problem is not None or data is None:  # it names the entry: the file, or the zip's folder
        return make_response(f"{problem}\n" if name not in ZIPPED else f"{name}: {problem}\n", 403)
    return send_file(
        io.BytesIO(data),
        mimetype=MIMETYPES[Path(name).suffix],
        as_attachment=name != "report.html",
        download_name=label,
    )
