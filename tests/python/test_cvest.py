"""`import cvest` against NumPy: multiply bit for bit with `m[None] * d` for
every order, precision, strategy and shape tried, in place where it can be,
the errors a user meets, decks, verify and the benchmark from Python, and
no leak over many calls. Run by ctest (python.module) with the module's
build directory on PYTHONPATH and CVEST_BINARY naming the command.
"""
import json
import os
import subprocess

import h5py
import numpy as np
import pytest

import cvest

SOURCE = os.path.join(os.path.dirname(__file__), "..", "..")
STRATEGIES = ["flat", "per_date", "per_id", "elementwise", "one_worker", "team", "kokkos_kernels"]


def identical(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def inputs(T, N, K, m_type="f8", d_type="f8", seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((N, K)).astype(m_type) + 0.5, rng.random((T, N, K)).astype(d_type)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("types", [("f8", "f8"), ("f4", "f4"), ("f4", "f8"), ("f8", "f4")])
def test_multiply_is_numpy_bit_for_bit(strategy, order, types):
    m, d = inputs(6, 37, 5, *types)
    m, d = np.asarray(m, order=order), np.asarray(d, order=order)
    cv = cvest.multiply(m, d, strategy=strategy)
    assert identical(cv, m[None] * d)
    assert cv.flags["C_CONTIGUOUS" if order == "C" else "F_CONTIGUOUS"]  # the layout follows the order


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 1000, 1), (3, 1, 7), (200, 3, 2), (7, 999, 5), (2, 5, 64)])
def test_odd_shapes(shape):
    m, d = inputs(*shape)
    for layout in ("right", "left"):
        assert identical(cvest.multiply(m, d, layout=layout), m[None] * d)


def test_out_is_written_in_place_and_returned():
    m, d = inputs(4, 100, 3)
    for order in ("C", "F"):
        out = np.zeros(d.shape, order=order)
        got = cvest.multiply(m, np.asarray(d, order=order), out=out)
        assert got is out and identical(out, m[None] * d)
    # in place over discount itself: each element is read before it is written
    d2 = d.copy()
    cvest.multiply(m, d2, out=d2)
    assert identical(d2, m[None] * d)


def test_strided_and_other_order_inputs_are_copied_first():
    m, d = inputs(8, 60, 6)
    views = [d[::2], d[:, 5:50:3], d[:, :, ::2], d.transpose(0, 1, 2)[:, ::-1]]
    for v in views:
        mm = np.ascontiguousarray(m[: v.shape[1], : v.shape[2]]) if v.shape[1:] != m.shape else m
        if v.shape[1:] != mm.shape:
            continue
        assert identical(cvest.multiply(mm, v), mm[None] * v)
    # multBy in the other order than discount
    assert identical(cvest.multiply(np.asfortranarray(m), d), m[None] * d)
    assert identical(cvest.multiply(m, np.asfortranarray(d)), m[None] * d)
    # a layout asked for against the arrays' order
    assert identical(cvest.multiply(m, d, layout="left"), m[None] * d)


def test_views_into_h5py_read_arrays(tmp_path):
    m, d = inputs(5, 80, 4)
    path = tmp_path / "in.h5"
    with h5py.File(path, "w") as f:
        f["multBy"], f["discount"] = m, d
    with h5py.File(path, "r") as f:
        md, dd = f["multBy"][...], f["discount"][...]
    assert identical(cvest.multiply(md, dd), m[None] * d)
    assert identical(cvest.multiply(md[10:30], dd[1:4, 10:30]), m[None, 10:30] * d[1:4, 10:30])


def test_errors_are_one_line_value_errors():
    m, d = inputs(3, 10, 2)
    cases = [
        (lambda: cvest.multiply(m[:9], d), "multBy is (9, 2), expected (10, 2) to match discount (3, 10, 2)"),
        (lambda: cvest.multiply(m, d[0]), "discount must be 3-D (T, N, K), found 2-D (10, 2)"),
        (lambda: cvest.multiply(m[None], d), "multBy must be 2-D (N, K), found 3-D (1, 10, 2)"),
        (lambda: cvest.multiply(m.astype(np.int64), d), "multBy must hold float32 or float64, found int64"),
        (lambda: cvest.multiply(m, d.astype(np.float16)), "discount must hold float32 or float64, found float16"),
        (lambda: cvest.multiply(m, d, strategy="fastest"), "unknown strategy 'fastest'"),
        (lambda: cvest.multiply(m, d, layout="diagonal"), "diagonal"),
        (lambda: cvest.multiply(m, d, out=np.empty((3, 10, 3))), "out is (3, 10, 3), expected discount's shape"),
        (lambda: cvest.multiply(m, d, out=np.empty(d.shape, "f4")), "out holds float32, expected float64"),
        (lambda: cvest.multiply(m, d, out=np.empty(d.shape, order="F")), "out must be C-contiguous for LayoutRight"),
        (lambda: cvest.multiply(m, d, out=[0.0]), "out must be a NumPy array"),
    ]
    read_only = np.empty(d.shape)
    read_only.flags.writeable = False
    cases.append((lambda: cvest.multiply(m, d, out=read_only), "out is read-only"))
    for call, message in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert message in str(e.value) and "\n" not in str(e.value)


def test_run_of_the_seed_deck_reports_as_the_command_does(tmp_path):
    deck = os.path.join(SOURCE, "inputs", "seed.toml")
    paths = {"input.file": "in.h5", "output.file": "cv.h5", "report.json": "report.json", "report.csv": "report.csv"}
    for where in ("python", "command"):
        (tmp_path / where).mkdir()
    over = {k: str(tmp_path / "python" / v) for k, v in paths.items()}
    report = cvest.run(deck, set=over)
    assert cvest.verify(over["output.file"], input=over["input.file"]) is True
    with pytest.raises(ValueError, match="needs the input file"):
        cvest.verify(over["output.file"])
    with open(over["report.json"]) as f:
        assert json.load(f).keys() == report.keys()
    sets = [a for k, v in paths.items() for a in ("--set", f"{k}={json.dumps(str(tmp_path / 'command' / v))}")]
    subprocess.run([os.environ["CVEST_BINARY"], "run", deck, *sets], check=True, capture_output=True)
    with open(tmp_path / "command" / "report.json") as f:
        command = json.load(f)
    assert command.keys() == report.keys()
    # Everything but timings and paths is the same: the plan, each job's
    # choices and bytes, the verification; and the outputs are the same bits.
    for key in ("shape", "block_plans", "backend", "threads", "memory_budget_bytes", "output_chunk_ids",
                "output_compression", "ranks", "verified", "cvest_version", "kokkos_version"):
        assert command[key] == report[key], key
    same = ("strategy", "layout", "precision", "pipeline", "pipeline_threads", "blocks", "block_dates", "block_ids",
            "kernel_ids", "runs", "wrote_output", "resumed_blocks")
    assert len(command["jobs"]) == len(report["jobs"]) == 8
    for c, r in zip(command["jobs"], report["jobs"]):
        assert {k: c[k] for k in same} == {k: r[k] for k in same}, [(k, c[k], r[k]) for k in same if c[k] != r[k]]
        # Bytes every run moves alike (the read phase's depend on which
        # thread took which block: a thread rereads multBy for a new id range).
        for phase in ("kernel", "write"):
            assert c["bytes"][phase] == r["bytes"][phase], phase
        assert c["seconds"].keys() == r["seconds"].keys() and len(c["timeline"]) == len(r["timeline"])
    with h5py.File(over["output.file"], "r") as a, h5py.File(tmp_path / "command" / "cv.h5", "r") as b:
        assert a["cv"].shape == (100, 4000, 5) and np.array_equal(a["cv"][...].view(np.uint8), b["cv"][...].view(np.uint8))
    plan = cvest.run(deck, set=dict(over, **{"output.file": str(tmp_path / "planned.h5")}), plan=True)
    assert plan["jobs"] and not (tmp_path / "planned.h5").exists()


def test_run_errors_are_typed(tmp_path):
    deck = tmp_path / "deck.toml"
    deck.write_text('[input]\nfile = "missing.h5"\n[output]\nfile = "out.h5"\n')
    with pytest.raises(cvest.InputError) as e:
        cvest.run(str(deck))
    assert isinstance(e.value, ValueError) and "missing.h5" in str(e.value)
    with pytest.raises(cvest.InputError):
        cvest.run(str(deck), set={"run.strategy": "fastest"})


def test_verify_finds_a_changed_value(tmp_path):
    m, d = inputs(4, 50, 3)
    with h5py.File(tmp_path / "in.h5", "w") as f:
        f["multBy"], f["discount"] = m, d
    deck = tmp_path / "deck.toml"
    deck.write_text(f'[input]\nfile = "{tmp_path / "in.h5"}"\n[output]\nfile = "{tmp_path / "out.h5"}"\n')
    cvest.run(str(deck))
    assert cvest.verify(str(tmp_path / "out.h5"), deck=str(deck))
    with h5py.File(tmp_path / "out.h5", "r+") as f:
        f["cv"][2, 17, 1] += 1.0
    with pytest.raises(cvest.VerifyError):
        cvest.verify(str(tmp_path / "out.h5"), input=str(tmp_path / "in.h5"))


def test_bench_returns_its_report():
    report = cvest.bench(dates=4, ids=20000, cols=5, strategies=["flat", "per_date"], layouts=["right"], repeats=2,
                         warm_seconds=0)
    assert {r["strategy"] for r in report["results"]} == {"flat", "per_date"}
    assert report["roof"]["copy_GBps"] > 0
    for r in report["results"]:  # each row against a copy on its own arrays
        assert r["roof_GBps"] > 0 and r["roof_fraction"] > 0


def test_no_leak_over_many_calls():
    m, d = inputs(10, 2000, 5)
    out = np.empty(d.shape)

    def rss_kib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))

    for _ in range(100):  # settle allocators
        cvest.multiply(m, d)
    before = rss_kib()
    for i in range(1000):
        cvest.multiply(m, d, out=out) if i % 2 else cvest.multiply(m, d)
    grown = rss_kib() - before
    assert grown < 8 * 1024, f"RSS grew {grown} KiB over 1000 calls"  # one call's result is 800 KiB
    assert identical(out, m[None] * d)


def test_initialize_after_first_use_is_refused():
    cvest.multiply(*inputs(1, 1, 1))
    assert cvest.is_initialized()
    with pytest.raises(ValueError, match="already initialized"):
        cvest.initialize(threads=1)


def test_bench_server_times_on_its_own_arrays():
    server = cvest.BenchServer(dates=3, ids=5000, cols=5, strategies=["flat"], layouts=["right", "left"])
    assert "checked" in server.describe()
    reply = server.time("flat", "left")
    assert reply["seconds"] > 0 and reply["layout"] == "left"
    roof = server.roof()  # on the kernels' own arrays and bytes: the first layout's discount copied into its cv
    assert roof["copy_GBps"] > 0 and roof["copy_streaming_GBps"] > 0
    assert roof["arrays"] == "discount into cv, multBy read, right, double"
    # the copy in flat's walk where the bench's rows have it: on LayoutRight
    # where flat takes dates together on these arrays, on LayoutLeft runs of T
    assert set(roof) <= {"copy_GBps", "copy_streaming_GBps", "copy_walk_GBps", "arrays"}
    assert roof.get("copy_walk_GBps", 1) > 0
    left = cvest.BenchServer(dates=3, ids=5000, cols=5, strategies=["flat"], layouts=["left"]).roof()
    assert left["arrays"] == "discount into cv, multBy read, left, double" and left["copy_walk_GBps"] > 0
    with pytest.raises(ValueError, match="unknown strategy"):
        server.time("fastest", "right")
    # kept alive to the end of the process: released before Kokkos finalizes
    test_bench_server_times_on_its_own_arrays.kept = server


@pytest.mark.parametrize("layout", ["right", "left"])
@pytest.mark.parametrize("types", [("f8", "f8"), ("f4", "f4"), ("f4", "f8")])
@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 999, 5), (300, 4, 3)])
def test_staged_through_the_block_pipeline(layout, types, shape):
    # The path NumPy arrays take on a Cuda build (host staging, copies in and
    # out, the layout's transposes), run on the host.
    m, d = inputs(*shape, *types)
    for strategy in ("flat", "per_date"):
        assert identical(cvest.multiply(m, d, strategy=strategy, layout=layout, staged=True), m[None] * d)
    out = np.empty(d.shape, np.result_type(m, d))
    assert cvest.multiply(m, np.asfortranarray(d), out=out, staged=True) is out and identical(out, m[None] * d)
    fortran_out = np.asfortranarray(out)
    if not fortran_out.flags["C_CONTIGUOUS"]:  # (a (1, 1, 1) array is both)
        with pytest.raises(ValueError, match="C-contiguous for the block pipeline"):
            cvest.multiply(m, d, out=fortran_out, staged=True)


def with_edge_values(a, rng):
    """IEEE's edge cases at random places of a: NaNs with distinct payloads
    (one signalling), both infinities and zeros, subnormals, the largest
    finite values and tiny normals (products overflow and underflow)."""
    info = np.finfo(a.dtype)
    bits = np.uint64 if a.dtype == np.float64 else np.uint32
    inf_bits, quiet = np.array(np.inf, dtype=a.dtype).view(bits), bits(1) << bits(info.nmant - 1)
    nans = [np.array(b, dtype=bits).view(a.dtype) for b in (inf_bits | quiet | bits(1), inf_bits | quiet | bits(0x5a5),
                                                             inf_bits | bits(3))]
    specials = nans + [np.inf, -np.inf, 0.0, -0.0, info.smallest_subnormal, -info.smallest_subnormal * 7, info.max,
                       -info.max, info.tiny, -info.tiny * 3]
    flat = a.reshape(-1)
    for j, where in enumerate(rng.choice(flat.size, size=len(specials) * 6, replace=False)):
        flat[where] = specials[j % len(specials)]
    return a


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("layout", ["right", "left"])
@pytest.mark.parametrize("dtype", ["f8", "f4"])
@pytest.mark.parametrize("staged", [False, True])
def test_edge_values_through_every_variant(strategy, layout, dtype, staged):
    rng = np.random.default_rng(11)
    m = with_edge_values((rng.uniform(-1, 1, (301, 5)) * 2.0 ** rng.integers(-30, 30, (301, 5))).astype(dtype), rng)
    d = with_edge_values((rng.uniform(-1, 1, (7, 301, 5)) * 2.0 ** rng.integers(-30, 30, (7, 301, 5))).astype(dtype),
                         rng)
    with np.errstate(all="ignore"):
        expected = m[None] * d
    got = cvest.multiply(m, d, strategy=strategy, layout=layout, staged=staged)
    bits = np.uint64 if dtype == "f8" else np.uint32
    both_nan = np.isnan(m)[None] & np.isnan(d)  # any NaN will do there: IEEE leaves that payload open
    assert got.dtype == expected.dtype
    assert ((got.view(bits) == expected.view(bits)) | (both_nan & np.isnan(got))).all()


def test_io_errors_are_typed(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the output's folder would be\n")
    deck = tmp_path / "deck.toml"
    deck.write_text('[input]\nfile = "gen.h5"\ngenerate = { dates = 2, ids = 100, cols = 5 }\n'
                    '[output]\nfile = "file/sub/out.h5"\n')
    with pytest.raises(cvest.IoError) as e:
        cvest.run(str(deck))
    assert isinstance(e.value, OSError) and "file/sub/out.h5" in str(e.value) and "\n" not in str(e.value)


def test_the_gil_is_released_during_a_kernel():
    # Another Python thread makes progress while multiply runs: ticks
    # stamped well inside the call prove it. Holding the GIL, the call could
    # still see ticks in its first switch interval (the ticker asks for the
    # GIL as the call starts), so that interval is made 1 ms and the window
    # opens 10 ms in; it closes half-way through the call.
    import sys
    import threading
    import time
    m, d = inputs(40, 100000, 5)
    ticks, stop = [], threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        calls = []
        for _ in range(20):
            t0 = time.perf_counter()
            cvest.multiply(m, d, strategy="one_worker")
            calls.append((t0, time.perf_counter()))
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
    # The first half of each call (its tail was seen to let the ticker in
    # even with the GIL held through the kernel: the result's bookkeeping).
    inside = [sum(a + 0.010 < t < (a + b) / 2 for t in ticks) for a, b in calls if b - a > 0.03]
    assert inside, "no call took long enough to tell"
    # A loaded machine may leave the ticker unscheduled through some calls,
    # never through most.
    assert sum(n > 0 for n in inside) > len(inside) // 2, inside


@pytest.mark.parametrize("dtype", ["f8", "f4"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_both_sides_of_the_calling_thread_limit_give_numpy_bits(dtype, order):
    # Below the limit cvest computes on the calling thread, above it on its
    # Kokkos thread: the same bits either way, with and without out=, in place.
    limit = cvest._caller_thread_limit()
    one_thread = limit == 2 ** 64 - 1  # one Kokkos thread: the calling thread always
    assert one_thread or 32 << 10 <= limit <= 128 << 20
    limit = min(limit, 64 << 20)
    item = np.dtype(dtype).itemsize
    for nbytes in (limit // 3, 2 * limit):
        T, K = 4, 5
        N = max(1, nbytes // (T * K * item))
        m, d = inputs(T, N, K, dtype, dtype, seed=N)
        m, d = np.asarray(m, order=order), np.asarray(d, order=order)
        expected = m[None] * d
        assert identical(cvest.multiply(m, d), expected)
        out = np.empty_like(d, order=order)
        assert cvest.multiply(m, d, out=out) is out and identical(out, expected)
        cvest.multiply(m, d, d)  # out given by position, over discount itself
        assert identical(d, expected)


def test_the_common_call_checks_what_it_takes():
    m, d = inputs(3, 50, 5)
    swapped = d.astype(">f8")  # not native: the general path converts it
    assert identical(cvest.multiply(m, swapped), m[None] * d)
    strided = d[:, ::2]  # not contiguous: the general path copies it
    assert identical(cvest.multiply(m[::2], strided), m[None, ::2] * strided)
    with pytest.raises(ValueError, match="out is read-only"):
        ro = np.empty_like(d)
        ro.flags.writeable = False
        cvest.multiply(m, d, out=ro)
    with pytest.raises(TypeError):
        cvest.multiply(m, d, nonsense=1)
    with pytest.raises(TypeError):
        cvest.multiply(m)
    import inspect
    assert list(inspect.signature(cvest.multiply).parameters) == ["multby", "discount", "out", "strategy", "layout",
                                                                 "staged"]
