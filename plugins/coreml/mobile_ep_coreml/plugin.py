"""mobile-ep plugin module: registers the Core ML backend (entry point ``coreml`` in group ``mobile_ep``).

Importing this module must stay cheap: coremltools is only imported by the compile step.
"""

from __future__ import annotations

from mobile_ep import hookimpl

from .backend import CoreMLBackend


@hookimpl
def mobile_ep_register_backends(register):  # type: ignore[no-untyped-def]
    """Register the Core ML backend with its default options."""
    register(CoreMLBackend())
