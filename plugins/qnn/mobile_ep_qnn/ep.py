"""The QNN execution provider of this environment: its library, its backends, sessions with it.

``onnxruntime-qnn`` ships ONNX Runtime's QNN EP as a plugin EP library for a stock onnxruntime; it is
registered once per process (:func:`mobile_ep.testing.oracle.register_ep_library`: a second registration
fails) and added to a session for the devices onnxruntime lists under :data:`EP_NAME`.
"""

from __future__ import annotations

import pathlib
from typing import Any

from mobile_ep.errors import UsageError

__all__ = ["EP_NAME", "BACKEND_LIBRARIES", "package_dir", "backend_available", "provider_options",
           "execution_provider", "sdk_version"]

EP_NAME = "QNNExecutionProvider"
#: The QNN backend library each ``backend_type`` loads (the EP's ``ParseBackendTypeName``).
BACKEND_LIBRARIES = {"htp": "libQnnHtp.so", "gpu": "libQnnGpu.so", "cpu": "libQnnCpu.so"}


def package_dir() -> pathlib.Path | None:
    """Where ``onnxruntime_qnn`` is installed, or ``None`` without it."""
    try:
        import onnxruntime_qnn
    except ImportError:
        return None
    return pathlib.Path(onnxruntime_qnn.get_library_path()).parent


def backend_available(backend_type: str) -> bool:
    """Whether the installed ``onnxruntime-qnn`` wheel ships the QNN library of *backend_type*."""
    folder = package_dir()
    return folder is not None and (folder / BACKEND_LIBRARIES[backend_type]).is_file()


def sdk_version() -> str:
    """The QNN SDK version the installed wheel was built with (``""`` without it)."""
    try:
        from onnxruntime_qnn import build_and_package_info as info
    except ImportError:
        return ""
    return str(getattr(info, "qnn_version", ""))


def provider_options(options: Any) -> dict[str, str]:
    """The QNN EP's provider options for a backend's options (``QnnOptions``)."""
    values = {"backend_type": options.backend_type, "soc_model": str(options.soc_model),
              "offload_graph_io_quantization": "1" if options.offload_graph_io_quantization else "0"}
    if options.htp_arch:
        values["htp_arch"] = str(options.htp_arch)
    if options.precision == "fp16":
        values["enable_htp_fp16_precision"] = "1"
    return values


def execution_provider(options: Any) -> Any:
    """The real QNN EP configured as *options* say (a :class:`mobile_ep.testing.ExecutionProvider`, for the oracle
    and for compiling)."""
    import onnxruntime_qnn

    from mobile_ep.testing.oracle import ExecutionProvider

    if not backend_available(options.backend_type):
        raise UsageError(f"qnn: backend_type={options.backend_type}: this onnxruntime-qnn wheel has no "
                         f"{BACKEND_LIBRARIES[options.backend_type]}")
    return ExecutionProvider(EP_NAME, provider_options(options), library=onnxruntime_qnn.get_library_path())
