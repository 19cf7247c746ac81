"""setup.py — the build step pyproject.toml cannot express: copies the C
library libstepscope_analyzer.so into the package, so that the installed
package (or wheel) carries it, and then tags the wheel for the platform
(py3-none-<platform>: the library is native, the Python code is not tied to
one Python version, as ctypes needs no extension module).

The library is taken from $STEPSCOPE_LIB, else from ../build/analyzer/ (the
build directory of scripts/test.sh and the README). Without one the install
fails at once, saying how to build it (a package installed without its library
only failed when first used); STEPSCOPE_NO_LIB=1 installs it anyway, for a
library named at run time through STEPSCOPE_LIB."""

import os
import shutil

from setuptools import Distribution, setup

here = os.path.dirname(os.path.abspath(__file__))
NAME = "libstepscope_analyzer.so"
candidates = [os.environ.get("STEPSCOPE_LIB"), os.path.join(here, "..", "build", "analyzer", NAME)]
bundled = os.path.join(here, "stepscope", NAME)
for c in candidates:
    if c and os.path.isfile(c):
        if not os.path.exists(bundled) or not os.path.samefile(c, bundled):
            shutil.copyfile(c, bundled)
        break

if not os.path.exists(bundled) and os.environ.get("STEPSCOPE_NO_LIB") != "1":
    raise SystemExit(
        "stepscope: the analyzer library %s is not built, so the package would not work. "
        "Build it first, from the repository root:\n"
        "    cmake -S . -B build -G Ninja && cmake --build build --target stepscope_analyzer\n"
        "then `pip install ./python` again (or set STEPSCOPE_LIB to a built %s; "
        "STEPSCOPE_NO_LIB=1 installs without it, to be named at run time by STEPSCOPE_LIB)"
        % (NAME, NAME))

cmdclass = {}
if os.path.exists(bundled):
    try:
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:  # setuptools < 70: the wheel package's
        from wheel.bdist_wheel import bdist_wheel

    class platform_wheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = platform_wheel


class native_distribution(Distribution):
    """Installs into platlib, as a package with a native library must."""

    def has_ext_modules(self):
        return os.path.exists(bundled)


setup(cmdclass=cmdclass, distclass=native_distribution)
