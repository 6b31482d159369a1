"""The entry-point module of mobile-ep-nnapi: registers the NNAPI backend."""

from __future__ import annotations

from mobile_ep import hookimpl

from .backend import NnapiBackend


@hookimpl
def mobile_ep_register_backends(register):
    """Register the NNAPI backend with its default options (Android API 31, as ORT host builds assume)."""
    register(NnapiBackend())


@hookimpl
def mobile_ep_quantization_config(backend, model_path, calibration_reader):
    """uint8 activations, int8 weights, per tensor (per channel for Conv weights from feature level 3)."""
    if not isinstance(backend, NnapiBackend):
        return None
    from .quantization import quantization_config

    return quantization_config(backend, model_path, calibration_reader)
