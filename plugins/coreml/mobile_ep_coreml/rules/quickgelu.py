"""com.microsoft:QuickGelu (ORT ``quick_gelu_op_builder.cc``), produced by ORT's QuickGeluFusion."""

from __future__ import annotations

from ._base import CoreMLRule


class QuickGelu(CoreMLRule):
    """Input shape known; lowered as x * sigmoid(alpha * x)."""

    domain = "com.microsoft"
    op_types = ("QuickGelu",)
    neuralnetwork = False
