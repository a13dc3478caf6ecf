"""Test-wide settings: nothing may touch a model hub, and tests never listen beyond loopback."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# litellm fetches a price list from the internet at import unless told to use its bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from skip_policy import pytest_configure  # noqa: E402, F401  (tests/ is on sys.path: CI fails on unlisted skips)
