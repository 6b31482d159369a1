"""The entry-point module of mobile-ep-nnapi: registers the NNAPI backend."""

from __future__ import annotations

from mobile_ep import hookimpl

from .backend import NnapiBackend


@hookimpl
def mobile_ep_register_backends(register):
    """Register the NNAPI backend with its default options (Android API 31, as ORT host builds assume)."""
    register(NnapiBackend())
