"""MkDocs hook: the reference pages generated from the code (filled in by the reference work)."""
