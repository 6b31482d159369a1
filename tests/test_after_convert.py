"""``check``'s "after mobile-ep convert" is what ``convert`` writes: the same partitions of the same nodes.

Run on the test corpora: the light_* architectures of the onnx wheel, the sample CNN, and the QDQ models of
:mod:`quant_models`, for each installed backend.
"""

from __future__ import annotations

import pathlib

import pytest
import quant_models

import mobile_ep
from mepkit import LIGHT_MODELS
from mobile_ep.samples import write_sample

BACKENDS = ("nnapi", "coreml")
QUANTIZED = tuple(quant_models.ARCHITECTURES)


def _summary(report) -> tuple:
    return (report.nodes, report.supported_nodes, [sorted(p.nodes) for p in report.partitions])


def _same(model: pathlib.Path, ep: str, out: pathlib.Path) -> None:
    checked = mobile_ep.check(model, ep).after_convert[ep]
    result = mobile_ep.convert(model, ep, out, verify=False)
    converted = result.check
    assert _summary(checked) == _summary(converted)
    assert checked.verdict == converted.verdict
    # ... and what the backend takes of the written file as a session loads it (a model the backend takes whole
    # with no rewrite is not read again by either command: this holds them to it)
    from mobile_ep.contract.plugins import make_plugins
    from mobile_ep.passes.fuse_cpu import partition_written

    again, model = partition_written(pathlib.Path(result.outputs["onnx"]), make_plugins().backend(ep),
                                     out / "again", False)
    assert again.proposal is not None
    assert _summary(converted) == (len(model.graph), again.proposal.supported_nodes,
                                   [sorted(n.name for n in p.nodes) for p in again.proposal.partitions])


@pytest.fixture(scope="module")
def qdq_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qdq")
    return {name: quant_models.write(name, folder) for name in QUANTIZED}


@pytest.mark.parametrize("ep", BACKENDS)
@pytest.mark.parametrize("name", QUANTIZED)
def test_quantized_models(qdq_dir, name, ep, tmp_path):
    _same(qdq_dir[name], ep, tmp_path)


@pytest.mark.parametrize("ep", BACKENDS)
def test_sample_cnn(ep, tmp_path):
    _same(write_sample(tmp_path / "in"), ep, tmp_path / "out")


@pytest.mark.parametrize("ep", BACKENDS)
@pytest.mark.parametrize("model", LIGHT_MODELS[:3], ids=lambda p: p.stem)
def test_light_models(model, ep, tmp_path):
    _same(model, ep, tmp_path)


@pytest.mark.parametrize("ep", BACKENDS)
def test_a_model_whose_folded_shapes_a_new_session_simplifies(ep, tmp_path):
    # ViT as torch exports it: Reshapes to shapes computed from Shape ops, which the basic level folds; a session
    # of the written file knows those shapes when it loads it and removes 4 Reshapes to the shape their input
    # has.  Core ML takes every node with no rewrite: check cannot answer with the original's partition
    import modern_models
    import onnx

    path = tmp_path / "vit.onnx"
    onnx.save(modern_models.vit(), path)
    _same(path, ep, tmp_path / "out")


@pytest.mark.parametrize("cpu_node", [False, True], ids=["all-claimed", "with-cpu-node"])
def test_model_storing_large_weights(cpu_node, tmp_path):
    """70 MB of weights and a rewrite (Sum -> Add): check writes its work copy referencing the weights, and its
    answer is still what convert writes; a node left on the CPU (TopK's k from a graph input) takes the
    CPU-fusion path too."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    n = 4200  # 4200 x 4200 float32: 70.6 MB
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((n, n), dtype=np.float32) / n, "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             helper.make_node("Sum", ["m", "x", "x"], ["s"], name="sum"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])]
    if cpu_node:
        nodes.append(helper.make_node("TopK", ["y", "k"], ["v", "i"], name="topk"))
        inputs.append(helper.make_tensor_value_info("k", TensorProto.INT64, [1]))
        outputs += [helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, None]),
                    helper.make_tensor_value_info("i", TensorProto.INT64, [1, None])]
    model = helper.make_model(helper.make_graph(nodes, "big", inputs, outputs, [w]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "big.onnx"
    onnx.save(model, path)
    checked = mobile_ep.check(path, "nnapi").after_convert["nnapi"]
    assert checked.rewrites and checked.supported_nodes == checked.nodes - cpu_node
    _same(path, "nnapi", tmp_path / "out")
