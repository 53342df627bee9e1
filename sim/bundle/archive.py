"""A bundle (or one of its folders) as a zip, for the web UI's downloads (sim.locust.downloads)."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path


def bundle_zip(bundle: Path, under: str = "") -> bytes:
    """The bundle (or its folder ``under``) as a zip whose entries start with the bundle's
    name; regular files only, in sorted order. Links are never followed (a link planted in a
    bundle would otherwise serve whatever it points at): os.walk does not enter linked
    directories, and linked files are left out."""
    root = bundle / under if under else bundle
    files = [
        Path(top) / name
        for top, _, names in os.walk(root, followlinks=False)
        for name in names
        if not (Path(top) / name).is_symlink() and (Path(top) / name).is_file()
    ]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(files):
            archive.write(path, Path(bundle.name) / path.relative_to(bundle))
    return buffer.getvalue()
