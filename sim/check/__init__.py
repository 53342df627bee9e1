"""``dbsim check``: first contact with a user's own SQL server, one line per check.

In a scratch table prefix of its own (``chk`` and eight random hex digits), against the target
a scenario names: connect (a round trip), the privileges dbsim needs with the GRANT for each
one missing, a small SLOB-like load, the proof of one row per block or page, about twenty
seconds of reads whose physical reads per read are held against WORK_UNIT − 1, the statistics
views the ``db`` collector reads, and the drop of everything it created. The engine-specific
SQL is the dialect record's (``first_contact``, written in storage/targets/first_contact.py,
and ``stats_collectors``), ``sim.connect_check``'s probe and the SLOB statements;
:mod:`sim.check.probe` only sequences and judges, :mod:`sim.check.driver` runs it on a loop.
"""

from sim.check.probe import CheckLine, CheckOptions, run_checks

__all__ = ["CheckLine", "CheckOptions", "run_checks"]
