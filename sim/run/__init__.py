"""The run's assembly, above the engine: what wires ``sim.core`` to the bundle, the judges and
the report for one run.

- :mod:`sim.run.runner`: the target, workload and collectors from the registry, the engine
  and its bundle writer, the sweep's breach monitor, the calibration and the lab steps wired
  to its events (``prepare_run``), and everything a run would refuse before it starts
  (``check_before_run``).
- :mod:`sim.run.finish`: the final summary, written once with the SLO verdicts judged on it,
  then the report (``finish_summary``; ``write_final_summary`` for a merged bundle too).
- :mod:`sim.run.calibration`: load asked in device IOPS, converted into ops/s by a
  calibration stage measured on the device source (``sim.registry.ROLE_DEVICE``).

``sim.core`` imports none of these (tests/unit/test_import_graph.py).
"""
