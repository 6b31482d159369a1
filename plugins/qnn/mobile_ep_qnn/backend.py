"""The QNN backend: options, rule registry, QDQ units, ORT's QNN partition filter and the compile hook."""

from __future__ import annotations

import dataclasses
from typing import Literal

from mobile_ep import (
    SUPPORTED,
    Backend,
    PartitionView,
    RuleContext,
    RuleRegistry,
    Support,
    check_option_types,
)
from mobile_ep.contract import package_files

from . import __version__, ep
from . import rules as _rules

__all__ = ["QnnBackend", "QnnOptions", "HTP_ARCHS", "QDQ_OPS"]

#: The ``htp_arch`` values the EP parses (0: as the SoC says).
HTP_ARCHS = (0, 68, 69, 73, 75, 81)

#: Op types grouped into QDQ node units (DequantizeLinear -> op -> QuantizeLinear): the QNN EP's own list of
#: ORT's QDQ selectors (misc, unary, binary, variadic, ... ops); the EP takes or leaves each unit whole.
QDQ_OPS = frozenset({
    # misc (Q/DQ dropped around them)
    "Expand", "Flatten", "Gather", "GatherElements", "MaxPool", "Reshape", "Resize", "Squeeze", "Tile", "Transpose",
    "Unsqueeze",
    # only a DequantizeLinear before them
    "ArgMax", "ArgMin", "NonZero",
    # unary
    "Abs", "Asin", "Atan", "AveragePool", "Ceil", "Cos", "DepthToSpace", "Elu", "Erf", "Exp", "Floor", "Gelu",
    "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid", "HardSwish", "LRN", "LeakyRelu", "Log", "LogSoftmax",
    "LpNormalization", "Neg", "ReduceL2", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd",
    "ReduceSum", "Relu", "Round", "Sigmoid", "Sign", "Sin", "Slice", "Softmax", "Softplus", "SpaceToDepth", "Sqrt",
    "Tanh", "Clip",
    # binary, variadic and the rest
    "Add", "Div", "GridSample", "Mul", "Pow", "PRelu", "Sub", "Concat", "Max", "Min", "Split", "Conv",
    "ConvTranspose", "Einsum", "Reciprocal", "MatMul", "Gemm", "InstanceNormalization", "LayerNormalization",
    "BatchNormalization", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Where", "Pad", "TopK",
    "CumSum", "ScatterElements", "RMSNormalization",
})

Precision = Literal["float32", "fp16", "quantized"]
BackendType = Literal["htp", "cpu", "gpu"]


@dataclasses.dataclass(frozen=True)
class QnnOptions:
    """Options of the QNN backend: the target SoC and the QNN EP's provider options."""

    soc_model: int = dataclasses.field(
        default=60,
        metadata={"help": "QNN SoC model id of the target (the EP's soc_model, e.g. 36, 43, 57, 60, 69); "
                          "compiled context binaries are for this SoC. 0 lets the EP choose (many graphs "
                          "then fail to finalize on the simulator)."},
    )
    htp_arch: int = dataclasses.field(
        default=0,
        metadata={"help": "HTP architecture (the EP's htp_arch: 68, 69, 73, 75, 81; 0 = as the SoC says)."},
    )
    precision: Precision = dataclasses.field(
        default="float32",
        metadata={"help": "float32: float models as the EP runs them; fp16: the EP's enable_htp_fp16_precision; "
                          "quantized: the model is QDQ (8/16-bit) and compiled results are checked with "
                          "quantization-sized tolerances."},
    )
    backend_type: BackendType = dataclasses.field(
        default="htp",
        metadata={"help": "QNN backend: htp (the NPU; a simulator on x86-64 Linux); gpu or cpu only when the "
                          "installed onnxruntime-qnn wheel ships their library. Predictions are the HTP's."},
    )
    offload_graph_io_quantization: bool = dataclasses.field(
        default=True,
        metadata={"help": "The EP's offload_graph_io_quantization: the QuantizeLinear of a graph input and the "
                          "DequantizeLinear of a graph output run on the CPU."},
    )

    def __post_init__(self) -> None:
        check_option_types(self)
        if isinstance(self.soc_model, bool) or not isinstance(self.soc_model, int) or self.soc_model < 0:
            raise ValueError(f"soc_model must be a QNN SoC model id (an integer >= 0), got {self.soc_model!r}")
        if self.htp_arch not in HTP_ARCHS:
            raise ValueError(f"htp_arch must be one of {', '.join(map(str, HTP_ARCHS))}, got {self.htp_arch!r}")
        if self.backend_type != "htp" and ep.package_dir() is not None and not ep.backend_available(self.backend_type):
            raise ValueError(f"backend_type={self.backend_type}: the installed onnxruntime-qnn has no "
                             f"{ep.BACKEND_LIBRARIES[self.backend_type]}")


class QnnBackend(Backend):
    """Qualcomm NPUs (HTP) as ONNX Runtime's QNN execution provider sees a model."""

    name = "qnn"
    version = __version__
    description = ("Qualcomm NPUs (QNN HTP) through ONNX Runtime's QNN execution provider (onnxruntime-qnn): its op "
                   "builders' checks, QDQ node units and partition filter, checked against the real EP. NHWC; "
                   "static shapes only.")
    preferred_layout = "NHWC"
    groups_by_explicit_inputs = True
    platform = "android"
    rules_from = "onnxruntime-qnn 2.7 (QNN SDK 2.51)"
    Options = QnnOptions
    plugin_api = 1

    options: QnnOptions

    def build_rules(self) -> RuleRegistry:
        return RuleRegistry.from_package(_rules)

    def rewrites(self):
        """Legalizations into what the QNN EP takes (each applied only where the result is claimed): Gemm scales
        folded into its constants (exact); a lone Erf as a rational function (approximate: at most 4e-7
        absolute error in float32), since the EP takes Erf only inside a GELU pattern."""
        from mobile_ep import rewrites as r

        return (r.GemmFoldScales(), r.ErfApproximation())

    def qdq_ops(self) -> frozenset[str]:
        """Op types grouped into QDQ node units, as ORT's QDQ selectors group them for the QNN EP."""
        return QDQ_OPS

    def accept_partition(self, partition: PartitionView, ctx: RuleContext) -> Support:
        """ORT's QNN EP drops a partition that is a single QuantizeLinear or DequantizeLinear.  A partition that reads
        only constants (the Casts of the constants of a function body onnxruntime inlined) onnxruntime-qnn 2.7 takes
        and then fails the session on ("Having zero graph inputs is not supported"): refused, saying so."""
        nodes = partition.nodes
        if len(nodes) == 1 and nodes[0].op_type in ("QuantizeLinear", "DequantizeLinear") and nodes[0].domain in ("", "ai.onnx"):
            return Support.no("a lone QuantizeLinear/DequantizeLinear: the QNN EP does not take a partition of one")
        if all(value is None or ctx.is_constant(value) for value in partition.inputs):
            return Support.no("a partition reading only constants: onnxruntime-qnn 2.7 takes it and then fails the "
                              "session ('Having zero graph inputs is not supported')")
        return SUPPORTED

    # -- the real EP ------------------------------------------------------------------------------------
    def real_ep(self):
        """onnxruntime-qnn's QNN EP with the provider options of this backend's options (``check --against-ep``)."""
        return ep.EP_NAME, ep.provider_options(self.options)

    def execution_provider(self):
        """The real QNN EP with this backend's options (for the oracle and for compiling)."""
        return ep.execution_provider(self.options)

    def compile_with_ep(self, source, target, workdir, options=None):
        """``convert --compile``: onnxruntime-qnn compiles the model into its EPContext model and QNN context
        binary, checked on the HTP simulator (:func:`mobile_ep_qnn.compile.compile_with_ep`)."""
        from .compile import compile_with_ep

        return compile_with_ep(self, source, target, workdir)

    def app_files(self) -> dict[str, bytes]:
        """The Android snippet loading the EPContext model with ORT Mobile's QNN EP (written by ``--compile``).

        Not the compile contract's ``runtime_adapter``: the QNN payload is the EP's own, run by ORT Mobile."""
        return package_files("mobile_ep_qnn", "adapter")
