"""``dbsim capture``: production's storage observed by the collectors alone, into a capture
bundle (issue #26, docs/capture.md).

- :mod:`sim.capture.plan`: the scenario's ``target``, ``collectors``, ``output`` and
  ``capture`` sections, with the command line's overrides, validated.
- :mod:`sim.capture.watch`: the one target a capture opens (paths, or a database server
  read-only) — nothing is created on it.
- :mod:`sim.capture.loop`: the sampling clock on the run's sampler and bundle writer.
- :mod:`sim.capture.budget`: ``--max-bytes``: the interval doubles as the bundle fills.
- :mod:`sim.capture.own`: the capture's own CPU and memory, children included.
- :mod:`sim.capture.summary`: ``kind: capture`` and the ``capture`` object of summary.json.
"""
