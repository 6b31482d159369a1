"""MatMul, Gemm and Einsum (``matmul_op_builder.cc``, ``gemm_op_builder.cc``, ``einsum_op_builder.cc``): QNN MatMul
and FullyConnected."""

from __future__ import annotations

from ._base import FLOATS, SUPPORTED, QnnRule, Support, attr, constant_or_dequantized


class MatMul(QnnRule):
    op_types = ("MatMul",)

    def check(self, unit, ctx):
        """float32/float16 or a QDQ unit; both operands may be activations; broadcasting batch dims; with a first
        operand of rank 5, a constant second one of rank 5 only (a lower-rank constant the EP makes a FullyConnected
        weight, which the HTP refuses there)."""
        inputs = unit.target.inputs[:2]
        ranks = [ctx.rank(v) for v in inputs]
        weight = inputs[1]
        if ranks[0] == 5 and ranks[1] != 5 and (ctx.is_constant(weight) or (
                unit.kind == "qdq" and constant_or_dequantized(weight, ctx))):
            return Support.no(f"operands of rank 5 and {ranks[1]}, the second a constant: the HTP takes MatMul of rank 5 "
                              "with a constant second operand of rank 5 only")
        return SUPPORTED


class Gemm(QnnRule):
    op_types = ("Gemm",)

    def check(self, unit, ctx):
        """alpha = beta = 1 (FullyConnected has no scaling); transA/transB as the EP transposes them."""
        node = unit.target
        if attr(node, "alpha", 1.0) != 1.0 or attr(node, "beta", 1.0) != 1.0:
            return Support.no("alpha or beta is not 1: QNN's FullyConnected has no scaling")
        return SUPPORTED


def _terms(equation: str) -> tuple[str, str, str] | None:
    """The two input terms and the result of *equation* when the EP parses it: ``a,b->c``, letters (either case,
    ``B G H I D, B G H J D -> B G H I J`` as torchvision's MaxViT writes them; spaces ignored), each term of two
    letters or more (no ellipsis)."""
    text = equation.replace(" ", "")
    lhs, arrow, result = text.partition("->")
    first, comma, second = lhs.partition(",")
    if not arrow or not comma or "," in second:
        return None
    if any(len(t) < 2 or not (t.isascii() and t.isalpha()) for t in (first, second, result)):
        return None
    return first, second, result


def einsum_form(equation: str) -> str | None:
    """Which matrix product the QNN EP builds *equation* as (``matmul``, ``transpose_b``, ``broadcast_transpose_b``,
    ``transpose_all``), or ``None``."""
    terms = _terms(equation)
    if terms is None:
        return None
    a, b, r = terms
    if len(a) == len(b) == len(r) and a[:-2] == b[:-2] == r[:-2] and a[-2] == r[-2]:
        if a[-1] == b[-2] and b[-1] == r[-1]:
            return "matmul"
        if a[-1] == b[-1] and b[-2] == r[-1]:
            return "transpose_b"
    if (len(a), len(b), len(r)) == (4, 3, 4) and a[2] == r[2] and a[3] == b[2] and b[1] == r[3] and a[:2] == r[:2] \
            and b[0] == r[1]:
        return "broadcast_transpose_b"
    if len(a) == len(b) == len(r) == 4 and a[0] == b[0] == r[0] and a[3] == r[3] and a[1] == b[3] and b[1] == r[1]:
        return "transpose_all"
    return None


class Einsum(QnnRule):
    op_types = ("Einsum",)
    input_types = {0: FLOATS, 1: FLOATS}

    def check(self, unit, ctx):
        """Two inputs and an equation the EP builds as a matrix product (``einsum_op_builder.cc``): ``...ij,...jk->
        ...ik`` (same batch letters), ``...ij,...kj->...ik``, ``bhwc,hkc->bhwk``, or the four-letter ``bchq,bkhc->
        bkhq`` form; letters of either case, two or more per term, no ellipsis."""
        node = unit.target
        if len([v for v in node.inputs if v is not None]) != 2:
            return Support.no("not two inputs: the QNN EP builds Einsum of two inputs as a MatMul")
        equation = attr(node, "equation", "")
        if einsum_form(equation) is None:
            return Support.no(f"equation {equation!r}: the QNN EP builds only matrix-product equations (ij,jk->ik, "
                              "ij,kj->ik with the same leading letters, bhwc,hkc->bhwk, bchq,bkhc->bkhq)")
        return SUPPORTED
