"""The process port (actors/_process/): the launcher's client, output streams."""
