"""Evaluations of agents over datasets (documented in `glassagent.evals`)."""
