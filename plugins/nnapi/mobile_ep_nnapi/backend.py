"""The NNAPI backend: options, rule registry, QDQ units, stop ops and ORT's partition filter."""

from __future__ import annotations

import collections
import dataclasses
import functools
import importlib
import inspect
import operator
import pkgutil
from collections.abc import Iterable, Mapping
from typing import Literal

import numpy as np
import onnx_ir as ir

import mobile_ep
from mobile_ep import (
    SUPPORTED,
    Backend,
    PartitionView,
    RuleContext,
    RuleRegistry,
    Support,
    check_option_types,
    op_label,
)

from . import rules as _rules_package
from .rules._quant import QDQ_ACCEPTED_OPS, QDQ_GROUPED_OPS

__all__ = ["NnapiBackend", "NnapiOptions", "feature_level_for_api", "MIN_API_LEVEL", "MAX_API_LEVEL"]

#: ORT's NNAPI EP leaves everything to the CPU below Android 8.1 (``ORT_NNAPI_MIN_API_LEVEL``).
MIN_API_LEVEL = 27
#: Android 15, the last release shipping NNAPI (deprecated there).
MAX_API_LEVEL = 35

# NNAPI feature level of each Android API level.  Feature levels 1-5 are tied to API 27-31; from Android
# 12 on the NNAPI runtime is updatable and reports its own level (12L keeps 5, 13 → 6, 14 → 7, 15 → 8).
_FEATURE_LEVELS = {27: 1, 28: 2, 29: 3, 30: 4, 31: 5, 32: 5, 33: 6, 34: 7, 35: 8}

CompileOps = Literal["ort", "extended"]
Preference = Literal["fast_single_answer", "sustained_speed", "low_power"]

#: Single-node partitions ORT's NNAPI EP drops because the op would only copy data (helper.cc).
TRIVIAL_SINGLE_OPS = frozenset({"Reshape", "Flatten", "Identity"})


def feature_level_for_api(api_level: int) -> int:
    """The NNAPI feature level (1-8) an Android API level (27-35) provides."""
    try:
        return _FEATURE_LEVELS[api_level]
    except KeyError:
        raise ValueError(
            f"api_level must be an Android API level from {MIN_API_LEVEL} to {MAX_API_LEVEL}, got {api_level}"
        ) from None


@dataclasses.dataclass(frozen=True)
class NnapiOptions:
    """Options of the NNAPI backend: the target device and ORT's NNAPI EP flags."""

    api_level: int = dataclasses.field(
        default=31,
        metadata={"help": "Android API level of the target device (27-35); decides the NNAPI feature level "
                          "(API 27 → FL1 ... 31 → FL5). ORT builds off Android assume 31."},
    )
    use_fp16: bool = dataclasses.field(
        default=False,
        metadata={"help": "NNAPI_FLAG_USE_FP16: let NNAPI relax float32 to float16 (FL2+); "
                          "float16 ONNX tensors are still not accepted."},
    )
    use_nchw: bool = dataclasses.field(
        default=False,
        metadata={"help": "NNAPI_FLAG_USE_NCHW: keep NCHW layout; Conv, pooling and DepthToSpace then need "
                          "FL3 (API 29). ORT documents it as slower."},
    )
    cpu_disabled: bool = dataclasses.field(
        default=False,
        metadata={"help": "NNAPI_FLAG_CPU_DISABLED: never use nnapi-reference (API 29+); a partition with an op "
                          "no accelerator supports then fails to compile instead of falling back."},
    )
    cpu_only: bool = dataclasses.field(
        default=False,
        metadata={"help": "NNAPI_FLAG_CPU_ONLY: run on nnapi-reference only, for validation."},
    )
    stop_ops: tuple[str, ...] = dataclasses.field(
        default=("NonMaxSuppression",),
        metadata={"help": "ORT session key ep.nnapi.partitioning_stop_ops: op types that, with every node "
                          "downstream of them, stay on the CPU."},
    )
    compile_ops: CompileOps = dataclasses.field(
        default="ort",
        metadata={"help": "Which nodes the backend claims: `ort` exactly what ORT's NNAPI EP takes (the "
                          "predictions of check/convert); `extended` also the NNAPI ops and forms only mobile-ep's "
                          "own lowering runs (HardSwish, comparisons, reductions, Clip to any bounds, ...): use it "
                          "with convert --compile, whose partitions do not go through ORT's EP.",
                  "compile_only": True},
    )
    approximate_erf: bool = dataclasses.field(
        default=True,
        metadata={"help": "Let convert replace Erf (the exporters' GELU) by a rational approximation NNAPI takes "
                          "(erf-approx: at most 4e-7 absolute error in float32); 0 leaves Erf on the CPU."},
    )
    preference: Preference = dataclasses.field(
        default="fast_single_answer",
        metadata={"help": "Execution preference of compiled partitions (--compile): fast_single_answer (as "
                          "ORT's EP), sustained_speed or low_power.",
                  "compile_only": True},
    )

    def __post_init__(self) -> None:
        check_option_types(self)
        if isinstance(self.api_level, bool) or not isinstance(self.api_level, int):
            raise ValueError(f"api_level must be an integer, got {self.api_level!r}")
        feature_level_for_api(self.api_level)  # validates the range
        if self.cpu_disabled and self.cpu_only:
            raise ValueError("cpu_disabled and cpu_only cannot both be set (ORT refuses NNAPI_FLAG_CPU_DISABLED "
                             "together with NNAPI_FLAG_CPU_ONLY)")
        if isinstance(self.stop_ops, str):
            object.__setattr__(self, "stop_ops", tuple(s.strip() for s in self.stop_ops.split(",") if s.strip()))
        else:
            object.__setattr__(self, "stop_ops", tuple(self.stop_ops))
        if not all(isinstance(op, str) and op for op in self.stop_ops):
            raise ValueError(f"stop_ops must be op type names, got {self.stop_ops!r}")

    @functools.cached_property  # (asked for every node; the options are frozen)
    def feature_level(self) -> int:
        """The NNAPI feature level of :attr:`api_level` (1 for API 27 ... 5 for API 31)."""
        return feature_level_for_api(self.api_level)


class NnapiBackend(Backend):
    """Android NNAPI as ONNX Runtime's NNAPI execution provider sees a model."""

    name = "nnapi"
    version = "0.1.0"
    description = (
        "Android NNAPI through ONNX Runtime's NNAPI execution provider: the support checks of its op builders "
        "(ORT 1.30), its QDQ node units, stop ops and partition filter. NHWC layout; static shapes only."
    )
    preferred_layout = "NHWC"
    platform = "android"
    rules_from = "onnxruntime 1.30"
    Options = NnapiOptions

    options: NnapiOptions

    def __init__(self, options: NnapiOptions | None = None) -> None:
        super().__init__(options)
        if self.options.use_nchw:
            # ORT's GetPreferredLayout follows NNAPI_FLAG_USE_NCHW.
            self.preferred_layout = "NCHW"  # type: ignore[misc]

    # -- configuration ------------------------------------------------------------------------------
    def build_rules(self) -> RuleRegistry:
        """One rule module per op or op family; modules marked ``COMPILE_ONLY`` only with compile_ops=extended."""
        registry = RuleRegistry()
        extended = self.options.compile_ops == "extended"
        for info in sorted(pkgutil.iter_modules(_rules_package.__path__), key=lambda i: i.name):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{_rules_package.__name__}.{info.name}")
            if getattr(module, "COMPILE_ONLY", False) and not extended:
                continue
            for obj in vars(module).values():
                if (isinstance(obj, type) and issubclass(obj, mobile_ep.OpRule) and obj.__module__ == module.__name__
                        and obj.op_types and not inspect.isabstract(obj)):
                    registry.add(obj())
        return registry

    def rewrites(self) -> tuple[mobile_ep.Rewrite, ...]:
        """Legalizations into ops ORT's NNAPI EP takes (each applied only where the result is claimed)."""
        from mobile_ep import rewrites as r

        from . import qdq_rewrites as q

        return (
            r.SumToAdd(),
            r.MeanToAddDiv(),
            r.HardSigmoidToRelu6(),
            r.HardSwishToRelu6(),
            r.ClipToMaxMin(),
            r.ExpandToMul(),
            r.TileToConcat(),
            r.SplitToSlices(),
            r.NegToMul(),
            r.BatchNormToMulAdd(),
            r.LayerNormToPrimitives(),
            r.ChannelShuffleToGather(),
            r.MatMulToFlatMatMul(),
            r.InstanceNormToPrimitives(),
            r.ReciprocalToDiv(),
            r.ReduceSumToMean(),
            r.ReduceL2ToMean(),
            r.GemmFoldScales(),
            r.ConvTransposeToDepthToSpace(),
            r.ConvTransposeToConv(),
            r.ConvTo2D(),
            r.PoolCeilToPads(),
            r.PadToGather(),
            r.LSTMToSteps(),
            r.GRUToSteps(),
            r.Rank5HeadSplit(),
            r.Rank5TransposeMerge(),
            r.Rank5GatherSplit(),
            r.Rank5BinaryMerge(),
            r.EmptyInputDrop(),
            r.SoftmaxNanGuard(),
            r.BoolMaskToFloat(),
            r.GatherInt32Indices(),
            r.PositionIdsViaFloat(),
            r.GatherElementsOfUniformConstant(),
            q.QdqFlattenToReshape(),
            q.QdqSigmoidToTanh(),
            q.QdqMaxPoolToUint8(),
            q.QdqMaxPoolViaFloat(),
            q.QdqGlobalAveragePoolToQLinearConv(),
        ) + ((r.ErfApproximation(),) if self.options.approximate_erf else ())

    def qdq_ops(self) -> frozenset[str]:
        """Op types grouped into QDQ node units, as ORT's QDQ selectors group them.

        ORT forms a unit around every op its selectors know (``GetAllNodeUnits``) and the NNAPI EP then
        takes or leaves the unit whole; only :data:`accepted_qdq_ops` are ever taken.  Grouping the rest
        too is what keeps, e.g., DequantizeLinear → Sigmoid → QuantizeLinear on the CPU, as on a device.
        """
        return QDQ_GROUPED_OPS

    @property
    def accepted_qdq_ops(self) -> frozenset[str]:
        """The QDQ node units NNAPI can take (``helper.cc`` ``GetQuantizedOpType``)."""
        return QDQ_ACCEPTED_OPS

    # -- capability ---------------------------------------------------------------------------------
    def excluded_nodes(self, graph: ir.Graph, ctx: RuleContext) -> Mapping[ir.Node, str]:
        """Every stop op (option ``stop_ops``) and every node downstream of one (``CreateExcludedNodeSet``)."""
        stop_ops = set(self.options.stop_ops)
        if not stop_ops:
            return {}
        nodes = ctx.graph_nodes() if ctx is not None and graph is ctx.graph else list(graph)
        if stop_ops.isdisjoint(map(_op_type, nodes)):
            return {}  # the usual case: no need to map every node's consumers
        consumers = _top_level_consumers(nodes)
        excluded: dict[ir.Node, str] = {}
        for node in nodes:
            if node in excluded or node.op_type not in stop_ops:
                continue
            label = f"{op_label(node)} {node.name!r}" if node.name else op_label(node)
            excluded[node] = (f"{node.op_type} is a partitioning stop op (option stop_ops); it and every node "
                              "after it stay on the CPU")
            queue = collections.deque([node])
            while queue:
                current = queue.popleft()
                for consumer in consumers.get(current, ()):
                    if consumer in excluded:
                        continue
                    excluded[consumer] = (f"downstream of stop op {label} (option stop_ops): ORT keeps everything "
                                          "after a stop op on the CPU")
                    queue.append(consumer)
        return excluded

    # -- the compile contract (convert --compile) ------------------------------------------------------
    def compile(self, partition: PartitionView, ctx: RuleContext) -> mobile_ep.CompiledPartition:
        """Lower the partition to an NNAPI model (each rule's ``lower``) and serialize it (docs/format.md)."""
        from .compile import compile_partition

        return compile_partition(self, partition, ctx)

    def emulate(self, payload: mobile_ep.CompiledPartition, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run a payload's serialized NNAPI model in the numpy emulator (NNAPI semantics, relaxed fp16 too)."""
        from . import emulator, serialize

        if payload.format != serialize.FORMAT:
            raise mobile_ep.CompileError(f"nnapi: cannot run a {payload.format!r} payload (this backend reads "
                                         f"{serialize.FORMAT})")
        model = serialize.read(payload.data)
        missing = [s.name for s in payload.inputs if s.name not in inputs]
        if missing:
            raise mobile_ep.CompileError(f"nnapi: missing inputs {missing}")
        outputs = emulator.run_named(model, {n: np.asarray(inputs[n]) for n in model.input_names})
        result = {}
        for spec in payload.outputs:
            shape = tuple(spec.shape or ())
            if spec.name in outputs:
                result[spec.name] = outputs[spec.name].reshape(shape)
            elif spec.shape is not None and 0 in shape:  # an empty tensor: nothing to compute
                result[spec.name] = np.zeros(shape, dtype=spec.dtype.numpy())
            else:
                raise mobile_ep.CompileError(f"nnapi: the NNAPI model has no output {spec.name!r}")
        return result

    def runtime_adapter(self) -> dict[str, bytes]:
        """The C++ runtime adapter (NNAPI C API), its JNI and Kotlin glue, the header and the build files."""
        from mobile_ep.contract.compile import package_files

        return package_files("mobile_ep_nnapi", "adapter")

    def accept_partition(self, partition: PartitionView, ctx: RuleContext) -> Support:
        """ORT's ``IsValidSupportedNodeGroup`` and its all-constant-inputs filter (nnapi_execution_provider.cc)."""
        nodes = partition.nodes
        if len(nodes) == 1 and nodes[0].op_type in TRIVIAL_SINGLE_OPS:
            return Support.no(
                f"a partition of a single {nodes[0].op_type} only copies data, so ORT leaves it on the CPU"
            )
        if not any(not ctx.is_constant(value) for value in partition.inputs):
            what = "has no inputs" if not partition.inputs else "reads only constant initializers"
            return Support.no(f"the partition {what}; ORT drops such partitions (fold them into constants instead)")
        return SUPPORTED


_op_type = operator.attrgetter("op_type")


def _top_level_consumers(nodes: Iterable[ir.Node]) -> dict[ir.Node, list[ir.Node]]:
    """For each node, the top-level nodes reading one of its outputs (also from inside their subgraphs)."""
    readers: dict[ir.Value, list[ir.Node]] = collections.defaultdict(list)
    for node in nodes:
        seen: set[int] = set()
        for value in _values_read(node):
            if id(value) not in seen:
                seen.add(id(value))
                readers[value].append(node)
    result: dict[ir.Node, list[ir.Node]] = {}
    for value, consumers in readers.items():
        producer = value.producer()
        if producer is not None:
            result.setdefault(producer, []).extend(c for c in consumers if c is not producer)
    return result


def _values_read(node: ir.Node) -> Iterable[ir.Value]:
    yield from (v for v in node.inputs if v is not None)
    for attribute in node.attributes.values():
        if attribute.type == ir.AttributeType.GRAPH:
            graphs = [attribute.value]
        elif attribute.type == ir.AttributeType.GRAPHS:
            graphs = list(attribute.value)
        else:
            continue
        for graph in graphs:
            for inner in graph.all_nodes():
                yield from (v for v in inner.inputs if v is not None)

