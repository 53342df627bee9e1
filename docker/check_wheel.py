"""Refuse a dbsim wheel built without its native file loop.

setup.py marks the C extension optional (an install without a compiler still succeeds), so a
build stage whose compiler is missing or broken would silently produce a wheel whose file
sessions run on Python threads. The image's build stage runs this on the wheels it made
(``python docker/check_wheel.py /wheels``), and tests/unit/test_docker_files.py runs it on a
wheel built here with the same ``pip wheel`` command. Exit 0 naming the extension, else 1.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

EXTENSION = "storage/targets/_fileloop"


def native_loop(wheel_dir: Path) -> str:
    """The extension's path inside the one dbsim wheel of ``wheel_dir``; ValueError if none."""
    wheels = sorted(wheel_dir.glob("dbsim-*.whl"))
    if len(wheels) != 1:
        raise ValueError(f"{wheel_dir}: expected one dbsim wheel, found {len(wheels)}")
    with zipfile.ZipFile(wheels[0]) as archive:
        found = [n for n in archive.namelist() if n.startswith(EXTENSION) and n.endswith(".so")]
    if not found:
        raise ValueError(f"{wheels[0].name} has no {EXTENSION}*.so: the compiler did not run")
    return f"{wheels[0].name}: {found[0]}"


def main(argv: list[str]) -> int:
    try:
        print(native_loop(Path(argv[1] if len(argv) > 1 else "/wheels")))
    except ValueError as exc:
        print(f"check_wheel: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
