"""The build of dbsim's optional C extensions (everything else is in pyproject.toml).

``optional=True``: on a machine without a compiler, Python headers, libpq's headers
(Debian's libpq-dev), MariaDB Connector/C's (libmariadb-dev) or unixODBC's (unixodbc-dev) the
install still succeeds; file sessions then run on Python threads, PostgreSQL sessions on
asyncpg, MariaDB/MySQL sessions on asyncmy, ODBC sessions on pyodbc, and the run's summary
says why.
"""

import subprocess

from setuptools import Extension, setup

FLAGS = ["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Wno-missing-field-initializers"]


def pg_include() -> str:
    """libpq's header directory (pg_config's answer, else Debian's)."""
    try:
        found = subprocess.run(
            ["pg_config", "--includedir"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        found = ""
    return found or "/usr/include/postgresql"


def mariadb_include() -> list[str]:
    """MariaDB Connector/C's header directories (mariadb_config's answer, else Debian's)."""
    try:
        found = subprocess.run(
            ["mariadb_config", "--include"], capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        found = []
    return [flag[2:] for flag in found if flag.startswith("-I")] or ["/usr/include/mariadb"]


setup(
    ext_modules=[
        Extension(
            "storage.targets._fileloop",
            sources=["storage/targets/native/fileloop.c"],
            depends=["storage/targets/native/batch.h"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
        Extension(
            "storage.targets._pgloop",
            sources=["storage/targets/native/pgloop.c", "storage/targets/native/pggroup.c"],
            depends=[
                "storage/targets/native/pgloop.h",
                "storage/targets/native/batch.h",
                "storage/targets/native/pack.h",
            ],
            include_dirs=[pg_include()],
            libraries=["pq"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
        Extension(
            "storage.targets._marialoop",
            sources=["storage/targets/native/marialoop.c"],
            depends=["storage/targets/native/batch.h", "storage/targets/native/pack.h"],
            include_dirs=mariadb_include(),
            libraries=["mariadb"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
        Extension(
            "storage.targets._odbcloop",
            sources=["storage/targets/native/odbcloop.c"],
            depends=["storage/targets/native/batch.h", "storage/targets/native/pack.h"],
            libraries=["odbc"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
    ]
)
