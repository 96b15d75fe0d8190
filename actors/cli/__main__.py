"""`python -m actors.cli`: the nannytree command."""

import sys

from ._command import main

sys.exit(main())
