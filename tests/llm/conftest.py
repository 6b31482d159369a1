"""The llm tests export tiny decoders with torch and transformers: they run in ``tox -e llm``, which installs
them; where torch or transformers is missing (the default envs) they are not collected."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    collect_ignore_glob = ["test_*.py"]
sys.path.insert(0, str(pathlib.Path(__file__).parent))
