"""A generated corpus of malformed and hostile ONNX files, each with the one-line error mobile-ep must give.

``generate(folder, seed)`` writes every case into its own subfolder of *folder* and returns the cases:
the file to pass to ``mobile-ep``, the exact start of the error (after ``mobile-ep: error: ``) and the
exit code.  The seed varies everything that is not the defect itself: value, node and tensor names
(quotes, spaces, non-ASCII, newlines), shapes, ops, chain lengths, where in the graph the defect sits,
cycle lengths, nesting depths, offsets and sizes.  The development corpus uses seeds 0-2; the held-out
corpus (``tests/test_hostile_heldout.py``) uses other seeds and was not run while the checks were written.

Every file is tiny (a few KB at most): nothing here is ever large, and nothing is committed.

    python tests/hostile_corpus.py OUT_DIR [SEED]     # write a corpus to look at
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import random
import string
import sys
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

EXIT_BAD_MODEL = 3
OPSET = 13
UNARY = ("Relu", "Sigmoid", "Neg", "Abs", "Tanh", "Exp", "Softsign", "Identity")


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    path: pathlib.Path
    message: str  # the error line must be "mobile-ep: error: " + message + anything
    exit_code: int = EXIT_BAD_MODEL
    posix_only: bool = False


class Gen:
    """Random-but-seeded names and shapes for one case."""

    def __init__(self, rng: random.Random, folder: pathlib.Path) -> None:
        self.rng = rng
        self.folder = folder
        self.used: set[str] = set()

    def name(self, prefix: str = "v") -> str:
        style = self.rng.randrange(6)
        while True:
            core = "".join(self.rng.choices(string.ascii_lowercase + string.digits, k=self.rng.randint(1, 8)))
            if style == 1:
                core = f"{prefix}/{core}:0"
            elif style == 2:
                core = f"{core} \u00e9\u4e2d"  # non-ASCII
            elif style == 3:
                core = f"it's {core}"  # a quote
            elif style == 4:
                core = f"{core}\nline"  # a newline must not break the one-line error
            else:
                core = f"{prefix}_{core}"
            if core not in self.used:
                self.used.add(core)
                return core

    def shape(self, rank: int | None = None) -> list[int]:
        rank = self.rng.randint(1, 4) if rank is None else rank
        return [self.rng.randint(1, 5) for _ in range(rank)]

    def op(self) -> str:
        return self.rng.choice(UNARY)

    def chain(self, length: int | None = None, shape: list[int] | None = None):
        """(nodes, input value info, output value info, value names) of a chain of unary ops."""
        length = self.rng.randint(1, 4) if length is None else length
        shape = self.shape() if shape is None else shape
        names = [self.name("x")] + [self.name() for _ in range(length)]
        nodes = [helper.make_node(self.op(), [names[i]], [names[i + 1]], name=self.name("n")) for i in range(length)]
        return nodes, vi(names[0], shape), vi(names[-1], shape), names

    def model(self, nodes, inputs, outputs, initializers=(), *, ir_version=8, opsets=None, graph_name=None):
        graph = helper.make_graph(nodes, graph_name or self.name("g"), inputs, outputs, initializer=list(initializers))
        opsets = [("", OPSET)] if opsets is None else opsets
        return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                                 ir_version=ir_version)

    def write(self, model: onnx.ModelProto | bytes, filename: str = "model.onnx") -> pathlib.Path:
        path = self.folder / filename
        path.write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
        return path


def vi(name, shape, elem_type=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem_type, shape)


def label(node: onnx.NodeProto, index: int = 0) -> str:
    op = f"{node.domain}:{node.op_type}" if node.domain else node.op_type
    return f"{node.name!r} ({op})" if node.name else f"#{index} ({op})"


def external(tensor: TensorProto, **entries: str) -> TensorProto:
    """Turn *tensor* into an external-data reference with the given entries (its own data is dropped)."""
    for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "string_data"):
        tensor.ClearField(field)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in entries.items():
        entry = tensor.external_data.add()
        entry.key = key
        entry.value = value
    return tensor


# --------------------------------------------------------------------------------------------------
# The cases: each returns (path, expected message after the path prefix or None for a full message)
# --------------------------------------------------------------------------------------------------
CaseFn = Callable[[Gen], "tuple[pathlib.Path, str]"]
CASES: dict[str, CaseFn] = {}


def case(fn: CaseFn) -> CaseFn:
    CASES[fn.__name__] = fn
    return fn


def good(g: Gen) -> onnx.ModelProto:
    nodes, x, y, _ = g.chain()
    return g.model(nodes, [x], [y])


# -- files that are not ONNX at all -----------------------------------------------------------------
@case
def empty_file(g):
    return g.write(b""), "empty file, not an ONNX model"


@case
def truncated_in_graph(g):
    data = good(g).SerializeToString()
    # ir_version (2 bytes), then the graph field: tag 0x3a and a varint length.
    assert data[2] == 0x3A
    length, pos = 0, 3
    for shift in range(0, 35, 7):
        byte = data[pos]
        length |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            break
    cut = g.rng.randint(pos + 1, pos + length - 1)
    return g.write(data[:cut]), "not a valid ONNX model (protobuf parse failed:"


@case
def random_bytes(g):
    # wire type 7 does not exist: no parser can take this as a protobuf message
    return g.write(b"\x07" + g.rng.randbytes(g.rng.randint(1, 300))), "not a valid ONNX model (protobuf parse failed:"


@case
def zip_archive(g):
    return g.write(b"PK\x03\x04" + g.rng.randbytes(64)), "not a valid ONNX model (protobuf parse failed:"


@case
def json_text(g):
    return g.write(b'{"graph": {"node": []}, "ir_version": 8}\n'), "not a valid ONNX model (protobuf parse failed:"


@case
def protobuf_without_graph(g):
    return (g.write(onnx.ModelProto(ir_version=8, producer_name=g.name("p")).SerializeToString()),
            "not an ONNX model (no graph or IR version in the file)")


@case
def missing_file(g):
    return g.folder / "missing.onnx", "no such file"


@case
def directory(g):
    (g.folder / "dir.onnx").mkdir()
    return g.folder / "dir.onnx", "is a directory, not an ONNX model"


@case
def fifo_as_model(g):
    path = g.folder / "fifo.onnx"
    os.mkfifo(path)  # reading it would block forever
    return path, "not a regular file (a device, FIFO or socket), refused"


@case
def device_as_model(g):
    path = g.folder / "zero.onnx"
    path.symlink_to("/dev/zero")  # reading it would never end
    return path, "not a regular file (a device, FIFO or socket), refused"


# -- versions ---------------------------------------------------------------------------------------
@case
def ir_version_zero(g):
    m = good(g)
    m.ir_version = 0
    return g.write(m), "not an ONNX model (no graph or IR version in the file)"


@case
def ir_version_too_old(g):
    m = good(g)
    m.ir_version = g.rng.choice([1, 2])
    return g.write(m), f"unsupported IR version {m.ir_version} (supported: 3 to {onnx.IR_VERSION})"


@case
def ir_version_future(g):
    m = good(g)
    m.ir_version = g.rng.randint(onnx.IR_VERSION + 1, 10**9)
    return g.write(m), f"unsupported IR version {m.ir_version} (supported: 3 to {onnx.IR_VERSION})"


@case
def ir_version_negative(g):
    m = good(g)
    m.ir_version = -g.rng.randint(1, 10**12)
    return g.write(m), f"unsupported IR version {m.ir_version} (supported: 3 to {onnx.IR_VERSION})"


@case
def no_opset_import(g):
    m = good(g)
    del m.opset_import[:]
    return g.write(m), "invalid ONNX model: model with IR version >= 3 must specify opset_import for ONNX"


@case
def opset_zero_or_negative(g):
    version = g.rng.randint(-1000, 0)
    nodes, x, y, _ = g.chain()
    m = g.model(nodes, [x], [y], opsets=[("", version)])
    return g.write(m), f"unsupported opset: the model imports ai.onnx opset {version}; supported are 1 to"


@case
def opset_future(g):
    version = g.rng.randint(onnx.defs.onnx_opset_version() + 1, 10**6)
    nodes, x, y, _ = g.chain()
    m = g.model(nodes, [x], [y], opsets=[("", version)])
    return g.write(m), f"unsupported opset: the model imports ai.onnx opset {version}; supported are 1 to"


@case
def opset_imported_twice(g):
    nodes, x, y, _ = g.chain()
    m = g.model(nodes, [x], [y], opsets=[("", OPSET), ("", g.rng.randint(7, OPSET))])
    return g.write(m), "invalid ONNX model: opset of domain 'ai.onnx' imported twice"


@case
def custom_opset_negative(g):
    nodes, x, y, _ = g.chain()
    version = -g.rng.randint(1, 99)
    m = g.model(nodes, [x], [y], opsets=[("", OPSET), ("com.microsoft", version)])
    return g.write(m), f"unsupported opset: the model imports 'com.microsoft' opset {version}"


# -- graph structure --------------------------------------------------------------------------------
@case
def empty_graph(g):
    m = g.model([], [], [])
    return g.write(m), "empty graph: the model has no nodes"


@case
def no_graph_outputs(g):
    nodes, x, _, _ = g.chain()
    return g.write(g.model(nodes, [x], [])), "invalid ONNX model: the graph has no outputs"


@case
def cycle(g):
    length = g.rng.randint(2, 5)
    names = [g.name() for _ in range(length)]
    x, y = g.name("x"), g.name("y")
    nodes = [helper.make_node("Add", [names[i - 1], x], [names[i]], name=g.name("n")) for i in range(length)]
    nodes.append(helper.make_node("Relu", [names[-1]], [y], name=g.name("n")))
    g.rng.shuffle(nodes)
    shape = g.shape()
    graph_name = g.name("g")
    m = g.model(nodes, [vi(x, shape)], [vi(y, shape)], graph_name=graph_name)
    return g.write(m), "invalid ONNX model: Nodes in a graph must be topologically sorted, however input"  # (which node comes first depends on the order)


@case
def self_loop(g):
    nodes, x, y, names = g.chain(length=g.rng.randint(2, 4))
    victim = g.rng.randrange(len(nodes))
    node = nodes[victim]
    node.input.append(node.output[0])
    node.op_type = "Add"
    graph_name = g.name("g")
    m = g.model(nodes, [x], [y], graph_name=graph_name)
    return g.write(m), (f"invalid ONNX model: Nodes in a graph must be topologically sorted, however input '{node.output[0]}' of node: name: {node.name} OpType: Add is not "
                        "output of any previous nodes.")


@case
def undefined_input(g):
    nodes, x, y, _ = g.chain(length=g.rng.randint(1, 4))
    victim = g.rng.randrange(len(nodes))
    ghost = g.name("ghost")
    nodes[victim].input[0] = ghost
    graph_name = g.name("g")
    m = g.model(nodes, [x], [y], graph_name=graph_name)
    return g.write(m), (f"invalid ONNX model: Nodes in a graph must be topologically sorted, however input '{ghost}' of node: name: {nodes[victim].name} OpType: "
                        f"{nodes[victim].op_type} is not output of any previous nodes.")


@case
def duplicate_node_output(g):
    nodes, x, y, names = g.chain(length=g.rng.randint(2, 4))
    twin = helper.make_node(g.op(), [names[0]], [names[1]], name=g.name("n"))
    nodes.insert(g.rng.randint(1, len(nodes)), twin)
    graph_name = g.name("g")
    m = g.model(nodes, [x], [y], graph_name=graph_name)
    return g.write(m), f"invalid ONNX model: Graph must be in single static assignment (SSA) form, however '{names[1]}' has been used as output names multiple times."


@case
def output_shadows_input(g):
    nodes, x, y, names = g.chain(length=g.rng.randint(1, 3))
    nodes[-1].output[0] = names[0]
    graph_name = g.name("g")
    m = g.model(nodes, [x], [vi(names[0], [1])], graph_name=graph_name)
    return g.write(m), f"invalid ONNX model: Graph must be in single static assignment (SSA) form, however '{names[0]}' has been used as output names multiple times."


@case
def duplicate_graph_input(g):
    nodes, x, y, names = g.chain()
    graph_name = g.name("g")
    m = g.model(nodes, [x, vi(names[0], g.shape())], [y], graph_name=graph_name)
    return g.write(m), f"invalid ONNX model: Graph must be in single static assignment (SSA) form, however '{names[0]}' has been used as graph input names multiple times."


@case
def duplicate_initializer(g):
    shape = g.shape(2)
    x, y, w = g.name("x"), g.name("y"), g.name("w")
    inits = [numpy_helper.from_array(np.ones(shape, np.float32), w),
             numpy_helper.from_array(np.zeros(shape, np.float32), w)]
    graph_name = g.name("g")
    m = g.model([helper.make_node("Add", [x, w], [y], name=g.name("n"))], [vi(x, shape)], [vi(y, shape)], inits,
                graph_name=graph_name)
    return g.write(m), f"invalid ONNX model: {w} initializer name is not unique"


@case
def output_never_defined(g):
    nodes, x, y, _ = g.chain()
    ghost = g.name("out")
    graph_name = g.name("g")
    m = g.model(nodes, [x], [y, vi(ghost, [1])], graph_name=graph_name)
    return g.write(m), f"invalid ONNX model: Graph output '{ghost}' is not an output of any node in graph."


@case
def node_without_op_type(g):
    nodes, x, y, _ = g.chain()
    victim = g.rng.randrange(len(nodes))
    nodes[victim].op_type = ""
    graph_name = g.name("g")
    m = g.model(nodes, [x], [y], graph_name=graph_name)
    return g.write(m), "invalid ONNX model: Field 'op_type' of 'node' is required to be non-empty."


@case
def unknown_domain(g):
    nodes, x, y, _ = g.chain()
    victim = g.rng.randrange(len(nodes))
    domain = g.rng.choice(["com.evil", "org.example.ops", "ai.onnx.contrib", "x"])
    nodes[victim].domain = domain
    imports = [("", OPSET)] + ([(domain, 1)] if g.rng.random() < 0.5 else [])
    m = g.model(nodes, [x], [y], opsets=imports)
    return g.write(m), (f"unknown domain: node {label(nodes[victim], victim)} is in domain {domain!r}, which neither "
                        "ONNX nor onnxruntime implements")


@case
def unknown_op(g):
    nodes, x, y, _ = g.chain()
    victim = g.rng.randrange(len(nodes))
    op = g.rng.choice(["FooBar", "Relu6", "Conv2D", "Swish"])
    nodes[victim].op_type = op
    m = g.model(nodes, [x], [y])
    return g.write(m), f"invalid ONNX model: No Op registered for {op} with domain_version of {OPSET}"


def if_node(g, then_graph, else_graph, cond, out):
    return helper.make_node("If", [cond], [out], name=g.name("if"), then_branch=then_graph, else_branch=else_graph)


def branch(g, source, out_name, shape):
    node = helper.make_node(g.op(), [source], [out_name], name=g.name("b"))
    return helper.make_graph([node], g.name("branch"), [], [vi(out_name, shape)])


@case
def subgraph_undefined_input(g):
    shape = g.shape()
    c, x, y, ghost = g.name("c"), g.name("x"), g.name("y"), g.name("ghost")
    then_out, else_out = g.name("t"), g.name("e")
    then_graph = branch(g, ghost, then_out, shape)
    else_graph = branch(g, x, else_out, shape)
    if g.rng.random() < 0.5:
        then_graph, else_graph = else_graph, then_graph
    bad = then_graph if then_graph.node[0].input[0] == ghost else else_graph
    m = g.model([if_node(g, then_graph, else_graph, c, y)], [vi(c, [], TensorProto.BOOL), vi(x, shape)], [vi(y, shape)])
    return g.write(m), (f"invalid ONNX model: Nodes in a graph must be topologically sorted, however input '{ghost}' of node: name: {bad.node[0].name} OpType: "
                        f"{bad.node[0].op_type} is not output of any previous nodes.")


@case
def subgraph_cycle(g):
    shape = g.shape()
    c, x, y = g.name("c"), g.name("x"), g.name("y")
    a, b, out = g.name("a"), g.name("b"), g.name("o")
    body_nodes = [helper.make_node("Add", [b, x], [a], name=g.name("n")),
                  helper.make_node("Add", [a, x], [b], name=g.name("n")),
                  helper.make_node("Relu", [b], [out], name=g.name("n"))]
    body = helper.make_graph(body_nodes, g.name("body"), [], [vi(out, shape)])
    other = branch(g, x, g.name("e"), shape)
    m = g.model([if_node(g, body, other, c, y)], [vi(c, [], TensorProto.BOOL), vi(x, shape)], [vi(y, shape)])
    return g.write(m), (f"invalid ONNX model: Nodes in a graph must be topologically sorted, however input '{b}' of node: name: {body_nodes[0].name} OpType: Add is not output of any "
                        "previous nodes.")


def nested_ifs(g, depth):
    shape = [1]
    c, x = g.name("c"), g.name("x")
    inner = branch(g, x, g.name("o"), shape)
    for _ in range(depth):
        out = g.name("o")
        node = if_node(g, inner, branch(g, x, g.name("e"), shape), c, out)
        inner = helper.make_graph([node], g.name("level"), [], [vi(out, shape)])
    return g.model(list(inner.node), [vi(c, [], TensorProto.BOOL), vi(x, shape)], list(inner.output))


@case
def deeply_nested_subgraphs(g):
    depth = g.rng.randint(17, 30)  # deeper than MAX_SUBGRAPH_DEPTH, still parseable
    return g.write(nested_ifs(g, depth)), "subgraphs nested more than 16 deep"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


@case
def nesting_beyond_protobuf(g):
    # Hand-encoded: graph -> node -> attribute -> graph ... 40+ levels, past every protobuf parser's limit.
    levels = g.rng.randint(40, 200)
    graph = b""
    for _ in range(levels):
        attribute = b"\x0a\x01g" + b"\x32" + _varint(len(graph)) + graph + b"\xa0\x01\x05"  # type GRAPH
        node = b"\x22\x02If" + b"\x2a" + _varint(len(attribute)) + attribute  # op_type, attribute (field 5)
        graph = b"\x0a" + _varint(len(node)) + node  # node (field 1)
    model = b"\x08\x08" + b"\x3a" + _varint(len(graph)) + graph + b"\x42\x02\x10\x0d"
    return g.write(model), "not a valid ONNX model (protobuf parse failed: messages nested too deeply"


@case
def recursive_function(g):
    shape = g.shape()
    fname = g.rng.choice(["loop", "again", "f"])
    a, b = g.name("a"), g.name("b")
    function = helper.make_function("local", fname, [a], [b], [helper.make_node(fname, [a], [b], domain="local")],
                                    [helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)])
    x, y = g.name("x"), g.name("y")
    m = g.model([helper.make_node(fname, [x], [y], domain="local", name=g.name("n"))], [vi(x, shape)], [vi(y, shape)],
                opsets=[("", OPSET), ("local", 1)])
    m.functions.append(function)
    return g.write(m), (f"invalid ONNX model: Cycle detected in model-local function references: local::{fname} -> "
                        f"local::{fname}. Model-local functions must not be recursive.")


# -- absurd shapes ----------------------------------------------------------------------------------
@case
def negative_input_dim(g):
    nodes, x, y, names = g.chain()
    dim = -g.rng.randint(2, 10**6)  # (-1 is an unknown dim)
    shape = g.shape()
    shape[g.rng.randrange(len(shape))] = dim
    m = g.model(nodes, [vi(names[0], shape)], [y])
    return g.write(m), f"absurd shape: graph input {names[0]!r} has a negative dimension ({dim})"


@case
def overflowing_input_dims(g):
    nodes, x, y, names = g.chain()
    shape = [2**62, 2**62] + g.shape(g.rng.randint(0, 2))
    m = g.model(nodes, [vi(names[0], shape)], [y])
    return g.write(m), f"absurd shape: graph input {names[0]!r} would have"


@case
def billions_of_elements_output(g):
    nodes, x, y, names = g.chain()
    shape = [g.rng.randint(50_000, 100_000), g.rng.randint(50_000, 100_000)]
    m = g.model(nodes, [x], [vi(names[-1], shape)])
    return g.write(m), f"absurd shape: graph output {names[-1]!r} would have"


@case
def negative_value_info_dim(g):
    nodes, x, y, names = g.chain(length=2)
    m = g.model(nodes, [x], [y])
    dim = -g.rng.randint(2, 99)  # (-1 is an unknown dim)
    m.graph.value_info.append(vi(names[1], [dim, 3]))
    return g.write(m), f"absurd shape: value {names[1]!r} has a negative dimension ({dim})"


@case
def unknown_element_type(g):
    nodes, x, y, names = g.chain()
    elem = g.rng.randint(100, 10**6)
    m = g.model(nodes, [vi(names[0], g.shape(), elem)], [y])
    return g.write(m), f"invalid ONNX model: graph input {names[0]!r} has an unknown element type {elem}"


@case
def constant_of_shape_bomb(g):
    # 12 bytes of file, 10^12+ floats once onnxruntime folds it
    dims = [g.rng.randint(10**4, 10**5) for _ in range(3)]
    s, big, r, x, y = g.name("s"), g.name("big"), g.name("r"), g.name("x"), g.name("y")
    nodes = [helper.make_node("ConstantOfShape", [s], [big], name=g.name("n"),
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
             helper.make_node("ReduceSum", [big], [r], keepdims=0, name=g.name("n")),
             helper.make_node("Add", [x, r], [y], name=g.name("n"))]
    m = g.model(nodes, [vi(x, [1])], [vi(y, [1])], [numpy_helper.from_array(np.array(dims, np.int64), s)])
    return g.write(m), f"absurd shape: value {big!r} would have"


@case
def expand_bomb(g):
    dims = [g.rng.randint(10**5, 10**6), g.rng.randint(10**5, 10**6)]
    s, one, big, r, x, y = (g.name(p) for p in ("s", "one", "big", "r", "x", "y"))
    nodes = [helper.make_node("Expand", [one, s], [big], name=g.name("n")),
             helper.make_node("ReduceMax", [big], [r], keepdims=0, name=g.name("n")),
             helper.make_node("Mul", [x, r], [y], name=g.name("n"))]
    inits = [numpy_helper.from_array(np.array(dims, np.int64), s), numpy_helper.from_array(np.ones([1], np.float32), one)]
    m = g.model(nodes, [vi(x, [1])], [vi(y, [1])], inits)
    return g.write(m), f"absurd shape: value {big!r} would have"


# -- malformed tensors ------------------------------------------------------------------------------
def add_with(g, tensor: TensorProto, shape=None):
    shape = shape or [1]
    x, y = g.name("x"), g.name("y")
    return g.model([helper.make_node("Add", [x, tensor.name], [y], name=g.name("n"))], [vi(x, shape)],
                   [vi(y, shape)], [tensor])


@case
def raw_data_too_short(g):
    shape = g.shape(2)
    w = g.name("w")
    t = helper.make_tensor(w, TensorProto.FLOAT, shape, np.ones(shape, np.float32).tobytes(), raw=True)
    cut = g.rng.randint(1, 4 * int(np.prod(shape)))
    t.raw_data = t.raw_data[:-cut]
    need = 4 * int(np.prod(shape))
    return g.write(add_with(g, t)), (f"malformed tensor: initializer {w!r} holds {need - cut:,} bytes but its shape "
                                     f"{shape} of FLOAT needs {need:,}")


@case
def huge_dims_tiny_data(g):
    w = g.name("w")
    shape = [g.rng.randint(10**5, 10**6), g.rng.randint(10**5, 10**6)]
    t = TensorProto(name=w, data_type=TensorProto.FLOAT, dims=shape, raw_data=b"\0\0\x80?")
    need = 4 * shape[0] * shape[1]
    return g.write(add_with(g, t)), (f"malformed tensor: initializer {w!r} holds 4 bytes but its shape {shape} of "
                                     f"FLOAT needs {need:,}")


@case
def negative_tensor_dims(g):
    w = g.name("w")
    dim = -g.rng.randint(1, 1000)
    t = TensorProto(name=w, data_type=TensorProto.FLOAT, dims=[2, dim], float_data=[1.0, 2.0])
    return g.write(add_with(g, t)), f"malformed tensor: initializer {w!r} has a negative dimension ({dim})"


@case
def tensor_unknown_data_type(g):
    w = g.name("w")
    data_type = g.rng.choice([0, 99, 12345])
    t = TensorProto(name=w, data_type=data_type, dims=[1], raw_data=b"\0\0\0\0")
    return g.write(add_with(g, t)), f"malformed tensor: initializer {w!r} has an unknown data type {data_type}"


@case
def float_data_count_mismatch(g):
    w = g.name("w")
    shape = g.shape(2)
    n = int(np.prod(shape))
    count = n + g.rng.choice([-1, 1, 5]) if n > 1 else n + 1
    t = TensorProto(name=w, data_type=TensorProto.FLOAT, dims=shape, float_data=[0.5] * count)
    return g.write(add_with(g, t)), (f"malformed tensor: initializer {w!r} holds {count:,} values but its shape "
                                     f"{shape} of FLOAT needs {n:,}")


@case
def tensor_without_data(g):
    w = g.name("w")
    shape = g.shape(2)
    t = TensorProto(name=w, data_type=TensorProto.FLOAT, dims=shape)
    return g.write(add_with(g, t)), (f"invalid ONNX model: TensorProto (tensor name: {w}) should contain one and only "
                                     "one value field.")


@case
def tensor_two_data_fields(g):
    w = g.name("w")
    t = TensorProto(name=w, data_type=TensorProto.FLOAT, dims=[1], float_data=[1.0], raw_data=b"\0\0\0\0")
    return g.write(add_with(g, t)), (f"invalid ONNX model: TensorProto (tensor name: {w}) should contain one and only one "
                                     "value field.")


@case
def tensor_data_in_wrong_field(g):
    w = g.name("w")
    t = TensorProto(name=w, data_type=TensorProto.FLOAT, dims=[2], int64_data=[1, 2])
    return g.write(add_with(g, t)), ("invalid ONNX model: values of data_type '1' should be stored in field 'float_data' "
                                     "instead of 'int64_data'")


@case
def constant_attribute_malformed(g):
    shape = g.shape(1)
    c, x, y = g.name("c"), g.name("x"), g.name("y")
    value = TensorProto(name="", data_type=TensorProto.FLOAT, dims=shape, raw_data=b"\0\0")
    node_c = helper.make_node("Constant", [], [c], name=g.name("k"), value=value)
    m = g.model([node_c, helper.make_node("Add", [x, c], [y], name=g.name("n"))], [vi(x, shape)], [vi(y, shape)])
    need = 4 * shape[0]
    return g.write(m), (f"malformed tensor: attribute 'value' of node {label(node_c)} holds 2 bytes but its shape "
                        f"{shape} of FLOAT needs {need:,}")


@case
def string_tensor_raw_data(g):
    w = g.name("w")
    t = TensorProto(name=w, data_type=TensorProto.STRING, dims=[1], raw_data=b"abc")
    x, y = g.name("x"), g.name("y")
    m = g.model([helper.make_node("Identity", [x], [y], name=g.name("n"))], [vi(x, [1])], [vi(y, [1])], [t])
    return g.write(m), f"invalid ONNX model: STRING data (tensor name: {w}) should not be stored in raw_data field"


# -- attributes -------------------------------------------------------------------------------------
def softmax_model(g, attribute: onnx.AttributeProto):
    shape = g.shape(2)
    x, y = g.name("x"), g.name("y")
    node = helper.make_node("Softmax", [x], [y], name=g.name("n"))
    node.attribute.append(attribute)
    return g.model([node], [vi(x, shape)], [vi(y, shape)])


@case
def attribute_type_and_field_mismatch(g):
    attribute = onnx.AttributeProto(name="axis", type=onnx.AttributeProto.INT, f=g.rng.random())
    return g.write(softmax_model(g, attribute)), "invalid ONNX model: type field and data field mismatch in attribute axis"


@case
def attribute_wrong_type(g):
    attribute = helper.make_attribute("axis", g.rng.choice(["last", "1", "-1"]))
    return g.write(softmax_model(g, attribute)), "invalid ONNX model: Mismatched attribute type in"


@case
def attribute_undefined_type(g):
    attribute = helper.make_attribute("axis", 1)
    attribute.type = onnx.AttributeProto.UNDEFINED
    return g.write(softmax_model(g, attribute)), "invalid ONNX model: type field and data field mismatch in attribute axis"


@case
def attribute_unknown(g):
    name = g.rng.choice(["alpha", "foo", "kernel"])
    attribute = helper.make_attribute(name, g.rng.randint(0, 9))
    return g.write(softmax_model(g, attribute)), f"invalid ONNX model: Unrecognized attribute: {name} for operator Softmax"


# -- external data ----------------------------------------------------------------------------------
def external_model(g, **entries):
    """A model whose initializer is an external-data reference with *entries*; returns (path, tensor name)."""
    shape = g.shape(2)
    w = g.name("w")
    t = external(numpy_helper.from_array(np.ones(shape, np.float32), w), **entries)
    return g.write(add_with(g, t, shape)), w


def weights_file(g, name="weights.bin", size=4096):
    (g.folder / name).write_bytes(g.rng.randbytes(size))
    return name


@case
def external_absolute_path(g):
    location = g.rng.choice(["/etc/passwd", "/proc/self/environ", "/root/.ssh/id_rsa", str(g.folder / "w.bin")])
    path, w = external_model(g, location=location)
    return path, (f"external data of initializer {w!r} refused: location {location!r} is an absolute path; it must be "
                  "relative to the model's folder")


@case
def external_windows_absolute(g):
    location = g.rng.choice(["C:\\Windows\\win.ini", "\\\\server\\share\\w.bin", "D:/w.bin"])
    path, w = external_model(g, location=location)
    return path, f"external data of initializer {w!r} refused: location {location!r} is an absolute path"


@case
def external_home_path(g):
    location = "~/" + g.rng.choice([".ssh/id_rsa", "w.bin"])
    path, w = external_model(g, location=location)
    return path, f"external data of initializer {w!r} refused: location {location!r} is an absolute path"


@case
def external_dotdot(g):
    location = g.rng.choice(["../secret.bin", "../../home/user/.ssh/id_rsa", "sub/../../x.bin", "a/b/../../../c",
                             "..\\..\\secret.bin"])
    path, w = external_model(g, location=location)
    return path, (f"external data of initializer {w!r} refused: location {location!r} contains '..'; it must stay "
                  "inside the model's folder")


@case
def external_symlink_leaving(g):
    outside = g.folder.parent / f"outside-{g.folder.name}.bin"
    outside.write_bytes(b"\0" * 4096)
    link = g.name("l").replace("/", "_").replace("\n", "_") + ".bin"
    (g.folder / link).symlink_to(outside)
    path, w = external_model(g, location=link)
    return path, (f"external data of initializer {w!r} refused: location {link!r} leaves the model's folder through a "
                  "symbolic link")


@case
def external_symlinked_dir_leaving(g):
    outside = g.folder.parent / f"outside-dir-{g.folder.name}"
    outside.mkdir()
    (outside / "w.bin").write_bytes(b"\0" * 4096)
    (g.folder / "d").symlink_to(outside, target_is_directory=True)
    path, w = external_model(g, location="d/w.bin")
    return path, f"external data of initializer {w!r} refused: location 'd/w.bin' leaves the model's folder"


@case
def external_symlink_inside(g):
    target = weights_file(g)
    (g.folder / "alias.bin").symlink_to(target)
    path, w = external_model(g, location="alias.bin")
    return path, f"external data of initializer {w!r} refused: location 'alias.bin' is a symbolic link"


@case
def external_fifo(g):
    os.mkfifo(g.folder / "pipe.bin")
    path, w = external_model(g, location="pipe.bin")
    return path, f"external data of initializer {w!r} refused: location 'pipe.bin' is not a regular file"


@case
def external_directory(g):
    (g.folder / "weights").mkdir()
    path, w = external_model(g, location="weights")
    return path, f"external data of initializer {w!r} refused: location 'weights' is not a regular file"


@case
def external_missing_file(g):
    location = g.rng.choice(["nope.bin", "sub/dir/w.bin", "model.data"])
    path, w = external_model(g, location=location)
    return path, f"external data of initializer {w!r} refused: location {location!r} does not exist in the model's folder"


@case
def external_offset_past_end(g):
    size = g.rng.randint(16, 4096)
    location = weights_file(g, size=size)
    offset = size + g.rng.randint(0, 10**9)
    path, w = external_model(g, location=location, offset=str(offset))
    return path, f"external data of initializer {w!r} refused: offset {offset:,} + length"


@case
def external_length_past_end(g):
    shape = g.shape(2)
    n = 4 * int(np.prod(shape))
    size = g.rng.randint(n, n + 64)
    location = weights_file(g, size=size)
    offset = size - n + g.rng.randint(1, 16)
    w = g.name("w")
    t = external(TensorProto(name=w, data_type=TensorProto.FLOAT, dims=shape), location=location,
                 offset=str(offset), length=str(n))
    path = g.write(add_with(g, t, shape))
    return path, (f"external data of initializer {w!r} refused: offset {offset:,} + length {n:,} is past the end of "
                  f"{location!r} ({size:,} bytes)")


@case
def external_huge_offset(g):
    location = weights_file(g)
    key = g.rng.choice(["offset", "length"])
    digits = g.rng.randint(20, 6000)  # (past Python's 4,300-digit limit for int())
    path, w = external_model(g, location=location, **{key: "9" * digits})
    return path, f"external data of initializer {w!r} refused: {key} of {digits:,} digits is larger than any file"


@case
def external_bad_offset(g):
    location = weights_file(g)
    offset = g.rng.choice(["-8", "abc", "1e3", " 4", "0x10", "٣"])
    path, w = external_model(g, location=location, offset=offset)
    return path, f"external data of initializer {w!r} refused: offset {offset!r} is not a non-negative integer"


@case
def external_length_mismatch(g):
    location = weights_file(g)
    shape = g.shape(2)
    n = 4 * int(np.prod(shape))
    length = n + g.rng.choice([-1, 1, 4, 1000])
    w = g.name("w")
    t = external(TensorProto(name=w, data_type=TensorProto.FLOAT, dims=shape), location=location, length=str(length))
    path = g.write(add_with(g, t, shape))
    return path, (f"external data of initializer {w!r} refused: length {length:,} does not match its shape {shape} of "
                  f"FLOAT ({n:,} bytes)")


@case
def external_ort_memory_address(g):
    # onnxruntime would read the tensor from the *address* given as offset
    location = "*/_ORT_MEM_ADDR_/*"
    path, w = external_model(g, location=location, offset=str(g.rng.randint(0, 2**48)))
    return path, f"external data of initializer {w!r} refused: location {location!r} is onnxruntime's in-memory marker"


@case
def external_no_location(g):
    entries = g.rng.choice([{}, {"offset": "0"}, {"location": ""}])
    path, w = external_model(g, **entries)
    return path, f"external data of initializer {w!r} refused: no location"


@case
def external_string_tensor(g):
    location = weights_file(g)
    w = g.name("w")
    t = external(TensorProto(name=w, data_type=TensorProto.STRING, dims=[1]), location=location)
    x, y = g.name("x"), g.name("y")
    m = g.model([helper.make_node("Identity", [x], [y], name=g.name("n"))], [vi(x, [1])], [vi(y, [1])], [t])
    return g.write(m), f"external data of initializer {w!r} refused: string tensors cannot be stored as external data"


@case
def external_in_constant_attribute(g):
    shape = g.shape(1)
    c, x, y = g.name("c"), g.name("x"), g.name("y")
    value = external(TensorProto(name="", data_type=TensorProto.FLOAT, dims=shape), location="../../etc/passwd")
    node_c = helper.make_node("Constant", [], [c], name=g.name("k"), value=value)
    m = g.model([node_c, helper.make_node("Add", [x, c], [y], name=g.name("n"))], [vi(x, shape)], [vi(y, shape)])
    return g.write(m), (f"external data of attribute 'value' of node {label(node_c)} refused: location "
                        "'../../etc/passwd' contains '..'")


@case
def external_in_subgraph(g):
    shape = g.shape(1)
    c, x, y, w = g.name("c"), g.name("x"), g.name("y"), g.name("w")
    out = g.name("t")
    t = external(TensorProto(name=w, data_type=TensorProto.FLOAT, dims=shape), location="/etc/shadow")
    then_graph = helper.make_graph([helper.make_node("Add", [x, w], [out], name=g.name("b"))], g.name("then"), [],
                                   [vi(out, shape)], initializer=[t])
    else_graph = branch(g, x, g.name("e"), shape)
    m = g.model([if_node(g, then_graph, else_graph, c, y)], [vi(c, [], TensorProto.BOOL), vi(x, shape)], [vi(y, shape)])
    return g.write(m), f"external data of initializer {w!r} refused: location '/etc/shadow' is an absolute path"


@case
def external_nul_in_location(g):
    location = "w.bin\0/../../etc/passwd"
    path, w = external_model(g, location=location)
    return path, f"external data of initializer {w!r} refused: location {location!r} contains a NUL character"


# --------------------------------------------------------------------------------------------------
def generate(folder: str | os.PathLike, seed: int = 0, *, names: list[str] | None = None) -> list[Case]:
    """Write every case (or those in *names*) under *folder*, one subfolder each, and return them."""
    folder = pathlib.Path(folder)
    cases = []
    for name, fn in sorted(CASES.items()):
        if names is not None and name not in names:
            continue
        sub = folder / f"{name}"
        sub.mkdir(parents=True, exist_ok=True)
        rng = random.Random(f"{seed}:{name}")
        path, message = fn(Gen(rng, sub))
        cases.append(Case(name, path, f"{path}: {message}",
                          posix_only=name in {"fifo_as_model", "device_as_model", "external_fifo"}))
    return cases


if __name__ == "__main__":
    out = pathlib.Path(sys.argv[1])
    for c in generate(out, int(sys.argv[2]) if len(sys.argv) > 2 else 0):
        print(f"{c.name:32} {c.exit_code}  {c.message!r}")
