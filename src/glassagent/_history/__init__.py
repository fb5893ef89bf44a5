"""Implementation of `glassagent.history`: the conversation tree, its formats and storage."""
