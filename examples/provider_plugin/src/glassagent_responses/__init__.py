"""A glassagent provider for OpenAI's Responses API, installed as a plugin.

Installing this package registers the provider ``openai_responses`` through the
``glassagent.providers`` entry-point group::

    from glassagent.llm import create_llm_client

    client = create_llm_client("openai_responses", model="gpt-5-mini")
"""

from glassagent_responses.client import ResponsesClient
from glassagent_responses.options import ResponsesOptions
from glassagent_responses.wire import ResponsesReader, ResponsesWire

__all__ = ["ResponsesClient", "ResponsesOptions", "ResponsesReader", "ResponsesWire"]
