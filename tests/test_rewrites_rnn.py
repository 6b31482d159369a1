"""LSTM and GRU unrolled: every output equal within rounding to onnxruntime's, in every direction, with and
without initial states and biases."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from test_rewrites import rnd, run
from test_rewrites_spatial import Mobile, legalized

from mepkit import const, make_model, tensor
from mobile_ep.passes import rewrites


def _rnn(op, direction, initial, bias, steps=5, batch=2, inputs=3, hidden=4, **attrs):
    dirs = 2 if direction == "bidirectional" else 1
    gates = 4 if op == "LSTM" else 3
    names = ["x", "W", "R", "B" if bias else ""]
    inits = [const("W", rnd(dirs, gates * hidden, inputs, seed=1) / 3), const("R", rnd(dirs, gates * hidden, hidden,
                                                                                         seed=2) / 3)]
    if bias:
        inits.append(const("B", rnd(dirs, 2 * gates * hidden, seed=3) / 3))
    graph_inputs = [tensor("x", [steps, batch, inputs])]
    if initial:
        names += ["", "h0"] + (["c0"] if op == "LSTM" else [])
        graph_inputs += [tensor("h0", [dirs, batch, hidden])] + ([tensor("c0", [dirs, batch, hidden])]
                                                                 if op == "LSTM" else [])
    outs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
    shapes = [[steps, dirs, batch, hidden], [dirs, batch, hidden], [dirs, batch, hidden]]
    node = helper.make_node(op, names, outs, name="rnn", hidden_size=hidden, direction=direction, **attrs)
    proto = make_model([node], graph_inputs, [tensor(o, s) for o, s in zip(outs, shapes, strict=False)], inits,
                       opset=14)
    feeds = {i.name: rnd(*[d.dim_value for d in i.type.tensor_type.shape.dim], seed=7) for i in graph_inputs}
    feeds["x"][0, 0, 0] = 40.0  # saturates the gates
    return proto, feeds


@pytest.mark.parametrize("op, rewrite, extra", [("LSTM", rewrites.LSTMToSteps(), {}),
                                                ("GRU", rewrites.GRUToSteps(), {"linear_before_reset": 0}),
                                                ("GRU", rewrites.GRUToSteps(), {"linear_before_reset": 1})])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("initial, bias", [(True, True), (False, True), (False, False)])
def test_recurrences_unrolled_match_onnxruntime(tmp_path, op, rewrite, extra, direction, initial, bias):
    proto, feeds = _rnn(op, direction, initial, bias, **extra)
    new, legal = legalized(proto, rewrite, tmp_path, Mobile(rewrite))
    assert len(legal.applied) == 1, legal.skipped
    assert op not in {n.op_type for n in new.graph.node}
    for before, after in zip(run(proto, feeds), run(new, feeds), strict=True):
        assert before.shape == after.shape
        np.testing.assert_allclose(after, before, rtol=1e-5, atol=2e-6)


def test_lstm_with_peepholes_or_a_clip_is_left_alone(tmp_path):
    rewrite = rewrites.LSTMToSteps()
    proto, _ = _rnn("LSTM", "forward", False, True, clip=3.0)
    _, legal = legalized(proto, rewrite, tmp_path, Mobile(rewrite))
    assert legal.applied == [] and legal.skipped[0].reason == "clip is set"
