"""What the live views compute, free of Locust and gevent: the web UI's start form
(:mod:`~sim.live.start_form`), the run's phase (:mod:`~sim.live.phase`), the Storage table's
rows (:mod:`~sim.live.storage_table`), the strip of latency beside the limiting device with the
SLOs and the cache check (:mod:`~sim.live.now`), the verdict's and values' wording
(:mod:`~sim.live.wording`) and the distributed master's merge of the workers' samples
(:mod:`~sim.live.worker_samples`).

They live outside :mod:`sim.locust` because importing that package patches sockets with
gevent: the unit tests (and any tool) can import these without it.
"""
