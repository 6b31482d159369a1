"""Hook specifications of mobile-ep: the whole plugin API in one place.

A plugin is a module (or an object) with functions named like the hooks below and decorated with
:data:`mobile_ep.hookimpl`, published through the ``mobile_ep`` entry-point group::

    # pyproject.toml of your plugin
    [project.entry-points.mobile_ep]
    mybackend = "mybackend_package.plugin"

Hooks are grouped by when mobile-ep calls them.  Every parameter is documented; plugins may accept a
subset of the parameters, by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from mobile_ep.contract.backend import Backend, RegisterBackend

__all__ = ["PROJECT_NAME", "hookspec", "hookimpl", "mobile_ep_register_backends", "mobile_ep_quantization_config"]

#: The pluggy project name, the marker name and the entry-point group: one name for all three.
PROJECT_NAME = "mobile_ep"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# --------------------------------------------------------------------------------------------------
# Start-up: collecting what plugins provide
# --------------------------------------------------------------------------------------------------
@hookspec
def mobile_ep_register_backends(register: RegisterBackend) -> None:
    """Register the backends this plugin provides.

    :param register: call ``register(backend)`` once for each :class:`mobile_ep.Backend` instance.
        mobile-ep validates the backend (a unique name, a rule registry, a compatible
        ``plugin_api``) when you call it and raises :class:`mobile_ep.BackendError` (or its subclass
        :class:`mobile_ep.PluginApiError`) for an invalid one.

    Called once per plugin manager, when the backends are first needed.  Return nothing.
    """


# --------------------------------------------------------------------------------------------------
# mobile-ep quantize: how a backend wants its models quantized
# --------------------------------------------------------------------------------------------------
@hookspec(firstresult=True)
def mobile_ep_quantization_config(backend: Backend, model_path: str, calibration_reader: Any) -> Any:
    """How ``mobile-ep quantize`` should quantize a model for *backend*: the backend's constraints, as the
    configuration of ``onnxruntime.quantization.quantize``.

    :param backend: the backend the model is quantized for, configured with the user's options (e.g. the NNAPI
        backend with ``api_level=29``).  Answer only for your own backend (check ``backend.name``); return
        ``None`` otherwise.
    :param model_path: the float model to quantize (already pre-processed: shapes inferred), to read op
        types or weight names from; do not change the file.
    :param calibration_reader: an ``onnxruntime.quantization.CalibrationDataReader`` over the calibration
        samples; pass it on to the configuration you return.

    Return an ``onnxruntime.quantization.StaticQuantConfig`` (QDQ format, the activation and weight types,
    per-tensor or per-channel weights, ``extra_options`` such as ``TensorQuantOverrides``) - for example
    what ``onnxruntime.quantization.execution_providers.qnn.get_qnn_qdq_config`` builds for QNN -,
    ``mobile_ep.quantize.WeightsOnly(config)`` to keep only the weights quantized, or ``None``.  Stops at the first non-``None`` result; with none, ``mobile-ep quantize`` refuses the backend.
    """
