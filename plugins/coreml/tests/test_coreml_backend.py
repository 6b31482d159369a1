"""The backend: options, registry, plugin registration and the trivial-partition filter."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from coreml_testing import MLP, NN, i64, model, x
from onnx import helper

import mobile_ep
from mobile_ep.testing import node_support, proposal
from mobile_ep_coreml import CoreMLBackend
from mobile_ep_coreml import plugin as coreml_plugin


# -- options --------------------------------------------------------------------------------------------
def test_defaults():
    options = CoreMLBackend().options
    assert options.model_format == "MLProgram"
    assert options.require_static_input_shapes is False
    assert options.compute_units == "ALL"
    assert options.deployment_target == "iOS15"
    assert options.coreml_version == 5


@pytest.mark.parametrize(("target", "version"), [("iOS15", 5), ("iOS16", 6), ("iOS17", 7), ("iOS18", 8)])
def test_deployment_target_maps_to_coreml_version(target, version):
    assert CoreMLBackend().configure({"deployment_target": target}).options.coreml_version == version


def test_configure_parses_strings_case_insensitively():
    b = CoreMLBackend().configure({"model-format": "neuralnetwork", "require_static_input_shapes": "1",
                                   "compute_units": "cpuandneuralengine", "deployment_target": "ios17"})
    assert b.options.model_format == "NeuralNetwork"
    assert b.options.require_static_input_shapes is True
    assert b.options.compute_units == "CPUAndNeuralEngine"
    assert b.options.deployment_target == "iOS17"
    assert b.provider_options() == {"ModelFormat": "NeuralNetwork", "MLComputeUnits": "CPUAndNeuralEngine",
                                    "RequireStaticInputShapes": "1"}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"model_format": "CoreML9"}, "expected one of MLProgram, NeuralNetwork"),
        ({"compute_units": "GPU"}, "expected one of ALL, CPUOnly, CPUAndGPU, CPUAndNeuralEngine"),
        ({"deployment_target": "iOS14"}, "expected one of iOS15, iOS16, iOS17, iOS18"),
        ({"require_static_input_shapes": "maybe"}, "expected true or false"),
        ({"flags": "1"}, "unknown option 'flags'"),
    ],
)
def test_invalid_options_are_usage_errors(values, message):
    with pytest.raises(mobile_ep.UsageError, match=message):
        CoreMLBackend().configure(values)


def test_options_validate_on_direct_construction():
    with pytest.raises(ValueError, match="model_format='ML'"):
        CoreMLBackend.Options(model_format="ML")  # type: ignore[arg-type]
    options = CoreMLBackend.Options(deployment_target="iOS16")
    assert dataclasses.replace(options, model_format="NeuralNetwork").coreml_version == 6


def test_every_option_has_help():
    described = CoreMLBackend().describe_options()
    assert [name for name, _, _ in described] == [
        "model_format", "require_static_input_shapes", "compute_units", "deployment_target", "compute_precision",
        "max_dynamic_dim", "enumerated_dims", "fold_qdq"]
    assert all(text for _, _, text in described)


# -- backend --------------------------------------------------------------------------------------------
def test_identity():
    b = CoreMLBackend()
    assert b.name == "coreml" and b.preferred_layout == "NCHW" and b.description
    assert b.qdq_ops() == frozenset()  # the CoreML EP is not QDQ-aware


def test_registry_covers_ort_builders():
    ops = {f"{d}:{o}" if d else o for d, o in CoreMLBackend().rules.op_types()}
    # every op type registered in ORT's op_builder_factory.cc
    expected = {
        "Sigmoid", "Tanh", "Relu", "PRelu", "LeakyRelu", "Gelu", "Softplus", "Elu", "HardSigmoid",
        "com.microsoft:QuickGelu", "com.microsoft:FusedConv", "Erf", "Reciprocal", "Round", "Sqrt", "Exp",
        "Sin", "Cos", "Ceil", "Add", "Div", "Mul", "Max", "Pow", "Sub", "AveragePool", "GlobalAveragePool",
        "GlobalMaxPool", "MaxPool", "ReduceMean", "ReduceMin", "ReduceMax", "ReduceProd", "ReduceSum",
        "BatchNormalization", "GroupNormalization", "InstanceNormalization", "LayerNormalization", "And",
        "ArgMax", "Cast", "Clip", "Concat", "Conv", "ConvTranspose", "DepthToSpace", "Flatten", "Gather",
        "GatherND", "Gemm", "GridSample", "Identity", "LRN", "MatMul", "Pad", "Reshape", "Resize", "Shape",
        "Slice", "Split", "Softmax", "Squeeze", "Tile", "Transpose", "Unsqueeze", "Where",
    }
    assert ops == expected


def test_unknown_op_reason():
    m = model([helper.make_node("Sum", ["x", "x"], ["y"], name="n")], [x()])
    assert "coreml has no rule for Sum" in node_support(m, MLP, "n").reason


def test_plugin_registers_the_backend():
    registered = []
    coreml_plugin.mobile_ep_register_backends(registered.append)
    assert [type(b) for b in registered] == [CoreMLBackend]


def test_plugin_import_does_not_import_coremltools():
    # building the backend imports every rule module (and their lowerings' MILBuilder): still no coremltools
    code = ("import sys, mobile_ep_coreml.plugin; mobile_ep_coreml.plugin.CoreMLBackend(); "
            "print('coremltools' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_entry_point_is_declared():
    from importlib.metadata import entry_points

    eps = {ep.name: ep.value for ep in entry_points(group="mobile_ep")}
    assert eps.get("coreml") == "mobile_ep_coreml.plugin"


# -- the trivial-partition filter ----------------------------------------------------------------------
def _chain(*ops):
    """x -> op1 -> op2 -> ... with the ops given as (op_type, extra inputs, attrs)."""
    nodes, inputs, previous = [], [x((1, 3, 4, 4))], "x"
    for i, (op_type, extra, attrs) in enumerate(ops):
        names = [previous]
        for spec in extra:
            inputs.append(spec)
            names.append(spec[0])
        nodes.append(helper.make_node(op_type, names, [f"t{i}"], name=f"n{i}", **attrs))
        previous = f"t{i}"
    return model(nodes, inputs, outputs=[previous])


@pytest.mark.parametrize("backend", [MLP, NN], ids=["mlprogram", "neuralnetwork"])
def test_partition_of_only_trivial_ops_is_dropped(backend):
    m = _chain(("Transpose", [], {"perm": [0, 2, 3, 1]}), ("Reshape", [i64("s", [1, 48])], {}),
               ("Identity", [], {}))
    result = proposal(m, backend).per_backend["coreml"]
    assert result.partitions == []
    reasons = set(result.rejected.values())
    assert len(reasons) == 1
    reason = reasons.pop()
    assert "partition dropped by coreml: it holds only trivial ops (Identity, Reshape, Transpose)" in reason


def test_partition_with_one_compute_op_is_kept():
    m = _chain(("Transpose", [], {"perm": [0, 2, 3, 1]}), ("Relu", [], {}), ("Reshape", [i64("s", [1, 48])], {}))
    result = proposal(m, MLP).per_backend["coreml"]
    assert len(result.partitions) == 1 and len(result.partitions[0].nodes) == 3


def test_ceil_is_trivial_but_other_unary_ops_are_not():
    ceil = proposal(_chain(("Ceil", [], {})), MLP).per_backend["coreml"]
    assert ceil.partitions == [] and "only trivial ops (Ceil)" in next(iter(ceil.rejected.values()))
    sqrt = proposal(_chain(("Sqrt", [], {})), MLP).per_backend["coreml"]
    assert len(sqrt.partitions) == 1


def test_trivial_groups_split_by_a_cpu_node_are_judged_separately():
    # Relu | Sum (CPU) | Transpose: the Transpose-only group after the Sum is dropped, the Relu one kept.
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Sum", ["a", "a"], ["b"], name="sum"),
        helper.make_node("Transpose", ["b"], ["y"], name="transpose", perm=[0, 1, 3, 2]),
    ]
    result = proposal(model(nodes, [x()]), MLP).per_backend["coreml"]
    assert [[n.name for n in p.nodes] for p in result.partitions] == [["relu"]]
    assert "only trivial ops (Transpose)" in result.rejected[[n for n in result.rejected if n.name == "transpose"][0]]
