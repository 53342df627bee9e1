"""The console at 80 and 200 columns, on a terminal (a pty) and piped (#16).

What a run prints must read whole at either width: no figure or heading cut short (rich's
``…``), tables folded into parts rather than truncated, the verdict and its findings at the
end, the operation mix as a sentence (never a Python dict), load progress with its rate and
ETA while the data loads, errors/s in the progress lines, and ``dbsim runs`` with full run
names. ``COLUMNS`` sets the width when stdout is not a terminal.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Dbsim, bundle_dirs

pytestmark = [pytest.mark.e2e]

# Paced (open loop, 200 ops/s): the output's shape is checked, not a rate. Closed loop, each of
# the three runs drove SQLite as hard as it could (updates fsync'ed: ~0.5 CPU-s more a run).
RUN = (
    "run",
    "--duration",
    "2",
    "--warmup",
    "0",
    "-s",
    "load.mode=open",
    "-s",
    "load.rate_ops_s=200",
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][AB0-2]|\r")
TRUNCATED = "…"


def _check_run_output(text: str, width: int) -> None:
    lines = text.splitlines()
    too_wide = [line for line in lines if len(line) > width]
    assert not too_wide, too_wide
    assert TRUNCATED not in text, text
    assert any(line.startswith("verdict (analysis.json): ") for line in lines), text
    assert "{" not in text and "}" not in text, text  # no dict, no JSON
    mix = next(line for line in lines if line.startswith("mix (measured): "))
    assert re.search(r"read \d+(\.\d+)?\s%, update \d+(\.\d+)?\s%", mix), mix


@pytest.mark.parametrize("width", [80, 200])
def test_piped_run_honours_columns(dbsim: Dbsim, out_dir: Path, width: int) -> None:
    result = dbsim(*RUN, "-o", out_dir, env={"COLUMNS": str(width)})
    assert result.rc == 0, result.describe()
    _check_run_output(result.stdout, width)
    folded = "(continued)" in result.stdout
    assert folded == (width == 80), result.stdout  # the block table needs ~92 columns
    # Piped, the load is never silent: its progress with rate (rows/s), then the run's lines.
    assert re.search(r"load \S+: [\d,]+/[\d,]+ rows \(100 %\), [\d,]+ rows/s", result.stderr)
    assert re.search(r"measure read [\d,]+/s p99 .* errors [\d,]+/s", result.stderr)

    runs = dbsim("runs", out_dir, env={"COLUMNS": str(width)})
    assert runs.rc == 0, runs.describe()
    name = bundle_dirs(out_dir)[0].name
    assert name in runs.stdout and TRUNCATED not in runs.stdout, runs.stdout
    assert max(len(line) for line in runs.stdout.splitlines()) <= width


def _run_in_pty(command: list[str], cwd: Path, env: dict[str, str], width: int) -> str:
    """``command`` with stdout and stderr on a pseudo-terminal ``width`` columns wide; all it
    wrote, escape sequences stripped."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm"
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")[-3000:]
    return ANSI.sub("", b"".join(chunks).decode("utf-8", errors="replace"))


def test_terminal_run_at_80_columns(dbsim: Dbsim, out_dir: Path) -> None:
    text = _run_in_pty(dbsim.command(*RUN, "-o", out_dir), dbsim.cwd, dbsim.env, 80)
    # The live panel draws over itself; what stays is the final output, 80 columns wide.
    final = text[text.rfind("slob on sqlite") :]
    _check_run_output(final, 80)
    assert "(continued)" in final
    assert re.search(r"rows \(\d+ %\)", text), text[:3000]  # the panel showed the load
