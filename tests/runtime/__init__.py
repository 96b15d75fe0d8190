"""The actor runtime (actors/_runtime/): pooled actors, futures, flags."""
