"""The ``sql`` workload's parameters: the user's named statements, their weights, their
parameter generators, and the rules that keep a run off the user's data (docs/workloads/sql.md).

Everything here is checked before anything connects: each statement's text by the tokenizer
(workloads.sql.safety), each generator's range, each ``:name`` against its generator. A
refusal names the statement and the field.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from sim.sql import IDENTIFIER
from workloads.sql.generators import (
    MAX_ZIPFIAN_S,
    MIN_GAUSSIAN_STDDEVS,
    MIN_ZIPFIAN_S,
    range_problem,
)
from workloads.sql.safety import WRITE, Reading, UnsafeStatement, read_statement

RANGE_KINDS = ("uniform", "gaussian", "exponential", "zipfian")
KINDS = (*RANGE_KINDS, "sequence", "list", "file", "sample")
#: The modifier each range kind takes (and no other kind may carry).
MODIFIER = {"gaussian": "stddevs", "exponential": "parameter", "zipfian": "s"}
MAX_STATEMENTS = 100
MAX_TRANSACTION = 20
Scalar = StrictInt | float | str | bool


class SequenceSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    start: StrictInt = 1
    step: StrictInt = Field(default=1, description="Added per value; not 0.")


class SampleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    table: str = Field(description="A table of yours (schema.table allowed), as stored.")
    column: str = Field(description="Its values are drawn from, alike.")
    rows: int = Field(default=1000, ge=1, le=1_000_000, description="The first N non-NULL.")


class Generator(BaseModel):
    """One parameter's generator: exactly one kind, with its modifier where it has one."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    uniform: tuple[StrictInt, StrictInt] | None = None
    gaussian: tuple[StrictInt, StrictInt] | None = None
    exponential: tuple[StrictInt, StrictInt] | None = None
    zipfian: tuple[StrictInt, StrictInt] | None = None
    sequence: SequenceSpec | None = None
    list: tuple[Scalar, ...] | None = Field(default=None, max_length=1_000_000)
    file: str | None = Field(default=None, min_length=1)
    sample: SampleSpec | None = None
    stddevs: float | None = Field(default=None, description="gaussian: pgbench's parameter")
    parameter: float | None = Field(default=None, description="exponential: pgbench's")
    s: float | None = Field(default=None, description="zipfian: the exponent")

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if getattr(self, k) is not None)

    def problem(self) -> str | None:
        """Why this generator cannot draw (None: it can)."""
        kinds = [k for k in KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            return f"give exactly one of {', '.join(KINDS)} (got {', '.join(kinds) or 'none'})"
        kind = kinds[0]
        for other, modifier in MODIFIER.items():
            if other != kind and getattr(self, modifier) is not None:
                return f"{modifier} belongs to {other}, not {kind}"
        if kind in RANGE_KINDS:
            lo, hi = getattr(self, kind)
            return range_problem(lo, hi) or self._modifier_problem(kind)
        if kind == "sequence" and self.sequence is not None and self.sequence.step == 0:
            return "sequence.step is 0: every value would be the same"
        if kind == "list" and not self.list:
            return "list is empty"
        if kind == "sample" and self.sample is not None:
            for field in ("table", "column"):
                name = getattr(self.sample, field)
                if not all(IDENTIFIER.fullmatch(part) for part in name.split(".", 1)):
                    return f"sample.{field}: {name!r} is not a plain SQL name"
        return None

    def _modifier_problem(self, kind: str) -> str | None:
        value = getattr(self, MODIFIER[kind]) if kind in MODIFIER else None
        if kind == "gaussian":
            value = MIN_GAUSSIAN_STDDEVS * 1.25 if value is None else value
            if value < MIN_GAUSSIAN_STDDEVS:
                return f"stddevs {value} is below pgbench's minimum {MIN_GAUSSIAN_STDDEVS}"
        if kind == "exponential" and (value is None or value <= 0):
            return "exponential needs parameter > 0 (pgbench's)"
        if kind == "zipfian" and (value is None or not MIN_ZIPFIAN_S <= value <= MAX_ZIPFIAN_S):
            return f"zipfian needs s in [{MIN_ZIPFIAN_S}, {MAX_ZIPFIAN_S:g}] (pgbench's)"
        return None


class StatementSlo(BaseModel):
    """Limits for one statement, as the scenario's ``slos`` (op: the statement's name)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    p50_ms: float | None = Field(default=None, gt=0)
    p95_ms: float | None = Field(default=None, gt=0)
    p99_ms: float | None = Field(default=None, gt=0)
    ops_s_min: float | None = Field(default=None, gt=0)
    error_pct_max: float | None = Field(default=None, ge=0, le=100)

    def scenario_slo(self, op: str) -> dict[str, Any]:
        slo: dict[str, Any] = {"name": f"statement {op}", "op": op}
        for pct in ("p50", "p95", "p99"):
            value = getattr(self, f"{pct}_ms")
            if value is not None:
                slo[f"{pct}_us_max"] = value * 1000.0
        for key in ("ops_s_min", "error_pct_max"):
            if getattr(self, key) is not None:
                slo[key] = getattr(self, key)
        return slo


class SqlStatement(BaseModel):
    """One named statement, or a short transaction of several."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: str = Field(pattern=r"^[a-z0-9_]{1,48}$", description="The operation's name.")
    weight: float = Field(gt=0, le=1e9, description="Relative frequency.")
    read_only: bool = Field(
        default=False, description="Declared: a write found in it fails validation."
    )
    sql: str | None = Field(
        default=None, min_length=1, max_length=100_000, description="One statement, :name binds."
    )
    transaction: tuple[str, ...] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TRANSACTION,
        description="Instead of sql: statements run in order as one operation.",
    )
    params: dict[str, Generator] = Field(
        default_factory=dict, description="One generator per :name."
    )
    slo: StatementSlo | None = Field(default=None, description="Joined to the scenario's slos.")

    @property
    def texts(self) -> tuple[str, ...]:
        return (self.sql,) if self.sql is not None else self.transaction or ()

    def readings(self) -> tuple[Reading, ...]:
        return tuple(read_statement(text) for text in self.texts)

    @property
    def writes(self) -> bool:
        return any(r.kind == WRITE for r in self.readings())

    @model_validator(mode="after")
    def _safe(self) -> SqlStatement:
        where = f"statement {self.name}"
        if (self.sql is None) == (self.transaction is None):
            raise ValueError(f"{where}: give sql or transaction (one of the two)")
        fields = (
            ["sql"]
            if self.sql is not None
            else [f"transaction[{i}]" for i in range(len(self.texts))]
        )
        used: list[str] = []
        for field, text in zip(fields, self.texts, strict=True):
            try:
                reading = read_statement(text)
            except UnsafeStatement as exc:
                raise ValueError(f"{where}: {field}: {exc}") from None
            if self.read_only and reading.kind == WRITE:
                raise ValueError(
                    f"{where}: {field}: declared read_only but it writes "
                    f"({text.split()[0].upper()} …): remove read_only or the write"
                )
            used += reading.params
        missing = sorted(set(used) - set(self.params))
        if missing:
            raise ValueError(f"{where}: params: no generator for :{missing[0]}")
        unused = sorted(set(self.params) - set(used))
        if unused:
            raise ValueError(f"{where}: params.{unused[0]}: not used by its statement")
        for name, generator in self.params.items():
            problem = generator.problem()
            if problem:
                raise ValueError(f"{where}: params.{name}: {problem}")
        return self


class SqlParameters(BaseModel):
    """``workload.parameters`` of ``sql``: the user's statements (docs/workloads/sql.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    commit: bool = Field(
        default=False,
        description="false: every statement that is not read-only runs in a transaction that "
        "is rolled back. true: committed; may_change must name the tables.",
    )
    may_change: tuple[str, ...] = Field(
        default=(), max_length=1000, description="With commit: true, the tables it may change."
    )
    samples_before_run: bool = Field(
        default=True,
        description="sample: generators are read once before the measured window (true is "
        "the only value today)",
    )
    statements: tuple[SqlStatement, ...] = Field(
        default=(), max_length=MAX_STATEMENTS, description="The named statements (at least one)."
    )

    @property
    def table_prefix(self) -> str:
        """The load lock's key (the workload creates no table: nothing is named by it)."""
        return "sql"

    def declared_slos(self) -> list[dict[str, Any]]:
        """Each statement's ``slo`` as one of the scenario's SLOs (sim.config.resolve)."""
        return [s.slo.scenario_slo(s.name) for s in self.statements if s.slo is not None]

    @model_validator(mode="after")
    def _rules(self) -> SqlParameters:
        if not self.samples_before_run:
            raise ValueError(
                "samples_before_run: false is not supported: samples are read before the run"
            )
        names = [s.name for s in self.statements]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"statement {twice[0]}: name: given twice (names are unique)")
        may_change = {t.lower() for t in self.may_change}
        if self.commit and not may_change:
            raise ValueError("may_change: commit: true needs the tables the statements may change")
        if may_change and not self.commit:
            raise ValueError("may_change: only with commit: true (otherwise all is rolled back)")
        if self.commit:
            for statement in self.statements:
                for reading in statement.readings():
                    if reading.kind != WRITE:
                        continue
                    outside = [t for t in reading.writes if t not in may_change]
                    if outside or not reading.writes:
                        what = outside[0] if outside else "a table it does not name"
                        raise ValueError(
                            f"statement {statement.name}: writes {what}, not in may_change"
                        )
        return self
