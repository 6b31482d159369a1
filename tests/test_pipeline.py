"""The convert pipeline (issue 3): shape fixing, constant folding, legalization, cost model, CPU fusion.

Models with dynamic shapes, shape sub-graphs and control flow are built here; the light_* models of the
onnx wheel get random weights so that verification can tell a wrong rewrite from a right one.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from mepkit import LIGHT_DIR, LIGHT_MODELS, const, make_model, tensor
from mobile_ep import errors
from mobile_ep import model_io as mir
from mobile_ep import pipeline as api
from mobile_ep.contract.plugins import make_plugins
from mobile_ep.options import Options
from mobile_ep.passes import fold_constants

INSTALLED = sorted(make_plugins().backends())
BUILTIN = [name for name in ("nnapi", "coreml") if name in INSTALLED]
pytestmark = pytest.mark.skipif(not BUILTIN, reason="no built-in backend installed")


def ocr_like(path, *, control_flow=False):
    """A small CNN classifier whose input dims all share the name '?', with a Shape-based flatten head
    (as exporters write it) and, optionally, an If on the CPU side."""
    rng = np.random.default_rng(3)
    nodes, inits = [], []

    def conv(x, name, cin, cout, stride=1):
        w = (rng.standard_normal((cout, cin, 3, 3)) * (2 / (cin * 9)) ** 0.5).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, f"{name}.w"),
                      numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"{name}.b")])
        nodes.append(helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [f"{name}.c"], name=f"{name}/conv",
                                      pads=[1, 1, 1, 1], strides=[stride, stride]))
        nodes.append(helper.make_node("Relu", [f"{name}.c"], [f"{name}.r"], name=f"{name}/relu"))
        return f"{name}.r"

    x = conv("image", "c1", 3, 8, 2)
    x = conv(x, "c2", 8, 16, 2)
    y = conv(x, "c3", 16, 16)
    nodes.append(helper.make_node("Sum", [x, y], ["res"], name="residual/sum"))
    nodes.append(helper.make_node("GlobalAveragePool", ["res"], ["gap"], name="gap"))
    # flatten the exporter way: Reshape(gap, Concat(Shape(gap)[0:1], [-1]))
    nodes += [
        helper.make_node("Shape", ["gap"], ["gap_shape"], name="head/shape"),
        helper.make_node("Gather", ["gap_shape", "zero"], ["batch"], name="head/gather", axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch1"], name="head/unsqueeze"),
        helper.make_node("Concat", ["batch1", "minus1"], ["flat_shape"], name="head/concat", axis=0),
        helper.make_node("Reshape", ["gap", "flat_shape"], ["flat"], name="head/reshape"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="head/gemm", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="head/softmax", axis=-1),
    ]
    inits += [const("zero", np.array(0, np.int64)), const("axes0", np.array([0], np.int64)),
              const("minus1", np.array([-1], np.int64)),
              numpy_helper.from_array((rng.standard_normal((5, 16)) * 0.3).astype(np.float32), "fc.w"),
              numpy_helper.from_array(np.zeros(5, np.float32), "fc.b")]
    outputs = [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["?", 5])]
    inputs = [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["?", 3, "?", "?"])]
    if control_flow:
        then_g = helper.make_graph([helper.make_node("Identity", ["probs"], ["t"])], "then", [],
                                   [tensor("t", ["?", 5])])
        else_g = helper.make_graph([helper.make_node("Neg", ["probs"], ["e"])], "else", [], [tensor("e", ["?", 5])])
        nodes.append(helper.make_node("If", ["flag"], ["decided"], name="post/if", then_branch=then_g,
                                      else_branch=else_g))
        inputs.append(helper.make_tensor_value_info("flag", TensorProto.BOOL, []))
        outputs.append(helper.make_tensor_value_info("decided", TensorProto.FLOAT, ["?", 5]))
    graph = helper.make_graph(nodes, "ocr_like", inputs, outputs, initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


@pytest.mark.parametrize("backend", BUILTIN)
def test_dynamic_model_claims_nothing_until_its_shape_is_fixed(tmp_path, backend, mobile_ep_cli):
    model = ocr_like(tmp_path / "ocr.onnx")
    result = mobile_ep_cli("check", model, "--ep", backend, "--shape", "image=1,3,32,64", "--json", plugins=None)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    as_is, after = data["backends"][backend], data["after_convert"][backend]
    if backend == "nnapi":  # NNAPI takes nothing with a dynamic shape
        assert as_is["supported_nodes"] == 0
        assert not any("--shape" in hint for hint in as_is.get("suggestions", []))  # (the user gave it)
    # Fixed: the Shape/Gather/Concat head folds away, the Sum becomes an Add: one partition, every node.
    assert len(after["partitions"]) == 1
    assert after["supported_nodes"] == after["nodes"]
    assert {r["rewrite"] for r in after["rewrites"]} == {"sum-to-add"}
    assert not {"Shape", "Gather", "Concat"} & set(after["partitions"][0]["ops"])
    assert data["shape_changes"] == {"image": ["[?,3,?,?]", "[1,3,32,64]"]}


@pytest.mark.parametrize("backend", BUILTIN)
def test_convert_with_fixed_shape_verifies(tmp_path, backend, mobile_ep_cli):
    model = ocr_like(tmp_path / "ocr.onnx")
    out = tmp_path / "out"
    result = mobile_ep_cli("convert", model, "--ep", backend, "-o", out, "--shape", "1,3,32,64", plugins=None)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert len(report["partitioning"]["partitions"]) == 1
    assert all(v["ok"] for v in report["verification"])
    assert report["before"]["supported_nodes"] < report["partitioning"]["supported_nodes"]
    saved = onnx.load(out / f"ocr.{backend}.onnx")
    assert [d.dim_value for d in saved.graph.input[0].type.tensor_type.shape.dim] == [1, 3, 32, 64]


@pytest.mark.parametrize("backend", BUILTIN)
def test_control_flow_stays_on_cpu_and_never_adds_partitions_over_ort_checker(tmp_path, backend):
    from onnxruntime.tools.mobile_helpers import usability_checker as uc

    model = ocr_like(tmp_path / "ocr_if.onnx", control_flow=True)
    report = api.check(model, [backend], options=Options(shapes={"image": (1, 3, 32, 64)}))
    after = report.after_convert[backend]
    assert [u.op for u in after.unsupported] == ["If"]
    assert len(after.partitions) == 1
    assert after.supported_nodes / (after.nodes - 1) >= 0.98
    # ORT's own checker on the same fixed model (its estimate is by op name only).
    fixed = tmp_path / "fixed.onnx"
    m = mir.load(model)
    from mobile_ep.passes.fix_shapes import FixShapesPass

    FixShapesPass({"image": (1, 3, 32, 64)})(m)
    mir.save(m, fixed)
    proto = onnx.load(fixed)
    if backend == "nnapi":
        info = uc.check_nnapi_partitions(proto, require_fixed_input_sizes=True)
    else:
        info = uc.check_coreml_partitions(proto, True, "coreml_supported_mlprogram_ops.md")
    assert len(after.partitions) <= info.num_partitions


@pytest.mark.parametrize("args, message", [
    (["--shape", "image=1,3,32"], "--shape image: the input has rank 4 [?,3,?,?], not 3"),
    (["--shape", "image=1,4,32,32"], "--shape image: dim 1 is fixed to 3 in the model, not 4"),
    (["--shape", "nope=1,3,32,32"], "--shape nope: the model has no input 'nope' (inputs: 'image')"),
    (["--shape", "image=1,x,3"], "--shape 'image=1,x,3': expected NAME=D1,D2,... with integer dims"),
    (["--shape", "image=0,3,8,8"], "--shape 'image=0,3,8,8': dims must be positive"),
    (["--dim", "batch=1"], "--dim batch: no input has a dim named 'batch' (named dims: '?')"),
    (["--dim", "?=-1"], "--dim '?=-1': the value must be positive"),
])
def test_impossible_shapes_are_one_line_usage_errors(tmp_path, args, message, mobile_ep_cli):
    model = ocr_like(tmp_path / "ocr.onnx")
    result = mobile_ep_cli("check", model, "--ep", BUILTIN[0], *args, plugins=None)
    assert result.exit_code == errors.EXIT_USAGE, result.output
    assert result.stderr.strip() == f"mobile-ep: error: {message}"


def test_shapes_the_model_cannot_take_are_reported(tmp_path, mobile_ep_cli):
    # Adding a [2, 3] input to a constant [4, 3] cannot broadcast: shape inference says so.
    proto = make_model([helper.make_node("Add", ["x", "c"], ["y"])], [tensor("x", ["N", 3])],
                       [tensor("y", [4, 3])], [const("c", np.ones((4, 3), np.float32))])
    path = tmp_path / "m.onnx"
    onnx.save(proto, path)
    result = mobile_ep_cli("check", path, "--ep", BUILTIN[0], "--shape", "x=2,3", plugins=None)
    assert result.exit_code == errors.EXIT_BAD_MODEL
    assert result.stderr.startswith(f"mobile-ep: error: {path}: fixing input shapes (--shape x=2,3): the shapes do "
                                    "not fit the model:")
    assert len(result.stderr.strip().splitlines()) == 1
    # A Reshape to a constant [1, 12] only fits 12 elements: only running the model shows it, and
    # convert's verification does.
    proto = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], [tensor("x", ["N", 12])],
                       [tensor("y", [1, 12])], [const("s", np.array([1, 12], np.int64))])
    onnx.save(proto, path)
    result = mobile_ep_cli("convert", path, "--ep", BUILTIN[0], "--shape", "x=2,12", "-o", tmp_path / "out",
                           plugins=None)
    assert result.exit_code == errors.EXIT_VERIFY  # (the model is fine: the inputs --shape asks for are not)
    assert "the test inputs failed, not the model" in result.stderr and "Reshape" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_dim_fixes_a_shared_name_everywhere(tmp_path):
    model = ocr_like(tmp_path / "ocr.onnx")
    # Every dim is called '?': --dim ?=1 would make the image 1x3x1x1 -- legal but tiny; it must apply.
    report = api.check(model, [BUILTIN[0]], options=Options(dims={"?": 4}))
    assert report.shape_changes == {"image": ["[?,3,?,?]", "[4,3,4,4]"]}


@pytest.mark.skipif("nnapi" not in INSTALLED, reason="needs the NNAPI backend")
def test_max_partitions_and_min_nodes_are_explained(tmp_path):
    resnet = next(p for p in LIGHT_MODELS if p.stem == "light_resnet50")
    report = api.check(resnet, ["nnapi"], options=Options(legalize=False, max_partitions=2,
                                                                         min_nodes=7))
    after = report.after_convert["nnapi"]
    estimates = [p.estimate for p in after.partitions]
    assert len(estimates) == 17
    kept = [e for e in estimates if e["kept"]]
    assert len(kept) == 2
    reasons = {e["reason"] for e in estimates if not e["kept"]}
    assert "fewer than --min-nodes 7 nodes" in reasons
    assert "beyond --max-partitions 2 (ranked by estimated saving)" in reasons


def test_cost_model_rejects_a_lone_add_between_copies():
    from mobile_ep.partitioning.cost import CostParams, partition_cost
    from mobile_ep.partitioning.propose import Partition

    proto = make_model([helper.make_node("Add", ["a", "b"], ["y"], name="add")],
                       [tensor("a", [1, 64]), tensor("b", [1, 64])], [tensor("y", [1, 64])])
    model = mir.from_proto(proto)
    (node,) = list(model.graph)
    from mepkit import ToyBackend
    from mobile_ep.contract import RuleContext

    part = Partition("toy", (node,), tuple(node.inputs), tuple(node.outputs))
    cost = partition_cost(part, RuleContext(model, ToyBackend()), CostParams())
    assert cost.flops == 64 and cost.boundary_bytes == 3 * 64 * 4
    assert cost.net_us < 0


def test_cost_model_counts_quantized_convolutions_and_matmuls_as_their_float_ops():
    """QLinearConv's weight is input 3: a quantized convolution costs the multiply-adds of the float one."""
    from mepkit import ToyBackend
    from mobile_ep.contract import RuleContext
    from mobile_ep.partitioning.cost import node_flops

    u8 = lambda name, shape: numpy_helper.from_array(np.zeros(shape, np.uint8), name)  # noqa: E731
    f32 = lambda name: numpy_helper.from_array(np.array(0.1, np.float32), name)  # noqa: E731
    inits = [u8("w", (16, 8, 3, 3)), u8("wq", (16, 8, 3, 3)), u8("zp", ()), f32("s"),
             numpy_helper.from_array(np.zeros((16, 8, 3, 3), np.float32), "wf"), u8("m", (32, 8))]
    nodes = [helper.make_node("Conv", ["xf", "wf"], ["yf"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QLinearConv", ["x", "s", "zp", "wq", "s", "zp", "s", "zp"], ["y"], name="qconv",
                              pads=[1, 1, 1, 1]),
             helper.make_node("MatMul", ["af", "mf"], ["bf"], name="matmul"),
             helper.make_node("QLinearMatMul", ["a", "s", "zp", "m", "s", "zp", "s", "zp"], ["b"], name="qmatmul")]
    inits.append(numpy_helper.from_array(np.zeros((32, 8), np.float32), "mf"))
    inputs = [tensor("xf", [1, 8, 10, 10]), helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 8, 10, 10]),
              tensor("af", [4, 32]), helper.make_tensor_value_info("a", TensorProto.UINT8, [4, 32])]
    outputs = [tensor("yf", [1, 16, 10, 10]), helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 16, 10, 10]),
               tensor("bf", [4, 8]), helper.make_tensor_value_info("b", TensorProto.UINT8, [4, 8])]
    model = mir.from_proto(make_model(nodes, inputs, outputs, inits))
    ctx = RuleContext(model, ToyBackend())
    flops = {n.name: node_flops(n, ctx) for n in model.graph}
    assert flops["conv"] == flops["qconv"] == 2 * 16 * 10 * 10 * 8 * 9
    assert flops["matmul"] == flops["qmatmul"] == 2 * 4 * 8 * 32


@pytest.mark.skipif("nnapi" not in INSTALLED, reason="needs the NNAPI backend")
def test_cpu_nodes_get_ort_fusions_and_claimed_nodes_stay_plain(tmp_path):
    """A GELU block too small for NNAPI: the cost model rejects its partitions, so the nodes go to the
    CPU region, where onnxruntime fuses Div/Erf/Add/Mul/Mul into one Gelu the EP cannot take."""
    rng = np.random.default_rng(0)
    d = 64
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Div", ["h", "sqrt2"], ["q"], name="div"),
             helper.make_node("Erf", ["q"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="add"),
             helper.make_node("Mul", ["h", "a"], ["m"], name="mul"),
             helper.make_node("Mul", ["m", "half"], ["g"], name="mul2"),
             helper.make_node("MatMul", ["g", "w2"], ["y"], name="mm2")]
    inits = [numpy_helper.from_array((rng.standard_normal((d, d)) * 0.05).astype(np.float32), "w1"),
             numpy_helper.from_array((rng.standard_normal((d, d)) * 0.05).astype(np.float32), "w2"),
             const("sqrt2", np.array(2 ** 0.5, np.float32)), const("one", np.array(1.0, np.float32)),
             const("half", np.array(0.5, np.float32))]
    path = tmp_path / "gelu.onnx"
    onnx.save(make_model(nodes, [tensor("x", [8, d])], [tensor("y", [8, d])], inits), path)
    # (Erf stays on the CPU: without its approximation NNAPI does not take it)
    report = api.convert(path, "nnapi", tmp_path / "out", options={"nnapi.approximate_erf": False})
    assert report.cpu_fusion is not None
    assert report.cpu_fusion.ops_after.get("com.microsoft:Gelu") == 1  # ORT's GELU fusion, on the CPU part
    assert all(v.ok for v in report.verification)
    claimed = {n for p in report.check.partitions for n in p.nodes}
    assert claimed  # the MatMuls
    assert [u.op for u in report.check.unsupported] == ["com.microsoft:Gelu"]
    # The .ort keeps the claimed MatMuls as plain ops next to the fused Gelu.
    from mobile_ep.export import ort_format as export

    ops = export.ort_format_ops(tmp_path / "out" / "gelu.nnapi.ort")
    assert "MatMul" in ops and "com.microsoft:Gelu" in ops


def randomized(model_path, tmp_path, seed=0):
    """The light model after ORT's basic optimizations, with He-scaled random weights."""
    optimized = fold_constants.ort_optimized(model_path, tmp_path)
    proto = onnx.load(optimized)
    rng = np.random.default_rng(seed)
    for t in proto.graph.initializer:
        if t.data_type != TensorProto.FLOAT:
            continue
        array = numpy_helper.to_array(t)
        if array.ndim >= 2:
            fan_in = int(np.prod(array.shape[1:])) if array.ndim > 2 else array.shape[0]
            new = rng.standard_normal(array.shape) * (2.0 / max(fan_in, 1)) ** 0.5
        else:
            new = rng.standard_normal(array.shape) * 0.05
        t.CopyFrom(numpy_helper.from_array(new.astype(np.float32), t.name))
    path = tmp_path / (model_path.stem + ".random.onnx")
    proto.ir_version = min(max(proto.ir_version, 8), 10)
    for i in list(proto.graph.input):
        if i.name in {t.name for t in proto.graph.initializer}:
            proto.graph.input.remove(i)
    onnx.save(proto, path)
    return path


SMALL = [p for p in LIGHT_MODELS if p.stem not in {"light_vgg19", "light_zfnet512", "light_bvlc_alexnet"}]


@pytest.mark.parametrize("model", SMALL, ids=lambda p: p.stem)
def test_cnn_light_models_land_in_one_partition_after_convert(model, tmp_path):
    path = randomized(model, tmp_path)
    for backend in BUILTIN:
        report = api.convert(path, backend, tmp_path / backend)
        part = report.check
        assert len(part.partitions) == 1, (backend, [u.reason for u in part.unsupported])
        assert part.supported_nodes == part.nodes, (backend, [u.reason for u in part.unsupported])
        assert all(v.ok for v in report.verification), backend
        assert report.before is not None and len(report.before.partitions) >= 1


@pytest.mark.skipif("nnapi" not in INSTALLED, reason="needs the NNAPI backend")
def test_partitions_worth_keeping_are_not_fused_away(tmp_path):
    rng = np.random.default_rng(0)
    d = 256
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Erf", ["h"], ["e"], name="erf"),
             helper.make_node("MatMul", ["e", "w2"], ["y"], name="mm2")]
    inits = [numpy_helper.from_array((rng.standard_normal((d, d)) * 0.05).astype(np.float32), n) for n in ("w1", "w2")]
    path = tmp_path / "big.onnx"
    onnx.save(make_model(nodes, [tensor("x", [64, d])], [tensor("y", [64, d])], inits), path)
    report = api.convert(path, "nnapi", tmp_path / "out", options={"nnapi.approximate_erf": False})
    assert [p.nodes for p in report.check.partitions] == [["mm1"], ["mm2"]]
    assert all(p.estimate["kept"] for p in report.check.partitions)
    assert all(v.ok for v in report.verification)


@pytest.mark.skipif("nnapi" not in INSTALLED, reason="needs the NNAPI backend")
def test_regression_nd_matmul_before_batchnorm_with_equal_sizes(tmp_path):
    """Found by the differential tests: flattening a 4-D MatMul whose N equals the channel count of the
    BatchNormalization after it let onnxruntime's MatMul+BN fusion fold the scale along the wrong axis."""
    rng = np.random.default_rng(0)
    ch = k = 4
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("BatchNormalization", ["m", "s", "b", "mu", "v"], ["y"], name="bn")]
    inits = [numpy_helper.from_array(rng.standard_normal((5, k)).astype(np.float32), "w"),
             numpy_helper.from_array((rng.standard_normal(ch) + 1).astype(np.float32), "s"),
             numpy_helper.from_array((rng.standard_normal(ch) * 0.1).astype(np.float32), "b"),
             numpy_helper.from_array((rng.standard_normal(ch) * 0.1).astype(np.float32), "mu"),
             numpy_helper.from_array((np.abs(rng.standard_normal(ch)) + 0.5).astype(np.float32), "v")]
    path = tmp_path / "mmbn.onnx"
    onnx.save(make_model(nodes, [tensor("x", [1, ch, 3, 5])], [tensor("y", [1, ch, 3, k])], inits, opset=14), path)
    report = api.convert(path, "nnapi", tmp_path / "out")
    assert all(v.ok for v in report.verification)
    assert report.check.rewrites == []


@pytest.mark.parametrize("backend", BUILTIN)
def test_ort_format_failure_on_the_background_thread_reaches_the_caller(tmp_path, backend, monkeypatch):
    """convert writes the .ort on a thread while it analyzes the written model: an error there is the
    caller's one-line error, and no .ort or report is left behind."""
    from mobile_ep.export import ort_format as export

    def broken(onnx_path, ort_path):
        raise errors.ModelError(f"onnxruntime could not convert {onnx_path} to ORT format: simulated")

    monkeypatch.setattr(export, "write_ort", broken)
    path = ocr_like(tmp_path / "ocr.onnx")
    with pytest.raises(errors.ModelError, match="could not convert .* to ORT format: simulated"):
        api.convert(path, backend, tmp_path / "out", options=Options(shapes={None: (1, 3, 32, 32)}))
    assert not (tmp_path / "out" / f"ocr.{backend}.ort").exists()
    assert not (tmp_path / "out" / "report.json").exists()


def test_check_rewrites_in_place_and_the_reports_are_unchanged_by_it():
    """check's last backend rewrites the analyzed model in place instead of copying it (the others copy):
    whichever backend comes last, the reports are the same, and rewrites did happen."""
    path = LIGHT_DIR / "light_resnet50.onnx"  # 16 Sum nodes: NNAPI's sum-to-add rewrites them
    forward = api.check(path, BUILTIN)
    backward = api.check(path, list(reversed(BUILTIN)))
    assert any(report.rewrites for report in forward.after_convert.values())
    for name in BUILTIN:
        assert forward.backends[name].as_dict() == backward.backends[name].as_dict()
        assert forward.after_convert[name].as_dict() == backward.after_convert[name].as_dict()


#: light_* models with small weights: none, one or both backends rewrite them.
SMALL_LIGHT_MODELS = [LIGHT_DIR / f"light_{name}.onnx" for name in ("squeezenet", "inception_v1", "shufflenet",
                                                                  "resnet50")]


@pytest.mark.parametrize("model", SMALL_LIGHT_MODELS, ids=lambda p: p.stem)
def test_check_after_convert_is_what_each_backend_gives_alone(model):
    """Checking several backends at once gives each the "after convert" report it gets alone, in the order the
    backends were given (one backend's rewrites never leak into another's analysis)."""
    report = api.check(model, BUILTIN)
    assert list(report.after_convert) == BUILTIN
    for name in BUILTIN:
        alone = api.check(model, [name])
        assert report.after_convert[name].as_dict() == alone.after_convert[name].as_dict()
        assert report.backends[name].as_dict() == alone.backends[name].as_dict()


def test_check_reports_do_not_depend_on_the_backends_order():
    """On light_inception_v1 only Core ML rewrites (two nodes); whatever the order the backends are given in,
    each backend's reports are the same."""
    if BUILTIN != ["nnapi", "coreml"]:
        pytest.skip("needs both built-in backends")
    path = LIGHT_DIR / "light_inception_v1.onnx"
    forward, backward = api.check(path, BUILTIN), api.check(path, list(reversed(BUILTIN)))
    assert forward.after_convert["coreml"].rewrites and not forward.after_convert["nnapi"].rewrites
    assert list(backward.after_convert) == list(reversed(BUILTIN))
    for name in BUILTIN:
        assert forward.after_convert[name].as_dict() == backward.after_convert[name].as_dict()
        assert forward.backends[name].as_dict() == backward.backends[name].as_dict()
