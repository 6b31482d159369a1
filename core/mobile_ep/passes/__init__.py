"""Rewrite passes over the IR, one pass per module (onnx_ir ``InPlacePass`` subclasses)."""

from mobile_ep.passes.fix_shapes import FixShapesPass, parse_dim, parse_shape
from mobile_ep.passes.legalize import Applied, LegalizePass, Skipped

__all__ = ["FixShapesPass", "parse_shape", "parse_dim", "LegalizePass", "Applied", "Skipped"]
