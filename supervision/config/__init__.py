"""Tree files: a TOML document read into the spec language (supervision/spec/).

`_load.py` walks the document into a `SupervisorSpec` (`load_tree`) and reads its
`[engine]` table (`load_engine`); `_vars.py` substitutes `${NAME}` in its strings.
Pure: the caller reads the file. Imports the spec language and supervision's
vocabulary, never the core. Its public names are supervision's.
"""
