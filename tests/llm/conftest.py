"""The llm tests export tiny decoders with torch and transformers (the ``llm`` tox env has them)."""

from __future__ import annotations

import pathlib
import sys

import pytest

pytest.importorskip("torch", reason="the llm tests export decoders with torch (tox -e llm)")
pytest.importorskip("transformers", reason="the llm tests export transformers decoders (tox -e llm)")
sys.path.insert(0, str(pathlib.Path(__file__).parent))
