"""Apple Core ML backend for mobile-ep.

Models ONNX Runtime's CoreML execution provider: which nodes it claims (NeuralNetwork or ML Program
format, for a minimum iOS deployment target) and which partitions it keeps; and compiles partitions
itself (MIL lowering to ``.mlpackage`` payloads, an emulator of the saved packages, a Swift runtime
adapter).  The plugin entry point is :mod:`mobile_ep_coreml.plugin`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .backend import CoreMLBackend  # noqa: E402  (after __version__, which the backend reports)

__all__ = ["__version__", "CoreMLBackend"]
