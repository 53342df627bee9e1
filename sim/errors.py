"""The one error tree of dbsim.

::

    SimError                      anything dbsim reports to the user as a one-line message
    ├── ConfigError               the scenario, the CLI arguments or the environment are wrong
    │   ├── ScenarioError         validation failed; carries one line per invalid field
    │   └── MissingDataError      --skip-load, but the workload's objects are not loaded
    ├── WorkloadError             a workload cannot set up, load, verify or run
    │   └── OwnershipError        an object exists that dbsim did not create; refusing to touch it
    ├── TargetError               the database or file tree cannot be reached or used
    ├── CollectorError            a storage collector cannot start or sample
    └── BundleError               the run bundle cannot be written
        └── OutputDirectoryError  before the run: no bundle can be created there (exit 2)

Driver exceptions (asyncpg, sqlite3, OSError …) are translated at the boundary with
``raise TargetError(...) from exc``.  The CLI prints ``str(error)`` (one line per problem)
and exits with ``error.exit_code``; tracebacks appear only with ``--debug``.
"""

from __future__ import annotations

# Exit codes shared by every command (the table: docs/index.md, "Exit codes").
EXIT_OK = 0
EXIT_SLO_MISSED = 1
EXIT_BAD_INPUT = 2
EXIT_RUN_FAILED = 3
#: ``compare``: the runs cannot be compared (a run is invalid, or they differ in more than
#: the storage): no verdict.
EXIT_NOT_COMPARABLE = 4
#: ``replay``: a scale's replay did not reproduce the capture within the documented tolerances
#: (docs/capture.md): unfaithful, said with its cause before any verdict.
EXIT_UNFAITHFUL = 5


class SimError(Exception):
    """Base of every error dbsim reports to the user."""

    exit_code = EXIT_RUN_FAILED


class ConfigError(SimError):
    """The user's input (scenario, arguments, environment) is wrong."""

    exit_code = EXIT_BAD_INPUT


class ScenarioError(ConfigError):
    """A scenario failed validation; ``problems`` holds one ``path: message`` line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class MissingDataError(ConfigError):
    """``dbsim run --skip-load`` found the workload's objects missing, half-loaded or loaded
    with other parameters; nothing ran. The message names them and ``dbsim load``."""


class WorkloadError(SimError):
    """A workload cannot set up, load, verify or run."""


class OwnershipError(WorkloadError):
    """An object exists that dbsim did not create; dbsim refuses to write to or drop it."""

    exit_code = EXIT_BAD_INPUT


class TargetError(SimError):
    """The system under test cannot be reached or used."""


class CollectorError(SimError):
    """A storage collector cannot start or take a sample (never fatal to a run)."""


class BundleError(SimError):
    """The run bundle cannot be written."""


class OutputDirectoryError(BundleError):
    """``output.directory`` cannot hold a new bundle (EACCES, EROFS, ENOSPC …), found before
    anything ran. Exit 2, like bad input: no run happened and no bundle was left behind, and
    the user fixes it by choosing another directory or freeing it, then runs the same command
    again. A bundle that stops being writable *during* a run is a failed run (exit 3)."""

    exit_code = EXIT_BAD_INPUT
