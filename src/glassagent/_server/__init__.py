"""The direct invoke API: one agent turn over HTTP (documented in `glassagent.server`)."""
