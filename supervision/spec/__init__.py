"""The spec language: what a supervisor is told to run, and every check of it.

`_spec.py` holds `ChildSpec` and `SupervisorSpec`, frozen and validated when built;
the types of their fields and the checks beside them (`_probes.py` health probes,
`_sockets.py` sockets and users, `_placement.py` where a subtree runs, `_limits.py`
resource limits, `_restart_limit.py` a child's own limit, `_daemonize.py` a command
that would fork itself away). Imports only supervision's vocabulary (`_errors.py`,
`_reasons.py`); the core (supervision/_core.py) reads these specs, and the file
format (supervision/config/) builds them. Their public names are supervision's.
"""
