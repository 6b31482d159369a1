"""mobile-ep backend for Android NNAPI, as ONNX Runtime's NNAPI execution provider sees a model.

The rules in :mod:`mobile_ep_nnapi.rules` reproduce the support checks of ORT's NNAPI op builders
(``onnxruntime/core/providers/nnapi/nnapi_builtin/builders``), one module per op or op family, so that
``mobile-ep check --ep nnapi`` predicts the partitions ORT Mobile makes on a device.
"""

from __future__ import annotations

from .backend import NnapiBackend, NnapiOptions, feature_level_for_api

__version__ = "0.1.0"

__all__ = ["__version__", "NnapiBackend", "NnapiOptions", "feature_level_for_api"]
