"""Tree files: a TOML document read into the spec language (supervision/spec/).

`_load.py` walks the document's tables into a `SupervisorSpec` (`load_tree`);
`_read.py` reads and checks each value a key takes, at its table path; `_engine.py`
reads the `[engine]` table (`EngineConfig`, `load_engine`); `_keys.py` lists the
keys each table accepts and the limits of a file; `_errors.py` says what a file got
wrong (`ConfigError`); `_vars.py` substitutes `${NAME}` in its strings;
`_env_file.py` parses the `env_file`s (systemd's format) and merges them under `env`;
`_foreign.py` names nannytree's key for a key of supervisord's or systemd's. Pure: the
caller reads the file, and the env files (`load_tree(read_env_file=...)`). Imports
the spec language and supervision's vocabulary, never the core. Its public names are supervision's.
"""
