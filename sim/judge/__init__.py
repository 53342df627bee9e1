"""Judging runs: service-level objectives (:mod:`sim.judge.slo`), the knee of a rate sweep
(:mod:`sim.judge.sweep`) and the comparison of two bundles (:mod:`sim.judge.compare`)."""
