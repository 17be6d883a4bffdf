"""cvest in processes made after a cvest call, as Python users make them:
multiprocessing pools with 'fork', 'spawn' and 'forkserver', os.fork(),
concurrent.futures.ProcessPoolExecutor, Dask's processes scheduler, and a
Ctrl-C in a child. In a forked child cvest.multiply gives NumPy's bits (on
the child's calling thread) and the calls that need Kokkos raise one
RuntimeError at once naming spawn/forkserver; never a hang. Each case runs
in a fresh interpreter under a timeout that fails the test (and kills what
is left), so a hang fails rather than stops the suite."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import dask  # noqa: F401  (the Dask case's child imports it: missing here fails, never skips)
import pytest

TIMEOUT = 120

PARENT = textwrap.dedent("""
    import multiprocessing as mp, os, sys
    import numpy as np
    import cvest

    def arrays(seed, T=7, N=3001, K=5, dtype="f8", order="C"):
        rng = np.random.default_rng(seed)
        m = np.asarray(rng.random((N, K)) + 0.5, dtype=dtype, order=order)
        d = np.asarray(rng.random((T, N, K)), dtype=dtype, order=order)
        return m, d

    def product_ok(seed):
        ok = True
        for dtype in ("f8", "f4"):
            for order in ("C", "F"):
                for T, N in ((7, 3001), (40, 100000)):  # below and above the calling-thread limit
                    m, d = arrays(seed, T, N, dtype=dtype, order=order)
                    ok &= cvest.multiply(m, d).tobytes(order="A") == (m[None] * d).tobytes(order="A")
        m, d = arrays(seed)
        ok &= cvest.multiply(m, d, strategy="per_id").tobytes() == (m[None] * d).tobytes()
        ok &= cvest.multiply(m.astype("f4"), d).tobytes() == (m.astype("f4")[None] * d).tobytes()
        return ok

    def path(name):
        return os.path.join(FOLDER, name)

    def kokkos_call(what):
        try:
            if what == "run":
                cvest.run(path("deck.toml"))
            elif what == "bench":
                cvest.bench(dates=2, ids=1000, repeats=1, warm_seconds=0)
            elif what == "verify":
                cvest.verify(path("cv.h5"), input=path("in.h5"))
            return "ran"
        except RuntimeError as e:
            return "RuntimeError: " + str(e)

    def fork_child(child):
        # child(write) in a child made by os.fork(): its pid, and the read end
        # of the pipe it writes its answers to.
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child(lambda text: os.write(w, text.encode()))
            os._exit(0)
        os.close(w)
        return pid, r

    def every_kind_of_call(folder):
        with open(path("deck.toml"), "w") as f:
            f.write('[input]\\nfile = "in.h5"\\ngenerate = { dates = 3, ids = 2000, cols = 5 }\\n'
                    '[output]\\nfile = "cv.h5"\\noverwrite = true\\n')
        m, d = arrays(0)
        for strategy in ("flat", "per_date", "per_id", "elementwise", "one_worker", "team", "kokkos_kernels"):
            cvest.multiply(m, d, strategy=strategy)
        cvest.run(path("deck.toml"))
        cvest.verify(path("cv.h5"), input=path("in.h5"))
        cvest.bench(dates=2, ids=1000, repeats=1, warm_seconds=0)
        return cvest.BenchServer(dates=2, ids=1000, strategies=["flat"])
""")


def run_case(body, folder, timeout=TIMEOUT):
    """`body` after PARENT in a fresh interpreter; its stdout. Killed (and
    the test failed) past the timeout, with every process it started."""
    script = folder / "case.py"  # a file: 'spawn' and 'forkserver' children import it
    script.write_text("FOLDER = " + repr(str(folder)) + "\n" + PARENT + "\n" + textwrap.dedent(body))
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, cwd=str(folder))
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"hung: no answer in {timeout} s\nstdout: {out}\nstderr: {err[-2000:]}")
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {out}\nstderr: {err[-3000:]}"
    return out


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pools_after_every_kind_of_call(tmp_path, method):
    out = run_case(f"""
        if __name__ == "__main__":
            server = every_kind_of_call(FOLDER)
            ctx = mp.get_context({method!r})
            with ctx.Pool(2) as pool:
                print("products", pool.map_async(product_ok, range(4)).get(timeout=90))
                print("kokkos", pool.map_async(kokkos_call, ["run", "bench", "verify"]).get(timeout=90))
            print("parent still works", product_ok(9), server.describe() != "released")
    """, tmp_path)
    assert "products [True, True, True, True]" in out
    assert "parent still works True True" in out
    kokkos = out.split("kokkos ", 1)[1].splitlines()[0]
    if method == "fork":
        assert kokkos.count("RuntimeError:") == 3 and "spawn" in kokkos and "forkserver" in kokkos, kokkos
    else:
        assert kokkos == "['ran', 'ran', 'ran']", kokkos


def test_os_fork_directly(tmp_path):
    out = run_case("""
        every_kind_of_call(FOLDER)
        pid, r = fork_child(lambda write: write(f"{product_ok(3)} {cvest.threads()} {kokkos_call('run')[:13]}"))
        _, status = os.waitpid(pid, 0)
        print("child", os.read(r, 1000).decode(), os.waitstatus_to_exitcode(status))
        # A child that ends normally runs the atexit hook (finalize): it must not hang either.
        pid = os.fork()
        if pid == 0:
            cvest.multiply(*arrays(1))
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        print("normal exit", os.waitstatus_to_exitcode(status))
    """, tmp_path)
    assert "child True 1 RuntimeError: 0" in out
    assert "normal exit 0" in out


def test_process_pool_executor(tmp_path):
    out = run_case("""
        import concurrent.futures
        if __name__ == "__main__":
            every_kind_of_call(FOLDER)
            with concurrent.futures.ProcessPoolExecutor(2) as pool:  # fork on Linux up to Python 3.13
                print("products", list(pool.map(product_ok, range(3), timeout=90)))
            ctx = mp.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as pool:
                print("spawned", list(pool.map(kokkos_call, ["run"], timeout=90)))
    """, tmp_path)
    assert "products [True, True, True]" in out
    assert "spawned ['ran']" in out


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dask_processes_scheduler(tmp_path, context):
    out = run_case(f"""
        import dask, dask.array as da
        if __name__ == "__main__":
            every_kind_of_call(FOLDER)
            m, d = arrays(5, T=12, N=20000)
            dm = da.from_array(m, chunks=(5000, 5))
            dd = da.from_array(d, chunks=(4, 5000, 5))
            with dask.config.set({{"multiprocessing.context": {context!r}}}):
                cv = da.map_blocks(lambda db, mb: cvest.multiply(mb, db), dd, dm, dtype=d.dtype).compute(
                    scheduler="processes", num_workers=2)
            print("dask", cv.tobytes() == (m[None] * d).tobytes())
    """, tmp_path)
    assert "dask True" in out


def test_ctrl_c_in_a_forked_child(tmp_path):
    out = run_case("""
        import signal, time
        every_kind_of_call(FOLDER)

        def loop(write):
            m, d = arrays(2, T=40, N=100000)
            try:
                write("started ")
                while True:
                    cvest.multiply(m, d)
            except KeyboardInterrupt:
                write("interrupted")

        pid, r = fork_child(loop)
        assert os.read(r, 8) == b"started "
        time.sleep(0.5)
        os.kill(pid, signal.SIGINT)
        _, status = os.waitpid(pid, 0)
        print("child", os.read(r, 100).decode(), os.waitstatus_to_exitcode(status))
    """, tmp_path)
    assert "child interrupted 0" in out
