"""A run imports nothing for the first time while it measures (sim.run.preload).

The commands that only read a scenario import numpy, SQLAlchemy and rich at the point of use;
a run imports them before its first session, because a first import in the middle of a run
stalls the sessions (and, in a Locust process, the gevent hub). Python's audit hook sees every
first import ("import" events are raised only when a module is not yet loaded), with its time.
The window checked is the measured one: as the sessions start (the warm-up's first moment) the
engine still chooses their runner, which imports the native loop's module.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import clean_environment, single_bundle

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]

#: ``dbsim`` with an audit hook that writes (time, module) of every first import at exit.
AUDITED_DBSIM = """
import atexit, json, sys, time
first_imports = []
sys.addaudithook(
    lambda event, args: first_imports.append((time.time(), args[0])) if event == "import" else None
)
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w", encoding="utf-8").write(json.dumps(first_imports)))
from sim.cli.entry import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_default_run_imports_nothing_while_it_measures(tmp_path: Path) -> None:
    record = tmp_path / "imports.json"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**clean_environment(tmp_path), "PYTHONPATH": str(REPO)}
    args = ["run", "--duration", "2", "--warmup", "1", "-q", "-o", str(tmp_path / "out")]
    done = subprocess.run(
        [sys.executable, "-c", AUDITED_DBSIM, str(record), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((single_bundle(tmp_path / "out") / "summary.json").read_text("utf-8"))
    # The measured window on the wall clock: the sessions' start (not the run's, which comes
    # before the load and the connections: a CI host took over a second between them), then
    # the warm-up.
    timing = summary["timing"]
    sessions = datetime.datetime.fromisoformat(timing["sessions_started_at"]).timestamp()
    first = sessions + timing["warmup_s"]
    last = first + timing["measured_s"]
    imports = json.loads(record.read_text("utf-8"))
    assert len(imports) > 100  # the hook saw the run's start
    during = [name for t, name in imports if first <= t <= last]
    assert during == [], f"first imported while the run measured: {during}"
