"""The built-in backends' inlined common checks answer exactly as the checks they stand for.

NNAPI's and Core ML's base rules run the usual case of their shared checks inline, for each rule class
that keeps the base methods (class flags ``_plain_*``, set when the class is made).  With every flag
turned off, each rule goes through the methods themselves: the answers (claim and reason) must not
change on any ONNX node case whose ops the backend has rules for, with and without constant inputs
or a dynamic batch, nor on the light_* models as ``check`` reads them, under several backend options.
"""

from __future__ import annotations

import onnx_ir as ir
import pytest

from mepkit import LIGHT_DIR
from mobile_ep import api, testing
from mobile_ep.partition import propose

BACKENDS = {  # backend -> (module of its base rule, base rule, its flags, option sets to try)
    "nnapi": ("mobile_ep_nnapi.rules._base", "NnapiRule", ("_plain_level", "_plain_shapes", "_plain_floor",
                                                           "_plain_io"),
              [{}, {"api_level": "27"}, {"use_nchw": "true", "api_level": "29"}]),
    "coreml": ("mobile_ep_coreml.rules._base", "CoreMLRule", ("_plain_checks", "_plain_types"),
               [{}, {"model_format": "NeuralNetwork"}, {"require_static_input_shapes": "true"}]),
}


def _subclasses(cls: type) -> list[type]:
    found, stack = [cls], [cls]
    while stack:
        for sub in stack.pop().__subclasses__():
            found.append(sub)
            stack.append(sub)
    return found


def _dynamic(model: ir.Model) -> ir.Model:
    """The model with its first input's first dimension made symbolic (as an exporter's batch)."""
    for value in model.graph.inputs[:1]:
        if value.shape is not None and len(value.shape):
            value.shape = ir.Shape(["N", *value.shape[1:]])
    return model


def _answers(models, backend) -> list[tuple[str, list[tuple[bool, str]]]]:
    out = []
    for name, model in models:
        proposal = propose(model, [backend])
        answers = proposal.answers[backend.name]
        out.append((name, [(bool(answers[id(node)]), answers[id(node)].reason) for node in model.graph
                           if id(node) in answers]))
    return out


@pytest.fixture(scope="module")
def light_models(tmp_path_factory):
    return [(p.stem, api.load_for_analysis(p, tmp_path_factory.mktemp(p.stem)))  # weights mapped from there
            for p in sorted(LIGHT_DIR.glob("light_*.onnx"))]


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_inlined_common_checks_answer_as_the_methods_they_replace(name, light_models, monkeypatch):
    module_name, base_name, flags, option_sets = BACKENDS[name]
    base = getattr(pytest.importorskip(module_name), base_name)
    for options in option_sets:
        (backend,) = api.resolve_backends([name], {name: options})
        classes = _subclasses(base)  # once the backend has imported its rules
        assert {type(rule) for _, _, rule in backend.rules} <= set(classes)
        assert any(all(getattr(cls, flag) for flag in flags) for cls in classes)  # the fast paths are in use
        cases = testing.candidate_cases(backend)
        models = [(case.name + suffix, testing._load_case(case, constant)) for case in cases
                  for constant, suffix in ((False, ""), (True, " (constant inputs)"))]
        models += [(case.name + " (dynamic)", _dynamic(testing._load_case(case, False))) for case in cases]
        models += light_models
        fast = _answers(models, backend)
        with monkeypatch.context() as patch:
            for cls in classes:
                for flag in flags:
                    patch.setattr(cls, flag, False)
            slow = _answers(models, backend)
        assert len(fast) == len(models) > 100
        assert sum(ok for _, answers in fast for ok, _ in answers) > 100  # claims, not only refusals
        mismatches = [(n, a, b) for (n, a), (_, b) in zip(fast, slow, strict=True) if a != b]
        assert not mismatches, f"{name} {options}: {mismatches[:3]}"
