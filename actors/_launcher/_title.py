"""Process titles that name the tree: `nannytree: launcher [shop]` and
`nannytree: guardian [shop]` in `ps`, where every launcher would otherwise read
`python -P -m actors._launcher._main 5 7`. A Python child forked from the launcher
is titled `nannytree: child [shop]` until its target sets a title of its own, not
left with the launcher's. Without the setproctitle package, titles stay as they were.
"""

from __future__ import annotations

import os

TITLE_ENV = "NANNYTREE_TREE_TITLE"  # the tree's name, from the host to the launcher only
TITLE_LIMIT = 64  # characters of a tree's or child's name in a title

_tree = ""


def take_tree_name() -> str:
    """The tree's name the host passed, taken out of the environment (no child
    inherits it)."""
    global _tree
    _tree = _clean(os.environ.pop(TITLE_ENV, ""))
    return _tree


def set_title(role: str) -> None:
    """Title this process `nannytree: ROLE [TREE]` (ROLE alone without a tree name)."""
    try:
        from setproctitle import setproctitle
    except ImportError:
        return
    title = f"nannytree: {_clean(role)}"
    setproctitle(f"{title} [{_tree}]" if _tree else title)


def _clean(name: str) -> str:
    """A name fit for a title: printable, one line, bounded."""
    return "".join(c if c.isprintable() else "?" for c in name)[:TITLE_LIMIT]
