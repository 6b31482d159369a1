"""convert --compile: the runtime adapter's README and examples name the converted model's files, inputs and outputs."""

from __future__ import annotations

import onnx
import pytest
from click.testing import CliRunner
from output_models import ocr_det_like

from mobile_ep.cli.main import main


@pytest.mark.parametrize("ep, files", [
    ("nnapi", ["README.md", "kotlin/ai/mobileep/CompiledModelRunner.kt"]),
    ("coreml", ["Examples/RunCompiledModel.swift"]),
])
def test_adapter_examples_use_the_models_names(tmp_path, ep, files):
    pytest.importorskip(f"mobile_ep_{ep}")
    path = tmp_path / "det.onnx"
    onnx.save(ocr_det_like(blocks=4), path)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["-q", "convert", str(path), "--ep", ep, "--compile", "--no-verify",
                                       "--shape", "x=1,3,32,32", "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (out / f"det.{ep}.compiled").is_dir()
    for name in files:
        text = (out / "adapter" / name).read_text()
        assert "{{mobile_ep:" not in text and "mobilenet" not in text and "probabilities" not in text
        assert f'"det.{ep}.compiled"' in text
        assert '"x"' in text and '"sigmoid_0.tmp_0"' in text
        assert "1, 3, 32, 32" in text
