"""The simulator (supervision.simulate): the core in virtual time, with fault models."""
