"""Remote subtrees (actors/_remote/, actors.ray): FakeEngine, one-node Ray, mini-clusters."""
