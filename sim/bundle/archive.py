"""A bundle's files for the web UI's downloads (:mod:`sim.locust.downloads`): one file, or the
bundle (or one of its folders) as a zip. Gevent-free, so it is tested without the UI.

Nothing is read through a link, at any level: the bundle's directory is opened once (it is
the output directory the run was given, as :mod:`sim.bundle.writer` made it), and everything
below it relative to its parent's descriptor with ``O_NOFOLLOW`` — a folder swapped for a
symbolic link (``timeseries`` -> ``/etc``) fails its ``openat`` instead of being entered, and
a linked file is not opened. A file with more than one link is not served either (dbsim never
makes one: it would be someone else's file under a bundle name, see :mod:`sim.nofollow`), nor
anything that is not a regular file. A zip leaves such entries out and says which and why in
:data:`LEFT_OUT_NAME`; a single file is refused with :class:`DownloadRefused`.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

from sim.nofollow import DIR_FLAGS, kind_of

#: The note a zip carries when it left something out (only then).
LEFT_OUT_NAME = "dbsim-left-out.txt"
#: A bundle file opened for reading: never through a link, never blocking on a FIFO.
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
#: Bundles nest three levels at most (histograms/, timeseries/workers/); a deeper tree was
#: not written by dbsim and is not walked further.
MAX_DEPTH = 8
CHUNK_BYTES = 1 << 20


class DownloadRefused(Exception):
    """What was asked for is in the bundle's place but is not the bundle's own file or
    folder (a link, a device, a hard link); the message says what it is."""


def _why_not(info: os.stat_result, want_dir: bool = False) -> str | None:
    """Why an entry is not served (None when it is served)."""
    if stat.S_ISDIR(info.st_mode) if want_dir else stat.S_ISREG(info.st_mode):
        if want_dir or info.st_nlink == 1:
            return None
        return f"a regular file with {info.st_nlink} hard links (dbsim makes one)"
    return kind_of(info.st_mode)


def _open_in(name: str, dir_fd: int, flags: int, want_dir: bool) -> int:
    """``name`` in ``dir_fd``, opened only when it is what a bundle holds there (looked at with
    ``lstat`` first, so a device is never opened) and still the same inode once open.
    DownloadRefused naming what is there otherwise; FileNotFoundError when nothing is."""
    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    why = _why_not(info, want_dir)
    if why:
        raise DownloadRefused(f"{name}: {why}; not served")
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
            raise DownloadRefused(f"{name}: swapped while being read; not served") from None
        raise
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino) or _why_not(now, want_dir):
        os.close(fd)
        raise DownloadRefused(f"{name}: swapped while being read; not served")
    return fd


@contextlib.contextmanager
def _opened(bundle: Path, under: str = "") -> Iterator[int]:
    """The bundle's directory (or its folder ``under``, each component checked) as a
    descriptor."""
    fd = os.open(bundle, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in Path(under).parts if under else ():
            inner = _open_in(part, fd, DIR_FLAGS, want_dir=True)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, CHUNK_BYTES):
        chunks.append(chunk)
    return b"".join(chunks)


def read_bundle_file(bundle: Path, name: str) -> bytes:
    """The bytes of the bundle's top-level file ``name`` (``report.html``, ``summary.json``).
    FileNotFoundError when it is not there (yet); DownloadRefused when something else is."""
    with _opened(bundle) as top:
        fd = _open_in(name, top, READ_FLAGS, want_dir=False)
        try:
            return _read_all(fd)
        finally:
            os.close(fd)


def _add_file(archive: zipfile.ZipFile, fd: int, arcname: str) -> None:
    info = os.fstat(fd)
    entry = zipfile.ZipInfo(arcname, time.localtime(info.st_mtime)[:6])
    entry.compress_type = zipfile.ZIP_DEFLATED
    entry.external_attr = (stat.S_IFREG | 0o644) << 16
    with archive.open(entry, "w") as out:
        while chunk := os.read(fd, CHUNK_BYTES):
            out.write(chunk)


def _walk_into(
    archive: zipfile.ZipFile, fd: int, where: str, left_out: list[str], depth: int = 0
) -> None:
    """Every served file below the folder ``fd`` into ``archive`` as ``where/…`` (sorted,
    depth first); what is not served is named in ``left_out``."""
    for name in sorted(os.listdir(fd)):
        try:
            is_dir = stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
            if is_dir and depth >= MAX_DEPTH:
                raise DownloadRefused(f"{name}: nested deeper than a bundle; not served")
            entry = _open_in(name, fd, DIR_FLAGS if is_dir else READ_FLAGS, is_dir)
        except DownloadRefused as exc:
            left_out.append(f"{where}/{exc}")
            continue
        except FileNotFoundError:  # removed since the listing
            continue
        try:
            if is_dir:
                _walk_into(archive, entry, f"{where}/{name}", left_out, depth + 1)
            else:
                _add_file(archive, entry, f"{where}/{name}")
        finally:
            os.close(entry)


def bundle_zip(bundle: Path, under: str = "") -> bytes:
    """The bundle (or its folder ``under``) as a zip whose entries start with the bundle's
    name; regular files with one link only, in sorted order, none reached through a link.
    What was left out is listed in ``<bundle>/``:data:`LEFT_OUT_NAME`. Raises
    DownloadRefused when ``under`` itself is a link or not a folder, FileNotFoundError when it
    is not there."""
    buffer = io.BytesIO()
    left_out: list[str] = []
    with _opened(bundle, under) as top, zipfile.ZipFile(buffer, "w") as archive:
        prefix = "/".join((bundle.name, *Path(under).parts)) if under else bundle.name
        _walk_into(archive, top, prefix, left_out)
        if left_out:
            note = "dbsim left these out of the download:\n" + "".join(
                f"{line}\n" for line in left_out
            )
            archive.writestr(f"{bundle.name}/{LEFT_OUT_NAME}", note, zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def fetch(
    bundle: Path, name: str, folder: str | None = None
) -> tuple[bytes, None] | tuple[None, DownloadRefused | FileNotFoundError]:
    """The bytes of the top-level file ``name``, or the zip of ``folder`` ("" for the whole
    bundle) when one is given; a refusal or an absence comes back as a value, not raised: a
    file not written yet is an everyday answer, and gevent's thread pool prints a traceback
    for whatever its function raises."""
    try:
        data = read_bundle_file(bundle, name) if folder is None else bundle_zip(bundle, folder)
    except (DownloadRefused, FileNotFoundError) as exc:
        return None, exc
    return data, None


__all__ = ["LEFT_OUT_NAME", "DownloadRefused", "bundle_zip", "fetch", "read_bundle_file"]
