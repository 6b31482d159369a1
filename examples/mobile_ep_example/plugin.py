"""The module the ``mobile_ep`` entry point names: module-level ``@hookimpl`` functions."""

from __future__ import annotations

from mobile_ep import hookimpl

from .backend import ExampleNpu


@hookimpl
def mobile_ep_register_backends(register):
    register(ExampleNpu())
