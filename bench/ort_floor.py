"""The floor of ``check`` as a command: one onnxruntime session at the basic level on the model, writing the
optimized model (weights of 1 KB and more beside it), as ``check``'s first session does; nothing else.

    python bench/ort_floor.py MODEL
"""

from __future__ import annotations

import sys
import tempfile


def main(model: str) -> None:
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="mobile-ep-floor-") as work:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = f"{work}/optimized.onnx"
        so.log_severity_level = 4
        so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "optimized.onnx.data")
        so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


if __name__ == "__main__":
    main(sys.argv[1])
