"""The module `import cvest` built by the project's own CMake for pip.

`pip install .` (pyproject.toml names this file's setuptools as the build
backend): CMake configures the project in build/pip-<interpreter> (kept, so
a second install rebuilds only what changed) for the interpreter running
pip, against Kokkos_ROOT when it is set, else the Kokkos scripts/setup builds
(and caches outside the clone), and builds only the module's target, which
goes into the wheel beside python/cvest/__init__.py. The module finds Kokkos
where it was built (its RPATH), as the command-line binary does.
"""
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import sysconfig

root = pathlib.Path(__file__).resolve().parent

# Where only Debian's packages are reachable (no PyPI), the route that works.
DEBIAN_ROUTE = ("with Debian's packages only: apt install python3-setuptools python3-wheel pybind11-dev python3-numpy "
                "python3-dev (scripts/setup installs them), then python3 -m venv --system-site-packages ENV && "
                "ENV/bin/pip install --no-build-isolation .")
# Debian's pybind11-dev: CMake finds it for any interpreter.
SYSTEM_PYBIND11 = ("/usr/lib/cmake/pybind11", "/usr/share/cmake/pybind11", "/usr/local/lib/cmake/pybind11")


def found(module):
    return importlib.util.find_spec(module) is not None


def missing_prerequisites(pybind11_dirs=SYSTEM_PYBIND11):
    """One line for each piece the interpreter running this build lacks,
    said before anything is configured (pip's own message where `wheel` is
    missing is "invalid command 'bdist_wheel'" after a page of output)."""
    missing = []
    where = f"this interpreter ({sys.executable}, Python {sys.version.split()[0]})"
    if not found("setuptools"):
        missing.append(f"cvest: pip install . needs setuptools, which {where} lacks")
    # setuptools from 70.1 has bdist_wheel itself; earlier ones need wheel.
    elif not found("wheel") and not found("setuptools.command.bdist_wheel"):
        missing.append(f"cvest: pip install . needs wheel (setuptools' bdist_wheel), which {where} lacks")
    if not found("pybind11") and not any(os.path.isdir(d) for d in pybind11_dirs):
        missing.append(f"cvest: pip install . needs pybind11 (its Python package or Debian's pybind11-dev), which "
                       f"{where} lacks")
    # NumPy is not needed to build (pip installs it as a dependency where it
    # can): said beside what is missing, never the cause of a failure alone.
    if missing and not found("numpy"):
        missing.append(f"cvest: import cvest needs NumPy, which {where} lacks")
    include = sysconfig.get_paths().get("include")
    if not include or not os.path.exists(os.path.join(include, "Python.h")):
        missing.append(f"cvest: building the module needs Python's headers (Python.h under {include}), which {where} "
                       f"lacks (Debian: python3-dev)")
    return missing


def version():
    """The version `cvest info` prints: CMakeLists.txt's project(VERSION)."""
    text = (root / "CMakeLists.txt").read_text()
    return re.search(r"project\(cvest VERSION ([0-9.]+)", text).group(1)


def kokkos_roots():
    """Kokkos and Kokkos Kernels to build against."""
    if os.environ.get("Kokkos_ROOT"):
        kokkos = os.environ["Kokkos_ROOT"]
        return kokkos, os.environ.get("KokkosKernels_ROOT", kokkos)
    backend = os.environ.get("CVEST_BACKEND", "openmp")
    out = subprocess.run([str(root / "scripts" / "setup"), "--backend", backend], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    kokkos = out.strip().splitlines()[-1]
    return kokkos, kokkos


def cached(build, key):
    """A CMake cache entry of the build folder `build`, or None."""
    try:
        text = (build / "CMakeCache.txt").read_text()
    except OSError:
        return None
    found = re.search(rf"^{key}:[A-Z]+=(.*)$", text, re.M)
    return found.group(1) if found else None


def same_file(a, b):
    return a is not None and b is not None and os.path.realpath(a) == os.path.realpath(b)


def build_folder(kokkos):
    """scripts/build's folder (CVEST_BUILD_DIR, else build/<backend>) where it was configured for this interpreter and
    this Kokkos (its module is then the one pip would build: only the module's
    target is brought up to date there), else build/pip-<interpreter>."""
    backend = "custom" if os.environ.get("Kokkos_ROOT") else os.environ.get("CVEST_BACKEND", "openmp")
    ours = pathlib.Path(os.environ.get("CVEST_BUILD_DIR") or root / "build" / backend)
    python = cached(ours, "Python3_EXECUTABLE") or cached(ours, "_Python3_EXECUTABLE")
    if same_file(python, sys.executable) and same_file(cached(ours, "Kokkos_ROOT"), kokkos):
        return ours, False
    return root / "build" / f"pip-{sys.implementation.cache_tag}", True


try:
    from setuptools import Extension, setup
    from setuptools.command.build_ext import build_ext
except ImportError:  # said by missing_prerequisites(), before anything else
    build_ext = object


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        kokkos, kernels = kokkos_roots()
        build, configure_it = build_folder(kokkos)
        configure = ["cmake", "-S", str(root), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DKokkos_ROOT={kokkos}", f"-DKokkosKernels_ROOT={kernels}",
                     f"-DPython3_EXECUTABLE={sys.executable}", "-DCVEST_ENABLE_TESTS=OFF"]
        wrapper = pathlib.Path(kokkos) / "bin" / "nvcc_wrapper"
        if wrapper.exists():  # a Cuda Kokkos compiles through its wrapper
            configure.append(f"-DCMAKE_CXX_COMPILER={wrapper}")
        try:
            import pybind11  # pip's own, under build isolation
            configure.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except ImportError:
            pass  # Debian's pybind11-dev, which CMake finds itself
        if configure_it:
            subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(build), "--target", "cvest_python", "-j", str(os.cpu_count() or 2)],
                       check=True)
        built = next((build / "python" / "cvest").glob("_cvest*.so"))
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        self.copy_file(str(built), str(target))


if __name__ == "__main__":  # run by pip (setuptools' build backend); imported by the tests
    lacking = missing_prerequisites()
    if lacking:
        for line in lacking:
            print(line, file=sys.stderr)
        print(f"cvest: where PyPI is reachable, pip install setuptools wheel pybind11 numpy into that environment; "
              f"{DEBIAN_ROUTE}", file=sys.stderr)
        sys.exit(1)
    setup(version=version(), ext_modules=[Extension("cvest._cvest", sources=[])], cmdclass={"build_ext": CMakeBuild})
