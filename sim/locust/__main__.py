"""``python -m sim.locust …``: the ``dbsim`` command with the Locust commands registered.

Local workers are started this way (``python -m sim.locust worker --master HOST:PORT``): the
process imports :mod:`sim.locust` first, so gevent patches it before anything else loads.
"""

import sys

from sim.cli.entry import main

sys.exit(main(sys.argv[1:]))
