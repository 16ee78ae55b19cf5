# `pip install . --no-build-isolation` (Debian's setuptools, no network): the Python module
# remora (python/remora: a pure-Python layer over remora._remora, a C extension built against
# the stable ABI, Py_LIMITED_API 3.9, over libremora.a, which `make lib` builds first).
# `make python` builds the same module into build-lib/python without pip. docs/api.md.
import os
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, "build-lib", "libremora.a")


class BuildWithLib(build_ext):
    """make lib first: the extension links libremora.a in."""

    def run(self):
        subprocess.check_call(["make", "-C", HERE, "lib"])
        super().run()


def version():
    with open(os.path.join(HERE, "VERSION")) as f:
        return f.read().strip()


setup(
    name="remora",
    version=version(),
    description="Read the Python stacks of a running CPython process (3.9-3.15) from outside it",
    packages=["remora"],
    package_dir={"": "python"},
    python_requires=">=3.9",
    ext_modules=[Extension(
        "remora._remora", ["python/remora/_remora.c"],
        include_dirs=[os.path.join(HERE, "include")],
        define_macros=[("Py_LIMITED_API", "0x03090000")],
        py_limited_api=True,
        extra_objects=[LIB],
        libraries=["z", "m", "dw", "elf", "bpf"],
        extra_link_args=["-Wl,--exclude-libs,ALL"],
    )],
    cmdclass={"build_ext": BuildWithLib},
    # setuptools' own build tree beside the library's, not in the command's build/
    options={"bdist_wheel": {"py_limited_api": "cp39"}, "build": {"build_base": "build-lib/setuptools"}},
)
