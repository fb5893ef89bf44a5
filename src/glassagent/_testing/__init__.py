"""Test doubles: scripted, function and replaying clients (see `glassagent.testing`)."""
