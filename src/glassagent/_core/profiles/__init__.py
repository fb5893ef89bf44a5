"""Model profiles: their files, validated, and where they are found (see `glassagent.profiles`)."""
