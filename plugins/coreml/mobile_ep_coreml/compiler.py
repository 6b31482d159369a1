"""The Core ML backend's compile contract: a partition -> MIL program -> ``.mlpackage`` -> payload.

:func:`compile_partition` opens a MIL function whose inputs are the partition's run-time inputs
(dynamic dims stay symbolic and become flexible shapes), lets every rule lower its node
(:func:`mobile_ep.contract.compile.lower_units`, which re-asserts support first), converts the program with
coremltools for the chosen format, deployment target and precision, and zips the saved package.
:func:`emulate` runs a payload's package with the host emulator.

Payload format ``coreml-mlpackage/1``: ``data`` is the ``.mlpackage`` directory as a deterministic zip
(:mod:`.package`); ``metadata`` repeats the options it was built with, the MIL ops (or NeuralNetwork
layers) it holds, ``unpack_as: mlpackage`` (app bundles get the package unpacked) and, for float16, the
tolerances a verification should allow (``rtol``/``atol``).  The ONNX <-> Core ML feature
mapping lives in the model itself (metadata entry ``com.github.mobile-ep.io``), so the package alone is
enough to run it, on the host or on the device.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx_ir as ir

from mobile_ep import CompiledPartition, CompileError, PartitionView, RuleContext, TensorSpec
from mobile_ep.contract.compile import lower_units, runtime_inputs

from . import __version__
from .emulator import IO_METADATA_KEY
from .mil import MILBuilder, coremltools

__all__ = ["FORMAT", "compile_partition", "emulate", "open_payload"]

FORMAT = "coreml-mlpackage/1"

#: NeuralNetwork partitions are Core ML 4 models (specification 5), which load on every iOS 14+ device.
NEURALNETWORK_TARGET = "iOS14"


def compile_partition(backend: Any, partition: PartitionView, ctx: RuleContext) -> CompiledPartition:
    options = ctx.options
    ct = coremltools()
    mlprogram = options.model_format == "MLProgram"
    target = getattr(ct.target, options.deployment_target if mlprogram else NEURALNETWORK_TARGET)
    float16 = options.compute_precision == "float16"
    inputs = runtime_inputs(partition, ctx)
    builder = MILBuilder(ctx, opset=target, mlprogram=mlprogram)
    builder.reserve_outputs(partition.outputs)
    with builder.function(inputs):
        lower_units(partition, ctx, builder)
        builder.set_outputs(partition.outputs)
    from coremltools.converters.mil.mil import Program

    program = Program()
    program.add_function("main", builder.function_obj)
    _flexible_inputs(builder, options)

    from . import package

    model = package.convert(program, mlprogram=mlprogram, target=target, float16=float16,
                            compute_units=options.compute_units)
    spec = model.get_spec()
    _check_features(spec, builder)
    in_specs = tuple(TensorSpec.of(v, ctx) for v in inputs)
    out_specs = tuple(_output_spec(v, ctx, builder) for v in partition.outputs)
    io = {
        "inputs": [{**s.as_dict(), "feature": f} for s, (_, f) in zip(in_specs, builder.input_features, strict=True)],
        "outputs": [{**s.as_dict(), "feature": f} for s, (_, f) in zip(out_specs, builder.output_features,
                                                                         strict=True)],
    }
    settings = {
        "model_format": options.model_format,
        "deployment_target": options.deployment_target if mlprogram else NEURALNETWORK_TARGET,
        "compute_precision": options.compute_precision,
        "compute_units": options.compute_units,
    }
    data = package.package_bytes(model, {
        IO_METADATA_KEY: json.dumps(io, sort_keys=True, separators=(",", ":")),
        "com.github.mobile-ep.compiler": f"mobile-ep-coreml {__version__}",
        **{f"com.github.mobile-ep.{k}": v for k, v in settings.items()},
    })
    ops = _op_types(spec)
    tolerances = {}
    if float16:  # what a verification of this partition should allow (mobile_ep.runtime honours it)
        tolerances = {"rtol": "0.02", "atol": "0.02"} if mlprogram else {"rtol": "0.005", "atol": "0.005"}
    return CompiledPartition(
        backend=backend.name,
        format=FORMAT,
        data=data,
        inputs=in_specs,
        outputs=out_specs,
        metadata={**settings, **tolerances, "compiler": f"{backend.name} {backend.version}",
                  "coremltools": str(ct.__version__), "specification_version": str(spec.specificationVersion),
                  "ops": ",".join(ops), "unpack_as": "mlpackage"},
    )


def _flexible_inputs(builder: MILBuilder, options: Any) -> None:
    """Declare each symbolic input dim as a range (1..``max_dynamic_dim``) or, with ``enumerated_dims``,
    the enumerated shapes made of those sizes (dims sharing an ONNX dim name take the same size)."""
    if not builder.symbolic_inputs:
        return
    ct = builder.ct
    sizes = [int(s) for s in options.enumerated_dims.split(",") if s.strip()] if options.enumerated_dims else []
    types = []
    for name, labels in builder.symbolic_inputs.items():
        var = builder.function_obj.inputs[name]
        shape = list(var.shape)
        if sizes:
            symbols = sorted({label for label in labels if label is not None})
            shapes = []
            for combo in itertools.product(sizes, repeat=len(symbols)):
                chosen = dict(zip(symbols, combo, strict=True))
                shapes.append(tuple(chosen[label] if label is not None else int(dim)
                                    for label, dim in zip(labels, shape, strict=True)))
            if len(shapes) > 128:
                raise CompileError(f"input {name!r}: {len(shapes)} enumerated shapes; Core ML takes at most 128")
            types.append(ct.TensorType(name=name, shape=ct.EnumeratedShapes(shapes=shapes, default=shapes[0])))
        else:
            dims = [ct.RangeDim(lower_bound=1, upper_bound=int(options.max_dynamic_dim), default=1)
                    if label is not None else int(dim)
                    for label, dim in zip(labels, shape, strict=True)]
            types.append(ct.TensorType(name=name, shape=ct.Shape(dims)))
    builder.function_obj.set_input_types(tuple(types))


_ONNX_OF_MIL = {"fp32": ir.DataType.FLOAT, "fp16": ir.DataType.FLOAT16, "int32": ir.DataType.INT32,
                "bool": ir.DataType.BOOL}


def _output_spec(value: ir.Value, ctx: RuleContext, builder: MILBuilder) -> TensorSpec:
    """The output's ONNX type and shape; where ONNX shape inference knows nothing (contrib ops such as
    com.microsoft:QuickGelu), the lowered program's."""
    spec = TensorSpec.of(value, ctx)
    if spec.dtype != ir.DataType.UNDEFINED and spec.shape is not None:
        return spec
    var = builder.var(value)
    dtype = spec.dtype
    if dtype == ir.DataType.UNDEFINED:
        dtype = _ONNX_OF_MIL.get(builder.types.builtin_to_string(var.dtype), ir.DataType.UNDEFINED)
    shape = spec.shape
    if shape is None:
        shape = tuple(d if isinstance(d, int) else None for d in var.shape)
    return TensorSpec(spec.name, dtype, shape)


def _check_features(spec: Any, builder: MILBuilder) -> None:
    names_in = [f.name for f in spec.description.input]
    names_out = [f.name for f in spec.description.output]
    want_in = [f for _, f in builder.input_features]
    want_out = [f for _, f in builder.output_features]
    if names_in != want_in or names_out != want_out:
        raise CompileError(f"coreml: coremltools renamed the model's features ({names_in} -> {names_out}); "
                           f"expected {want_in} -> {want_out}")


def _op_types(spec: Any) -> list[str]:
    if spec.WhichOneof("Type") == "mlProgram":
        function = spec.mlProgram.functions["main"]
        block = function.block_specializations[function.opset]
        return sorted({op.type for op in block.operations if op.type != "const"})
    return sorted({layer.WhichOneof("layer") for layer in spec.neuralNetwork.layers})


def open_payload(payload: CompiledPartition) -> Any:
    """The payload's package, parsed and ready to run (:class:`mobile_ep_coreml.emulator.Package`); a payload
    whose metadata has ``function`` runs that function of a multifunction package (:mod:`.functions`)."""
    if payload.format != FORMAT:
        raise CompileError(f"coreml: cannot run a {payload.format!r} payload (this backend writes {FORMAT})")
    from .emulator import Package
    from .package import read_package

    return Package(read_package(payload.data), payload.metadata.get("function"))


def emulate(payload: CompiledPartition, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    package = open_payload(payload)
    missing = [s.name for s in payload.inputs if s.name not in inputs]
    if missing:
        raise CompileError(f"coreml: missing inputs {missing}")
    outputs = package.run({s.name: inputs[s.name] for s in payload.inputs})
    return {spec.name: outputs[spec.name] for spec in payload.outputs}
