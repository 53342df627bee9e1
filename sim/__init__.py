"""dbsim's service layer: scenarios, the session engine, metrics, the run bundle and the CLI.

Workloads (``workloads/``) and storage targets/collectors (``storage/``) plug in through
``sim.registry``; nothing in ``sim`` imports them by name.
"""

__version__ = "0.1.0"
