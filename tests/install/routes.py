#!/usr/bin/env python3
"""cvest installed as users install software, each route tried from outside
the clone.

    routes.py prefix|pip|bundle|prerequisites SOURCE BUILD

prefix: `cmake --install BUILD --prefix P`, then P moved elsewhere: P/bin/cvest
  runs with nothing in the environment but PATH (no OpenMP variables: same
  placement, no Kokkos warning), its non-system libraries resolved inside P;
  `cvest info`; the installed seed deck (copied to a scratch folder) runs and
  verifies; `import cvest` from P's site-packages: one multiply equals NumPy's,
  and __version__ is what `cvest info` prints.
pip: `pip install --no-build-isolation .` into a fresh venv (Debian's
  python3 -m venv --system-site-packages; this machine reaches no PyPI), then
  from another folder and with no PYTHONPATH: import, multiply, __version__,
  and cvest.run of the seed deck, verified.
prerequisites: `pip install --no-build-isolation .` from a venv whose
  interpreter lacks wheel and NumPy (Debian's python3 -m venv, no system
  site-packages) exits non-zero before configuring anything, with one line
  for each and the route that works; pybind11 missing too (setup.py's check
  with Debian's pybind11-dev hidden); `import cvest` there says NumPy is
  missing and what to do, in one exception.
bundle: scripts/bundle of this build, copied elsewhere: `cvest info`, the seed
  deck run and verified, and its `python` wrapper's `import cvest`.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from checks import check, failures  # noqa: E402

case, source, build = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
bare = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}

MULTIPLY = r"""
import sys, numpy as np, cvest
rng = np.random.default_rng(5)
m, d = rng.random((1001, 3)), rng.random((7, 1001, 3))
cv = cvest.multiply(m, d)
print("module", cvest.__file__)
print("version", cvest.__version__)
print("same", bool(np.array_equal(cv, m[None] * d)))
if len(sys.argv) > 1:  # a deck to run as `cvest run` does
    report = cvest.run(sys.argv[1])
    print("verified", report.get("verified"))
"""


def run(cmd, env=None, cwd=None, timeout=900):
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def info_version(cvest, env):
    r = run([cvest, "info"], env=env)
    found = re.search(r"^cvest (\S+)", r.stdout, re.M)
    return r, found.group(1) if found else None


def seed_deck(share, scratch):
    """The installed seed deck in a folder of its own (its paths are relative to it)."""
    decks = os.path.join(scratch, "decks")
    os.makedirs(decks, exist_ok=True)
    shutil.copy(os.path.join(share, "inputs", "seed.toml"), decks)
    return os.path.join(decks, "seed.toml")


def check_command(cvest, share, scratch, what):
    r, version = info_version(cvest, bare)
    check(r.returncode == 0 and version, f"{what}: cvest info runs ({r.returncode}, {r.stderr.strip()[-300:]})")
    r = run([cvest, "run", seed_deck(share, scratch)], env=bare, cwd=scratch)
    noise = [l for l in r.stderr.splitlines() if "WARNING" in l or "OMP_PROC_BIND" in l]
    check(r.returncode == 0 and "output verified" in r.stdout and not noise,
          f"{what}: the seed deck runs and verifies, no library warnings ({r.returncode}, {noise}, {r.stderr.strip()[-300:]})")
    return version


def check_module(python, env, cwd, inside, version, what, deck=None):
    r = run([python, "-c", MULTIPLY] + ([deck] if deck else []), env=env, cwd=cwd)
    out = dict(l.split(" ", 1) for l in r.stdout.splitlines() if " " in l)
    check(r.returncode == 0 and out.get("module", "").startswith(inside) and out.get("same") == "True",
          f"{what}: import cvest from {inside}, multiply equals NumPy's ({r.returncode}, {out}, {r.stderr.strip()[-400:]})")
    check(out.get("version") == version, f"{what}: cvest.__version__ {out.get('version')} is cvest info's {version}")
    if deck:
        check(out.get("verified") == "True", f"{what}: cvest.run of the seed deck verifies ({out.get('verified')})")


with tempfile.TemporaryDirectory(prefix=f"cvest-install-{case}-") as scratch:
    if case == "prefix":
        r = run(["cmake", "--install", build, "--prefix", os.path.join(scratch, "p")])
        check(r.returncode == 0, f"cmake --install ({r.stderr.strip()[-300:]})")
        prefix = os.path.join(scratch, "moved", "elsewhere")
        os.makedirs(os.path.dirname(prefix))
        os.rename(os.path.join(scratch, "p"), prefix)
        cvest = os.path.join(prefix, "bin", "cvest")
        libs = run(["ldd", cvest]).stdout
        outside = [l.strip() for l in libs.splitlines() if "=>" in l and "not found" not in l
                   and not re.search(r"=> (/lib|/usr/lib|/lib64|/usr/lib64)/", l) and prefix not in l]
        check("not found" not in libs and not outside, f"moved prefix: every library found, non-system ones inside it ({outside})")
        version = check_command(cvest, os.path.join(prefix, "share", "cvest"), scratch, "moved prefix")
        site = os.path.join(prefix, "lib", "python3", "site-packages")
        check_module("/usr/bin/python3", dict(bare, PYTHONPATH=site), scratch, site, version, "moved prefix")
    elif case == "prerequisites":
        venv = os.path.join(scratch, "bare")
        r = run([sys.executable, "-m", "venv", venv])
        check(r.returncode == 0, f"python3 -m venv ({r.stderr.strip()[-300:]})")
        python = os.path.join(venv, "bin", "python")
        r = run([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index", source],
                cwd=scratch)
        said = [l.strip() for l in (r.stdout + r.stderr).splitlines() if l.strip().startswith("cvest:")]
        check(r.returncode != 0, "pip install . without wheel and NumPy fails")
        check(any("needs wheel" in l for l in said) and any("needs NumPy" in l for l in said) and
              any("--system-site-packages" in l and "--no-build-isolation" in l for l in said),
              f"one line for wheel, one for NumPy, and the route that works: {said}")
        check("-- Configuring" not in r.stdout + r.stderr and "cmake" not in (r.stdout + r.stderr).lower(),
              "said before anything was configured (no CMake output)")
        r = run([python, "-c", "import importlib.util as u, sys; s = u.spec_from_file_location('s', sys.argv[1]); "
                 "m = u.module_from_spec(s); s.loader.exec_module(m); print(m.missing_prerequisites(pybind11_dirs=()))",
                 os.path.join(source, "setup.py")], cwd=scratch)
        check("needs pybind11" in r.stdout, f"pybind11 missing (no package, no pybind11-dev) is said too: {r.stdout[-300:]}")
        r = run([python, "-c", "import cvest"], env=dict(bare, PYTHONPATH=os.path.join(build, "python")), cwd=scratch)
        lines = [l for l in r.stderr.splitlines() if l.startswith("ImportError")]
        check(r.returncode != 0 and len(lines) == 1 and "needs NumPy" in lines[0] and "python3-numpy" in lines[0],
              f"import cvest without NumPy: one ImportError saying what to do ({lines})")
    elif case == "pip":
        venv = os.path.join(scratch, "venv")
        r = run([sys.executable, "-m", "venv", "--system-site-packages", venv])
        check(r.returncode == 0, f"python3 -m venv ({r.stderr.strip()[-300:]})")
        python = os.path.join(venv, "bin", "python")
        cache = open(os.path.join(build, "CMakeCache.txt")).read()
        kokkos = re.search(r"^Kokkos_ROOT:[A-Z]*=(.*)$", cache, re.M)
        env = dict(os.environ, CVEST_BUILD_DIR=build, **({"Kokkos_ROOT": kokkos.group(1)} if kokkos else {}))
        r = run([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index", source], env=env,
                cwd=scratch)
        check(r.returncode == 0, f"pip install --no-build-isolation . ({r.returncode}, {r.stdout.strip()[-300:]} {r.stderr.strip()[-500:]})")
        _, version = info_version(os.path.join(build, "cvest"), bare)
        deck = seed_deck(os.path.join(source), scratch)
        check_module(python, bare, scratch, venv, version, "pip into a venv", deck=deck)
    elif case == "bundle":
        env = dict(os.environ, CVEST_BACKEND="openmp", CVEST_BUILD_DIR=build,
                   CVEST_BUNDLE_DIR=os.path.join(scratch, "made"))
        r = run([os.path.join(source, "scripts", "bundle")], env=env)
        check(r.returncode == 0, f"scripts/bundle ({r.stderr.strip()[-300:]})")
        copied = os.path.join(scratch, "copied")
        shutil.copytree(os.path.join(scratch, "made"), copied, symlinks=True)
        shutil.rmtree(os.path.join(scratch, "made"))
        version = check_command(os.path.join(copied, "cvest"), copied, scratch, "copied bundle")
        check_module(os.path.join(copied, "python"), bare, scratch, copied, version, "copied bundle")
    else:
        sys.exit(f"routes.py: unknown case {case}")

sys.exit(1 if failures else 0)
