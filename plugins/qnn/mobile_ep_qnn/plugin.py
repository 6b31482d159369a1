"""The entry-point module of mobile-ep-qnn: registers the QNN backend."""

from __future__ import annotations

from mobile_ep import hookimpl

from .backend import QnnBackend


@hookimpl
def mobile_ep_register_backends(register):
    """Register the QNN backend with its default options (HTP, soc_model 60)."""
    register(QnnBackend())


@hookimpl
def mobile_ep_quantization_config(backend, model_path, calibration_reader):
    """What ``mobile-ep quantize --ep qnn`` uses: onnxruntime.quantization's own QNN configuration
    (``get_qnn_qdq_config``: QDQ, uint8 activations and weights, the overrides the QNN EP's ops need)."""
    if not isinstance(backend, QnnBackend):
        return None
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    return get_qnn_qdq_config(str(model_path), calibration_reader)
