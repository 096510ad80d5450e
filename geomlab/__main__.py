"""``python -m geomlab``: the command line (see :mod:`geomlab.commands.cli`)."""

import sys

from geomlab.commands.cli import main

sys.exit(main())
