"""The embedded local model (public face: `glassagent.local`)."""
