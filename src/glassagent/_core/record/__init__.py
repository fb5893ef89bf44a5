"""Recordings of runs: JSON Lines, the redact hook, timelines (see `glassagent.events`)."""
