"""Model profiles and cost (documented in `glassagent.profiles`)."""
