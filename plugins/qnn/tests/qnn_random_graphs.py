"""Random ONNX graphs over what the QNN EP can be shown: every op the QNN rules or onnxruntime-qnn's op builders
know, tensors of rank 1 to 6 of every type onnxruntime's CPU EP takes for the op, QDQ groups per tensor and per
axis (with and without zero points, 8 and 16 bits), a QuantizeLinear or DequantizeLinear shared or made a graph
output, and attributes drawn at their boundaries (first and last axis, negative axes, every mode).

Written independently of the differential strategy (``mobile_ep.testing``'s random graphs): the point is to draw
what that one does not.  :func:`random_graph` builds graph number *seed* (the same seed, the same graph); a graph
onnxruntime's CPU EP does not load is dropped (``None``).  Each node is named ``n<k>_<op>``.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

IR_VERSION = 10
OPSETS = (17, 18, 19, 20, 21)
FLOATS = (T.FLOAT, T.FLOAT16)
INTS = (T.INT32, T.INT64)
SMALL = (T.UINT8, T.INT8, T.UINT16, T.INT16)
NUMERIC = FLOATS + INTS
ANY = FLOATS + INTS + SMALL + (T.BOOL,)
NP = {T.FLOAT: np.float32, T.FLOAT16: np.float16, T.INT32: np.int32, T.INT64: np.int64, T.UINT8: np.uint8,
      T.INT8: np.int8, T.UINT16: np.uint16, T.INT16: np.int16, T.BOOL: np.bool_}


class _Graph:
    """A graph being drawn: values (name -> (element type, shape)), nodes, initializers, inputs."""

    def __init__(self, rng: np.random.Generator, opset: int):
        self.rng = rng
        self.opset = opset
        self.values: dict[str, tuple[int, tuple[int, ...]]] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.forced_outputs: list[str] = []
        self.count = 0

    # -- names and values ----------------------------------------------------------------------------------------
    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}{self.count}"

    def shape(self, rank: int | None = None) -> tuple[int, ...]:
        rank = int(self.rng.integers(1, 7)) if rank is None else rank
        dims = [int(self.rng.choice([1, 2, 3, 4, 5])) for _ in range(rank)]
        while int(np.prod(dims)) > 512:
            dims[int(np.argmax(dims))] -= 1
        return tuple(dims)

    def add_input(self, dtype: int, shape: tuple[int, ...]) -> str:
        name = self.name("in")
        self.inputs.append(helper.make_tensor_value_info(name, dtype, list(shape)))
        self.values[name] = (dtype, tuple(shape))
        return name

    def const(self, array, hint: str = "c") -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def random_array(self, dtype: int, shape) -> np.ndarray:
        if dtype in FLOATS:
            return self.rng.standard_normal(shape).astype(NP[dtype])
        if dtype == T.BOOL:
            return self.rng.random(shape) > 0.5
        info = np.iinfo(NP[dtype])
        return self.rng.integers(max(info.min, -20), min(info.max, 20) + 1, shape).astype(NP[dtype])

    def weight(self, dtype: int, shape) -> str:
        return self.const(self.random_array(dtype, shape), "w")

    def pick(self, dtypes=ANY, min_rank: int = 1, max_rank: int = 6) -> str | None:
        """A value of the graph of one of *dtypes* and a rank in range; else a new graph input of such."""
        found = [n for n, (t, s) in self.values.items() if t in dtypes and min_rank <= len(s) <= max_rank]
        if found and self.rng.random() < 0.8:
            return str(self.rng.choice(found))
        dtype = int(self.rng.choice(list(dtypes)))
        return self.add_input(dtype, self.shape(int(self.rng.integers(min_rank, max_rank + 1))))

    def same_shape(self, value: str, dtype: int | None = None) -> str:
        """A second operand for *value*: itself, another value of its type and shape, a constant or a new input,
        its shape sometimes broadcast."""
        vtype, shape = self.values[value]
        dtype = vtype if dtype is None else dtype
        choice = self.rng.random()
        twins = [n for n, (t, s) in self.values.items() if t == dtype and s == shape and n != value]
        if choice < 0.25 and twins:
            return str(self.rng.choice(twins))
        if choice < 0.35 and dtype == vtype:
            return value
        target = list(shape)
        if self.rng.random() < 0.4:  # broadcast: drop leading dims or set some to 1
            target = target[int(self.rng.integers(0, len(target) + 1)):] or [1]
            target = [1 if self.rng.random() < 0.3 else d for d in target]
        if self.rng.random() < 0.5:
            return self.const(self.random_array(dtype, target), "b")
        return self.add_input(dtype, tuple(target))

    def axis(self, rank: int, negative: bool = True) -> int:
        axis = int(self.rng.choice([0, rank - 1, int(self.rng.integers(0, rank))]))
        return axis - rank if negative and self.rng.random() < 0.3 else axis

    # -- nodes --------------------------------------------------------------------------------------------------
    def node(self, op: str, inputs, n_outputs: int = 1, domain: str = "", **attrs) -> list[str]:
        outputs = [self.name("v") for _ in range(n_outputs)]
        label = f"n{len(self.nodes)}_{op}"
        self.nodes.append(helper.make_node(op, list(inputs), outputs, name=label, domain=domain or None, **attrs))
        return outputs

    def model(self, outputs: list[str]) -> onnx.ModelProto:
        infos = [helper.make_tensor_value_info(o, self.values[o][0], list(self.values[o][1])) for o in outputs]
        graph = helper.make_graph(self.nodes, "random", self.inputs, infos, initializer=self.inits)
        imports = [helper.make_opsetid("", self.opset), helper.make_opsetid("com.microsoft", 1)]
        return helper.make_model(graph, opset_imports=imports, ir_version=IR_VERSION)

    def infer(self) -> bool:
        """Type and shape the newest node's outputs (ONNX shape inference); ``False`` when it cannot."""
        model = self.model([])
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        except Exception:
            return False
        known = {v.name: v for v in inferred.graph.value_info}
        for out in self.nodes[-1].output:
            info = known.get(out)
            if info is None or not info.type.HasField("tensor_type"):
                return False
            tensor = info.type.tensor_type
            if not tensor.HasField("shape") or any(not d.HasField("dim_value") for d in tensor.shape.dim):
                return False
            self.values[out] = (tensor.elem_type, tuple(d.dim_value for d in tensor.shape.dim))
        return True


# -- op drawers: each adds one node (or a few) reading values of the graph; False when it cannot ------------------------
def _unary(types, opset_min=1, **fixed):
    def draw(g: _Graph, op: str):
        x = g.pick(types)
        attrs = {k: (v(g, x) if callable(v) else v) for k, v in fixed.items()}
        g.node(op, [x], **attrs)
    draw.opset_min = opset_min
    return draw


def _binary(types):
    def draw(g: _Graph, op: str):
        x = g.pick(types)
        g.node(op, [x, g.same_shape(x)])
    return draw


def _variadic(types):
    def draw(g: _Graph, op: str):
        x = g.pick(types)
        g.node(op, [x] + [g.same_shape(x) for _ in range(int(g.rng.integers(0, 3)))])
    return draw


def _rank(g, x):
    return len(g.values[x][1])


def _cast(g: _Graph, op: str):
    x = g.pick(ANY)
    to = int(g.rng.choice(list(ANY) + [T.DOUBLE]))
    if op == "CastLike":
        g.node(op, [x, g.const(np.zeros([1], NP.get(to, np.float64)), "like")])
    else:
        g.node(op, [x], to=to)


def _clip(g: _Graph, op: str):
    x = g.pick(FLOATS + INTS)
    dtype = g.values[x][0]
    low, high = sorted(g.random_array(dtype, [2]).tolist())
    inputs = [x]
    if g.rng.random() < 0.8:
        inputs.append(g.const(np.array(low, NP[dtype])) if g.rng.random() < 0.8 else "")
        if g.rng.random() < 0.7:
            inputs.append(g.const(np.array(high, NP[dtype])))
    g.node(op, inputs)


def _reduce(g: _Graph, op: str):
    types = FLOATS + INTS if op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean") else FLOATS
    x = g.pick(types)
    rank = _rank(g, x)
    axes = sorted(set(int(a) for a in g.rng.choice(rank, size=int(g.rng.integers(1, rank + 1)), replace=False)))
    if g.rng.random() < 0.3:
        axes = [a - rank for a in axes]
    attrs = {"keepdims": int(g.rng.integers(0, 2))}
    if g.rng.random() < 0.1:
        attrs["noop_with_empty_axes"] = 1
    axes_as_input = op == "ReduceSum" or g.opset >= 18
    inputs = [x]
    if g.rng.random() < 0.85:
        if axes_as_input:
            inputs.append(g.const(np.array(axes, np.int64), "axes"))
        else:
            attrs["axes"] = axes
    g.node(op, inputs, **attrs)


def _arg(g: _Graph, op: str):
    x = g.pick(FLOATS + INTS)
    g.node(op, [x], axis=g.axis(_rank(g, x)), keepdims=int(g.rng.integers(0, 2)),
           select_last_index=int(g.rng.random() < 0.2))


def _topk(g: _Graph, op: str):
    x = g.pick(FLOATS + INTS)
    shape = g.values[x][1]
    axis = g.axis(len(shape))
    k = int(g.rng.integers(1, shape[axis] + 1))
    g.node(op, [x, g.const(np.array([k], np.int64), "k")], 2, axis=axis, largest=int(g.rng.random() < 0.7),
           sorted=int(g.rng.random() < 0.8))


def _cumsum(g: _Graph, op: str):
    x = g.pick(FLOATS + INTS)
    axis = g.axis(_rank(g, x))
    g.node(op, [x, g.const(np.array(axis, g.rng.choice([np.int32, np.int64])), "axis")],
           exclusive=int(g.rng.random() < 0.25), reverse=int(g.rng.random() < 0.25))


def _softmax(g: _Graph, op: str):
    x = g.pick(FLOATS)
    g.node(op, [x], axis=g.axis(_rank(g, x)))


def _transpose(g: _Graph, op: str):
    x = g.pick(ANY)
    perm = [int(p) for p in g.rng.permutation(_rank(g, x))]
    g.node(op, [x], **({"perm": perm} if g.rng.random() < 0.9 else {}))


def _reshape(g: _Graph, op: str):
    x = g.pick(ANY)
    shape = list(g.values[x][1])
    size = int(np.prod(shape))
    rank = int(g.rng.integers(1, 7))
    target = []
    rest = size
    for _ in range(rank - 1):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = int(g.rng.choice(divisors))
        target.append(d)
        rest //= d
    target.append(rest)
    if g.rng.random() < 0.3:
        target[int(g.rng.integers(0, len(target)))] = -1
    g.node(op, [x, g.const(np.array(target, np.int64), "shape")])


def _flatten(g: _Graph, op: str):
    x = g.pick(ANY)
    rank = _rank(g, x)
    g.node(op, [x], axis=int(g.rng.integers(-rank, rank + 1)))


def _squeeze(g: _Graph, op: str):
    x = g.pick(ANY)
    shape = g.values[x][1]
    ones = [i for i, d in enumerate(shape) if d == 1]
    if op == "Squeeze":
        if not ones:
            return False
        axes = sorted(int(a) for a in g.rng.choice(ones, size=int(g.rng.integers(1, len(ones) + 1)), replace=False))
        g.node(op, [x] + ([g.const(np.array(axes, np.int64), "axes")] if g.rng.random() < 0.9 else []))
    else:
        out_rank = len(shape) + int(g.rng.integers(1, 3))
        axes = sorted(int(a) for a in g.rng.choice(out_rank, size=out_rank - len(shape), replace=False))
        g.node(op, [x, g.const(np.array(axes, np.int64), "axes")])
    return None


def _slice(g: _Graph, op: str):
    x = g.pick(ANY)
    shape = g.values[x][1]
    axes = sorted(int(a) for a in g.rng.choice(len(shape), size=int(g.rng.integers(1, len(shape) + 1)), replace=False))
    starts, ends, steps = [], [], []
    for a in axes:
        step = int(g.rng.choice([1, 1, 2, -1]))
        if step > 0:
            s = int(g.rng.integers(0, shape[a]))
            e = int(g.rng.choice([shape[a], s + 1, 2**31 - 1, -1 if shape[a] > 1 and s < shape[a] - 1 else shape[a]]))
        else:
            s = int(g.rng.choice([-1, shape[a] - 1]))
            e = int(g.rng.choice([-(2**31), -shape[a] - 1, 0]))
        starts.append(s)
        ends.append(e)
        steps.append(step)
    inputs = [x, g.const(np.array(starts, np.int64), "starts"), g.const(np.array(ends, np.int64), "ends")]
    if g.rng.random() < 0.8 or any(s != 1 for s in steps):
        inputs.append(g.const(np.array([a - len(shape) if g.rng.random() < 0.3 else a for a in axes], np.int64), "ax"))
        if g.rng.random() < 0.7 or any(s != 1 for s in steps):
            inputs.append(g.const(np.array(steps, np.int64), "steps"))
    g.node(op, inputs)


def _concat(g: _Graph, op: str):
    x = g.pick(ANY)
    dtype, shape = g.values[x]
    axis = g.axis(len(shape))
    others = []
    for _ in range(int(g.rng.integers(0, 3))):
        other = list(shape)
        other[axis] = int(g.rng.integers(1, 4))
        twins = [n for n, (t, s) in g.values.items() if t == dtype and list(s) == other]
        if twins and g.rng.random() < 0.5:
            others.append(str(g.rng.choice(twins)))
        elif g.rng.random() < 0.5:
            others.append(g.const(g.random_array(dtype, other), "cat"))
        else:
            others.append(g.add_input(dtype, tuple(other)))
    g.node(op, [x] + others, axis=axis)


def _split(g: _Graph, op: str):
    x = g.pick(ANY)
    shape = g.values[x][1]
    axis = g.axis(len(shape))
    size = shape[axis]
    if g.rng.random() < 0.5 and size > 1:
        cut = int(g.rng.integers(1, size))
        g.node(op, [x, g.const(np.array([cut, size - cut], np.int64), "split")], 2, axis=axis)
    elif g.opset >= 18:
        parts = int(g.rng.integers(1, min(size, 3) + 1))
        g.node(op, [x], parts, axis=axis, num_outputs=parts)
    else:
        g.node(op, [x], 1, axis=axis)


def _gather(g: _Graph, op: str):
    x = g.pick(ANY)
    shape = g.values[x][1]
    axis = g.axis(len(shape))
    itype = g.rng.choice([np.int64, np.int32])
    n = shape[axis]
    if op == "Gather":
        ishape = g.shape(int(g.rng.integers(0, 3)))
        indices = g.rng.integers(-n, n, ishape).astype(itype)
        g.node(op, [x, g.const(indices, "idx") if g.rng.random() < 0.85 else g.add_input(T.INT64, ishape)], axis=axis)
    elif op == "GatherElements":
        ishape = list(shape)
        ishape[axis] = int(g.rng.integers(1, n + 2))
        g.node(op, [x, g.const(g.rng.integers(-n, n, ishape).astype(itype), "idx")], axis=axis)
    else:  # GatherND
        batch = int(g.rng.integers(0, 2)) if len(shape) > 1 else 0
        last = int(g.rng.integers(1, len(shape) - batch + 1))
        ishape = list(shape[:batch]) + [int(g.rng.integers(1, 3)), last]
        indices = np.stack([g.rng.integers(0, shape[batch + j], ishape[:-1]) for j in range(last)], -1)
        g.node(op, [x, g.const(indices.astype(np.int64), "idx")], batch_dims=batch)


def _scatter(g: _Graph, op: str):
    x = g.pick(ANY)
    dtype, shape = g.values[x]
    reduction = str(g.rng.choice(["none", "none", "add", "mul", "max", "min"]))
    if op == "ScatterElements":
        axis = g.axis(len(shape))
        ishape = list(shape)
        ishape[axis] = 1
        idx = g.rng.integers(0, shape[axis], ishape).astype(np.int64)
        g.node(op, [x, g.const(idx, "idx"), g.same_shape_of(dtype, ishape)], axis=axis, reduction=reduction)
    else:
        idx = np.array([[int(g.rng.integers(0, shape[0]))]], np.int64)
        g.node(op, [x, g.const(idx, "idx"), g.same_shape_of(dtype, [1] + list(shape[1:]))], reduction=reduction)


def _same_shape_of(self: _Graph, dtype: int, shape) -> str:
    return self.const(self.random_array(dtype, shape), "upd") if self.rng.random() < 0.6 else \
        self.add_input(dtype, tuple(shape))


_Graph.same_shape_of = _same_shape_of  # type: ignore[attr-defined]


def _tile(g: _Graph, op: str):
    x = g.pick(ANY)
    rank = _rank(g, x)
    g.node(op, [x, g.const(g.rng.integers(1, 3, [rank]).astype(np.int64), "reps")])


def _expand(g: _Graph, op: str):
    x = g.pick(ANY)
    shape = list(g.values[x][1])
    target = [int(g.rng.integers(1, 4)) if d == 1 else d for d in shape]
    if g.rng.random() < 0.3 and len(target) < 6:
        target = [int(g.rng.integers(1, 3))] + target
    g.node(op, [x, g.const(np.array(target, np.int64), "shape")])


def _pad(g: _Graph, op: str):
    x = g.pick(FLOATS + INTS + (T.UINT8, T.INT8, T.BOOL))
    dtype, shape = g.values[x]
    rank = len(shape)
    mode = str(g.rng.choice(["constant", "constant", "reflect", "edge", "wrap"]))
    high = 2 if mode != "reflect" else 1
    pads = g.rng.integers(0, high + 1, 2 * rank)
    if mode == "constant" and g.rng.random() < 0.2:
        pads = -pads * (np.array(list(shape) * 2) > 2)
    inputs = [x, g.const(pads.astype(np.int64), "pads")]
    if mode == "constant" and g.rng.random() < 0.5:
        inputs.append(g.const(g.random_array(dtype, []), "pv"))
    if g.opset >= 18 and g.rng.random() < 0.2:
        axes = list(range(rank))
        inputs += [""] * (3 - len(inputs)) + [g.const(np.array(axes, np.int64), "axes")]
    g.node(op, inputs, mode=mode)


def _resize(g: _Graph, op: str):
    x = g.pick(FLOATS + (T.UINT8, T.INT8, T.INT32), min_rank=3, max_rank=5)
    shape = g.values[x][1]
    mode = str(g.rng.choice(["nearest", "linear", "cubic"]))
    transform = str(g.rng.choice(["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                  "half_pixel_symmetric", "tf_crop_and_resize"]))
    attrs = {"mode": mode, "coordinate_transformation_mode": transform}
    if mode == "nearest":
        attrs["nearest_mode"] = str(g.rng.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]))
    if g.rng.random() < 0.1:
        attrs["antialias"] = 1
    if g.rng.random() < 0.1:
        attrs["exclude_outside"] = 1
    spatial = len(shape) - 2
    roi = g.const(np.array([0] * len(shape) + [1] * len(shape), np.float32), "roi") \
        if transform == "tf_crop_and_resize" else ""
    if g.rng.random() < 0.5:
        factors = [float(g.rng.choice([0.5, 1.0, 2.0, 3.0, 1.5])) for _ in range(spatial)]
        g.node(op, [x, roi, g.const(np.array([1.0, 1.0] + factors, np.float32), "scales")], **attrs)
    else:
        sizes = [max(1, int(d * g.rng.choice([0.5, 1, 2, 3]))) for d in shape[2:]]
        g.node(op, [x, roi, "", g.const(np.array(list(shape[:2]) + sizes, np.int64), "sizes")], **attrs)


def _depth_space(g: _Graph, op: str):
    x = g.pick(FLOATS + (T.UINT8,), min_rank=4, max_rank=4)
    n, c, h, w = g.values[x][1]
    block = 2
    if op == "DepthToSpace" and c % 4:
        return False
    if op == "SpaceToDepth" and (h % 2 or w % 2):
        return False
    attrs = {"blocksize": block}
    if op == "DepthToSpace":
        attrs["mode"] = str(g.rng.choice(["DCR", "CRD"]))
    g.node(op, [x], **attrs)
    return None


def _spatial_input(g: _Graph, types=FLOATS, ranks=(3, 4, 5)):
    rank = int(g.rng.choice(ranks))
    found = [n for n, (t, s) in g.values.items() if t in types and len(s) == rank and min(s[2:]) >= 2]
    if found and g.rng.random() < 0.7:
        return str(g.rng.choice(found))
    dims = [1, int(g.rng.choice([1, 2, 3, 4]))] + [int(g.rng.integers(3, 7)) for _ in range(rank - 2)]
    return g.add_input(int(g.rng.choice(types)), tuple(dims))


def _conv(g: _Graph, op: str):
    x = _spatial_input(g)
    dtype, shape = g.values[x]
    channels, spatial = shape[1], len(shape) - 2
    group = int(g.rng.choice([1, 1, channels])) if op == "Conv" else 1
    out = int(g.rng.choice([1, 2, 4])) * group
    kernel = [int(g.rng.integers(1, min(3, min(shape[2:])) + 1)) for _ in range(spatial)]
    attrs = {"strides": [int(g.rng.choice([1, 2])) for _ in range(spatial)]}
    if g.rng.random() < 0.3:
        attrs["dilations"] = [int(g.rng.choice([1, 2])) if kernel[i] * 2 - 1 <= shape[2 + i] else 1
                              for i in range(spatial)]
    if g.rng.random() < 0.5:
        attrs["pads"] = [int(g.rng.integers(0, 2)) for _ in range(2 * spatial)]
    elif g.rng.random() < 0.3:
        attrs["auto_pad"] = str(g.rng.choice(["SAME_UPPER", "SAME_LOWER", "VALID"]))
    if group > 1:
        attrs["group"] = group
    wshape = [out, channels // group] + kernel if op == "Conv" else [channels, out] + kernel
    inputs = [x, _maybe_quantized_weight(g, dtype, wshape, axis=0 if op == "Conv" else 1)]
    if g.rng.random() < 0.6:
        inputs.append(g.const(g.random_array(dtype, [out]), "bias"))
    g.node(op, inputs, **attrs)


def _pool(g: _Graph, op: str):
    x = _spatial_input(g, FLOATS + ((T.UINT8, T.INT8) if op == "MaxPool" else ()))
    shape = g.values[x][1]
    spatial = len(shape) - 2
    if op.startswith("Global"):
        g.node(op, [x])
        return
    kernel = [int(g.rng.integers(1, min(3, shape[2 + i]) + 1)) for i in range(spatial)]
    attrs = {"kernel_shape": kernel, "strides": [int(g.rng.choice([1, 2])) for _ in range(spatial)]}
    if g.rng.random() < 0.4:
        attrs["pads"] = [int(g.rng.integers(0, k)) for k in kernel * 2]
    if g.rng.random() < 0.2:
        attrs["ceil_mode"] = 1
    if op == "AveragePool" and g.rng.random() < 0.3:
        attrs["count_include_pad"] = 1
    if op == "MaxPool" and g.rng.random() < 0.2:
        attrs["dilations"] = [int(g.rng.choice([1, 2])) for _ in range(spatial)]
    if op == "LpPool":
        attrs["p"] = int(g.rng.choice([1, 2, 3]))
    g.node(op, [x], **attrs)


def _matmul(g: _Graph, op: str):
    x = g.pick(FLOATS + INTS if op == "MatMul" else FLOATS)
    dtype, shape = g.values[x]
    k = shape[-1]
    n = int(g.rng.choice([1, 2, 4, 8]))
    if op == "Gemm":
        if len(shape) != 2:
            x = g.node("Flatten", [x], axis=len(shape) - 1)[0]
            if not g.infer():
                return False
            shape = g.values[x][1]
        trans_a, trans_b = int(g.rng.random() < 0.3), int(g.rng.random() < 0.4)
        k = shape[0] if trans_a else shape[1]
        m = shape[1] if trans_a else shape[0]
        b = _maybe_quantized_weight(g, dtype, [n, k] if trans_b else [k, n], axis=0 if trans_b else 1)
        inputs = [x, b]
        if g.rng.random() < 0.6:
            inputs.append(g.const(g.random_array(dtype, [n] if g.rng.random() < 0.7 else [m, n]), "bias"))
        g.node(op, inputs, transA=trans_a, transB=trans_b, alpha=float(g.rng.choice([1.0, 1.0, 0.5])),
               beta=float(g.rng.choice([1.0, 1.0, 2.0])))
        return None
    if len(shape) == 1 or g.rng.random() < 0.6:
        b = _maybe_quantized_weight(g, dtype, [k, n], axis=1) if dtype in FLOATS else g.weight(dtype, [k, n])
    else:
        b = g.add_input(dtype, tuple(shape[:-2]) + (k, n))
    g.node(op, [x, b])
    return None


def _maybe_quantized_weight(g: _Graph, dtype: int, shape, axis: int) -> str:
    """A constant weight of *shape*, often stored quantized behind a DequantizeLinear (per tensor or per *axis*)."""
    if dtype != T.FLOAT or g.rng.random() < 0.5:
        return g.weight(dtype, shape)
    qtype = int(g.rng.choice(SMALL))
    per_axis = g.rng.random() < 0.6
    count = shape[axis] if per_axis else 1
    info = np.iinfo(NP[qtype])
    data = g.rng.integers(max(info.min, -100), min(info.max, 200), shape).astype(NP[qtype])
    scale = (g.rng.random(count) * 0.05 + 0.001).astype(np.float32)
    zero = _zero_points(g, qtype, count)
    inputs = [g.const(data, "wq"), g.const(scale if per_axis else scale[0], "ws")]
    if zero is not None:
        inputs.append(g.const(zero if per_axis else zero[0], "wz"))
    return g.node("DequantizeLinear", inputs, axis=axis)[0] if per_axis else g.node("DequantizeLinear", inputs)[0]


def _zero_points(g: _Graph, qtype: int, count: int) -> np.ndarray | None:
    choice = g.rng.random()
    if choice < 0.25:
        return None
    info = np.iinfo(NP[qtype])
    symmetric = 0 if info.min < 0 else (info.max + 1) // 2
    if choice < 0.7:
        return np.full(count, symmetric, NP[qtype])
    return g.rng.integers(max(info.min, -10), min(info.max, 200), count).astype(NP[qtype])


def _qdq(g: _Graph, op: str):
    """A QDQ group on a float value: QuantizeLinear -> DequantizeLinear (per tensor or per axis, 8 or 16 bits, with
    or without zero points); sometimes the Q output is also a graph output, or shared by two DequantizeLinears."""
    x = g.pick((T.FLOAT,))
    shape = g.values[x][1]
    qtype = int(g.rng.choice(SMALL))
    per_axis = g.rng.random() < 0.3
    axis = g.axis(len(shape)) if per_axis else None
    count = shape[axis] if per_axis else 1
    scale = (g.rng.random(count) * 0.05 + 0.005).astype(np.float32)
    zero = _zero_points(g, qtype, count)
    params = [g.const(scale if per_axis else scale[0], "s")]
    if zero is not None:
        params.append(g.const(zero if per_axis else zero[0], "z"))
    attrs = {"axis": axis} if per_axis else {}
    q = g.node("QuantizeLinear", [x] + params, **attrs)[0]  # (without a zero point it writes uint8)
    if not g.infer():
        return False
    g.node("DequantizeLinear", [q] + params, **attrs)
    if not g.infer():
        return False
    if g.rng.random() < 0.15:
        g.forced_outputs.append(q)
    if g.rng.random() < 0.15:
        g.node("DequantizeLinear", [q] + params, **attrs)
    return None


def _norm(g: _Graph, op: str):
    if op == "LayerNormalization":
        x = g.pick(FLOATS)
        dtype, shape = g.values[x]
        axis = g.axis(len(shape))
        normalized = list(shape[axis % len(shape):])
        g.node(op, [x, g.weight(dtype, normalized), g.weight(dtype, normalized)], axis=axis,
               epsilon=float(g.rng.choice([1e-5, 1e-12])))
    elif op == "RMSNormalization":
        return False
    elif op == "LpNormalization":
        x = g.pick(FLOATS)
        g.node(op, [x], axis=g.axis(_rank(g, x)), p=int(g.rng.choice([1, 2])))
    else:
        x = _spatial_input(g, FLOATS, (3, 4, 5)) if op != "LRN" else _spatial_input(g, FLOATS, (4,))
        dtype, shape = g.values[x]
        c = shape[1]
        if op == "InstanceNormalization":
            g.node(op, [x, g.weight(dtype, [c]), g.weight(dtype, [c])])
        elif op == "BatchNormalization":
            var = np.abs(g.random_array(dtype, [c])) + 0.5
            g.node(op, [x, g.weight(dtype, [c]), g.weight(dtype, [c]), g.weight(dtype, [c]), g.const(var, "var")])
        elif op == "GroupNormalization":
            groups = int(g.rng.choice([d for d in range(1, c + 1) if c % d == 0]))
            size = [c] if g.opset >= 21 else [groups]
            g.node(op, [x, g.weight(dtype, size), g.weight(dtype, size)], num_groups=groups)
        else:  # LRN
            g.node(op, [x], size=int(g.rng.choice([1, 3, 5])))
    return None


def _where(g: _Graph, op: str):
    x = g.pick(ANY)
    dtype, shape = g.values[x]
    bools = [n for n, (t, s) in g.values.items() if t == T.BOOL and s == shape]
    cond = str(g.rng.choice(bools)) if bools and g.rng.random() < 0.7 else g.add_input(T.BOOL, shape)
    g.node(op, [cond, x, g.same_shape(x)])


def _einsum(g: _Graph, op: str):
    forms = [("ij,jk->ik", 2), ("bij,bjk->bik", 3), ("bhij,bhjk->bhik", 4), ("bij,bkj->bik", 3),
             ("bhij,bhkj->bhik", 4), ("bhwc,hkc->bhwk", 4), ("bchq,bkhc->bkhq", 4), ("ij->ji", 2),
             ("bij->bji", 3), ("i,i->", 1), ("bhji,bhjk->bhik", 4), ("...ij,...jk->...ik", 3), ("abc,cd->abd", 3)]
    equation, rank = forms[int(g.rng.integers(0, len(forms)))]
    dtype = int(g.rng.choice(FLOATS))
    lhs, result = equation.split("->")
    terms = lhs.split(",")
    sizes: dict[str, int] = {}
    inputs = []
    for term in terms:
        dims = []
        for letter in term.replace("...", "E"):
            sizes.setdefault(letter, int(g.rng.integers(1, 5)))
            dims.append(sizes[letter])
        inputs.append(g.add_input(dtype, tuple(dims)) if g.rng.random() < 0.5 else g.weight(dtype, dims))
    g.node(op, inputs, equation=equation)


def _range(g: _Graph, op: str):
    dtype = int(g.rng.choice([T.FLOAT, T.INT32, T.INT64]))
    start, limit, delta = (np.array(v, NP[dtype]) for v in (0, int(g.rng.integers(2, 8)), 1))
    g.node(op, [g.const(start, "st"), g.const(limit, "li"), g.const(delta, "de")])


def _grid_sample(g: _Graph, op: str):
    x = _spatial_input(g, FLOATS, (4,))
    dtype, (n, c, h, w) = g.values[x]
    grid = g.const((g.rng.random((n, 3, 3, 2)) * 2 - 1).astype(NP[dtype]), "grid")
    g.node(op, [x, grid], mode=str(g.rng.choice(["linear", "nearest", "cubic"] if g.opset >= 20 else
                                                  ["bilinear", "nearest", "bicubic"])),
           align_corners=int(g.rng.random() < 0.5))


def _rnn(g: _Graph, op: str):
    seq, batch, inp, hidden = (int(g.rng.integers(1, 5)) for _ in range(4))
    x = g.add_input(T.FLOAT, (seq, batch, inp))
    gates = 4 if op == "LSTM" else 3
    dirs = 2 if g.rng.random() < 0.3 else 1
    inputs = [x, g.weight(T.FLOAT, [dirs, gates * hidden, inp]), g.weight(T.FLOAT, [dirs, gates * hidden, hidden])]
    if g.rng.random() < 0.7:
        inputs.append(g.weight(T.FLOAT, [dirs, 2 * gates * hidden]))
    attrs = {"hidden_size": hidden, "direction": "bidirectional" if dirs == 2 else
             str(g.rng.choice(["forward", "reverse"]))}
    g.node(op, inputs, 1 + int(g.rng.integers(0, 3 if op == "LSTM" else 2)), **attrs)


def _mod(g: _Graph, op: str):
    x = g.pick(NUMERIC + SMALL)
    fmod = int(g.values[x][0] in FLOATS or g.rng.random() < 0.2)
    g.node(op, [x, g.same_shape(x)], fmod=fmod)


def _prelu(g: _Graph, op: str):
    x = g.pick(FLOATS)
    g.node(op, [x, g.same_shape(x)])


def _shape(g: _Graph, op: str):
    x = g.pick(ANY)
    g.node(op, [x])


UNARY_FLOAT = ["Exp", "Sigmoid", "Reciprocal", "Relu", "Ceil", "Cos", "Floor", "Log", "Round", "Sin", "Sqrt", "Tanh",
               "Atan", "Asin", "Acos", "Erf", "Softplus", "Softsign", "Tan", "IsNaN", "IsInf", "HardSwish", "Mish"]
DRAWERS = {
    **{op: _unary(FLOATS) for op in UNARY_FLOAT},
    "Abs": _unary(NUMERIC + SMALL), "Neg": _unary(NUMERIC + (T.INT8, T.INT16)), "Sign": _unary(NUMERIC + SMALL),
    "Identity": _unary(ANY), "Not": _unary((T.BOOL,)), "NonZero": _unary(ANY),
    "Gelu": _unary(FLOATS, approximate=lambda g, x: str(g.rng.choice(["none", "tanh"]))),
    "LeakyRelu": _unary(FLOATS, alpha=lambda g, x: float(g.rng.choice([0.01, 0.2, 1.0]))),
    "Elu": _unary(FLOATS, alpha=lambda g, x: float(g.rng.choice([1.0, 0.5]))),
    "Selu": _unary(FLOATS), "HardSigmoid": _unary(FLOATS, alpha=lambda g, x: float(g.rng.choice([0.2, 1 / 6]))),
    "ThresholdedRelu": _unary(FLOATS, alpha=lambda g, x: float(g.rng.choice([1.0, 0.0]))),
    "Celu": _unary((T.FLOAT,)),
    "Add": _binary(NUMERIC), "Sub": _binary(NUMERIC), "Mul": _binary(NUMERIC), "Div": _binary(NUMERIC),
    "Pow": _binary(FLOATS + INTS), "Equal": _binary(NUMERIC + (T.BOOL, T.UINT8)),
    "Greater": _binary(NUMERIC), "GreaterOrEqual": _binary(NUMERIC), "Less": _binary(NUMERIC),
    "LessOrEqual": _binary(NUMERIC), "And": _binary((T.BOOL,)), "Or": _binary((T.BOOL,)),
    "Xor": _binary((T.BOOL,)), "BitShift": _binary((T.UINT8,)),
    "Max": _variadic(NUMERIC + SMALL), "Min": _variadic(NUMERIC + SMALL), "Mean": _variadic(FLOATS),
    "Sum": _variadic(FLOATS + INTS), "Mod": _mod, "PRelu": _prelu, "Where": _where,
    "Cast": _cast, "CastLike": _cast, "Clip": _clip,
    **{op: _reduce for op in ("ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum", "ReduceL2", "ReduceProd",
                              "ReduceL1", "ReduceLogSumExp", "ReduceSumSquare")},
    "ArgMax": _arg, "ArgMin": _arg, "TopK": _topk, "CumSum": _cumsum, "Softmax": _softmax, "LogSoftmax": _softmax,
    "Transpose": _transpose, "Reshape": _reshape, "Flatten": _flatten, "Squeeze": _squeeze, "Unsqueeze": _squeeze,
    "Slice": _slice, "Concat": _concat, "Split": _split, "Gather": _gather, "GatherElements": _gather,
    "GatherND": _gather, "ScatterElements": _scatter, "ScatterND": _scatter, "Tile": _tile, "Expand": _expand,
    "Pad": _pad, "Resize": _resize, "DepthToSpace": _depth_space, "SpaceToDepth": _depth_space,
    "Conv": _conv, "ConvTranspose": _conv, "MaxPool": _pool, "AveragePool": _pool, "LpPool": _pool,
    "GlobalAveragePool": _pool, "GlobalMaxPool": _pool, "MatMul": _matmul, "Gemm": _matmul,
    "LayerNormalization": _norm, "InstanceNormalization": _norm, "BatchNormalization": _norm,
    "GroupNormalization": _norm, "LpNormalization": _norm, "LRN": _norm,
    "Einsum": _einsum, "Range": _range, "GridSample": _grid_sample, "LSTM": _rnn, "GRU": _rnn, "Shape": _shape,
    "QDQ": _qdq,
}
OPS = sorted(DRAWERS)


def random_graph(seed: int, max_nodes: int = 6) -> onnx.ModelProto | None:
    """Graph number *seed*: 1 to *max_nodes* drawn ops (a QDQ group counts as one), their values' leaves as graph
    outputs (and some values more); ``None`` when it does not come out valid or onnxruntime's CPU EP refuses it."""
    rng = np.random.default_rng(seed)
    g = _Graph(rng, int(rng.choice(OPSETS)))
    g.add_input(int(rng.choice(ANY)), g.shape())
    wanted = int(rng.integers(1, max_nodes + 1))
    tries = 0
    while len(g.nodes) < wanted and tries < 4 * wanted:
        tries += 1
        op = OPS[int(rng.integers(0, len(OPS)))] if rng.random() < 0.9 else "QDQ"
        mark = (len(g.nodes), len(g.inits), len(g.inputs), dict(g.values), list(g.forced_outputs), g.count)
        try:
            done = DRAWERS[op](g, op)
        except (ValueError, IndexError, ZeroDivisionError):
            done = False
        if done is not False and (op == "QDQ" or g.infer()):
            continue
        count, inits, inputs, values, forced, _ = mark
        del g.nodes[count:], g.inits[inits:], g.inputs[inputs:]
        g.values, g.forced_outputs = values, forced
    if not g.nodes:
        return None
    read = {i for n in g.nodes for i in n.input}
    produced = [o for n in g.nodes for o in n.output]
    outputs = [o for o in produced if o not in read or o in g.forced_outputs or rng.random() < 0.1]
    outputs = list(dict.fromkeys(o for o in outputs if o in g.values))
    if not outputs:
        return None
    model = g.model(outputs)
    return model if loads(model) else None


def loads(model: onnx.ModelProto) -> bool:
    """Whether ONNX's checker passes the model and onnxruntime's CPU EP opens it."""
    import onnxruntime as ort

    try:
        onnx.checker.check_model(model, full_check=True)
        so = ort.SessionOptions()
        so.log_severity_level = 4
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception:
        return False
    return True


# -- running graphs against the real EP ------------------------------------------------------------------------------
def judge(seed: int, backend, ep, max_nodes: int = 8) -> dict | None:
    """Graph *seed* through the oracle: ``None`` when the graph is dropped, else whether the real EP built it, whether
    the prediction matches, each node's op and whether its placement agrees, and the diff; ``internal``: the line of
    ``mobile-ep check --ep qnn`` on the graph when it ends in an internal error (else empty)."""
    from mobile_ep.errors import ModelError
    from mobile_ep.testing import run_oracle

    model = random_graph(seed, max_nodes)
    if model is None:
        return None
    internal = _check_internal_error(model)
    try:
        result = run_oracle(backend, model, ep, case=f"graph {seed}")
    except ModelError as exc:
        return {"seed": seed, "built": False, "error": f"mobile-ep: {exc}", "matches": False, "nodes": [],
                "internal": internal}
    except Exception as exc:  # a defect of mobile-ep itself: reported, not hidden
        return {"seed": seed, "built": True, "matches": False, "nodes": [], "internal": internal,
                "diff": f"graph {seed}: mobile-ep raised {type(exc).__name__}: {exc}"}
    wrong = result.over_claimed | result.under_claimed if result.built else set()
    return {"seed": seed, "built": result.built, "matches": result.matches, "error": result.real.error,
            "nodes": [(op, name not in wrong) for name, op in result.nodes.items()],
            "diff": "" if result.matches else result.diff(), "internal": internal}


def _check_internal_error(model: onnx.ModelProto) -> str:
    """``mobile-ep check --ep qnn`` on *model*: its internal-error line, or ``""`` when it ends otherwise."""
    import tempfile

    from click.testing import CliRunner

    from mobile_ep.cli.main import main

    with tempfile.TemporaryDirectory(prefix="mobile-ep-random-") as work:
        path = pathlib.Path(work) / "graph.onnx"
        onnx.save(model, path)
        run = CliRunner().invoke(main, ["check", str(path), "--ep", "qnn", "-O", "qnn.soc_model=60"])
    if run.exception is not None and not isinstance(run.exception, SystemExit):
        return f"{type(run.exception).__name__}: {run.exception}"
    return next((line for line in run.output.splitlines() if "internal error" in line), "")


def _worker(seeds, results, max_nodes):
    from mobile_ep_qnn.backend import QnnBackend

    backend = QnnBackend()
    ep = backend.execution_provider()
    while True:
        seed = seeds.get()
        if seed is None:
            return
        results.put(("start", seed))
        results.put(("done", judge(seed, backend, ep, max_nodes) or {"seed": seed, "dropped": True}))


def run_graphs(seeds, max_nodes: int = 8) -> list[dict]:
    """Judge each graph of *seeds* in a child process (onnxruntime-qnn crashes on some graphs: the graph in flight is
    then recorded as crashed and a new child goes on with the rest).  Dropped graphs are left out."""
    import multiprocessing
    import queue

    context = multiprocessing.get_context("spawn")
    pending = list(seeds)
    out: list[dict] = []
    while pending:
        inbox, results = context.Queue(), context.Queue()
        for seed in pending:
            inbox.put(seed)
        inbox.put(None)
        process = context.Process(target=_worker, args=(inbox, results, max_nodes), daemon=True)
        process.start()
        current = None
        finished: set[int] = set()
        while True:
            try:
                kind, payload = results.get(timeout=5)
            except queue.Empty:
                if process.is_alive():
                    continue
                break
            if kind == "start":
                current = payload
            else:
                finished.add(payload["seed"])
                if not payload.get("dropped"):
                    out.append(payload)
                current = None
        process.join()
        if current is not None:  # the EP took the child down with this graph
            out.append({"seed": current, "built": False, "matches": False, "nodes": [],
                        "error": f"the execution provider crashed (exit code {process.exitcode})"})
            finished.add(current)
        pending = [s for s in pending if s not in finished]
        if current is None and pending:  # (the child ended without a graph in flight: give up on the rest)
            break
    return out


def agreement_report(results: list[dict]) -> tuple[str, float, int]:
    """A per-op table of node placements that agree with the real EP, over the graphs it built; returns the text,
    the share of built graphs whose whole placement matches, and how many were built."""
    built = [r for r in results if r["built"]]
    matched = sum(r["matches"] for r in built)
    per_op: dict[str, list[int]] = {}
    for r in built:
        for op, ok in r["nodes"]:
            counts = per_op.setdefault(op, [0, 0])
            counts[0] += 1
            counts[1] += ok
    share = matched / len(built) if built else 1.0
    lines = [f"{len(results)} graphs, {len(built)} built by the real EP, {matched} placed as predicted "
             f"({100 * share:.1f}%); {len(results) - len(built)} not built"]
    lines.append(f"{'op':<28}{'nodes':>7}{'agree':>7}{'share':>8}")
    for op, (n, ok) in sorted(per_op.items(), key=lambda item: (item[1][1] / item[1][0], item[0])):
        lines.append(f"{op:<28}{n:>7}{ok:>7}{100 * ok / n:>7.1f}%")
    return "\n".join(lines), share, len(built)
