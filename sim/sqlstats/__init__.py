"""``dbsim sql-from-stats``: a scenario skeleton of the ``sql`` workload seeded from a
database's own statement statistics (issue #31).

Where the statements come from (each reader returns one :class:`~sim.sqlstats.captured.Captured`):

* PostgreSQL's ``pg_stat_statements`` (:mod:`sim.sqlstats.postgres`): calls, mean execution
  time, shared blocks read;
* MariaDB's ``performance_schema.events_statements_summary_by_digest``
  (:mod:`sim.sqlstats.mariadb`): calls, mean timer wait, rows examined;
* SQL Server's Query Store (:mod:`sim.sqlstats.mssql`): executions, mean duration, physical
  reads;
* an Oracle AWR text report's "SQL ordered by Executions" and "SQL ordered by Reads"
  sections (:mod:`sim.sqlstats.awr`).

What is made of them: :mod:`sim.sqlstats.normalize` finds each statement's normalized
parameters (``$1``, ``?``, ``:1``/``:B1``) and renames them ``:p1`` …, with the column a
parameter is compared with (``col = $1``); :mod:`sim.sqlstats.skeleton` writes the
scenario: the top N statements by calls, weights = their calls, a generator placeholder
(``fill_in``, which no generator model accepts) for each parameter or a proposed ``sample:``
of the compared column, and a comment per statement with its captured figures.
"""
