"""OpenTelemetry spans of a run, from its events (public face: `glassagent.otel`).

Needs the ``otel`` extra (the OpenTelemetry API only); nothing here is imported by
``import glassagent``.
"""

try:
    import opentelemetry.trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - tested in a subprocess without the API
    raise ImportError(
        'glassagent.otel needs the OpenTelemetry API: pip install "glassagent[otel]"'
    ) from exc
