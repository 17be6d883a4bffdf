"""Inputs as users' tools write them (bench/user_files.py, and at small
sizes tests/io/user_files.py): h5py's loop writing one date a chunk, plain
and through gzip, gzip after a shuffle, lzf, and Blosc and bitshuffle from
hdf5plugin; h5py's automatic chunks; chunks of all dates and some ids; a
contiguous cube; float32 discount beside float64 multBy; xarray's to_netcdf
(h5netcdf) and Dask's to_hdf5, a date a chunk."""
import dask.array as da
import h5py
import hdf5plugin
import numpy as np
import xarray as xr


def write_h5py(path, m, d, **create):
    """The loop users write: one date at a time into the dataset."""
    with h5py.File(path, "w") as f:
        f["multBy"] = m
        ds = f.create_dataset("discount", d.shape, d.dtype, **create)
        for t in range(d.shape[0]):
            ds[t] = d[t]


def write_xarray(path, m, d):
    T, N, K = d.shape
    ds = xr.Dataset({"multBy": (("id", "col"), m), "discount": (("date", "id", "col"), d)})
    ds.to_netcdf(path, engine="h5netcdf",
                 encoding={"discount": {"zlib": True, "complevel": 1, "chunksizes": (1, N, K)}})


def write_dask(path, m, d):
    T, N, K = d.shape
    da.to_hdf5(path, {"/multBy": da.from_array(m, chunks=(N, K)), "/discount": da.from_array(d, chunks=(1, N, K))},
               compression="gzip", compression_opts=1)


def corpus(T, N, K):
    """(name, writer(path, m, d), discount's dtype) for each kind of file."""
    one_date = dict(chunks=(1, N, K))

    def h5py_with(**create):
        return lambda path, m, d: write_h5py(path, m, d, **create)

    return [
        ("date_chunks_plain", h5py_with(**one_date), np.float64),
        ("date_chunks_gzip", h5py_with(**one_date, compression="gzip", compression_opts=1), np.float64),
        ("date_chunks_shuffle_gzip", h5py_with(**one_date, compression="gzip", shuffle=True), np.float64),
        ("date_chunks_lzf", h5py_with(**one_date, compression="lzf"), np.float64),
        ("date_chunks_blosc", h5py_with(**one_date, **hdf5plugin.Blosc(cname="lz4", clevel=5)), np.float64),
        ("date_chunks_bitshuffle", h5py_with(**one_date, **hdf5plugin.Bitshuffle(cname="lz4")), np.float64),
        ("auto_chunks_gzip", h5py_with(chunks=True, compression="gzip"), np.float64),
        ("ids_chunks_gzip", h5py_with(chunks=(T, min(N, 20_000), K), compression="gzip"), np.float64),
        ("contiguous", h5py_with(), np.float64),
        ("float32_date_chunks_lzf", h5py_with(**one_date, compression="lzf"), np.float32),
        ("xarray_date_chunks", write_xarray, np.float64),
        ("dask_date_chunks", write_dask, np.float64),
    ]


def values(T, N, K, seed=57):
    """multBy around 1, and discount factors exp(-r t) with a rate per id and
    column: as compressible as users' (lzf barely, gzip and Blosc some)."""
    rng = np.random.default_rng(seed)
    m = rng.uniform(0.5, 1.5, (N, K))
    rates = rng.uniform(0.01, 0.08, (N, K))
    return m, np.exp(-rates[None] * (np.arange(1, T + 1)[:, None, None] / 12))
