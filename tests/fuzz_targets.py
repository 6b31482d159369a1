"""Fuzz targets for loading and ``check``: arbitrary bytes, and real models mutated byte- and field-wise.

A target passes when mobile-ep either analyses the input or refuses it with a :class:`MobileEpError`
(one line, a documented exit code).  Anything else — another exception, a hang, a crash of the process —
is a bug; each one found becomes a regression test in ``tests/test_hostile.py``.

Used by ``tests/test_fuzz.py`` (a bounded run in the default test run; ``tox -e fuzz`` runs it for a set
time).  Hypothesis strategies, so every failure shrinks to a small reproducer.
"""

from __future__ import annotations

import functools
import pathlib
import tempfile

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from mepkit import LIGHT_DIR, OtherBackend, ToyBackend, ToyPlugin
from mobile_ep import pipeline as api
from mobile_ep.contract.plugins import make_plugins
from mobile_ep.errors import EXIT_FAILURE, MobileEpError

ONNX_OPS = sorted({s.name for s in onnx.defs.get_all_schemas() if s.domain == ""})
HOSTILE_LOCATIONS = ["../x.bin", "/etc/passwd", "w.bin", "", "a/../../b", "*/_ORT_MEM_ADDR_/*", "sub/w.bin",
                     "model.onnx", ".", "C:\\w.bin", "w.bin\0x"]


@functools.lru_cache(maxsize=1)
def plugins():
    """Every installed backend plus the toy ones (check runs them all)."""
    pm = make_plugins()
    pm.register(ToyPlugin(ToyBackend(), OtherBackend()), name="fuzz-toy")
    return pm


def check_file(path: pathlib.Path) -> None:
    """The target: load + check one file; only one-line MobileEpErrors (not internal errors) may escape."""
    try:
        api.check(path, plugins=plugins())
    except MobileEpError as exc:
        assert "\n" not in str(exc)
        assert exc.exit_code != EXIT_FAILURE, f"internal error reported as such: {exc}"


def check_bytes(data: bytes, extra_files: dict[str, bytes] | None = None) -> None:
    with tempfile.TemporaryDirectory(prefix="mobile-ep-fuzz-") as tmp:
        folder = pathlib.Path(tmp) / "m"
        folder.mkdir()
        for name, content in (extra_files or {}).items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(content)
        path = folder / "model.onnx"
        path.write_bytes(data)
        check_file(path)


# --------------------------------------------------------------------------------------------------
# Seed models
# --------------------------------------------------------------------------------------------------
def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


@functools.lru_cache(maxsize=1)
def seed_models() -> tuple[bytes, ...]:
    from mobile_ep.samples import write_sample

    seeds = []
    with tempfile.TemporaryDirectory() as tmp:
        seeds.append(write_sample(pathlib.Path(tmp)).read_bytes())
    for name in ("light_bvlc_alexnet.onnx", "light_inception_v1.onnx"):
        if (LIGHT_DIR / name).exists():
            seeds.append((LIGHT_DIR / name).read_bytes())
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [_vi("t", [2, 3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", [2, 3])])
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["i"], then_branch=then_g, else_branch=else_g, name="if"),
         helper.make_node("Add", ["i", "w"], ["a"], name="add"),
         helper.make_node("Conv", ["a4", "k"], ["conv"], name="conv", kernel_shape=[1, 1]),
         helper.make_node("Reshape", ["a", "s"], ["a4"], name="reshape"),
         helper.make_node("Softmax", ["conv"], ["y"], name="softmax", axis=1)],
        "g", [_vi("c", [], TensorProto.BOOL), _vi("x", [2, 3])], [_vi("y", [1, 1, 2, 3])],
        initializer=[w, numpy_helper.from_array(np.ones([1, 1, 1, 1], np.float32), "k"),
                     numpy_helper.from_array(np.array([1, 1, 2, 3], np.int64), "s")])
    graph.node.sort(key=lambda n: ["if", "add", "reshape", "conv", "softmax"].index(n.name))
    seeds.append(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
                 .SerializeToString())
    return tuple(seeds)


# --------------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------------
byte_mutation = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(0, 7)),
    st.tuples(st.just("set"), st.floats(0, 1), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 64)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("truncate"), st.floats(0, 1), st.just(0)),
    st.tuples(st.just("duplicate"), st.floats(0, 1), st.integers(1, 64)),
)


def mutate_bytes(data: bytes, mutations) -> bytes:
    buf = bytearray(data)
    for kind, where, arg in mutations:
        if not buf:
            break
        i = min(int(where * len(buf)), len(buf) - 1)
        if kind == "flip":
            buf[i] ^= 1 << arg
        elif kind == "set":
            buf[i] = arg
        elif kind == "delete":
            del buf[i:i + arg]
        elif kind == "insert":
            buf[i:i] = arg
        elif kind == "truncate":
            del buf[i:]
        elif kind == "duplicate":
            buf[i:i] = buf[i:i + arg]
    return bytes(buf)


UNARY_OPS = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Softsign", "HardSigmoid", "Elu", "Identity", "Floor"]

#: Mild mutations keep most models valid, so the fuzzer also reaches onnxruntime and the backends' rules.
gentle_mutation = st.one_of(
    st.tuples(st.just("unary_op"), st.integers(0, 10**6), st.sampled_from(UNARY_OPS)),
    st.tuples(st.just("input_dim"), st.integers(0, 10**6), st.one_of(st.integers(1, 9), st.just("N"))),
    st.tuples(st.just("attribute"), st.integers(0, 10**6), st.integers(-2, 4)),
    st.tuples(st.just("drop_value_info"), st.integers(0, 10**6), st.just(0)),
)

field_mutation = st.one_of(
    gentle_mutation,
    st.tuples(st.just("op_type"), st.integers(0, 10**6), st.sampled_from(ONNX_OPS)),
    st.tuples(st.just("rewire"), st.integers(0, 10**6), st.integers(0, 10**6)),
    st.tuples(st.just("dim"), st.integers(0, 10**6), st.sampled_from([-1, 0, 1, 3, 2**31, 2**62, -(2**40)])),
    st.tuples(st.just("attribute"), st.integers(0, 10**6), st.integers(-(2**40), 2**40)),
    st.tuples(st.just("attribute_type"), st.integers(0, 10**6), st.integers(0, 14)),
    st.tuples(st.just("ir_version"), st.integers(0, 0), st.integers(-1, 20)),
    st.tuples(st.just("opset"), st.integers(0, 10**6), st.integers(-1, 30)),
    st.tuples(st.just("delete_node"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("duplicate_node"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("tensor_dims"), st.integers(0, 10**6), st.lists(st.integers(-3, 10**7), max_size=4)),
    st.tuples(st.just("tensor_type"), st.integers(0, 10**6), st.integers(0, 30)),
    st.tuples(st.just("external"), st.integers(0, 10**6), st.sampled_from(HOSTILE_LOCATIONS)),
    st.tuples(st.just("domain"), st.integers(0, 10**6), st.sampled_from(["", "com.microsoft", "com.evil", "ai.onnx.ml"])),
    st.tuples(st.just("swap_nodes"), st.integers(0, 10**6), st.integers(0, 10**6)),
    st.tuples(st.just("output_name"), st.integers(0, 10**6), st.sampled_from(["x", "y", "", "w", "dup"])),
)


def _values(graph: onnx.GraphProto) -> list[str]:
    names = [v.name for v in graph.input] + [t.name for t in graph.initializer]
    return names + [o for n in graph.node for o in n.output]


def mutate_fields(data: bytes, mutations) -> bytes:
    proto = onnx.ModelProto()
    proto.ParseFromString(data)
    graph = proto.graph
    for kind, index, arg in mutations:
        nodes = graph.node
        node = nodes[index % len(nodes)] if len(nodes) else None
        if kind == "op_type" and node is not None:
            node.op_type = arg
        elif kind == "rewire" and node is not None and node.input:
            values = _values(graph)
            node.input[arg % len(node.input)] = values[index % len(values)]
        elif kind == "dim":
            infos = [*graph.input, *graph.output, *graph.value_info]
            if infos:
                dims = infos[index % len(infos)].type.tensor_type.shape.dim
                if dims:
                    dims[index % len(dims)].dim_value = arg
        elif kind == "attribute" and node is not None and node.attribute:
            attribute = node.attribute[index % len(node.attribute)]
            if attribute.type == onnx.AttributeProto.INT:
                attribute.i = arg
            elif attribute.type == onnx.AttributeProto.INTS and attribute.ints:
                attribute.ints[index % len(attribute.ints)] = arg
            elif attribute.type == onnx.AttributeProto.FLOAT:
                attribute.f = float(arg)
        elif kind == "attribute_type" and node is not None and node.attribute:
            node.attribute[index % len(node.attribute)].type = arg
        elif kind == "ir_version":
            proto.ir_version = arg
        elif kind == "opset" and proto.opset_import:
            proto.opset_import[index % len(proto.opset_import)].version = arg
        elif kind == "delete_node" and node is not None:
            del nodes[index % len(nodes)]
        elif kind == "duplicate_node" and node is not None:
            nodes.add().CopyFrom(node)
        elif kind == "tensor_dims" and graph.initializer:
            t = graph.initializer[index % len(graph.initializer)]
            del t.dims[:]
            t.dims.extend(arg)
        elif kind == "tensor_type" and graph.initializer:
            graph.initializer[index % len(graph.initializer)].data_type = arg
        elif kind == "external" and graph.initializer:
            t = graph.initializer[index % len(graph.initializer)]
            t.ClearField("raw_data")
            t.data_location = TensorProto.EXTERNAL
            del t.external_data[:]
            t.external_data.add(key="location", value=arg)
        elif kind == "domain" and node is not None:
            node.domain = arg
        elif kind == "swap_nodes" and len(nodes) > 1:
            i, j = index % len(nodes), arg % len(nodes)
            a, b = onnx.NodeProto(), onnx.NodeProto()
            a.CopyFrom(nodes[i])
            b.CopyFrom(nodes[j])
            nodes[i].CopyFrom(b)
            nodes[j].CopyFrom(a)
        elif kind == "output_name" and node is not None and node.output:
            node.output[0] = arg
        elif kind == "unary_op" and node is not None and node.op_type in UNARY_OPS:
            node.op_type = arg
            del node.attribute[:]
        elif kind == "input_dim" and graph.input:
            dims = graph.input[index % len(graph.input)].type.tensor_type.shape.dim
            if dims:
                dim = dims[index % len(dims)]
                if isinstance(arg, str):
                    dim.dim_param = arg
                else:
                    dim.dim_value = arg
        elif kind == "drop_value_info":
            del graph.value_info[:]
    return proto.SerializeToString()


#: A weights file beside the model, for the "external" mutations that name an in-folder file.
EXTRA_FILES = {"w.bin": bytes(range(256)) * 16, "sub/w.bin": b"\0" * 64}

