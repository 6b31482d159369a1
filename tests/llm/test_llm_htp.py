"""Generation through the written graphs on the real QNN EP (onnxruntime-qnn's HTP simulator, float16), against
the export on the CPU EP: the tokens and the logits' error within a stated tolerance."""

from __future__ import annotations

import pytest
from decoders import decoder

import mobile_ep
from mobile_ep import model_io
from mobile_ep.llm import generate
from mobile_ep.llm.decoder import interface

CONTEXT, PREFILL = 64, 16
#: The HTP runs the float graphs in float16: at least 90% of the greedy tokens equal (measured: all 64), each
#: step's logits within 15% of the reference logits' largest magnitude (measured at worst: 0.75 of 9.9 and 0.95
#: of 11.6, 7.6% and 8.2%; the median step 0.11, about 1%).
TOKEN_AGREEMENT, RELATIVE_ERROR = 0.9, 0.15


def test_generation_on_the_htp_simulator(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    qnn = pytest.importorskip("onnxruntime_qnn", reason="the QNN EP (onnxruntime-qnn) runs the HTP simulator")
    path = decoder("llama", dynamo=False)
    report = mobile_ep.build_llm(path, "qnn", context=CONTEXT, prefill=PREFILL, output=tmp_path / "o", verify=False)
    for graph in report.graphs.values():  # (the QNN rules say the EP takes the whole graph)
        assert len(graph.backends["qnn"].partitions) == 1 and not graph.backends["qnn"].unsupported
    try:
        ort.register_execution_provider_library("QNNExecutionProvider", qnn.get_library_path())
    except Exception as exc:
        if "already registered" not in str(exc):
            raise
    devices = [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"]
    assert devices

    def on_htp(graph):
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")  # (every node on the HTP)
        options.add_provider_for_devices(devices[:1], {"backend_type": "htp", "soc_model": "60",
                                                       "enable_htp_fp16_precision": "1"})
        return ort.InferenceSession(str(graph), options)

    face = interface(model_io.validate(path), path)
    out = tmp_path / "o"
    results = generate.verify(face, CONTEXT, PREFILL, path, out / "prefill.onnx", out / "decode.onnx",
                              generate.default_prompts(face.vocab, PREFILL), 32, make_session=on_htp)
    for result in results:
        assert result.agreement >= TOKEN_AGREEMENT, result.as_dict()
        assert 0 < result.relative_error <= RELATIVE_ERROR, result.as_dict()  # (> 0: not the CPU EP's result)
