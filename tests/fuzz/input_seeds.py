#!/usr/bin/env python3
"""Seed inputs for the input fuzzer: small files holding multBy (N, K) and
discount (T, N, K) the ways users' tools store them (h5py's defaults,
contiguous or chunked, gzip/shuffle, lzf, Blosc and bitshuffle (hdf5plugin),
Fletcher32, float32, big-endian,
a user block, the newest file format), and a few a run must refuse.
Generated at test time, so the repository holds no binary corpus, and
byte for byte the same each time (no creation times in any object header),
so the fuzzer's fixed seed repeats the same mutations run after run.

    input_seeds.py DIRECTORY
"""
import os
import sys

import h5py
import hdf5plugin
import numpy

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
T, N, K = 3, 7, 2
rng = numpy.random.default_rng(1)
m = rng.random((N, K))
d = rng.random((T, N, K))


def create(path, libver=None, userblock_size=None):
    """h5py.File(path, "w", ...), without the root group's creation time
    (which the newest format stores, h5py giving no say)."""
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    if libver == "latest":
        fapl.set_libver_bounds(h5py.h5f.LIBVER_LATEST, h5py.h5f.LIBVER_LATEST)
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_obj_track_times(False)
    if userblock_size:
        fcpl.set_userblock(userblock_size)
    return h5py.File(h5py.h5f.create(path.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl))


def seed(name, discount=None, multby=None, file_kw=None, **kw):
    with create(os.path.join(out, name + ".h5"), **(file_kw or {})) as f:
        f.create_dataset("multBy", data=m if multby is None else multby, **kw.get("m", {}))
        f.create_dataset("discount", data=d if discount is None else discount, **kw.get("d", {}))


seed("contiguous")
seed("chunked_gzip", d=dict(chunks=(1, N, K), compression="gzip", shuffle=True), m=dict(chunks=(N, K), compression="gzip"))
seed("chunked_odd_f32", discount=d.astype("f4"), d=dict(chunks=(2, 3, 1)))
seed("lzf", d=dict(chunks=(1, 4, K), compression="lzf"))
# Blosc and bitshuffle chunks (the registered plugins' formats, which cvest
# decodes itself): values of few bits so the chunks compress.
# Wider rows (16 columns) so a chunk is more than Blosc's 128-byte minimum.
wide_d, wide_m = numpy.tile(numpy.round(d * 4) / 4, (1, 1, 8)), numpy.tile(m, (1, 8))
seed("blosc_bit_zstd", discount=wide_d, multby=wide_m,
     d=dict(chunks=(1, N, 16), **hdf5plugin.Blosc(cname="zstd", shuffle=hdf5plugin.Blosc.BITSHUFFLE)))
seed("blosc_lz4", discount=wide_d, multby=wide_m, d=dict(chunks=(2, 4, 16), **hdf5plugin.Blosc(cname="lz4")))
seed("bitshuffle_lz4", discount=wide_d, multby=wide_m, d=dict(chunks=(1, N, 16), **hdf5plugin.Bitshuffle(cname="lz4")))
seed("fletcher32", d=dict(chunks=(1, N, K), fletcher32=True))
seed("latest", file_kw=dict(libver="latest"), d=dict(chunks=(1, 4, K), compression="gzip", maxshape=(None, N, K)))
seed("big_endian", discount=d.astype(">f8"))
seed("userblock", file_kw=dict(userblock_size=512), d=dict(chunks=(1, N, K)))
seed("wrong_rank", discount=d[0])
seed("integers", discount=(d * 100).astype("i4"))
