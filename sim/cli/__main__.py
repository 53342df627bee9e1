"""``python -m sim.cli …``: the ``dbsim`` command."""

import sys

from sim.cli.entry import main

sys.exit(main())
