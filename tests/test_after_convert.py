"""``check``'s "after mobile-ep convert" is what ``convert`` writes: the same partitions of the same nodes.

Run on the test corpora: the light_* architectures of the onnx wheel, the sample CNN, and the QDQ models of
:mod:`quant_models`, for each installed backend.
"""

from __future__ import annotations

import pathlib

import pytest
import quant_models

import mobile_ep
from mepkit import LIGHT_MODELS
from mobile_ep.samples import write_sample

BACKENDS = ("nnapi", "coreml")
QUANTIZED = tuple(quant_models.ARCHITECTURES)


def _summary(report) -> tuple:
    return (report.nodes, report.supported_nodes, [sorted(p.nodes) for p in report.partitions])


def _same(model: pathlib.Path, ep: str, out: pathlib.Path) -> None:
    checked = mobile_ep.check(model, ep).after_convert[ep]
    converted = mobile_ep.convert(model, ep, out, verify=False).check
    assert _summary(checked) == _summary(converted)
    assert checked.verdict == converted.verdict


@pytest.fixture(scope="module")
def qdq_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qdq")
    return {name: quant_models.write(name, folder) for name in QUANTIZED}


@pytest.mark.parametrize("ep", BACKENDS)
@pytest.mark.parametrize("name", QUANTIZED)
def test_quantized_models(qdq_dir, name, ep, tmp_path):
    _same(qdq_dir[name], ep, tmp_path)


@pytest.mark.parametrize("ep", BACKENDS)
def test_sample_cnn(ep, tmp_path):
    _same(write_sample(tmp_path / "in"), ep, tmp_path / "out")


@pytest.mark.parametrize("ep", BACKENDS)
@pytest.mark.parametrize("model", LIGHT_MODELS[:3], ids=lambda p: p.stem)
def test_light_models(model, ep, tmp_path):
    _same(model, ep, tmp_path)
