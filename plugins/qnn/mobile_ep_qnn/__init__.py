"""mobile-ep-qnn: a mobile-ep backend for Qualcomm NPUs through ONNX Runtime's QNN execution provider.

- ``backend``: :class:`QnnBackend` (name ``qnn``): options, rules, QDQ units, ORT's QNN partition filter,
  and the compile hook that has ``onnxruntime-qnn`` itself write the EPContext model and context binary;
- ``rules/``: one module per op or op family, from the QNN EP's op builders;
- ``ep``: the QNN EP of this environment (library registration, once per process; sessions);
- ``plugin``: the ``mobile_ep`` entry point.
"""

__version__ = "0.1.0"
