"""The documentation: its reference pages, built site, tutorials and how-to guides."""
