"""Model profiles and cost: what a model can do, what it costs, its limits.

A profile is a JSON file, ``[model-id].json`` (percent-encoded: `profile_file_name`), with
the sections ``basic_info``, ``capabilities``, ``features`` and the optional ``pricing``,
``limitations`` and ``notes``, validated into a `ModelProfile`. glassagent ships profiles of
the models it names (Gemini 2.5 Flash, Pro and Flash-Lite, gpt-4o-mini, claude-sonnet-4-5,
llama3.1:8b and the embedded Qwen2.5-Coder-0.5B), one for each built-in provider's default
model; users add their own from directories (an ``ai_profile`` folder in the working folder,
``GLASSAGENT_PROFILE_PATH``, ``profile_dirs=``) and packages from the
``glassagent.profiles`` entry-point group. `get_profile` finds one, `list_profiles` lists
them, `BaseLLMClient.profile` is the client's own. Unknown keys are kept
(`ModelProfile.unknown_fields`); an invalid file is skipped with a `ProfileWarning`, and only
a lookup of its own model raises.

`cost_of` prices a call's `Usage` by the profile's pricing, thinking and prompt-cache tokens
included, falling back to genai-prices (``pip install "glassagent[prices]"``) for a model
whose profile has no pricing; a `Cost` says which source priced it, or why nothing could.

```python
from glassagent.profiles import cost_of, get_profile

profile = get_profile("gemini-2.5-flash")
print(profile.capabilities.context_length, profile.features.supports_function_calling)
print(cost_of(result.usage, profile))  # e.g. 0.0031 USD (profile)
```

Profiles are read on the first lookup (never by ``import glassagent``) and kept for the
process.
"""

from glassagent._core.cost import Cost, CostSource
from glassagent._core.pricing import client_cost, cost_of
from glassagent._core.profiles.load import (
    AI_PROFILE_DIR,
    ProfileDirs,
    ProfileList,
    ProfileProblem,
    ProfileWarning,
    get_profile,
    list_profiles,
    load_profile,
    reload_profiles,
)
from glassagent._core.profiles.model import (
    BasicInfo,
    Capabilities,
    Features,
    Limitations,
    Modality,
    ModelProfile,
    Pricing,
    PricingTier,
    profile_file_name,
)
from glassagent._public import publish

__all__ = [
    "AI_PROFILE_DIR",
    "BasicInfo",
    "Capabilities",
    "Cost",
    "CostSource",
    "Features",
    "Limitations",
    "Modality",
    "ModelProfile",
    "Pricing",
    "PricingTier",
    "ProfileDirs",
    "ProfileList",
    "ProfileProblem",
    "ProfileWarning",
    "client_cost",
    "cost_of",
    "get_profile",
    "list_profiles",
    "load_profile",
    "profile_file_name",
    "reload_profiles",
]

publish(__name__, globals(), __all__)
