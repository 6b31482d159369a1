"""The NNAPI backend itself: options, registration, the rule registry and the common checks."""

from __future__ import annotations

import ast
import importlib
import pathlib
import pkgutil

import pytest
from nnapi_models import I64, U8, at_api, model, node, support

import mobile_ep
from mobile_ep import UsageError
from mobile_ep.contract import compile as compile_contract
from mobile_ep.contract.plugins import make_plugins
from mobile_ep_nnapi import NnapiBackend, NnapiOptions, feature_level_for_api, rules
from mobile_ep_nnapi.rules import NnapiRule

# Every op of reference/ort.md §1 (op builders registered in op_builder_factory.cc).
ORT_NNAPI_OPS = {
    ("", op) for op in (
        "Abs Exp Floor Log Neg Sigmoid Sin Sqrt Tanh Add Sub Mul Div Pow PRelu Relu Clip LeakyRelu Elu Cast "
        "BatchNormalization Conv QLinearConv AveragePool MaxPool GlobalAveragePool GlobalMaxPool Gemm MatMul "
        "QLinearMatMul Concat DepthToSpace DequantizeLinear QuantizeLinear Flatten Gather Identity LRN Max Min Pad "
        "ReduceMean Reshape Resize Slice Softmax Split Squeeze Unsqueeze Transpose"
    ).split()
} | {("com.microsoft", op) for op in ("QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearAveragePool",
                                     "QLinearConv")}


# -- options ------------------------------------------------------------------------------------------
def test_defaults_match_ort_host_builds():
    options = NnapiOptions()
    assert options.api_level == 31 and options.feature_level == 5
    assert options.stop_ops == ("NonMaxSuppression",)
    assert not (options.use_fp16 or options.use_nchw or options.cpu_disabled or options.cpu_only)


@pytest.mark.parametrize(("api", "level"), [(27, 1), (28, 2), (29, 3), (30, 4), (31, 5), (32, 5), (33, 6), (35, 8)])
def test_feature_level_of_api_level(api, level):
    assert feature_level_for_api(api) == level
    assert NnapiOptions(api_level=api).feature_level == level


@pytest.mark.parametrize("api", [26, 36, 0])
def test_api_level_out_of_range_is_rejected(api):
    with pytest.raises(ValueError, match="api_level must be .* 27 to 35"):
        NnapiOptions(api_level=api)


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("preference", "fast", "preference='fast': expected one of fast_single_answer, sustained_speed, low_power"),
    ("compile_ops", "all", "compile_ops='all': expected one of ort, extended"),
    ("use_fp16", 1, "use_fp16=1: expected true or false"),
])
def test_options_built_in_python_are_checked_like_parsed_ones(field, value, expected):
    with pytest.raises(ValueError) as raised:
        NnapiOptions(**{field: value})
    assert str(raised.value) == expected


def test_both_cpu_flags_are_rejected_like_ort():
    with pytest.raises(ValueError, match="cpu_disabled and cpu_only cannot both be set"):
        NnapiOptions(cpu_disabled=True, cpu_only=True)
    with pytest.raises(UsageError, match="cannot both be set"):
        NnapiBackend().configure({"cpu_disabled": "1", "cpu_only": "true"})


def test_configure_parses_strings():
    backend = NnapiBackend().configure({"api_level": "28", "use-nchw": "yes", "stop_ops": "TopK, NonMaxSuppression"})
    assert isinstance(backend, NnapiBackend)
    assert backend.options.api_level == 28 and backend.options.feature_level == 2
    assert backend.options.use_nchw and backend.preferred_layout == "NCHW"
    assert backend.options.stop_ops == ("TopK", "NonMaxSuppression")
    assert NnapiBackend().preferred_layout == "NHWC"


@pytest.mark.parametrize(("values", "message"), [
    ({"api_level": "abc"}, "expected an integer"),
    ({"api_level": "40"}, "api_level must be"),
    ({"feature_level": "3"}, "unknown option 'feature_level'"),
])
def test_configure_reports_bad_values(values, message):
    with pytest.raises(UsageError, match=message):
        NnapiBackend().configure(values)


def test_every_option_has_help():
    described = NnapiBackend().describe_options()
    assert [name for name, _, _ in described] == ["api_level", "use_fp16", "use_nchw", "cpu_disabled", "cpu_only",
                                                   "stop_ops", "compile_ops", "approximate_erf", "preference"]
    assert all(help_text for _, _, help_text in described)


# -- registration -----------------------------------------------------------------------------------
def test_registered_through_the_entry_point():
    backend = make_plugins().backend("nnapi")
    assert isinstance(backend, NnapiBackend)
    assert backend.name == "nnapi" and backend.preferred_layout == "NHWC"


def test_registry_covers_every_ort_nnapi_op():
    registered = {(domain, op) for domain, op, _ in NnapiBackend().rules}
    assert registered == ORT_NNAPI_OPS


def test_every_rule_module_registers_rules_and_documents_them():
    backend = NnapiBackend()
    modules = {type(rule).__module__ for _, _, rule in backend.rules}
    public = {f"{rules.__name__}.{m.name}" for m in pkgutil.iter_modules(rules.__path__) if not m.name.startswith("_")}
    compile_only = {name for name in public if getattr(importlib.import_module(name), "COMPILE_ONLY", False)}
    assert modules == public - compile_only  # ORT's claims: compile-only modules are not registered
    extended = NnapiBackend().configure({"compile_ops": "extended"})
    assert {type(rule).__module__ for _, _, rule in extended.rules} == public
    for _, op_type, rule in backend.rules:
        conditions = rule.conditions(op_type)
        assert conditions and all(c and not c.endswith(".") for c in conditions), (op_type, conditions)
        assert isinstance(rule, NnapiRule)


def test_ops_doc_shows_feature_levels_and_qdq():
    rows = {op: "; ".join(rule.conditions(op)) for _, op, rule in NnapiBackend().rules}
    assert rows["Abs"].startswith("feature level 3+ (API 29+)")
    assert "feature level 2+ (API 28+), 3+ with use_nchw" in rows["Conv"]
    assert "also as a QDQ unit" in rows["Conv"] and "also as a QDQ unit" not in rows["Sub"]
    assert "input 0 float32 or uint8" in rows["Transpose"]


def test_qdq_units_group_like_ort_and_only_some_are_accepted():
    backend = NnapiBackend()
    assert backend.accepted_qdq_ops == {"Conv", "Resize", "AveragePool", "Add", "Mul", "Transpose", "Reshape",
                                        "Softmax", "Concat", "Gemm", "MatMul"}
    assert backend.accepted_qdq_ops < backend.qdq_ops()
    assert {"Relu", "Sigmoid", "MaxPool", "Sub"} <= backend.qdq_ops()


# -- the common checks ----------------------------------------------------------------------------------
def test_feature_level_gate_names_the_api_levels():
    m = model(node("Abs", ["x"]), {"x": [1, 4]})
    assert support(m)
    answer = support(m, be=at_api(28))
    assert not answer
    assert answer.reason == "needs NNAPI feature level 3 (Android API 29); target is API 28"
    assert support(m, be=at_api(29))


def test_dynamic_shape_is_rejected_with_a_fix():
    answer = support(model(node("Relu", ["x"]), {"x": ["N", 3, 224, 224]}))
    assert answer.reason == "input 0 has a dynamic shape [N,3,224,224]: fix it with --shape"
    assert "no shape information" in support(model(node("Relu", ["x"]), {"x": None})).reason


def test_dynamic_shape_of_any_input_counts():
    m = model(node("Add", ["a", "b"]), {"a": [1, 4], "b": [None, 4]})
    assert "input 1 has a dynamic shape [?,4]" in support(m).reason


def test_input_type_must_be_float32():
    assert support(model(node("Relu", ["x"], ["y"]), {"x": ([2, 2], I64)}, {"y": I64})).reason == \
        "input 0 is int64; needs float32"
    assert support(model(node("Identity", ["x"], ["y"]), {"x": ([2, 2], U8)}, {"y": U8})).reason == \
        "input 0 is uint8; needs float32"


def test_opset_range():
    m = model(node("Relu", ["x"]), {"x": [2]}, opset=28)
    assert support(m).reason == "opset 28 is above the highest supported opset 27"


def test_order_of_checks_is_ort_order():
    # feature level is checked before shapes and types
    m = model(node("Abs", ["x"], ["y"]), {"x": (["N"], I64)}, {"y": I64})
    assert support(m, be=at_api(27)).reason.startswith("needs NNAPI feature level 3")
    # shapes before types
    assert "dynamic shape" in support(m).reason


def test_unknown_op_has_a_reason():
    answer = support(model(node("Sum", ["a", "b"]), {"a": [2], "b": [2]}))
    assert not answer and answer.reason == "nnapi has no rule for Sum"


def test_plugin_uses_only_the_public_api():
    """The package imports mobile_ep's public names only: the package and its public compile-contract module."""
    package = pathlib.Path(importlib.import_module("mobile_ep_nnapi").__file__).parent
    imported = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for stmt in ast.walk(tree):
            if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.module.startswith("mobile_ep"):
                assert stmt.module in ("mobile_ep", "mobile_ep.contract.compile") or stmt.module.startswith("mobile_ep_nnapi"), (
                    path, stmt.module)
                if stmt.module == "mobile_ep":
                    imported.update(alias.name for alias in stmt.names)
                if stmt.module == "mobile_ep.contract.compile":
                    assert {a.name for a in stmt.names} <= set(compile_contract.__all__), path
            elif isinstance(stmt, ast.Import):
                assert not any(a.name.startswith("mobile_ep.") for a in stmt.names), path
    assert imported and imported <= set(mobile_ep.__all__), imported - set(mobile_ep.__all__)
