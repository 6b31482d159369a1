"""Identity (ORT ``identity_op_builder.cc``)."""

from __future__ import annotations

from ._base import CoreMLRule


class Identity(CoreMLRule):
    """Base checks only."""

    op_types = ("Identity",)
    trivial = True
