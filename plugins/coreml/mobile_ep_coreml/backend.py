"""The Core ML backend: options, rule registry, ONNX Runtime's CoreML partition filter, and the compile
contract (MIL lowering to ``.mlpackage`` payloads, their host emulator and the Swift runtime adapter)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np

import mobile_ep
from mobile_ep import (
    Backend,
    CompiledPartition,
    NodeUnit,
    PartitionView,
    RuleContext,
    RuleRegistry,
    Support,
    check_option_types,
    op_label,
)

from . import __version__

__all__ = ["CoreMLBackend", "COREML_VERSION"]

ModelFormat = Literal["MLProgram", "NeuralNetwork"]
ComputeUnits = Literal["ALL", "CPUOnly", "CPUAndGPU", "CPUAndNeuralEngine"]
DeploymentTarget = Literal["iOS15", "iOS16", "iOS17", "iOS18"]
ComputePrecision = Literal["float32", "float16"]

#: Core ML version guaranteed by each minimum deployment target (macOS 12/13/14/15 are the same versions).
COREML_VERSION: dict[str, int] = {"iOS15": 5, "iOS16": 6, "iOS17": 7, "iOS18": 8}


def _option(default: Any, help_text: str) -> Any:
    """A field of :class:`CoreMLBackend.Options` with its ``metadata["help"]``, the text ``mobile-ep list -v``
    shows next to the option."""
    return dataclasses.field(default=default, metadata={"help": help_text})


class CoreMLBackend(Backend):
    """ONNX Runtime's CoreML execution provider (iOS / macOS), as of ORT 1.30."""

    name: ClassVar[str] = "coreml"
    version: ClassVar[str] = __version__
    description: ClassVar[str] = (
        "Apple Core ML through ONNX Runtime's CoreML EP (NeuralNetwork or ML Program, iOS 15+)"
    )
    preferred_layout: ClassVar[mobile_ep.Layout] = "NCHW"
    platform: ClassVar[str] = "ios"
    rules_from: ClassVar[str] = "onnxruntime 1.30"
    #: The mobile-ep plugin API this backend is written against.
    plugin_api: ClassVar[int] = 1

    @dataclasses.dataclass(frozen=True)
    class Options:
        """Settings of the CoreML execution provider (ORT provider options) and of the target devices."""

        model_format: ModelFormat = _option(
            "MLProgram",
            "Core ML model type ORT builds (provider option ModelFormat; ORT's own default is "
            "NeuralNetwork). MLProgram supports more ops and float16.",
        )
        require_static_input_shapes: bool = _option(
            False,
            "Only claim nodes whose inputs have fully static shapes "
            "(provider option RequireStaticInputShapes=1).",
        )
        compute_units: ComputeUnits = _option(
            "ALL",
            "Devices Core ML may use (provider option MLComputeUnits). Does not change which "
            "nodes ORT claims; CPUAndNeuralEngine fails on devices without a Neural Engine.",
        )
        deployment_target: DeploymentTarget = _option(
            "iOS15",
            "Oldest iOS version the app supports (iOS15..iOS18 = Core ML 5..8). Rules that "
            "ORT gates on the Core ML version claim only what every supported device runs.",
        )

        compute_precision: ComputePrecision = _option(
            "float32",
            "Precision of compiled partitions (--compile): float32, or float16 (ML Program: "
            "the program computes in fp16, as coremltools' default; NeuralNetwork: fp16 weights).",
        )
        max_dynamic_dim: int = _option(
            4096,
            "Compiled partitions: the upper bound of the flexible range (1..N) each dynamic "
            "input dim gets (ML Program needs a bounded range).",
        )
        enumerated_dims: str = _option(
            "",
            "Compiled partitions: instead of ranges, comma-separated sizes (e.g. 1,2,4) each "
            "dynamic input dim may take, declared as enumerated shapes.",
        )
        fold_qdq: bool = _option(
            False,
            "convert: turn a QDQ model into the float graph it describes (weights dequantized into float32 "
            "initializers, each activation QuantizeLinear/DequantizeLinear pair into the same rounding in float "
            "ops) so ORT's CoreML EP, which has no Q/DQ support, can take it (docs/quantized.md).",
        )

        def __post_init__(self) -> None:
            check_option_types(self)
            if isinstance(self.max_dynamic_dim, bool) or not isinstance(self.max_dynamic_dim, int) \
                    or self.max_dynamic_dim < 1:
                raise ValueError(f"max_dynamic_dim={self.max_dynamic_dim!r}: expected a positive integer")
            sizes = [s.strip() for s in self.enumerated_dims.split(",") if s.strip()]
            if any(not s.isdigit() or int(s) < 1 for s in sizes):
                raise ValueError(f"enumerated_dims={self.enumerated_dims!r}: expected positive sizes such as 1,2,4")

        @property
        def coreml_version(self) -> int:
            """The Core ML version every device of the deployment target has (5 for iOS 15)."""
            return COREML_VERSION[self.deployment_target]

        @property
        def mlprogram(self) -> bool:
            return self.model_format == "MLProgram"

    def build_rules(self) -> RuleRegistry:
        from . import rules

        return RuleRegistry.from_package(rules)

    def rewrites(self) -> tuple[mobile_ep.Rewrite, ...]:
        """Legalizations: ops ORT's CoreML EP lacks (in one or both formats) with exact decompositions."""
        from mobile_ep import rewrites as r

        from .qdq import FoldDequantizeLinear

        return (
            r.SumToAdd(),
            r.MeanToAddDiv(),
            r.HardSwishToHardSigmoid(),
            r.ExpandToMul(),
            r.UnsqueezeToReshape(),
            r.FlattenToReshape(),
            r.NegToMul(),
            r.SplitToSlices(),
            r.BatchNormToMulAdd(),
            r.LayerNormToPrimitives(),
            r.LRNToConv(),
            r.InstanceNormToPrimitives(),
            r.AbsToRelu(),
            r.GemmFoldScales(),
            r.ConvTransposeToDepthToSpace(),
            r.ConvTransposeToConv(),
            r.ConvTo2D(),
            r.PoolCeilToPads(),
            r.PadToGather(),
            r.LSTMToSteps(),
            r.GRUToSteps(),
            r.Rank5TransposeMerge(),
            r.Rank5GatherSplit(),
            r.Rank5BinaryMerge(),
            r.EmptyInputDrop(),
            r.ReduceL2ToMean(),
            r.SoftmaxIsNaN(),
            r.BoolMoveViaFloat(),
            r.RunningCountViaFloat(),
            r.GatherElementsOfUniformConstant(),
        ) + ((FoldDequantizeLinear(),) if self.options.fold_qdq else ())

    def qdq_ops(self) -> frozenset[str]:
        """None: the CoreML EP is not QDQ-aware (it passes no NodeUnit map to the partitioner)."""
        return frozenset()

    # -- partitions -----------------------------------------------------------------------------------
    def is_trivial(self, unit: NodeUnit, ctx: RuleContext) -> bool:
        """Whether ORT counts the node as "trivial" (a builder's ``IsTrivial``)."""
        from .rules._base import CoreMLRule

        rule = self.rules.lookup(unit.domain, unit.op_type, ctx.node_opset(unit.target))
        return isinstance(rule, CoreMLRule) and rule.is_trivial(unit.target)

    def accept_partition(self, partition: PartitionView, ctx: RuleContext) -> Support:
        """Drop a partition made only of trivial ops (ORT ``CoreMLExecutionProvider::GetCapability``)."""
        if any(not self.is_trivial(unit, ctx) for unit in partition.units):
            return mobile_ep.SUPPORTED
        ops = ", ".join(sorted({op_label(unit.target) for unit in partition.units}))
        return Support.no(
            f"it holds only trivial ops ({ops}); ORT's CoreML EP drops such partitions because the "
            "CPU/Core ML round trip costs more than running them on the CPU"
        )

    def provider_options(self) -> dict[str, str]:
        """The options as ONNX Runtime CoreML provider options (for reports and sessions)."""
        options = self.options
        result = {"ModelFormat": options.model_format, "MLComputeUnits": options.compute_units}
        if options.require_static_input_shapes:
            result["RequireStaticInputShapes"] = "1"
        return result

    # -- the compile contract ---------------------------------------------------------------------------
    def compile(self, partition: PartitionView, ctx: RuleContext) -> CompiledPartition:
        """Lower *partition* to a MIL program and save it as a zipped ``.mlpackage`` (ML Program for the
        deployment target, or NeuralNetwork), in the chosen compute precision."""
        from .compiler import compile_partition

        return compile_partition(self, partition, ctx)

    def emulate(self, payload: CompiledPartition, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the payload's saved model on this machine with Core ML's semantics (see :mod:`.emulator`)."""
        from .compiler import emulate

        return emulate(payload, inputs)

    def package_functions(self, payloads: Mapping[str, CompiledPartition], path: Any
                          ) -> tuple[Any, dict[str, CompiledPartition]]:
        """The ML Program *payloads* (by function name) as one multifunction ``.mlpackage`` at *path* +
        ``.mlpackage``, each weight they share stored once; per function, the payload that runs it
        (see :mod:`.functions`)."""
        from .functions import package_functions

        return package_functions(payloads, path)

    def runtime_adapter(self) -> dict[str, bytes]:
        """The Swift sources that run payloads on iOS / macOS next to ONNX Runtime."""
        from mobile_ep.contract.compile import package_files

        return package_files("mobile_ep_coreml", "runtime")
