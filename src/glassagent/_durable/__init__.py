"""Durable runs on DBOS (public face: `glassagent.durable`); needs the ``durable`` extra."""
