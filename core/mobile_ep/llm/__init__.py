"""On-device language models: one decoder export to the fixed-context prefill and decode graphs an app ships.

:mod:`mobile_ep.llm.decoder` recognises the export's KV-cache interface, :mod:`mobile_ep.llm.graphs` writes the
two graphs over one weights file, :mod:`mobile_ep.llm.torch_export` exports a transformers model in the names
these expect.
"""
