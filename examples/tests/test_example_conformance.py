"""The example NPU through mobile-ep's conformance suite: ONNX's node tests for every op it has a rule for
(claim -> compile -> emulate -> compare), real models partitioned, compiled and emulated, and the contract.
"""

from mobile_ep.testing import conformance_suite
from mobile_ep_example.backend import ExampleNpu

TestExampleNpu = conformance_suite(
    ExampleNpu, models=["mobilenet_sample", "light_squeezenet", "light_resnet50", "light_shufflenet"])
