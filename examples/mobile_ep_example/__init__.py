"""mobile-ep-example-npu: a third-party mobile-ep backend for an imaginary NPU, "ENPU".

It is small but complete, and uses only mobile-ep's public API:

- ``backend``: the :class:`ExampleNpu` backend (name ``example``): options, rules, a partition filter,
  and the compile contract (``compile``, ``emulate``, ``runtime_adapter``);
- ``rules/``: one module per op or op family, each holding its support check *and* its lowering;
- ``enpu``: the NPU's serialized program format (version 1) and a builder for it;
- ``emulator``: a numpy interpreter of that format, with the NPU's semantics;
- ``runtime/``: the on-device runtime adapter, C sources shipped as package data;
- ``plugin``: the ``mobile_ep`` entry point.
"""

__version__ = "0.1.0"
