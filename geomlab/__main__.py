"""``python -m geomlab``: the command line (see :mod:`geomlab.cli`)."""

import sys

from geomlab.cli import main

sys.exit(main())
