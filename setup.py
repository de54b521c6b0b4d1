"""Native extensions of medallion; the package metadata lives in pyproject.toml.

Built in place by ``scripts/bootstrap.sh`` (``python setup.py build_ext --inplace``), again
whenever a source is newer than its built module. The modules are not optional: the code that
imports them fails at start when they are missing.
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]


def _extension(name: str) -> Extension:
    """The extension module ``name`` (dotted), built from the one C file of that path."""
    return Extension(name, [name.replace(".", "/") + ".c"], extra_compile_args=_FLAGS)


EXTENSIONS = [
    # One line per module (other branches add theirs here).
    _extension("capture.mysql._rowdecode"),
    _extension("capture.postgresql._pgdecode"),
    _extension("capture.postgresql._pgcopy"),
]

setup(ext_modules=EXTENSIONS)
