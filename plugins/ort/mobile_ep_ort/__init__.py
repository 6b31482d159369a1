"""mobile-ep-ort: every ONNX Runtime plugin EP library installed here is a mobile-ep backend, ``ort:<EP name>``.

Its placement is the real EP's own (a session that records which nodes each EP took), its ``--compile`` is
onnxruntime's ``ModelCompiler``; see :mod:`mobile_ep_ort.backend`.  A plugin that wraps another EP package
registers :func:`plugin_ep_backends` of it.
"""

from .backend import PluginEpBackend, plugin_ep_backends

__all__ = ["PluginEpBackend", "plugin_ep_backends"]
__version__ = "0.1.0"
