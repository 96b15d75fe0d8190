"""Whole trees on real processes: each feature as a user of the API meets it."""
