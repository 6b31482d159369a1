"""The entry-point module of mobile-ep-ort: one backend per plugin EP library an installed package provides,
and ``ort`` for a library given by path (``-O ort.library=PATH``)."""

from __future__ import annotations

from mobile_ep import hookimpl
from mobile_ep.ep_libraries import installed_libraries

from .backend import AnyLibraryBackend, backend_class


@hookimpl
def mobile_ep_register_backends(register):
    """``ort:<EP>`` for each EP of each installed package of :data:`mobile_ep.ep_libraries.KNOWN_PACKAGES`
    (nothing is loaded until the backend is used or listed), and ``ort``."""
    for library in installed_libraries():
        register(backend_class(library)())
    register(AnyLibraryBackend())
