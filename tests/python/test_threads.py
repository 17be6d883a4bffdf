"""import cvest from any Python thread: every call works whichever thread
came first, calls from several threads at once give the same bits as one
after another, Dask's threaded scheduler and xarray over Dask call it
freely, errors arrive as the documented exceptions in the calling thread,
and Ctrl-C in the main thread stops a long run with its temporary files
removed."""
import concurrent.futures
import glob
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

# Dask and xarray as the README's setup installs them: missing, the module
# fails to load (its cases are never skipped as if they had passed).
import dask
import dask.array  # noqa: F401  (xarray's chunks)
import h5py
import numpy as np
import pytest
import xarray as xr

import cvest

STRATEGIES = ["flat", "per_date", "per_id", "elementwise", "one_worker", "team", "kokkos_kernels"]


def in_thread(call):
    """call() on a new thread: its result, or the exception it raised."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(call).result()


def arrays(T=6, N=1001, K=5, dtype="f8", seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((N, K)).astype(dtype) + 0.5, rng.random((T, N, K)).astype(dtype)


def identical(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def deck(folder, name, dates=4, ids=3000, seed=1, **run):
    path = os.path.join(folder, f"{name}.toml")
    lines = [f'[input]\nfile = "{name}_in.h5"\ngenerate = {{ dates = {dates}, ids = {ids}, cols = 5, seed = {seed} }}\n',
             f'[output]\nfile = "{name}_cv.h5"\noverwrite = true\n']
    if run:
        lines.append("[run]\n" + "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in run.items()))
    with open(path, "w") as f:
        f.write("".join(lines))
    return path


def product_of(folder, name):
    with h5py.File(os.path.join(folder, f"{name}_in.h5"), "r") as f:
        expected = f["multBy"][...][None] * f["discount"][...]
    with h5py.File(os.path.join(folder, f"{name}_cv.h5"), "r") as f:
        return identical(f["cv"][...], expected)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("layout", ["right", "left"])
@pytest.mark.parametrize("dtype", ["f8", "f4"])
@pytest.mark.parametrize("staged", [False, True])
def test_multiply_from_a_thread_after_the_main_thread(strategy, layout, dtype, staged):
    m, d = arrays(dtype=dtype)
    main = cvest.multiply(m, d, strategy=strategy, layout=layout, staged=staged)
    other = in_thread(lambda: cvest.multiply(m, d, strategy=strategy, layout=layout, staged=staged))
    assert identical(main, m[None] * d) and identical(other, main)


def test_every_other_call_from_a_thread(tmp_path):
    assert in_thread(cvest.threads) == cvest.threads() >= 1
    assert in_thread(cvest.is_initialized) is True
    path = deck(str(tmp_path), "a")
    report = in_thread(lambda: cvest.run(path))
    assert report["jobs"] and product_of(str(tmp_path), "a")
    assert in_thread(lambda: cvest.verify(str(tmp_path / "a_cv.h5"), input=str(tmp_path / "a_in.h5"))) is True
    bench = in_thread(lambda: cvest.bench(4, 1000, 5, strategies=["flat", "team"], repeats=1, warm_seconds=0))
    assert len(bench["results"]) == 4
    server = in_thread(lambda: cvest.BenchServer(dates=3, ids=2000, cols=5, strategies=["flat"], layouts=["right"]))
    assert in_thread(lambda: server.time("flat", "right"))["strategy"] == "flat"
    assert server.roof()["copy_GBps"] > 0 and in_thread(server.touch)["touched_s"] >= 0
    assert in_thread(lambda: server.warm(0.0))["passes"] >= 0
    in_thread(lambda: server.__del__() if hasattr(server, "__del__") else None)
    del server
    with pytest.raises(ValueError, match="already initialized"):
        in_thread(lambda: cvest.initialize(threads=1))


def test_errors_arrive_in_the_calling_thread_as_documented(tmp_path):
    with pytest.raises(cvest.InputError, match="no such deck file"):
        in_thread(lambda: cvest.run(str(tmp_path / "missing.toml")))
    (tmp_path / "file").write_text("a file where the output's folder would be\n")
    (tmp_path / "io.toml").write_text('[input]\nfile = "g.h5"\ngenerate = { dates = 2, ids = 100, cols = 5 }\n'
                                      '[output]\nfile = "file/sub/out.h5"\n')
    with pytest.raises(cvest.IoError):
        in_thread(lambda: cvest.run(str(tmp_path / "io.toml")))
    m, d = arrays()
    with pytest.raises(ValueError, match="unknown strategy"):
        in_thread(lambda: cvest.multiply(m, d, strategy="fast"))
    with pytest.raises(ValueError, match="multBy is"):
        in_thread(lambda: cvest.multiply(m[:5], d))


def test_threads_at_once_give_the_bits_of_one_at_a_time(tmp_path):
    # Four threads at once, each several times: runs of two decks, multiply
    # with team and kokkos_kernels, and bench; every result checked.
    folder = str(tmp_path)
    decks = [deck(folder, f"d{s}", dates=5, ids=4000 + s, seed=s, strategy="flat", memory_budget="1MiB")
             for s in (1, 2)]
    m, d = arrays(T=9, N=20011)
    expected = m[None] * d
    barrier = threading.Barrier(4)

    def runs():
        barrier.wait()
        return [cvest.run(p)["jobs"][0]["strategy"] for p in decks * 2]

    def team():
        barrier.wait()
        return all(identical(cvest.multiply(m, d, strategy="team", layout=l), expected) for l in ("right", "left") * 3)

    def library():
        barrier.wait()
        return all(identical(cvest.multiply(m, d, strategy="kokkos_kernels"), expected) for _ in range(6))

    def bench():
        barrier.wait()
        return [len(cvest.bench(3, 2000, 5, strategies=["flat", "per_id"], repeats=1, warm_seconds=0)["results"])
                for _ in range(2)]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(f) for f in (runs, team, library, bench)]
        results = [f.result(timeout=300) for f in futures]
    assert results == [["flat"] * 4, True, True, [4, 4]]
    assert product_of(folder, "d1") and product_of(folder, "d2")


def test_dask_threaded_scheduler_runs_decks(tmp_path):
    folder = str(tmp_path)
    decks = [deck(folder, f"k{s}", dates=4, ids=3000, seed=s) for s in (3, 4)]
    reports = dask.compute(*[dask.delayed(cvest.run)(p) for p in decks], scheduler="threads")
    assert len(reports) == 2 and all(r["jobs"] for r in reports)
    assert product_of(folder, "k3") and product_of(folder, "k4")


def test_xarray_apply_ufunc_over_dask_with_a_strategy():
    m, d = arrays(T=12, N=6000)
    # id and col are the core dimensions, date the loop one in chunks of 3:
    # each chunk's (3, N, K) block is one multiply call, on Dask's threads
    # (multBy arrives with a broadcast axis of 1 in front).
    dm = xr.DataArray(m, dims=("id", "col"))
    dd = xr.DataArray(d, dims=("date", "id", "col")).chunk({"date": 3})
    cv = xr.apply_ufunc(lambda a, b: cvest.multiply(a.reshape(a.shape[-2:]), b, strategy="per_id"), dm, dd,
                        input_core_dims=[["id", "col"], ["id", "col"]], output_core_dims=[["id", "col"]],
                        dask="parallelized", output_dtypes=[np.float64])
    assert cv.chunks[0] == (3, 3, 3, 3)
    got = cv.transpose("date", "id", "col").compute(scheduler="threads")
    assert identical(np.ascontiguousarray(got.values), m[None] * d)


def test_ctrl_c_stops_a_long_run_and_removes_its_temporary_files(tmp_path):
    # In a Python of its own: Ctrl-C (SIGINT) while cvest.run writes a
    # slowed output (0.3 s a block) in the main thread.
    path = deck(str(tmp_path), "long", dates=40, ids=20000, strategy="flat", max_block="200KiB",
                pipeline="overlapped")
    script = textwrap.dedent(f"""
        import cvest, time
        started = time.monotonic()
        try:
            cvest.run({path!r})
            print("finished")
        except KeyboardInterrupt:
            print(f"interrupted after {{time.monotonic() - started:.1f}} s")
        """)
    cvest.run(path)  # the input generated here, unslowed; the run below would replace the output
    before = os.stat(tmp_path / "long_cv.h5").st_ino
    env = dict(os.environ, CVEST_FAULT="slow_write", PYTHONPATH=os.path.dirname(os.path.dirname(cvest.__file__)))
    p = subprocess.Popen([sys.executable, "-c", script], cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not glob.glob(str(tmp_path / ".long_cv.h5.tmp-*")) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.01)
    assert glob.glob(str(tmp_path / ".long_cv.h5.tmp-*")), "the run was writing its output"
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and out.startswith("interrupted"), (out, err)
    left = sorted(f for f in os.listdir(tmp_path) if f.startswith(".long_cv.h5"))
    assert left == [], left
    assert os.stat(tmp_path / "long_cv.h5").st_ino == before  # stopped before it replaced the output


def test_a_thread_may_make_the_first_call():
    # Before any other call: a fresh interpreter whose first cvest calls
    # come from a thread, then from the main thread.
    script = textwrap.dedent("""
        import concurrent.futures, numpy as np, cvest
        m, d = np.random.random((500, 5)), np.random.random((4, 500, 5))
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            first = pool.submit(lambda: cvest.multiply(m, d, strategy="team")).result()
            pool.submit(lambda: cvest.bench(3, 1000, 5, repeats=1, warm_seconds=0)).result()
        second = cvest.multiply(m, d, strategy="kokkos_kernels")
        third = cvest.multiply(m, d, strategy="team", layout="left")
        ref = m[None] * d
        print(all(x.tobytes() == ref.tobytes() for x in (first, second, third)))
        """)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(cvest.__file__)))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0 and p.stdout.strip() == "True", (p.stdout, p.stderr[-2000:])
