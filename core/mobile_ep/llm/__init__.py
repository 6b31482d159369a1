"""On-device language models: one decoder export to prefill and decode graphs for the NPU."""
