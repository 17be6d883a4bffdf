"""cvest from Python: cv[t, i, k] = multBy[i, k] * discount[t, i, k] on Kokkos.

    import cvest
    cv = cvest.multiply(multby, discount)           # = multby[None] * discount
    cvest.multiply(multby, discount, out=cv)        # in place, no allocation
    report = cvest.run("inputs/seed.toml")          # a deck, as `cvest run`
    cvest.verify("out/seed/cv.h5")                  # as `cvest verify`
    results = cvest.bench(dates=20, ids=100000)     # as `cvest bench`

Built by the project's CMake into build/<backend>/python (scripts/cvest
python runs Python with it on the path), installed by `pip install .` or
`cmake --install` (README, "Installing"). Kokkos starts at the first call
(cvest.initialize(threads=...) first to choose) and stops at exit. Any
Python thread may call cvest: its Kokkos work runs on one thread of the
module's, one call after another, the caller waiting with the GIL released.
"""
import atexit
import os

# As scripts/cvest python does, however the module was installed: OpenMP
# threads not bound (binding would pin Python's main thread to one core as
# OpenMP starts, and other libraries, numba's, would then see one core), and
# said, so Kokkos does not warn. A user's own setting is kept; it takes effect
# where OpenMP is not loaded yet (the import below loads it).
os.environ.setdefault("OMP_PROC_BIND", "false")

try:
    import numpy  # noqa: F401  (cvest's arrays are NumPy's)
except ModuleNotFoundError as missing:
    if missing.name != "numpy":  # NumPy is there but broken: its own error says why
        raise
    import sys as _sys

    raise ImportError(
        f"cvest needs NumPy, which this interpreter ({_sys.executable}) lacks: pip install numpy where PyPI is "
        "reachable; with Debian's packages only: apt install python3-numpy, and a venv made with "
        "python3 -m venv --system-site-packages") from None

from ._cvest import (  # noqa: F401
    BenchServer,
    InputError,
    IoError,
    VerifyError,
    __version__,
    _caller_thread_limit,
    bench,
    execution_space,
    finalize,
    initialize,
    is_initialized,
    multiply,
    run,
    threads,
    verify,
)

atexit.register(finalize)
