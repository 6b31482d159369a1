"""ort:<EP> backends against the real plugin EP they wrap: onnxruntime-qnn's QNN EP (HTP simulator).

The placement ``check --ep ort:QNNExecutionProvider`` reports must be the EP's own, asked independently here
of the same prepared graph; ``--compile`` must write an EPContext model that runs and verifies on the
simulator; a library that cannot load costs one line, never the run.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from mobile_ep import ep_libraries
from mobile_ep import pipeline as api

pytest.importorskip("onnxruntime_qnn")

QNN = "ort:QNNExecutionProvider"
LIGHT = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mobile_ep.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=1800, env={**os.environ, "PYTHONWARNINGS": "ignore"})


def save(path: pathlib.Path, nodes, inputs, outputs, initializers=(), opset=17) -> pathlib.Path:
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(initializers)),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    onnx.save(model, path)
    return path


def split_by_an_op_qnn_refuses(tmp_path: pathlib.Path) -> pathlib.Path:
    """Conv -> Relu -> Erf (the QNN EP takes Erf only inside a GELU) -> Conv -> Relu: two QNN partitions, Erf on the CPU
    (large enough for convert's cost model to keep both)."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((32, 3, 3, 3)).astype(np.float32) * 0.2, "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 32, 3, 3)).astype(np.float32) * 0.05, "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Erf", ["r1"], ["md"], name="erf"),
             helper.make_node("Conv", ["md", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["y"], name="relu2")]
    return save(tmp_path / "split.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 112, 112])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 112, 112])], [w1, w2])


def qnn_library() -> ep_libraries.EpLibrary:
    (library,) = [lib for lib in ep_libraries.installed_libraries() if lib.ep_name == "QNNExecutionProvider"]
    return library


def the_eps_own_answer(model: pathlib.Path, tmp_path: pathlib.Path) -> ep_libraries.Assignment:
    """The real EP asked directly about the graph mobile-ep judges (the basic-level model check reports on)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = str(tmp_path / "basic.onnx")
    ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    return ep_libraries.assignment(tmp_path / "basic.onnx", qnn_library(), {"backend_type": "htp", "soc_model": "60"})


def test_list_shows_the_ep_its_package_onnxruntime_and_devices():
    result = cli("list", "-v")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith(QNN))
    import onnxruntime

    text = result.stdout[result.stdout.index(QNN):]
    assert "onnxruntime-qnn" in line or "onnxruntime-qnn" in text
    assert f"onnxruntime {onnxruntime.__version__}" in text and "devices: cpu (Qualcomm)" in text


@pytest.mark.parametrize("model", ["split", "light_squeezenet", "light_inception_v1"])
def test_check_reports_the_real_eps_placement(model, tmp_path):
    path = split_by_an_op_qnn_refuses(tmp_path) if model == "split" else LIGHT / f"{model}.onnx"
    report = api.check(path, [QNN], after_convert=False)
    ours = report.backends[QNN]
    real = the_eps_own_answer(path, tmp_path)
    claimed = {name for p in ours.partitions for name in p.nodes}
    graph = claimed | {n.node for n in ours.unsupported}
    assert len(graph) == report.nodes
    # the EP's answer, less the nodes it adds itself (the Transposes of its NHWC layout)
    assert claimed == ep_libraries.node_names(real.nodes, graph)
    assert len(ours.partitions) == len(real.partitions)
    # each node left on the CPU with the EP's own reason (its op validation trace), else "no reason"
    for node in ours.unsupported:
        why = real.reasons.get(node.node)
        assert (f"QNNExecutionProvider: {why}" in node.reason if why else
                "not taken by QNNExecutionProvider (the EP gives no reason)" in node.reason), node
    if model == "split":
        assert len(real.partitions) == 2 and ours.supported_nodes == 4
        (erf,) = ours.unsupported
        assert erf.op == "Erf" and "Operators of type `Erf` are not supported by QNN EP" in erf.reason


def qdq_relu(tmp_path: pathlib.Path) -> pathlib.Path:
    """x -> Q -> DQ -> Relu -> Q -> DQ -> y: the Q of the graph input and the DQ of its output are where the QNN EP's
    offload_graph_io_quantization decides."""
    s, z = numpy_helper.from_array(np.array(0.02, np.float32), "s"), numpy_helper.from_array(np.array(128, np.uint8), "z")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q_in"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dq_in"),
             helper.make_node("Relu", ["d"], ["r"], name="relu"),
             helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q2"], name="q_out"),
             helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["y"], name="dq_out")]
    return save(tmp_path / "qdq.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], [s, z])


@pytest.mark.parametrize("offload", ["0", "1"])
def test_provider_options_reach_the_ep(tmp_path, offload):
    result = cli("check", qdq_relu(tmp_path), "--ep", QNN, "-O", f"{QNN}.offload_graph_io_quantization={offload}",
                 "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["backends"][QNN]
    left = sorted(n["node"] for n in report["unsupported"])
    assert left == ([] if offload == "0" else ["dq_out", "q_in"])


def test_convert_compile_writes_an_epcontext_model_that_runs_on_the_simulator(tmp_path):
    out = tmp_path / "out"
    result = cli("convert", split_by_an_op_qnn_refuses(tmp_path), "--ep", QNN, "--compile", "-o", out)
    assert result.returncode == 0, result.stderr
    compiled = out / "split.ort_QNNExecutionProvider.compiled.onnx"
    if not compiled.exists():
        compiled = next(out.glob("*.compiled.onnx"))
    model = onnx.load(compiled)
    contexts = [n for n in model.graph.node if n.op_type == "EPContext"]
    assert len(contexts) == 2 and [n.op_type for n in model.graph.node if n.op_type != "EPContext"] == ["Erf"]
    report = json.loads((out / "report.json").read_text())
    partitions = report["compiled"]["partitions"]
    assert partitions and all(p["metadata"]["verified"] == "yes" for p in partitions)
    assert float(partitions[0]["metadata"]["max_abs_error"]) < 0.05


def test_a_library_that_cannot_load_is_one_line(tmp_path):
    fake = tmp_path / "libnot_an_ep.so"
    fake.write_bytes(b"this is not a shared library")
    model = split_by_an_op_qnn_refuses(tmp_path)
    result = cli("check", model, "--ep", "ort", "-O", f"ort.library={fake}")
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mobile-ep: error:") and "libnot_an_ep.so" in lines[0], lines


def test_a_library_given_by_path_is_a_backend(tmp_path):
    model = split_by_an_op_qnn_refuses(tmp_path)
    result = cli("check", model, "--ep", "ort", "-O", f"ort.library={qnn_library().library_path()}",
                 "-O", "ort.ep_name=QNNExecutionProvider", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (backend,) = report["backends"]
    assert backend == QNN and report["backends"][QNN]["supported_nodes"] == 4


# -- check --against-ep: the rules of a backend against the real EP they predict -------------------------
#: The light models of the default run (their ops: every op of the nine); MOBILE_EP_ALL_LIGHT_MODELS=1 adds the
#: four whose weights make each check take half a minute (ResNet-50, AlexNet, ZFNet, VGG-19).
LIGHT_MODELS = ["light_squeezenet", "light_inception_v1", "light_shufflenet", "light_densenet121",
                "light_inception_v2"] + (["light_resnet50", "light_bvlc_alexnet", "light_zfnet512", "light_vgg19"]
                                         if os.environ.get("MOBILE_EP_ALL_LIGHT_MODELS") == "1" else [])


@pytest.mark.parametrize("model", LIGHT_MODELS)
def test_the_qnn_rules_agree_with_the_real_ep_on_the_light_models(model):
    result = cli("check", LIGHT / f"{model}.onnx", "--ep", "qnn", "--against-ep", "--json")
    assert result.returncode == 0, result.stderr
    (comparison,) = json.loads(result.stdout)["against_ep"]
    assert comparison["ep"] == QNN and comparison["nodes"] > 0
    assert comparison["disagreements"] == [] and comparison["partitions"]["rules"] == comparison["partitions"]["ep"]


class _Greedy:
    """A test plugin: a backend whose rules take every node and say they predict the QNN EP."""

    @staticmethod
    def _backend():
        from mobile_ep import SUPPORTED, Backend, RuleRegistry

        class Greedy(Backend):
            name = "greedy"

            def build_rules(self):
                return RuleRegistry()

            def supports(self, unit, ctx):
                return SUPPORTED

            def real_ep(self):
                return "QNNExecutionProvider", {"backend_type": "htp", "soc_model": "60"}

        return Greedy()

    from mobile_ep import hookimpl

    @hookimpl
    def mobile_ep_register_backends(self, register):
        register(self._backend())


def test_against_ep_names_each_node_the_rules_place_otherwise(tmp_path):
    from click.testing import CliRunner

    from mobile_ep.cli.main import main
    from mobile_ep.contract.plugins import make_plugins

    plugins = make_plugins(plugins=[_Greedy()])
    result = CliRunner().invoke(main, ["check", str(split_by_an_op_qnn_refuses(tmp_path)), "--ep", "greedy",
                                       "--against-ep"], obj=plugins)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "greedy against the real QNNExecutionProvider: 1 of 5 nodes placed differently; partitions 1 (rules) " \
           "vs 2 (EP)" in text
    assert "Erf erf: the rules take it, the EP leaves it on the CPU" in text


def test_against_ep_needs_a_backend_that_predicts_a_plugin_ep(tmp_path):
    result = cli("check", split_by_an_op_qnn_refuses(tmp_path), "--ep", "nnapi", "--against-ep")
    assert result.returncode == 2
    assert "none of the selected backends predicts an ONNX Runtime plugin EP" in result.stderr


def test_an_ep_that_crashes_on_a_model_is_an_answer_not_the_end_of_the_run(tmp_path):
    """onnxruntime-qnn 2.7 segfaults making a session of ONNX's STFT node case: the check goes on, every node on
    the CPU saying so."""
    from onnx.backend.test.case.node import collect_testcases

    (case,) = [c for c in collect_testcases("") if c.name == "test_stft"]
    model = case.model
    model.ir_version = min(model.ir_version, 10)
    onnx.save(model, tmp_path / "stft.onnx")
    result = cli("check", tmp_path / "stft.onnx", "--ep", QNN, "--json")
    assert result.returncode == 0, result.stderr
    (node,) = json.loads(result.stdout)["backends"][QNN]["unsupported"]
    assert "QNNExecutionProvider crashed (SIGSEGV) while creating a session" in node["reason"]


def layernorm_not_last_axis(tmp_path: pathlib.Path) -> pathlib.Path:
    """Relu -> LayerNormalization over axes 1.. (not only the last: the QNN EP leaves it on the CPU) -> Relu."""
    rng = np.random.default_rng(1)
    scale = numpy_helper.from_array(rng.random((8, 4)).astype(np.float32) + 0.5, "scale")
    bias = numpy_helper.from_array(rng.random((8, 4)).astype(np.float32), "bias")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("LayerNormalization", ["r", "scale", "bias"], ["n"], name="ln", axis=1),
             helper.make_node("Relu", ["n"], ["y"], name="relu2")]
    return save(tmp_path / "ln.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 4])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 4])], [scale, bias])


def bool_tile_of_rank_5(tmp_path: pathlib.Path) -> pathlib.Path:
    """Greater -> Tile of a rank-5 bool tensor -> Cast: the QNN EP takes none of it, nor the Concat that
    tile-to-concat would make of the Tile."""
    nodes = [helper.make_node("Greater", ["x", "zero"], ["g"], name="gt"),
             helper.make_node("Tile", ["g", "repeats"], ["t"], name="tile"),
             helper.make_node("Cast", ["t"], ["y"], name="cast", to=TensorProto.FLOAT)]
    return save(tmp_path / "tile.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 2, 2, 2])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 2, 2, 4])],
                [numpy_helper.from_array(np.zeros(1, np.float32), "zero"),
                 numpy_helper.from_array(np.array([1, 1, 1, 1, 2], np.int64), "repeats")])


def test_a_rewrite_is_kept_where_the_ep_then_takes_more(tmp_path):
    path = layernorm_not_last_axis(tmp_path)
    before = the_eps_own_answer(path, tmp_path)
    assert "ln" not in ep_libraries.node_names(before.nodes, {"relu", "ln", "relu2"})
    out = tmp_path / "out"
    result = cli("convert", path, "--ep", QNN, "-o", out)
    assert result.returncode == 0, result.stderr  # (verified against onnxruntime's CPU result on the original)
    report = json.loads((out / "report.json").read_text())["partitioning"]
    assert [r["rewrite"] for r in report["rewrites"]] == ["layernorm-to-primitives"]
    assert report["supported_nodes"] == report["nodes"] and len(report["partitions"]) == 1
    written = next(out.glob("*.onnx"))
    assert "LayerNormalization" not in {n.op_type for n in onnx.load(written).graph.node}
    # the EP itself, asked about the written file, takes every node
    after = the_eps_own_answer(written, tmp_path)
    assert len(after.partitions) == 1
    assert ep_libraries.node_names(after.nodes, {n.name for n in onnx.load(tmp_path / "basic.onnx").graph.node}) \
        == {n.name for n in onnx.load(tmp_path / "basic.onnx").graph.node}


def test_a_rewrite_the_ep_takes_no_more_with_is_not_kept(tmp_path):
    out = tmp_path / "out"
    result = cli("convert", bool_tile_of_rank_5(tmp_path), "--ep", QNN, "-o", out, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())["partitioning"]
    assert not report.get("rewrites")
    assert "Tile" in {n.op_type for n in onnx.load(next(out.glob("*.onnx"))).graph.node}


def test_against_ep_on_contrib_domain_qdq_with_16_bit_activations(tmp_path):
    """A w8a16 QDQ Conv as onnxruntime.quantization writes it for the QNN EP (``get_qnn_qdq_config`` with uint16
    activations): every QuantizeLinear/DequantizeLinear in the com.microsoft domain, no shapes after them.  The
    rules take the QDQ Conv as the real EP does."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.integers(-50, 50, (4, 3, 3, 3)).astype(np.int8), "w"),
             numpy_helper.from_array(np.full(4, 0.01, np.float32), "sw"),
             numpy_helper.from_array(np.zeros(4, np.int8), "zw"),
             numpy_helper.from_array(np.array(0.05, np.float32), "sx"),
             numpy_helper.from_array(np.array(32768, np.uint16), "zx")]
    ms = "com.microsoft"
    nodes = [helper.make_node("Relu", ["x"], ["xr"], name="relu"),
             helper.make_node("QuantizeLinear", ["xr", "sx", "zx"], ["xq"], name="qx", domain=ms),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"], name="dqx", domain=ms),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], axis=0, name="dqw", domain=ms),
             helper.make_node("Conv", ["xd", "wf"], ["m"], name="conv"),
             helper.make_node("QuantizeLinear", ["m", "sx", "zx"], ["mq"], name="qy", domain=ms),
             helper.make_node("DequantizeLinear", ["mq", "sx", "zx"], ["md"], name="dqy", domain=ms),
             helper.make_node("Relu", ["md"], ["y"], name="relu2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ms, 1)],
                              ir_version=10)
    path = tmp_path / "w8a16.onnx"
    onnx.save(model, path)
    result = cli("check", path, "--ep", "qnn", "--against-ep")
    assert result.returncode == 0, result.stderr
    assert "qnn against the real QNNExecutionProvider: 0 of 8 nodes placed differently; partitions 1 (rules) vs " \
           "1 (EP)" in result.stdout, result.stdout
    assert "8/8 nodes claimed" in result.stdout, result.stdout
