"""The live shell (actors/_shell/): supervisors and workers as actors, without a real tree."""
