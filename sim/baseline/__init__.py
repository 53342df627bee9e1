"""The storage baseline: the seeds' fio tests, run by the real fio on the user's volume or LUN.

Not a session workload: fio, not dbsim's engine, generates the I/O (the seeds' figures were
measured with fio, and only the same tool measures the same way). It lives with the workloads
because it shares their ownership rules: the file tree's ``.dbsim-tree`` marker
(:mod:`workloads.eda.tree`).

* :mod:`sim.baseline.matrix` — the published test matrices as presets (block size × read %
  × random/sequential, with each seed's jobs and queue depth) and their scaling to this host;
* :mod:`sim.baseline.fio` — finding fio, writing its job files, running it and reading
  its JSON output (fio's own figures, never recomputed);
* :mod:`sim.baseline.safety` — what fio may write to: a file tree carrying dbsim's marker,
  or a raw device named twice, unmounted and without a file-system signature;
* :mod:`sim.baseline.envelope` — each point beside a published envelope's figure.

The run itself (bundle, collectors on dbsim's clock, console) is :mod:`sim.baseline.run`.
"""
