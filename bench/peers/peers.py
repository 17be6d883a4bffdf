#!/usr/bin/env python3
"""What cvest's users run today, written fresh for the comparison.

Each peer computes cv[t, i, k] = multBy[i, k] * discount[t, i, k].

In memory (timed on arrays already loaded):
  numba_guvec_one_worker    guvectorize whose signature hands the whole cube
                            to one worker (the question's original), cpu
  numba_guvec_per_date_cpu  guvectorize, one worker per date, target='cpu'
  numba_guvec_per_date_par  the same, target='parallel'
  numba_njit_prange         njit(parallel=True), prange over dates
  numpy_broadcast           np.multiply(m[None], d, out=cv)
  numba_cuda_*, cupy_*      on a machine with an NVIDIA GPU only

File to file (timed from open to close):
  h5py_numpy                h5py + NumPy, one date at a time
  h5py_numpy_gzip           the same, writing gzip + shuffle chunks
  h5py_numpy_lzf            the same, writing shuffle + lzf chunks
  h5py_numpy_blosc_lz4      the same with hdf5plugin: Blosc (lz4 inside, byte shuffle, level 5)
  h5py_numpy_blosc_zstd     Blosc (zstd inside, byte shuffle, level 5)
  h5py_numpy_bitshuffle_lz4 bitshuffle + LZ4
  dask                      dask.array.from_array -> to_hdf5

In memory, every peer in one process on the same arrays, answering
commands on stdin with JSON lines, so bench/compare interleaves them with
cvest (`cvest bench --serve`) repeat by repeat:
  peers.py serve IN.h5     prints `ready` once every peer is compiled and its
                           output checked bit for bit against NumPy's
                           m[None] * d (a mismatch ends it with an error), then
    warm SECONDS           every peer in turn until SECONDS have passed
    touch                  every array once (after sitting idle) -> {touched_s}
    time NAME              one timed call -> {name, seconds}
    quit
  peers.py list -          the peers available here, as JSON

File to file, one peer per process, so its peak RSS is its own:
  peers.py file NAME IN.h5 OUT.h5             -> JSON line {name, seconds, peak_rss_bytes}
  peers.py inmem NAME IN.h5 OUT.npy REPEATS   (one peer alone, as before: {name, times_s, peak_rss_bytes})
"""
import json
import resource
import sys
import time

import h5py
import numpy as np


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# --- in memory -----------------------------------------------------------------

def make_inmem():
    import numba
    from numba import guvectorize, njit, prange

    sig3 = ["void(float64[:,:,:], float64[:,:], float64[:,:,:])",
            "void(float32[:,:,:], float32[:,:], float32[:,:,:])"]

    @guvectorize(sig3, "(t,n,k),(n,k)->(t,n,k)", target="cpu")
    def one_worker(d, m, out):
        for t in range(d.shape[0]):
            for i in range(d.shape[1]):
                for k in range(d.shape[2]):
                    out[t, i, k] = m[i, k] * d[t, i, k]

    sig2 = ["void(float64[:,:], float64[:,:], float64[:,:])",
            "void(float32[:,:], float32[:,:], float32[:,:])"]

    def per_date_body(d, m, out):
        for i in range(d.shape[0]):
            for k in range(d.shape[1]):
                out[i, k] = m[i, k] * d[i, k]

    per_date_cpu = guvectorize(sig2, "(n,k),(n,k)->(n,k)", target="cpu")(per_date_body)
    per_date_par = guvectorize(sig2, "(n,k),(n,k)->(n,k)", target="parallel")(per_date_body)

    @njit(parallel=True)
    def prange_dates(d, m, out):
        for t in prange(d.shape[0]):
            for i in range(d.shape[1]):
                for k in range(d.shape[2]):
                    out[t, i, k] = m[i, k] * d[t, i, k]

    peers = {
        "numba_guvec_one_worker": lambda m, d, cv: one_worker(d, m, cv),
        "numba_guvec_per_date_cpu": lambda m, d, cv: per_date_cpu(d, m, cv),
        "numba_guvec_per_date_par": lambda m, d, cv: per_date_par(d, m, cv),
        "numba_njit_prange": lambda m, d, cv: prange_dates(d, m, cv),
        "numpy_broadcast": lambda m, d, cv: np.multiply(m[None], d, out=cv),
    }
    peers.update(make_gpu(numba))
    return peers


def make_gpu(numba):
    """GPU peers, each with and without host<->device copies counted; none
    when no NVIDIA GPU is usable."""
    peers = {}
    try:
        from numba import cuda
        gpu = cuda.is_available()
    except Exception:
        gpu = False
    if gpu:
        try:
            peers.update(make_numba_cuda())
        except Exception as e:  # a numba without working CUDA support: the other peers still run
            print(f"peers: numba CUDA peers unavailable: {type(e).__name__}: {e}", file=sys.stderr)
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()

        def cupy_copies(m, d, cv):
            cv[...] = cupy.asnumpy(cupy.asarray(m)[None] * cupy.asarray(d))

        def cupy_resident(m, d, cv, state={}):
            key = id(d)
            if key not in state:
                state.clear()
                state[key] = (cupy.asarray(m), cupy.asarray(d))
            gm, gd = state[key]
            cupy.multiply(gm[None], gd)
            cupy.cuda.Device().synchronize()

        peers["cupy_copies"] = cupy_copies
        peers["cupy_resident"] = cupy_resident
    except Exception:
        pass
    return peers


def make_numba_cuda():
    """numba CUDA peers, in the question's variants."""
    from numba import cuda, vectorize, guvectorize
    peers = {}

    @vectorize(["float64(float64, float64)", "float32(float32, float32)"], target="cuda")
    def vmul(m, d):
        return m * d

    @guvectorize(["void(float64[:,:], float64[:], float64[:,:])",
                  "void(float32[:,:], float32[:], float32[:,:])"], "(t,k),(k)->(t,k)", target="cuda")
    def per_id(d, m, out):
        for t in range(d.shape[0]):
            for k in range(d.shape[1]):
                out[t, k] = m[k] * d[t, k]

    def with_copies_vectorize(m, d, cv):
        cv[...] = vmul(np.broadcast_to(m[None], d.shape), d)

    def resident_vectorize(m, d, cv, state={}):
        key = id(d)
        if key not in state:
            state.clear()
            state[key] = (cuda.to_device(np.ascontiguousarray(np.broadcast_to(m[None], d.shape))),
                          cuda.to_device(d), cuda.device_array_like(d))
        mb, dd, out = state[key]
        vmul(mb, dd, out=out)
        cuda.synchronize()

    def with_copies_per_id(m, d, cv):
        # slice dim 1: the cube re-shaped to N x T x K, as the question did
        dn = np.ascontiguousarray(d.transpose(1, 0, 2))
        cv[...] = per_id(dn, m).transpose(1, 0, 2)

    peers["numba_cuda_vectorize_copies"] = with_copies_vectorize
    peers["numba_cuda_vectorize_resident"] = resident_vectorize
    peers["numba_cuda_guvec_per_id_copies"] = with_copies_per_id
    return peers


def run_inmem(name, src, out_npy, repeats):
    with h5py.File(src, "r") as f:
        m = f["multBy"][...]
        d = f["discount"][...]
    cv = np.empty_like(d)
    peers = make_inmem()
    if name not in peers:
        return {"name": name, "skipped": "not available on this machine"}
    fn = peers[name]
    fn(m, d, cv)  # warm-up (and JIT compile)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(m, d, cv)
        times.append(time.perf_counter() - t0)
    if out_npy != "-" and not name.endswith("_resident"):
        np.save(out_npy, cv)
    return {"name": name, "times_s": times, "peak_rss_bytes": peak_rss_bytes()}


def serve(src):
    with h5py.File(src, "r") as f:
        m = f["multBy"][...]
        d = f["discount"][...]
    cv = np.empty_like(d)
    expected = m[None] * d
    peers = make_inmem()
    for name, fn in peers.items():  # compile, and check what each computes
        fn(m, d, cv)
        if not name.endswith("_resident") and cv.tobytes() != expected.tobytes():
            print(json.dumps({"error": f"{name} differs from NumPy's m[None] * d"}), flush=True)
            sys.exit(1)
    del expected
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        if words[0] == "warm":
            t0, passes = time.perf_counter(), 0
            while time.perf_counter() - t0 < float(words[1]):
                for fn in peers.values():
                    fn(m, d, cv)
                passes += 1
            reply = {"warmed_s": time.perf_counter() - t0, "passes": passes}
        elif words[0] == "touch":  # every array once, after this process sat idle
            t0 = time.perf_counter()
            np.multiply(m[None], d, out=cv)
            reply = {"touched_s": time.perf_counter() - t0}
        elif words[0] == "time" and len(words) == 2 and words[1] in peers:
            t0 = time.perf_counter()
            peers[words[1]](m, d, cv)
            reply = {"name": words[1], "seconds": time.perf_counter() - t0}
        else:
            reply = {"error": f"unknown command {line.strip()!r}; valid: warm SECONDS, touch, time NAME "
                               f"({', '.join(peers)}), quit"}
        print(json.dumps(reply), flush=True)


# --- file to file -------------------------------------------------------------

def h5py_numpy(src, dst):
    with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
        m = f["multBy"][...]
        d = f["discount"]
        cv = g.create_dataset("cv", shape=d.shape, dtype=d.dtype)
        for t in range(d.shape[0]):
            cv[t] = m * d[t]


def h5py_numpy_filtered(src, dst, **filters):
    """The same, writing compressed chunks of (1, ~1 MiB of ids, K), as
    cvest's compressed output is chunked: h5py's filters as `filters` say
    (HDF5 applies them, one chunk at a time, inside its lock)."""
    with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
        m = f["multBy"][...]
        d = f["discount"]
        T, N, K = d.shape
        ids = max(1, min(N, (1 << 20) // (K * d.dtype.itemsize)))
        cv = g.create_dataset("cv", shape=d.shape, dtype=d.dtype, chunks=(1, ids, K), **filters)
        for t in range(T):
            cv[t] = m * d[t]


def codec_peers():
    """The compressed outputs' peers: h5py's own filters, and hdf5plugin's
    (Debian's takes HDF5's plugin path) with cvest's default settings."""
    peers = {"h5py_numpy_gzip": dict(compression="gzip", compression_opts=4, shuffle=True),
             "h5py_numpy_lzf": dict(compression="lzf", shuffle=True)}
    try:
        import hdf5plugin
    except ImportError:
        return peers
    peers["h5py_numpy_blosc_lz4"] = dict(hdf5plugin.Blosc(cname="lz4", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE))
    peers["h5py_numpy_blosc_zstd"] = dict(hdf5plugin.Blosc(cname="zstd", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE))
    peers["h5py_numpy_bitshuffle_lz4"] = dict(hdf5plugin.Bitshuffle(cname="lz4"))
    return peers


def dask_peer(src, dst):
    import dask.array as da
    with h5py.File(src, "r") as f:
        m = da.from_array(f["multBy"], chunks=f["multBy"].shape)
        d = da.from_array(f["discount"], chunks=(1,) + f["discount"].shape[1:])
        da.to_hdf5(dst, "/cv", m[None] * d)


def run_file(name, src, dst):
    filtered = codec_peers()
    if name in filtered:
        def fn(s, d):
            h5py_numpy_filtered(s, d, **filtered[name])
    else:
        fn = {"h5py_numpy": h5py_numpy, "dask": dask_peer}[name]
    t0 = time.perf_counter()
    fn(src, dst)
    return {"name": name, "seconds": time.perf_counter() - t0, "peak_rss_bytes": peak_rss_bytes()}


if __name__ == "__main__":
    mode, name = sys.argv[1], sys.argv[2]
    if mode == "list":
        print(json.dumps(sorted(make_inmem())))
    elif mode == "serve":
        serve(name)
    elif mode == "inmem":
        print(json.dumps(run_inmem(name, sys.argv[3], sys.argv[4], int(sys.argv[5]))))
    else:
        print(json.dumps(run_file(name, sys.argv[3], sys.argv[4])))
