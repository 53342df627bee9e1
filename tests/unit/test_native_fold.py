"""A native batch's fold: the batch is recorded without a scan only when its program knows it
ran one operation and nothing failed (sim.core.session_native.clean_code); otherwise the full
fold counts failures and splits latencies by operation."""

from __future__ import annotations

from array import array
from types import SimpleNamespace
from typing import Any

import numpy as np

from sim.core.session_native import clean_code, fold


def program(*, constant: int | None, failed: int | None) -> Any:
    deck = SimpleNamespace(constant=constant)
    names = ("stat", "seq_read", "seq_write")
    prog = SimpleNamespace(deck=deck, names=names)
    if failed is not None:  # the file loop counts a batch's failures; the SQL loops do not
        prog.failed = failed
    return prog


def test_a_batch_is_clean_only_with_one_operation_and_no_failure() -> None:
    assert clean_code(program(constant=1, failed=0)) == 1
    assert clean_code(program(constant=1, failed=3)) is None
    assert clean_code(program(constant=None, failed=0)) is None
    assert clean_code(program(constant=1, failed=None)) is None


class Recorder:
    def __init__(self) -> None:
        self.raw: dict[str, array[int]] = {}
        self.errors: list[tuple[str, str, int]] = []

    def record_error(self, name: str, error_class: str, message: Any, n: int) -> None:
        self.errors.append((name, error_class, n))


def test_the_full_fold_records_what_the_clean_path_skips_scanning_for() -> None:
    prog = program(constant=None, failed=1)
    prog.error_class = lambda error: "EIO"
    prog.message = lambda code, error, arg: "boom"
    codes = np.array([1, 1, 2, 1], dtype=np.int32)
    latency = np.array([10, 11, 12, 13], dtype=np.int64)
    errors = np.array([0, 5, 0, 0], dtype=np.int32)
    recorder = Recorder()
    fold(recorder, prog, codes, latency, errors, np.zeros(4, dtype=np.int64))  # type: ignore[arg-type]
    assert recorder.raw == {"seq_read": array("q", [10, 13]), "seq_write": array("q", [12])}
    assert recorder.errors == [("seq_read", "EIO", 1)]
