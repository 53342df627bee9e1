"""``dbsim replay``: the captured profile reproduced on the storage under test at 1×, 2×, N×,
judged for fidelity before any verdict (docs/capture.md, "Replaying").

- :mod:`sim.replay.shape`: a workload's shape over a window of a profile (both sides);
- :mod:`sim.replay.fiojob`: the fio job that reproduces a shape at a scale;
- :mod:`sim.replay.runner`: one scale run under dbsim's own capture of the target;
- :mod:`sim.replay.fidelity`: the tolerances and the cause of an unfaithful replay;
- :mod:`sim.replay.verdict`: latency against SLOs and production, headroom, exit codes;
- :mod:`sim.replay.plan`: the inputs checked, then the scales in turn;
- :mod:`sim.replay.console`: the 80-column text.
"""

#: The version of replay.json's layout (every replay path writes it).
REPLAY_VERSION = 1
