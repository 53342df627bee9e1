"""The storage baseline: the seeds' fio tests, run by the real fio on the user's volume or LUN.

Not a session workload: fio, not dbsim's engine, generates the I/O (the seeds' figures were
measured with fio, and only the same tool measures the same way). It lives with the workloads
because it shares their ownership rules: the file tree's ``.dbsim-tree`` marker
(:mod:`workloads.eda.tree`).

* :mod:`sim.baseline.presets` — the published test matrices as presets (block size × read %
  × random/sequential), each seed table with its jobs, queue depth, clients, working set and
  mount options, quoted from the seed (:mod:`sim.baseline.points`);
* :mod:`sim.baseline.matrix` — the points planned for this host (jobs and depth scaled);
  :mod:`sim.baseline.workset` and :mod:`sim.baseline.planning` — the working sets scaled to
  its memory and the target's room; :mod:`sim.baseline.mounts` — an NFS target's mount
  options beside the seed's;
* :mod:`sim.baseline.strategy`, :mod:`sim.baseline.stepped` — the iodepth search and the
  iorate curve;
* :mod:`sim.baseline.fio` — finding fio, writing its job files (headed by
  :mod:`sim.baseline.annotate`'s comments), running it and reading its JSON output (fio's own
  figures, never recomputed); :mod:`sim.baseline.dryrun` — the job files without running;
* :mod:`sim.baseline.safety` — what fio may write to: a file tree carrying dbsim's marker,
  or a raw device named twice, unmounted and without a file-system signature;
* :mod:`sim.baseline.envelope` — each point beside a published envelope's figure.

The run itself (bundle, collectors on dbsim's clock, console) is :mod:`sim.baseline.run`.
"""
