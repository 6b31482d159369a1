"""The QNN backend's op rules: one module per op or op family, from the QNN EP's op builders
(``onnxruntime/core/providers/qnn/builder/opbuilder/*.cc`` of ``onnxruntime/onnxruntime-qnn``) and from what
the EP of ``onnxruntime-qnn`` 2.7 (QNN SDK 2.51) takes, checked by the oracle in the backend's tests."""
