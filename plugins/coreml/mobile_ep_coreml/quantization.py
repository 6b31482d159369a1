"""How ``mobile-ep quantize`` quantizes a model for Core ML (the ``mobile_ep_quantization_config`` hook).

Weight-only int8: onnxruntime.quantization quantizes the model (int8 symmetric weights, per channel for Conv
weights along their output channels), and only the weights' DequantizeLinear nodes are kept
(:class:`mobile_ep.quantize.WeightsOnly`): activations stay float.  ``convert -O coreml.fold_qdq=true`` then
gives ORT's CoreML EP float weights, and ``--compile`` (iOS 16+) stores them as int8 with
``constexpr_affine_dequantize`` - Core ML's weight compression.
"""

from __future__ import annotations

from typing import Any


def quantization_config(backend: Any, model_path: str, calibration_reader: Any) -> Any:
    import onnx_ir as ir
    from onnxruntime.quantization import QuantFormat, QuantType, StaticQuantConfig

    from mobile_ep.quantize import WeightsOnly

    graph = ir.load(model_path).graph
    conv_weights = sorted({n.inputs[1].name for n in graph
                           if n.op_type == "Conv" and n.domain in ("", "ai.onnx") and len(n.inputs) > 1
                           and n.inputs[1] is not None and n.inputs[1].is_initializer()})
    extra: dict[str, Any] = {"WeightSymmetric": True, "QDQKeepRemovableActivations": True}
    if conv_weights:
        extra["TensorQuantOverrides"] = {name: [{"axis": 0}] for name in conv_weights}
    return WeightsOnly(StaticQuantConfig(calibration_reader, quant_format=QuantFormat.QDQ,
                                         activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                                         per_channel=False, extra_options=extra))
