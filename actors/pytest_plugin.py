"""The pytest plugin's first name, kept for `pytest -p actors.pytest_plugin` (and an
install whose entry point still names it): the same module as
`actors.testing.pytest_plugin`, so that pytest never registers its hooks twice."""

import sys

from .testing import pytest_plugin

sys.modules[__name__] = pytest_plugin
