"""Packages coda's python modules with the libraries of a coda build.

    cmake --build build && pip install ./python

The libraries (libcoda_runtime.so for the GPU, libcoda_reference.so for the
CPU reference) come from $CODA_BUILD_DIR/lib, by default the build folder
next to this one; the version is the CMake project's.
"""

import os
import re
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIBRARIES = ("libcoda_runtime.so", "libcoda_reference.so")


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(coda\b[^)]*VERSION ([0-9.]+)", f.read()).group(1)


class BuildWithLibraries(build_py):
    """build_py that also copies the built libraries into coda/lib."""

    def run(self):
        super().run()
        build = os.environ.get("CODA_BUILD_DIR", os.path.join(ROOT, "build"))
        found = [name for name in LIBRARIES if os.path.exists(os.path.join(build, "lib", name))]
        if not found:
            raise SystemExit(f"coda: no libraries in {build}/lib; build coda first "
                             "(cmake --build build) or set CODA_BUILD_DIR")
        target = os.path.join(self.build_lib, "coda", "lib")
        os.makedirs(target, exist_ok=True)
        for name in found:
            shutil.copy2(os.path.join(build, "lib", name), target)


setup(version=version(), cmdclass={"build_py": BuildWithLibraries})
