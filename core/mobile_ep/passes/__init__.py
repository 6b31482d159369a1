"""Rewrite passes over the IR, one pass per module (onnx_ir ``InPlacePass`` subclasses)."""

from .fix_shapes import FixShapesPass, parse_dim, parse_shape
from .legalize import Applied, LegalizePass, Skipped

__all__ = ["FixShapesPass", "parse_shape", "parse_dim", "LegalizePass", "Applied", "Skipped"]
