"""The house's rules read from the source: import floors, a pure core, one home per name."""
