"""The QNN rules against the real QNN EP (the oracle, onnxruntime-qnn on the HTP simulator) on the models the
test suite builds as stand-ins for real architectures: ``tests/modern_models.py`` (BERT with each mask export,
ViT, Swin, Whisper's encoder, speech and OCR models, detection and segmentation heads), ``tests/quant_models.py``
(the float classifiers and their QDQ versions, per tensor and per channel) and ``qnn_models``.

The default run takes a sample of patterns the other oracle tests do not pin (4 models, 15 to 30 s): the
dynamo BERT's bool mask, Swin's rank-6 windows, the rank-5 moves of a detection head, a per-channel QDQ
ResNet.  ``MOBILE_EP_QNN_ORACLE=all`` (``tox -e qnn-oracle``) runs every one.
"""

from __future__ import annotations

import os
import pathlib
import sys

import onnx
import pytest

from mobile_ep.testing import run_oracle

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tests"))
import modern_models  # noqa: E402
import quant_models  # noqa: E402

FULL = os.environ.get("MOBILE_EP_QNN_ORACLE", "") == "all"

#: name -> builder of an onnx.ModelProto (QDQ ones: of a path, written into the test's folder).
BUILT = {
    **{name: builder for name, builder in modern_models.MODELS.items()},
    "bert_dynamo": lambda: modern_models.bert(dynamo=True),
    "bert_sdpa": lambda: modern_models.bert(sdpa=True),
    **{f"float_{name}": (lambda name=name: quant_models.ARCHITECTURES[name](0)) for name in quant_models.ARCHITECTURES},
}
QDQ = [(name, per_channel) for name in quant_models.ARCHITECTURES for per_channel in (False, True)]
SAMPLE = {"bert_dynamo", "swin", "ssdlite_head"}
QDQ_SAMPLE = {("resnet18", True)}


def _check(result) -> None:
    assert result.built, result.diff()
    assert result.matches, result.diff()


@pytest.mark.parametrize("name", [n for n in BUILT if FULL or n in SAMPLE])
def test_built_model_as_the_real_ep(qnn_backend, qnn_ep, name):
    _check(run_oracle(qnn_backend, BUILT[name](), qnn_ep, case=name))


@pytest.mark.parametrize(("name", "per_channel"), [q for q in QDQ if FULL or q in QDQ_SAMPLE],
                         ids=[f"{n}{'_pc' if pc else ''}" for n, pc in QDQ if FULL or (n, pc) in QDQ_SAMPLE])
def test_built_qdq_model_as_the_real_ep(qnn_backend, qnn_ep, tmp_path, name, per_channel):
    path = quant_models.write(name, tmp_path, per_channel=per_channel)
    result = run_oracle(qnn_backend, onnx.load(str(path)), qnn_ep, case=path.name)
    _check(result)
    # the whole classifier but the input's QuantizeLinear and the output's DequantizeLinear, in one partition
    assert len(result.real.partitions) == 1
