"""Keeping and showing runs: JSON Lines recordings, replay, redaction and the notebook view."""
