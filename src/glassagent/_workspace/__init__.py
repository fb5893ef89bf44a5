"""Implementation package; import from `glassagent.workspace` instead."""
