"""The design documents' synchronous AI-client contract, over any glassagent client.

An application written against the design's provider rules (``ai_client_rule.txt``) calls
``send_request``, ``send_request_stream``, ``handle_function_calls``... with its standard
history and context dicts, and reads the design's event dicts. `ContractClient` gives those
methods over any `BaseLLMClient`; `contract_class` makes a no-argument client class of the
design's form for a glassagent provider; `find_ai_clients` and `load_ai_client` read an
application's ``ai_client/<provider>/<provider>_client.py`` folders.

```python
client = ContractClient("gemini")   # GEMINI_API_KEY from the environment
response = client.send_request("gemini-2.5-flash", history, "Hello", [])
print(client.extract_response_text(response))
```
"""

from glassagent._contract.client import ContractClient
from glassagent._contract.folder import (
    AIClientPlugin,
    class_name,
    contract_class,
    find_ai_clients,
    load_ai_client,
)
from glassagent._contract.stream import ContractResponse, ContractStream
from glassagent._public import publish

__all__ = [
    "AIClientPlugin",
    "ContractClient",
    "ContractResponse",
    "ContractStream",
    "class_name",
    "contract_class",
    "find_ai_clients",
    "load_ai_client",
]

publish(__name__, globals(), __all__)
