"""The nannytree command (actors/cli/) end to end on real `run` processes."""
