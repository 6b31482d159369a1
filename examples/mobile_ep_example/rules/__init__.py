"""The example NPU's op rules: one module per op or op family, each with its check and its lowering.

``ExampleNpu.build_rules`` loads every public module of this package (``RuleRegistry.from_package``).
"""
