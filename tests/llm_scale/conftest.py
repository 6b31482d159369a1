"""The scale tests export decoders of 0.5 and 1 billion parameters with torch and transformers: they run in
``tox -e llm-scale``, which installs them; where torch or transformers is missing they are not collected."""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    collect_ignore_glob = ["test_*.py"]
