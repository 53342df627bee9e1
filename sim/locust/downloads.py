"""The web UI's downloads of the latest run's bundle: ``report.html``, ``summary.json``, the
time series (``timeseries.zip``) and the whole bundle (``bundle.zip``).

Paths are made absolute before Flask sees them: ``send_file`` resolves a relative path
against the application's package directory, not the working directory, so a relative
``-o runs`` used to answer Internal Server Error. Zips are built in gevent's native thread
pool (a big bundle must not stall the hub) and sent from memory; each holds the bundle's
directory, so it unpacks as ``<run>/…`` like the bundle on disk.
"""

from __future__ import annotations

import io
from pathlib import Path

import gevent
from flask import Response, make_response, send_file

from sim.bundle.archive import bundle_zip

#: name in the URL -> what it is (the Run tab's link text).
DOWNLOADS = {
    "report.html": "the run's report",
    "summary.json": "the run's summary",
    "timeseries.zip": "every time series (CSV) of the run",
    "bundle.zip": "the whole run bundle",
}
ZIPPED = {"timeseries.zip": "timeseries", "bundle.zip": ""}


def download(bundle: str | None, name: str) -> Response:
    """The response for ``/dbsim/run/<name>``: the file, a zip, or a one-line 404."""
    if name not in DOWNLOADS:
        return make_response(f"no such download: {name} (one of {', '.join(DOWNLOADS)})\n", 404)
    if not bundle:
        return make_response("no run yet: start a run first\n", 404)
    path = Path(bundle).absolute()
    label = f"{path.name}-{name}"
    if name in ZIPPED:
        folder = path / ZIPPED[name]
        if not folder.is_dir():
            return make_response(f"{name}: {folder} does not exist (yet)\n", 404)
        data = gevent.get_hub().threadpool.apply(bundle_zip, (path, ZIPPED[name]))
        return send_file(
            io.BytesIO(data), mimetype="application/zip", as_attachment=True, download_name=label
        )
    target = path / name
    if target.is_symlink() or not target.is_file():  # a planted link is never served
        return make_response(f"{name} is written when the run ends\n", 404)
    return send_file(target, as_attachment=name != "report.html", download_name=label)
