"""``python -m sim.locust …``: the ``dbsim`` command with the Locust commands registered.

Local workers are started this way (``python -m sim.locust worker --master HOST:PORT``): the
process imports :mod:`sim.locust` first, so gevent patches it before anything else loads.
"""

import sys

from sim import cli_ui  # noqa: F401  (registers ``ui`` and ``worker`` on sim.cli.app)
from sim.cli import main

sys.exit(main(sys.argv[1:]))
