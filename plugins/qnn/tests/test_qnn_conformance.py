"""mobile-ep's conformance suite for the QNN backend: the contract (options, rule docs, no partial compile
contract), registration through a plugin, and its claims over ONNX's node cases (the QNN payload is the EP's
own, so nothing is emulated here: the oracle tests check the claims against the real EP)."""

from mobile_ep_qnn.backend import QnnBackend

from mobile_ep.testing import conformance_suite

TestQnn = conformance_suite(QnnBackend, models=["mobilenet_sample"])
