"""The entry-point module of mobile-ep-qnn: registers the QNN backend."""

from __future__ import annotations

from mobile_ep import hookimpl

from .backend import QnnBackend


@hookimpl
def mobile_ep_register_backends(register):
    """Register the QNN backend with its default options (HTP, soc_model 60)."""
    register(QnnBackend())
