"""Analysis of a run bundle: how application latency moved with storage IOPS.

:func:`analyze_bundle` reads a bundle (never writes it) and returns a JSON-ready dict
(schema 1): aligned series, correlations, lag, the latency-versus-load curve and its knee,
I/O per operation, a regression of p99 on await, Little's law, and a verdict with its
evidence, for the run and for each step (or each half). Modules:

* :mod:`~sim.analysis.series` — loading and aligning the CSVs (measured phase only);
* :mod:`~sim.analysis.stats` — pure numpy statistics (Pearson, Spearman with average ranks,
  lagged correlation, least squares, hinge and plateau knees, Little's law);
* :mod:`~sim.analysis.sections` — the report sections built from them;
* :mod:`~sim.analysis.verdict` — the thresholds (each a named constant, documented there
  with the runs they were tuned on) and the call;
* :mod:`~sim.analysis.analyze` — :func:`analyze_bundle` itself.
"""

from sim.analysis.analyze import SCHEMA, analyze_bundle, analyze_series
from sim.analysis.series import BundleSeries, load_bundle
from sim.analysis.stats import (
    best_lag,
    correlation,
    hinge_knee,
    lagged_correlations,
    linear_fit,
    littles_law,
    pearson,
    plateau_knee,
    rankdata,
    spearman,
)
from sim.analysis.verdict import Findings, decide

__all__ = [
    "SCHEMA",
    "BundleSeries",
    "Findings",
    "analyze_bundle",
    "analyze_series",
    "best_lag",
    "correlation",
    "decide",
    "hinge_knee",
    "lagged_correlations",
    "linear_fit",
    "littles_law",
    "load_bundle",
    "pearson",
    "plateau_knee",
    "rankdata",
    "spearman",
]
