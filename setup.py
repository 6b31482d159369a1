"""Build configuration beyond pyproject.toml: the optional C extension.

mobile_ep._speedups holds compiled twins of the partitioner's per-node loops.  It is optional: where it
cannot be compiled (no C compiler or no Python headers), the install goes on and the pure-Python twins run.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("mobile_ep._speedups", ["core/mobile_ep/_speedups.c"], optional=True)])
