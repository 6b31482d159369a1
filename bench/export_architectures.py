"""Export the five architectures ``bench/vs_ort.py`` times beside the ``light_*`` models: torchvision's
MobileNetV3-Large, a BERT (tiny), a ViT (tiny), a Whisper-style encoder and a two-layer LSTM, with random
weights (nothing is downloaded), by torch's TorchScript exporter at opset 17.  Needs torch, torchvision and
transformers (a separate environment: the project's own has no torch).

    TORCH_PYTHON bench/export_architectures.py OUT_DIR
    python bench/vs_ort.py --models $(python -c "import onnx, pathlib; print(*sorted((pathlib.Path(onnx.__file__).parent / 'backend/test/data/light').glob('light_*.onnx')))") OUT_DIR/*.onnx
"""

from __future__ import annotations

import pathlib
import sys


def main(out: pathlib.Path) -> None:
    import torch
    import torchvision
    from transformers import BertConfig, BertModel, ViTConfig, ViTModel, WhisperConfig, WhisperModel

    torch.manual_seed(0)
    out.mkdir(parents=True, exist_ok=True)

    class Hidden(torch.nn.Module):
        """A transformers model called with one keyword input, returning its last hidden state."""

        def __init__(self, model: torch.nn.Module, key: str) -> None:
            super().__init__()
            self.model, self.key = model, key

        def forward(self, x):
            return self.model(**{self.key: x}).last_hidden_state

    class Lstm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(40, 64, num_layers=2, batch_first=True)
            self.fc = torch.nn.Linear(64, 10)

        def forward(self, x):
            return self.fc(self.lstm(x)[0])

    bert = BertModel(BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512))
    vit = ViTModel(ViTConfig(hidden_size=192, num_hidden_layers=4, num_attention_heads=3, intermediate_size=768))
    whisper = WhisperModel(WhisperConfig(d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                         decoder_attention_heads=4, num_mel_bins=80)).get_encoder()
    models = {
        "mobilenet_v3_large": (torchvision.models.mobilenet_v3_large(weights=None), torch.randn(1, 3, 224, 224)),
        "bert_tiny": (Hidden(bert, "input_ids"), torch.ones(1, 128, dtype=torch.long)),
        "vit_tiny": (Hidden(vit, "pixel_values"), torch.randn(1, 3, 224, 224)),
        "whisper_encoder": (Hidden(whisper, "input_features"), torch.randn(1, 80, 3000)),
        "lstm": (Lstm(), torch.randn(1, 50, 40)),
    }
    for name, (model, example) in models.items():
        torch.onnx.export(model.eval(), (example,), str(out / f"{name}.onnx"), opset_version=17, dynamo=False)
        print(out / f"{name}.onnx")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
