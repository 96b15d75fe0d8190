"""Fuzzers of every input a stranger writes (issue 23), run outside the suite:

    python -m tests.fuzz TARGET [--inputs N] [--seconds S] [--seed N] [--out DIR]

TARGET is one of toml, request, frames, sd_notify, events, control, or all. Each
input runs under a deadline of CPU time (1 s; 30 s for control, a live tree), and
a wall deadline for an answer that never comes (30 s; 120 s for control); the report
gives inputs per second, the RSS at the start, after the first twentieth, at
half and at the end, and each finding with its input (saved under --out). The
suite runs the same targets briefly under hypothesis (tests/fuzz/test_inputs.py).
No module here is named test_*, so pytest collects nothing from this folder.
"""
