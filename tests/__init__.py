"""nannytree's tests, one folder per layer; the folder says the layer, the file the
feature:

- core/: the pure decision core (supervision/), on a fake executor and clock;
- sim/: the simulator (supervision.simulate);
- spec/: the spec language (supervision/spec/); config/: tree files (supervision/config/);
- shell/, process/, launcher/, runtime/: the live layers of actors/, each alone;
- remote/: remote subtrees (FakeEngine, a one-node Ray, mini-clusters);
- cli/: the nannytree command end to end; live/: whole trees on real processes;
- docs/: the documentation's pages, site, tutorials and how-to guides;
- layers/: the house's rules read from the source (import floors, a pure core);
- chaos/, fuzz/: live trees under random faults, every input fuzzed (also `python -m`);
- support/: the helpers they share; targets/: what their children run (lean: a
  child imports it); benchmarks/: measurements, not tests.

conftest.py here holds the fixtures every folder uses and the order of the xdist
groups; a folder's own conftest.py, what only it needs.
"""
