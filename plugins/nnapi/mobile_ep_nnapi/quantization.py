"""How ``mobile-ep quantize`` quantizes a model for NNAPI (the ``mobile_ep_quantization_config`` hook).

What ORT's NNAPI EP takes as quantized (docs/ops-nnapi.md): uint8 activations with per-tensor scale and
zero point; int8 (symmetric) or uint8 weights; per-channel scales only for an int8 Conv weight, from
feature level 3 (Android API 29); int32 biases with scale input × weight.  So: QDQ format, QUInt8
activations, QInt8 symmetric weights, per tensor, with the Conv weights made per channel (axis 0) through
``TensorQuantOverrides`` on feature level 3 and later.
"""

from __future__ import annotations

from typing import Any


def quantization_config(backend: Any, model_path: str, calibration_reader: Any) -> Any:
    """The ``onnxruntime.quantization.StaticQuantConfig`` for *backend* (an NNAPI backend)."""
    import onnx_ir as ir
    from onnxruntime.quantization import QuantFormat, QuantType, StaticQuantConfig

    extra: dict[str, Any] = {"WeightSymmetric": True, "ActivationSymmetric": False}
    if backend.options.feature_level >= 3:
        graph = ir.load(model_path).graph
        conv_weights = sorted({n.inputs[1].name for n in graph
                               if n.op_type == "Conv" and n.domain in ("", "ai.onnx") and len(n.inputs) > 1
                               and n.inputs[1] is not None and n.inputs[1].is_initializer()})
        if conv_weights:
            extra["TensorQuantOverrides"] = {name: [{"axis": 0}] for name in conv_weights}
    return StaticQuantConfig(calibration_reader, quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                             weight_type=QuantType.QInt8, per_channel=False, extra_options=extra)
