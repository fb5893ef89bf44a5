"""Implementation package; import from the public modules instead."""
