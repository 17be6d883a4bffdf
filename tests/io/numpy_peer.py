#!/usr/bin/env python3
"""cvest's output equals NumPy's multBy[None] * discount bit for bit (IEEE's
edge cases included: NaN payloads, infinities, signed zeros, subnormals,
overflow and underflow), on files
written by h5py (contiguous, h5py-chunked and gzip-compressed), for both layouts and
both precisions; every strategy writing its own output with the edge cases;
and h5py sees named dimensions and string attributes.

    numpy_peer.py CVEST_BINARY
"""
import os
import sys
import tempfile

import h5py
import numpy as np

from cvest_deck import run_deck

cvest = sys.argv[1]
failures = 0
cases = 0


def sprinkle_special_values(a, rng):
    """Puts IEEE's edge cases at random places in a: NaNs with distinct
    payloads (the product keeps the first operand's, as NumPy's does), both
    infinities, both zeros, subnormals (flushed to zero under FTZ/DAZ, which
    NumPy never does), and the largest finite values and tiny normals, whose
    products overflow to infinity and underflow to subnormals or zero."""
    info = np.finfo(a.dtype)
    bits = np.uint64 if a.dtype == np.float64 else np.uint32
    inf_bits, quiet = np.array(np.inf, dtype=a.dtype).view(bits), bits(1) << bits(info.nmant - 1)
    nan_bits = [inf_bits | quiet | bits(p) for p in (1, 0x5a5)] + [inf_bits | bits(3)]  # the last one signalling
    specials = [np.array(b, dtype=bits).view(a.dtype) for b in nan_bits] + [
        np.inf, -np.inf, 0.0, -0.0, info.smallest_subnormal, -info.smallest_subnormal * 7, info.max, -info.max,
        info.tiny, -info.tiny * 3]
    flat = a.reshape(-1)
    at = rng.choice(flat.size, size=len(specials) * 40, replace=False)
    for j, where in enumerate(at):
        flat[where] = specials[j % len(specials)]


with tempfile.TemporaryDirectory(prefix="cvest-numpy-") as work:
    rng = np.random.default_rng(2026)
    for dtype in (np.float64, np.float32):
        # contiguous; h5py's own chunk shapes, plain and deflated (which split
        # the columns); deflated (1, ids, K) chunks with and without shuffle;
        # deflated (2, 700, K); h5py's lzf, alone and after a shuffle (HDF5's
        # library cannot read lzf): cvest decodes every chunked one itself;
        # a file with a user block ahead of its HDF5 data, and datasets in
        # files of their own behind h5py.ExternalLink (both were read at the
        # wrong offsets once)
        for chunks in (None, True, "gzip_h5py", "gzip_shuffle", "gzip", "gzip_other", "lzf", "lzf_shuffle",
                       "userblock", "external"):
            T, N, K = 13, 3001, 5
            # values over many binades, both signs: products round
            m = (rng.uniform(-1, 1, (N, K)) * 2.0 ** rng.integers(-30, 30, (N, K))).astype(dtype)
            d = (rng.uniform(-1, 1, (T, N, K)) * 2.0 ** rng.integers(-30, 30, (T, N, K))).astype(dtype)
            if chunks in ("lzf", "lzf_shuffle"):  # few distinct values, so lzf has something to shrink
                d = d.round(2)
            sprinkle_special_values(m, rng)
            sprinkle_special_values(d, rng)
            with np.errstate(all="ignore"):
                expected = m[None] * d
            tag = f"{np.dtype(dtype).name}_{chunks if isinstance(chunks, str) else 'chunked' if chunks else 'contiguous'}"
            src = os.path.join(work, f"in_{tag}.h5")
            with h5py.File(src, "w", userblock_size=4096 if chunks == "userblock" else 0) as f:
                if chunks == "external":
                    for name, data in (("multBy", m), ("discount", d)):
                        with h5py.File(os.path.join(work, f"{name}_{tag}.h5"), "w") as g:
                            g.create_dataset("padding", data=np.zeros(5000 + len(name)))
                            g.create_dataset(name, data=data, chunks=(1, 1000, K) if data.ndim == 3 else None)
                        f[name] = h5py.ExternalLink(f"{name}_{tag}.h5", name)
                elif chunks == "userblock":
                    f.create_dataset("multBy", data=m)
                    f.create_dataset("discount", data=d, chunks=(1, 1000, K), compression="gzip", shuffle=True)
                elif chunks == "gzip_h5py":  # what compression="gzip" alone gives
                    f.create_dataset("multBy", data=m, compression="gzip")
                    f.create_dataset("discount", data=d, compression="gzip")
                elif chunks in ("lzf", "lzf_shuffle"):
                    f.create_dataset("multBy", data=m, compression="lzf", shuffle=chunks == "lzf_shuffle")
                    ds = f.create_dataset("discount", data=d, compression="lzf", shuffle=chunks == "lzf_shuffle")
                    # some chunks compressed, so cvest's lzf decoding is what reads them
                    stored = [ds.id.get_chunk_info(j).size for j in range(ds.id.get_num_chunks())]
                    if min(stored) >= np.prod(ds.chunks) * d.itemsize:
                        print(f"FAIL {tag}: no chunk was compressed")
                        failures += 1
                elif isinstance(chunks, str):
                    shape = (2, 700, K) if chunks == "gzip_other" else (1, 1000, K)  # 3001 ids: a partial last chunk
                    f.create_dataset("multBy", data=m, chunks=(1000, K), compression="gzip")
                    f.create_dataset("discount", data=d, chunks=shape, compression="gzip",
                                     shuffle=chunks == "gzip_shuffle")
                else:
                    f.create_dataset("multBy", data=m, chunks=chunks)
                    f.create_dataset("discount", data=d, chunks=chunks)
            for layout in ("right", "left"):
                cases += 1
                out, error = run_deck(cvest, work, f"{tag}_{layout}", input={"file": src},
                                      run={"layout": layout, "strategy": ["flat", "elementwise", "per_id"],
                                           "memory_budget": "2MiB"})
                if error:
                    print(f"FAIL {tag} {layout}: {error}")
                    failures += 1
                    continue
                with h5py.File(out, "r") as f:
                    cv = f["cv"]
                    got = cv[...]
                    # bit for bit, except that where both factors are NaN any
                    # NaN will do: IEEE 754 leaves that payload to the
                    # implementation (compilers commute the operands)
                    bits = np.uint64 if dtype == np.float64 else np.uint32
                    both_nan = np.isnan(m)[None] & np.isnan(d)
                    same = got.dtype == expected.dtype and bool(
                        ((got.view(bits) == expected.view(bits)) | (both_nan & np.isnan(got))).all())
                    names = [cv.dims[i][0].name for i in range(3)]
                    attrs_ok = isinstance(cv.attrs["strategy"], str) and cv.attrs["layout"] == layout
                ok = same and names == ["/date", "/id", "/col"] and attrs_ok
                print(f"{'ok' if ok else 'FAIL'} {tag} layout={layout}: bitwise={same} dims={names} attrs={attrs_ok}")
                failures += not ok

    # Mixed precision: NumPy promotes float32 x float64 to float64, and so
    # does cvest unless [run] precision says otherwise (then a note says it
    # narrows an input, and the result is that precision's product).
    T, N, K = 6, 2001, 5
    for m_type, d_type in ((np.float64, np.float32), (np.float32, np.float64)):
        m = (rng.uniform(-1, 1, (N, K)) * 2.0 ** rng.integers(-30, 30, (N, K))).astype(m_type)
        d = (rng.uniform(-1, 1, (T, N, K)) * 2.0 ** rng.integers(-30, 30, (T, N, K))).astype(d_type)
        tag = f"mixed_m{np.dtype(m_type).name}_d{np.dtype(d_type).name}"
        src = os.path.join(work, f"in_{tag}.h5")
        with h5py.File(src, "w") as f:
            f["multBy"], f["discount"] = m, d
        for layout in ("right", "left"):
            for chosen in (None, "float"):
                cases += 1
                run = {"layout": layout, "strategy": ["flat", "per_id"], "memory_budget": "2MiB"}
                if chosen:
                    run["precision"] = chosen
                out, error = run_deck(cvest, work, f"{tag}_{layout}_{chosen}", input={"file": src}, run=run)
                if error:
                    print(f"FAIL {tag} {layout} precision={chosen}: {error}")
                    failures += 1
                    continue
                expected = m[None] * d if chosen is None else m.astype(np.float32)[None] * d.astype(np.float32)
                with h5py.File(out, "r") as f:
                    got = f["cv"][...]
                same = got.dtype == expected.dtype and got.tobytes() == expected.tobytes()
                print(f"{'ok' if same else 'FAIL'} {tag} layout={layout} precision={chosen}: {got.dtype} "
                      f"(NumPy {expected.dtype}), bitwise={same}")
                failures += not same

    # Every strategy, each writing its own output (a deck's later jobs are
    # only compared with its first, where any NaN matches a NaN), on both
    # layouts and precisions, with the edge values in both factors.
    STRATEGIES = ("one_worker", "per_date", "per_id", "elementwise", "flat", "team", "kokkos_kernels")
    T, N, K = 5, 1201, 5
    for dtype in (np.float64, np.float32):
        m = (rng.uniform(-1, 1, (N, K)) * 2.0 ** rng.integers(-30, 30, (N, K))).astype(dtype)
        d = (rng.uniform(-1, 1, (T, N, K)) * 2.0 ** rng.integers(-30, 30, (T, N, K))).astype(dtype)
        sprinkle_special_values(m, rng)
        sprinkle_special_values(d, rng)
        with np.errstate(all="ignore"):
            expected = m[None] * d
        bits = np.uint64 if dtype == np.float64 else np.uint32
        both_nan = np.isnan(m)[None] & np.isnan(d)
        tag = f"every_{np.dtype(dtype).name}"
        src = os.path.join(work, f"in_{tag}.h5")
        with h5py.File(src, "w") as f:
            f["multBy"], f["discount"] = m, d
        for strategy in STRATEGIES:
            for layout in ("right", "left"):
                cases += 1
                out, error = run_deck(cvest, work, f"{tag}_{strategy}_{layout}", input={"file": src},
                                      run={"layout": layout, "strategy": strategy, "memory_budget": "1MiB"})
                if error:
                    print(f"FAIL {tag} {strategy}/{layout}: {error}")
                    failures += 1
                    continue
                with h5py.File(out, "r") as f:
                    got = f["cv"][...]
                same = got.dtype == expected.dtype and bool(
                    ((got.view(bits) == expected.view(bits)) | (both_nan & np.isnan(got))).all())
                print(f"{'ok' if same else 'FAIL'} {tag} {strategy}/{layout}: edge values bit for bit={same}")
                failures += not same

print(f"{cases - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
