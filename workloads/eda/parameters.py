"""EDA parameters: the reference's per-component figures, overridable, with units in the names.

Reference (SPEC SFS 2014 SP2 "EDA", SPECstorage Solution 2020 "EDA_BLENDED"; see
docs/workloads/eda.md): a job set is 3 front-end processes at 100 ops/s (16 KiB files, 10 files
per directory, 10 directories, as many empty files) and 2 back-end processes at 75 ops/s
(10 MiB files, 10 files per directory, 5 directories).

Mixes are mappings of operation name to an integer weight; a mix you give replaces the
component's whole mix (operations left out get 0). The weights of one component make its
*deck*: each session deals its operations from a freshly shuffled deck of that many cards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workloads.sizes import parse_size_bytes

Component = Literal["EDA_FRONTEND", "EDA_BACKEND", "EDA_BLENDED"]
FRONTEND: Component = "EDA_FRONTEND"
BACKEND: Component = "EDA_BACKEND"
BLENDED: Component = "EDA_BLENDED"

#: The reference front-end mix, percent of the front-end processes' operations.
FRONTEND_MIX: dict[str, int] = {
    "stat": 39,
    "access": 15,
    "random_write": 15,
    "write_file": 10,
    "random_read": 8,
    "read_file": 7,
    "create": 2,
    "chmod": 1,
    "mkdir": 1,
    "unlink": 1,
    "unlink2": 1,
}
#: The reference back-end mix: streaming, one transfer per operation.
BACKEND_MIX: dict[str, int] = {"seq_read": 50, "seq_write": 50}
#: Every operation a component can deal (``append`` and ``readdir`` for custom mixes).
FRONTEND_OPS = frozenset(FRONTEND_MIX) | {"append", "readdir"}
BACKEND_OPS = frozenset(BACKEND_MIX)

DEFAULT_BLOCK_SIZE_BYTES = 4096
DEFAULT_TRANSFER_SIZE_BYTES = 65536
DIRECT_ALIGN_BYTES = 4096
MAX_DECK = 10_000
MAX_JOB_SETS = 10_000


class _Model(BaseModel):
    # allow_inf_nan=False: an .inf rate would pace a process at no delay at all.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _size(value: Any) -> Any:
    return parse_size_bytes(value) if isinstance(value, int | str) else value


class ComponentParameters(_Model):
    """One component's processes, files and mix."""

    process_rate_ops_s: float = Field(gt=0, description="Requested ops/s of one process.")
    processes_per_job_set: int = Field(ge=1, le=64)
    file_size_bytes: int = Field(ge=0, description="Size of each data file (bytes, or 16K, 10M).")
    files_per_dir: int = Field(ge=1, le=100_000)
    dirs: int = Field(ge=1, le=100_000)
    empty_files_per_dir: int = Field(default=0, ge=0, le=100_000)
    mix: dict[str, int] = Field(default_factory=dict)

    _check_size = field_validator("file_size_bytes", mode="before")(_size)

    @field_validator("mix")
    @classmethod
    def _weights(cls, mix: dict[str, int]) -> dict[str, int]:
        if any(weight < 0 for weight in mix.values()):
            raise ValueError("weights must be >= 0")
        total = sum(mix.values())
        if not 0 < total <= MAX_DECK:
            raise ValueError(f"weights must add up to 1..{MAX_DECK} (they are the deck)")
        return {name: weight for name, weight in mix.items() if weight > 0}


class FrontendParameters(ComponentParameters):
    """EDA_FRONTEND: small files and metadata."""

    process_rate_ops_s: float = Field(default=100.0, gt=0)
    processes_per_job_set: int = Field(default=3, ge=1, le=64)
    file_size_bytes: int = Field(default=16 * 1024, ge=1)
    files_per_dir: int = Field(default=10, ge=1, le=100_000)
    dirs: int = Field(default=10, ge=1, le=100_000)
    empty_files_per_dir: int = Field(default=10, ge=0, le=100_000)
    mix: dict[str, int] = Field(default_factory=lambda: dict(FRONTEND_MIX))

    @model_validator(mode="after")
    def _consistent(self) -> FrontendParameters:
        _known(self.mix, FRONTEND_OPS, "frontend")
        creates = self.mix.get("create", 0)
        removes = self.mix.get("unlink", 0) + self.mix.get("unlink2", 0)
        if removes > creates:
            raise ValueError(
                f"mix: unlink + unlink2 ({removes}) must not exceed create ({creates}): "
                "sessions only remove files they created"
            )
        empty_ops = {"access", "chmod", "append"} & set(self.mix)
        if empty_ops and self.empty_files_per_dir == 0:
            raise ValueError(f"mix: {', '.join(sorted(empty_ops))} need empty_files_per_dir > 0")
        return self


class BackendParameters(ComponentParameters):
    """EDA_BACKEND: large files, streamed."""

    process_rate_ops_s: float = Field(default=75.0, gt=0)
    processes_per_job_set: int = Field(default=2, ge=1, le=64)
    file_size_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    files_per_dir: int = Field(default=10, ge=1, le=100_000)
    dirs: int = Field(default=5, ge=1, le=100_000)
    mix: dict[str, int] = Field(default_factory=lambda: dict(BACKEND_MIX))

    @model_validator(mode="after")
    def _consistent(self) -> BackendParameters:
        _known(self.mix, BACKEND_OPS, "backend")
        if self.files_per_dir * self.dirs < 2 and set(self.mix) == BACKEND_OPS:
            raise ValueError("a process needs >= 2 files to read one while it writes another")
        return self


def _known(mix: Mapping[str, int], known: frozenset[str], component: str) -> None:
    unknown = sorted(set(mix) - known)
    if unknown:
        raise ValueError(
            f"mix: unknown {component} operation(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )


class EdaParameters(_Model):
    """What an EDA run builds and does (``workload.parameters``)."""

    component: Component = Field(default=BLENDED, description="Which processes a job set runs.")
    job_sets: int = Field(
        default=1, ge=1, le=MAX_JOB_SETS, description="Job sets to build trees for (the load unit)."
    )
    frontend: FrontendParameters = Field(default_factory=FrontendParameters)
    backend: BackendParameters = Field(default_factory=BackendParameters)
    block_size_bytes: int = Field(
        default=DEFAULT_BLOCK_SIZE_BYTES,
        ge=512,
        description="Size of random_read, random_write, append and a create's data block.",
    )
    transfer_size_bytes: int = Field(
        default=DEFAULT_TRANSFER_SIZE_BYTES,
        ge=512,
        description="Size of one call of whole-file reads and writes and of one streaming op.",
    )
    direct_io: bool = Field(default=False, description="Open data files with O_DIRECT.")
    fsync: Literal["none", "close", "each"] = Field(
        default="none",
        description="fdatasync after each write call, once before closing a written file, or never.",
    )
    seed: int = Field(default=0, ge=0, description="Seeds the file contents and every session.")
    load_parallelism: int = Field(
        default=4, ge=1, le=64, description="Files written at once while building the trees."
    )

    _check_block = field_validator("block_size_bytes", "transfer_size_bytes", mode="before")(_size)

    @model_validator(mode="after")
    def _aligned(self) -> EdaParameters:
        if self.direct_io:
            sizes = {
                "block_size_bytes": self.block_size_bytes,
                "transfer_size_bytes": self.transfer_size_bytes,
                "frontend.file_size_bytes": self.frontend.file_size_bytes,
                "backend.file_size_bytes": self.backend.file_size_bytes,
            }
            odd = [name for name, size in sizes.items() if size % DIRECT_ALIGN_BYTES]
            if odd:
                raise ValueError(
                    f"direct_io needs multiples of {DIRECT_ALIGN_BYTES} bytes: {', '.join(odd)}"
                )
        if FRONTEND in self.components() and self.block_size_bytes > self.frontend.file_size_bytes:
            raise ValueError("block_size_bytes must not exceed frontend.file_size_bytes")
        return self

    def components(self) -> list[str]:
        """The components this configuration runs, front-end first."""
        if self.component == BLENDED:
            return [FRONTEND, BACKEND]
        return [self.component]

    def of(self, component: str) -> ComponentParameters:
        return self.frontend if component == FRONTEND else self.backend
