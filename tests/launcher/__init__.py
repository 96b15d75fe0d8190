"""The launcher process (actors/_launcher/) with real processes."""
