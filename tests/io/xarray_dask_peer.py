#!/usr/bin/env python3
"""cvest's output opens in xarray and Dask without surprises: xarray (h5netcdf
engine) sees the dimensions date, id, col with integer coordinates, the
string attributes, the file's chunks (in its encoding), and values equal to
NumPy's multBy[None] * discount bit for bit, eagerly and as a Dask-backed
array over the file's chunks;
dask.array.from_array over the h5py dataset computes the same bits. For
double and float outputs, both layouts, plain, gzip and (h5py's) lzf. And
inputs that xarray (to_netcdf with zlib, its own chunks) and Dask (to_hdf5,
its chunks) wrote give the same bits through cvest. Datasets in groups: an
input's in /market/2026, the output in results/ (created), which xarray
opens as a group with its dimensions.

    xarray_dask_peer.py CVEST_BINARY
"""
import os
import subprocess
import sys
import tempfile

import dask
import dask.array as da
import h5py
import numpy as np
import pandas as pd
import xarray as xr

from cvest_deck import ENV, run_deck

cvest = sys.argv[1]
failures = 0
cases = 0


def bitwise(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


with tempfile.TemporaryDirectory(prefix="cvest-xarray-") as work:
    T, N, K = 11, 6007, 5
    src = os.path.join(work, "in.h5")
    gen = subprocess.run([cvest, "generate", "--dates", str(T), "--ids", str(N), "--cols", str(K), "--out", src],
                         env=ENV, capture_output=True, text=True)
    if gen.returncode != 0:
        sys.exit(f"FAIL: cvest generate: exit {gen.returncode}\n{gen.stderr}")
    with h5py.File(src, "r") as f:
        m, d = f["multBy"][...], f["discount"][...]
    for precision, layout, compression in (("double", "right", "none"), ("double", "left", "gzip"),
                                           ("float", "right", "gzip"), ("float", "left", "none"),
                                           ("double", "right", "lzf"), ("float", "left", "lzf")):
        cases += 1
        tag = f"{precision}_{layout}_{compression}"
        dtype = np.float64 if precision == "double" else np.float32
        expected = m.astype(dtype)[None] * d.astype(dtype)
        out, error = run_deck(cvest, work, tag, input={"file": src},
                              output={"compression": compression, "chunk": 1000},
                              run={"layout": layout, "precision": precision, "strategy": "flat",
                                   "memory_budget": "4MiB"})
        if error:
            print(f"FAIL {tag}: {error}")
            failures += 1
            continue
        problems = []
        with xr.open_dataset(out, engine="h5netcdf") as ds:
            cv = ds["cv"]
            if cv.dims != ("date", "id", "col"):
                problems.append(f"dims {cv.dims}")
            for name, size in (("date", T), ("id", N), ("col", K)):
                if not np.array_equal(ds[name].values, np.arange(size)):
                    problems.append(f"coordinate {name} is not 0..{size - 1}")
            for key, want in (("layout", layout), ("strategy", "flat"), ("precision", precision)):
                if cv.attrs.get(key) != want:
                    problems.append(f"attribute {key} = {cv.attrs.get(key)!r}, expected {want!r}")
            if not isinstance(cv.attrs.get("cvest_version"), str):
                problems.append("attribute cvest_version is not a string")
            if not bitwise(cv.values, expected):
                problems.append("xarray values differ from NumPy")
        with h5py.File(out, "r") as f:
            file_chunks = f["cv"].chunks
            stored = "none" if f["cv"].compression is None else f["cv"].compression + (
                "+shuffle" if f["cv"].shuffle else "")
        if stored != (compression if compression == "none" else compression + "+shuffle"):
            problems.append(f"compression {compression}, the file has {stored}")
        # xarray reports the file's chunks in encoding; opening with them
        # gives a Dask array with one task per chunk
        with xr.open_dataset(out, engine="h5netcdf",
                             chunks=dict(zip(("date", "id", "col"), file_chunks))) as ds:
            cv = ds["cv"]
            if cv.encoding.get("chunksizes") != file_chunks:
                problems.append(f"xarray encoding chunksizes {cv.encoding.get('chunksizes')}, file {file_chunks}")
            if not isinstance(cv.data, da.Array):
                problems.append(f"chunks= gave {type(cv.data).__name__}, not a Dask array")
            elif cv.data.chunksize != file_chunks:
                problems.append(f"Dask chunks {cv.data.chunksize}, file chunks {file_chunks}")
            with dask.config.set(scheduler="threads"):
                if not bitwise(cv.compute().values, expected):
                    problems.append("Dask-backed xarray values differ from NumPy")
                # max is exact in any order, so it must match NumPy's exactly
                if not bitwise(cv.max(("id", "col")).compute().values, expected.max(axis=(1, 2))):
                    problems.append("a Dask reduction differs from NumPy's")
        with h5py.File(out, "r") as f:
            arr = da.from_array(f["cv"], chunks=f["cv"].chunks)
            if not bitwise(arr.compute(scheduler="threads"), expected):
                problems.append("dask.array.from_array values differ from NumPy")
        print(f"{'FAIL' if problems else 'ok'} {tag}" + (": " + "; ".join(problems) if problems else
                                                          ": dims, coordinates, attributes, values (eager, Dask)"))
        failures += bool(problems)

    # inputs as xarray and Dask write them
    xr_src = os.path.join(work, "in_xarray.nc")
    xr.Dataset({"multBy": (("id", "col"), m), "discount": (("date", "id", "col"), d)}).to_netcdf(
        xr_src, engine="h5netcdf", encoding={v: {"zlib": True, "complevel": 4} for v in ("multBy", "discount")})
    dask_src = os.path.join(work, "in_dask.h5")
    da.to_hdf5(dask_src, {"/multBy": da.from_array(m, chunks=(1500, K)),
                          "/discount": da.from_array(d, chunks=(4, 1500, K))})
    expected = m[None] * d
    for tag, path in (("xarray_input", xr_src), ("dask_input", dask_src)):
        cases += 1
        with h5py.File(path, "r") as f:
            chunks, compression = f["discount"].chunks, f["discount"].compression
        out, error = run_deck(cvest, work, tag, input={"file": path},
                              run={"layout": ["right", "left"], "strategy": "flat", "memory_budget": "4MiB"})
        problems = [error] if error else []
        if not problems:
            with h5py.File(out, "r") as f:
                if not bitwise(f["cv"][...], expected):
                    problems.append("values differ from NumPy")
        print(f"{'FAIL' if problems else 'ok'} {tag} (chunks {chunks}, {compression})" +
              (": " + "; ".join(problems) if problems else ": bit for bit"))
        failures += bool(problems)

    # the input's coordinates (xarray's dimension scales) carried to the output
    cases += 1
    coords = {"date": pd.date_range("2026-01-01", periods=d.shape[0], freq="D"),
              "id": 100000 + 3 * np.arange(d.shape[1]), "col": [f"c{k}" for k in range(d.shape[2])]}
    coord_src = os.path.join(work, "in_coords.nc")
    xr.Dataset({"multBy": (("id", "col"), m), "discount": (("date", "id", "col"), d)}, coords=coords).to_netcdf(
        coord_src, engine="h5netcdf")
    out, error = run_deck(cvest, work, "coords", input={"file": coord_src}, run={"layout": "left", "strategy": "flat"})
    problems = [error] if error else []
    if not problems:
        with xr.open_dataset(coord_src, engine="h5netcdf") as src, xr.open_dataset(out, engine="h5netcdf") as ds:
            for name in ("date", "id", "col"):
                if name not in ds["cv"].coords or not (ds["cv"].coords[name].values == src.coords[name].values).all():
                    problems.append(f"coordinate {name}: {ds['cv'].coords.get(name)} against the input's")
            if not bitwise(ds["cv"].values, expected):
                problems.append("values differ from NumPy")
    print(f"{'FAIL' if problems else 'ok'} coords" + (": " + "; ".join(problems) if problems else
                                                      ": dates, ids and string labels carried over"))
    failures += bool(problems)

    # datasets in groups, in and out
    cases += 1
    grouped = os.path.join(work, "in_groups.h5")
    with h5py.File(grouped, "w") as f:
        f["market/2026/multBy"], f["market/2026/discount"] = m, d
    out, error = run_deck(cvest, work, "groups",
                          input={"file": grouped, "multby": "/market/2026/multBy", "discount": "market/2026/discount"},
                          output={"dataset": "results/cv"},
                          run={"strategy": ["flat", "per_id"], "memory_budget": "4MiB"})
    problems = [error] if error else []
    if not problems:
        with xr.open_dataset(out, engine="h5netcdf", group="results") as ds:
            if ds["cv"].dims != ("date", "id", "col"):
                problems.append(f"dims {ds['cv'].dims}")
            if not bitwise(ds["cv"].values, expected):
                problems.append("values differ from NumPy")
        # cvest verify without a deck: the output's attributes name the datasets
        v = subprocess.run([cvest, "verify", out, "--input", grouped], env=ENV, capture_output=True, text=True)
        if v.returncode != 0:
            problems.append(f"verify without --deck: exit {v.returncode}: {v.stderr.strip()}")
    print(f"{'FAIL' if problems else 'ok'} groups" + (": " + "; ".join(problems) if problems else
                                                      ": results/cv with its dimensions, bit for bit"))
    failures += bool(problems)

print(f"{cases - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
