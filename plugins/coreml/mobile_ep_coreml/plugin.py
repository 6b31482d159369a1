"""mobile-ep plugin module: registers the Core ML backend (entry point ``coreml`` in group ``mobile_ep``).

Importing this module must stay cheap: coremltools is only imported by the compile step.
"""

from __future__ import annotations

from mobile_ep import hookimpl

from .backend import CoreMLBackend


@hookimpl
def mobile_ep_register_backends(register):  # type: ignore[no-untyped-def]
    """Register the Core ML backend with its default options."""
    register(CoreMLBackend())


@hookimpl
def mobile_ep_quantization_config(backend, model_path, calibration_reader):  # type: ignore[no-untyped-def]
    """Weight-only int8 (per channel for Conv weights): activations stay float."""
    if not isinstance(backend, CoreMLBackend):
        return None
    from .quantization import quantization_config

    return quantization_config(backend, model_path, calibration_reader)
