"""The one compiled part: the node table's record decoder (``src/chakra/_columns.c``, see chakra/table.py).

Everything else about the package is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("chakra._columns", sources=["src/chakra/_columns.c"], extra_compile_args=["-O2"])])
