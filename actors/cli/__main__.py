"""`python -m actors.cli`: the nannytree command."""

import sys

from ._parser import main

sys.exit(main())
