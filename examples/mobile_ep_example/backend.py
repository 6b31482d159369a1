"""The example NPU backend: options, rules, a partition filter and the compile contract."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from mobile_ep import (
    Backend,
    CompiledPartition,
    CompileError,
    PartitionView,
    RuleContext,
    RuleRegistry,
    Support,
    TensorSpec,
)
from mobile_ep.contract import lower_units, package_files, runtime_inputs

from . import __version__, emulator, enpu, rules
from .builder import ProgramBuilder


@dataclasses.dataclass(frozen=True)
class ExampleOptions:
    allow_broadcast: bool = dataclasses.field(
        default=True, metadata={"help": "Add/Mul may broadcast; off: both inputs need the same shape"})
    min_partition_nodes: int = dataclasses.field(
        default=1, metadata={"help": "drop partitions with fewer nodes (their copies cost more than they save)"})


class ExampleNpu(Backend):
    name = "example"
    version = __version__
    description = "example third-party NPU (mobile-ep-example-npu): float32 NCHW, static shapes, rank <= 4"
    preferred_layout = "NCHW"
    Options = ExampleOptions
    #: Written for mobile-ep plugin API 1: a mobile-ep with another plugin API refuses it by name.
    plugin_api = 1

    def build_rules(self) -> RuleRegistry:
        return RuleRegistry.from_package(rules)

    def accept_partition(self, partition: PartitionView, ctx: RuleContext) -> Support:
        minimum = ctx.options.min_partition_nodes
        return Support.check(len(partition.nodes) >= minimum,
                             f"{len(partition.nodes)} node(s), fewer than min_partition_nodes={minimum}")

    # -- the compile contract ---------------------------------------------------------------------------
    def compile(self, partition: PartitionView, ctx: RuleContext) -> CompiledPartition:
        builder = ProgramBuilder(ctx)
        inputs = runtime_inputs(partition, ctx)
        builder.program.inputs = [builder.tensor(v) for v in inputs]
        lower_units(partition, ctx, builder)  # each rule's lower(), after re-checking its support
        builder.program.outputs = [builder.tensor(v) for v in partition.outputs]
        return CompiledPartition(
            backend=self.name,
            format=enpu.FORMAT,
            data=enpu.write(builder.program),
            inputs=tuple(TensorSpec.of(v, ctx) for v in inputs),
            outputs=tuple(TensorSpec.of(v, ctx) for v in partition.outputs),
            metadata={"compiler": f"{self.name} {self.version}", "ops": str(len(builder.program.operations))},
        )

    def emulate(self, payload: CompiledPartition, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if payload.format != enpu.FORMAT:
            raise CompileError(f"{self.name}: cannot run a {payload.format!r} payload (this is {enpu.FORMAT})")
        program = enpu.read(payload.data)
        missing = [s.name for s in payload.inputs if s.name not in inputs]
        if missing:
            raise CompileError(f"{self.name}: missing inputs {missing}")
        outputs = emulator.run(program, [np.asarray(inputs[s.name]) for s in payload.inputs])
        return {spec.name: value for spec, value in zip(payload.outputs, outputs, strict=True)}

    def runtime_adapter(self) -> dict[str, bytes]:
        return package_files("mobile_ep_example", "runtime")
