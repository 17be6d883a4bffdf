#!/usr/bin/env python3
"""Compressed outputs as users read them, and compressed inputs as others write them.

    compressed.py CVEST_BINARY

For every compression cvest writes (gzip, lzf, Blosc with lz4 and zstd, byte
and bit shuffle, bitshuffle-LZ4), in double and float, in chunks of 700 ids
(the last one partial), on smooth values and on random ones (so some chunks
are stored compressed and, where a filter cannot shrink one, without it):
  - h5py with hdf5plugin (Debian's, which takes HDF5's plugin path) reads the
    output bit for bit equal to NumPy's multBy[None] * discount;
  - Blosc's filter record holds the deck's level, shuffle and compressor,
    and its chunks' own headers the same compressor and shuffle;
  - its chunks take at most 2% more than h5py + hdf5plugin's same filters
    on the same values (libdeflate's gzip is not zlib's; the others match
    byte for byte), smooth values fewer than plain;
  - HDF5's h5dump with HDF5_PLUGIN_PATH set dumps the same bytes;
  - xarray (h5netcdf engine) opens it with the dimensions date, id, col;
  - cvest reads it back as an input, decoding the chunks itself (no plugins
    in its path), and gets the same product again;
  - the run table says what coding took, and whether compressing paid
    against the disk's plain rate once `cvest tune` has measured it.
Inputs h5py + hdf5plugin write with Blosc and Bitshuffle are decoded by
cvest's threads, bit for bit. A damaged Blosc or bitshuffle chunk ends in one
line naming the file, the dataset and the chunk (exit 3), or, where a flip
hits bytes no check covers, in the product h5py reads from the same bytes.
"""
import os
import subprocess
import sys
import tempfile

import h5py
import hdf5plugin
import numpy as np
import xarray as xr
from checks import check, failures

cvest = sys.argv[1]
PLUGINS = "/usr/lib/x86_64-linux-gnu/hdf5/serial/plugins"
CASES = [("gzip", {}), ("lzf", {}),
         ("blosc", {"codec": "lz4", "shuffle": "byte"}), ("blosc", {"codec": "lz4", "shuffle": "bit"}),
         ("blosc", {"codec": "zstd", "shuffle": "byte", "level": 3}), ("blosc", {"codec": "zstd", "shuffle": "bit"}),
         ("bitshuffle-lz4", {})]
T, N, K = 5, 2503, 5


def toml(v):
    return f'"{v}"' if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)


def run(deck_path, input_file, output_file, output_keys, env=None, discount="discount"):
    # No write-mode records but the test's own (an ambient CVEST_CACHE_DIR's would change the table).
    env = dict(env) if env else dict(os.environ, CVEST_CACHE_DIR=os.path.abspath("no-records"))
    with open(deck_path, "w") as f:
        f.write(f'[input]\nfile = "{input_file}"\ndiscount = "{discount}"\n[output]\nfile = "{output_file}"\n'
                f'overwrite = true\nchunk = 700\n' + "".join(f"{k} = {toml(v)}\n" for k, v in output_keys.items()))
    return subprocess.run([cvest, "run", deck_path, "--explain"], capture_output=True, text=True, env=env, timeout=120)


def blosc_settings(path):
    """The Blosc filter record's level, shuffle and compressor code (its
    values 4-6, as hdf5-blosc's set_local writes them), and the first
    compressed chunk's own header: its compressor's format (flags bits 5-7)
    and shuffle flags (bit 0 byte, bit 2 bit); None where no chunk was
    stored compressed. h5py + hdf5plugin decode by the header alone, so a
    chunk coded otherwise than the record says would still read back."""
    with h5py.File(path, "r") as f:
        cv = f["cv"]
        plist = cv.id.get_create_plist()
        record = next(tuple(plist.get_filter(i)[2][4:7]) for i in range(plist.get_nfilters())
                      if plist.get_filter(i)[0] == 32001)
        for i in range(cv.id.get_num_chunks()):
            mask, chunk = cv.id.read_direct_chunk(cv.id.get_chunk_info(i).chunk_offset)
            if mask == 0:
                return record, (chunk[2] >> 5, chunk[2] & 0x5)
    return record, None


def blosc_wanted(keys, element):
    """(the record's (level, shuffle, compressor code), the header's (format, shuffle flags)) for a case's keys."""
    shuffle, codec = keys.get("shuffle", "byte"), keys.get("codec", "lz4")
    return ((keys.get("level", 5), 2 if shuffle == "bit" else 1, 5 if codec == "zstd" else 1),
            (4 if codec == "zstd" else 1, 0x4 if shuffle == "bit" else 0x1))


def peer_filters(compression, keys):
    """The same filters as h5py + hdf5plugin write them (cvest's gzip and lzf shuffle first)."""
    if compression in ("gzip", "lzf"):
        return {"compression": compression, "shuffle": True, **({"compression_opts": 4} if compression == "gzip" else {})}
    if compression == "blosc":
        shuffle = hdf5plugin.Blosc.BITSHUFFLE if keys.get("shuffle") == "bit" else hdf5plugin.Blosc.SHUFFLE
        return hdf5plugin.Blosc(cname=keys.get("codec", "lz4"), clevel=keys.get("level", 5), shuffle=shuffle)
    return hdf5plugin.Bitshuffle(cname="lz4")


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


no_plugins = dict(os.environ, HDF5_PLUGIN_PATH="/nonexistent-cvest-plugins", CVEST_CACHE_DIR="/nonexistent-cvest-records")
with tempfile.TemporaryDirectory() as tmp:
    os.chdir(tmp)
    rng = np.random.default_rng(37)
    for dtype in (np.float64, np.float32):
        for values in ("smooth", "random"):
            if values == "smooth":  # discount factors falling with the date, multipliers of 2 decimals
                rates = rng.uniform(0.0, 0.08, (N, K))
                d = np.exp(-rates[None] * (np.arange(T) * 30.0 / 365.0)[:, None, None]).astype(dtype)
                m = np.round(rng.uniform(0.5, 2.0, (N, K)), 2).astype(dtype)
            else:
                d, m = rng.random((T, N, K)).astype(dtype), rng.random((N, K)).astype(dtype)
            expected = m[None] * d  # (before any plugin is loaded here: none changes this process's FP mode)
            src = f"in_{np.dtype(dtype).name}_{values}.h5"
            with h5py.File(src, "w") as f:
                f["multBy"], f["discount"] = m, d
            for compression, keys in CASES:
                tag = f"{np.dtype(dtype).name} {values} {compression} {keys}"
                out = "out.h5"
                p = run("deck.toml", src, out, {"compression": compression, **keys})
                if not check(p.returncode == 0, f"{tag}: cvest run ({p.stderr.strip()[-300:]})"):
                    continue
                written = [l for l in p.stdout.splitlines() if l.startswith("output: written")]
                check(len(written) == 1 and "GB coded into" in written[0] and "is not measured" in written[0],
                      f"{tag}: the table says what coding took, and that the disk's rate is not measured ({written})")
                with h5py.File(out, "r") as f:
                    cv = f["cv"]
                    got = cv[...]
                    filters = list(cv._filters)
                    stored = cv.id.get_storage_size()
                check(same_bits(got, expected), f"{tag}: h5py + hdf5plugin reads NumPy's product bit for bit "
                                                f"(filters {filters}, {stored} of {got.nbytes} bytes)")
                if compression == "blosc":
                    record, header = blosc_settings(out)
                    want = blosc_wanted(keys, np.dtype(dtype).itemsize)
                    check(record == want[0] and header in (want[1], None) and (header or values == "random"),
                          f"{tag}: the filter record (level, shuffle, compressor) {record} and a chunk's header "
                          f"(compressor format, shuffle flags) {header}, as the deck asked: {want}")
                with h5py.File("peer.h5", "w") as f:
                    peer = f.create_dataset("cv", data=expected, chunks=(1, 700, K),
                                            **peer_filters(compression, keys)).id.get_storage_size()
                check(stored <= 1.02 * peer and (values == "random" or stored < got.nbytes),
                      f"{tag}: stored in {stored} bytes, within 2% of h5py + hdf5plugin's {peer} for the same "
                      f"values and filters" + ("" if values == "random" else f", fewer than {got.nbytes} plain"))
                dump = subprocess.run(["h5dump", "-d", "/cv", "-b", "LE", "-o", "cv.bin", out], capture_output=True,
                                      text=True, env=dict(os.environ, HDF5_PLUGIN_PATH=PLUGINS))
                check(dump.returncode == 0 and same_bits(np.fromfile("cv.bin", dtype=dtype).reshape(T, N, K), expected),
                      f"{tag}: h5dump with HDF5_PLUGIN_PATH dumps the same bytes ({dump.stderr.strip()[-200:]})")
                with xr.open_dataset(out, engine="h5netcdf") as ds:
                    check(ds["cv"].dims == ("date", "id", "col") and same_bits(ds["cv"].values, expected),
                          f"{tag}: xarray opens it with dims {ds['cv'].dims}")
                # cvest reads its own output back (as the discount, its multBy beside it), no plugins.
                with h5py.File(out, "a") as f:
                    f["multBy"] = np.ones((N, K), dtype=dtype)
                p = run("back.toml", out, "back.h5", {}, env=no_plugins, discount="cv")
                ok = p.returncode == 0 and "decoded by cvest's threads" in p.stderr
                if ok:
                    with h5py.File("back.h5", "r") as f:
                        ok = same_bits(f["cv"][...], expected)
                check(ok, f"{tag}: cvest decodes its own output itself, without plugins ({p.stderr.strip()[-300:]})")

    # With the disk's rate measured (cvest tune), the table says whether compressing paid.
    records = os.path.abspath("records")
    t = subprocess.run([cvest, "tune", ".", "--size", "8MiB", "--repeats", "2", "--walk-size", "4MiB"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, CVEST_CACHE_DIR=records, CVEST_TUNE_NO_WAIT="1"))
    check(t.returncode == 0, f"cvest tune ({t.stderr.strip()[-300:]})")
    p = run("deck.toml", "in_float64_smooth.h5", "out.h5", {"compression": "blosc"},
            env=dict(os.environ, CVEST_CACHE_DIR=records))
    written = [l for l in p.stdout.splitlines() if l.startswith("output: written")]
    check(p.returncode == 0 and len(written) == 1 and "(cvest tune, " in written[0]
          and ("the output can reach the disk faster than plain" in written[0]
               or "plain, the output would reach the disk faster" in written[0]),
          f"after cvest tune: the table says whether compressing paid ({written})")

    # Others' chunks: h5py + hdf5plugin's Blosc and Bitshuffle, odd chunk shapes.
    d, m = rng.random((4, 3001, 5)), np.round(rng.random((3001, 5)), 3)
    expected = m[None] * d
    with h5py.File("others.h5", "w") as f:
        f["multBy"] = m
        f.create_dataset("blosc", data=d, chunks=(2, 751, 2),
                         **hdf5plugin.Blosc(cname="zstd", clevel=5, shuffle=hdf5plugin.Blosc.BITSHUFFLE))
        f.create_dataset("blosc_lz4", data=d, chunks=(1, 1000, 5), **hdf5plugin.Blosc(cname="lz4"))
        f.create_dataset("bitshuffle", data=d, chunks=(3, 333, 5), **hdf5plugin.Bitshuffle(cname="lz4"))
        f.create_dataset("bitshuffle_bare", data=d, chunks=(1, 1001, 5), **hdf5plugin.Bitshuffle(cname="none"))
        # deflate before shuffle (only the low-level API orders them so): HDF5's to read
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((1, 1000, 5))
        dcpl.set_deflate(4)
        dcpl.set_shuffle()
        h5py.h5d.create(f.id, b"deflate_then_shuffle", h5py.h5t.IEEE_F64LE, h5py.h5s.create_simple(d.shape), dcpl=dcpl)
        f["deflate_then_shuffle"][...] = d
    for name in ("blosc", "blosc_lz4", "bitshuffle", "bitshuffle_bare", "deflate_then_shuffle"):
        p = run("others.toml", "others.h5", "out_others.h5", {}, env=no_plugins, discount=name)
        reader = "read by HDF5" if name == "deflate_then_shuffle" else "decoded by cvest's threads"
        ok = p.returncode == 0 and reader in p.stderr
        if ok:
            with h5py.File("out_others.h5", "r") as f:
                ok = same_bits(f["cv"][...], expected)
        check(ok, f"h5py's {name} input: {reader}, bit for bit ({p.stderr.strip()[-300:]})")

    # A byte flipped inside a chunk (dates 1, ids 1000-1999 of the lz4 Blosc and the bitshuffle datasets).
    with h5py.File("others.h5", "r") as f:
        chunks = {name: f[name].id.get_chunk_info_by_coord((1, 1000, 0) if name == "blosc_lz4" else (0, 999, 0))
                  for name in ("blosc_lz4", "bitshuffle")}
    for name, c in chunks.items():
        for at in (c.byte_offset + 2, c.byte_offset + 13, c.byte_offset + c.size // 2):  # header, block size, body
            data = bytearray(open("others.h5", "rb").read())
            data[at] ^= 0x5A
            open("bad.h5", "wb").write(bytes(data))
            if os.path.exists("out_bad.h5"):  # a flip decoded before: its output, not this run's
                os.remove("out_bad.h5")
            p = run("bad.toml", "bad.h5", "out_bad.h5", {}, env=no_plugins, discount=name)
            lines = [l for l in p.stderr.splitlines() if l.startswith("cvest: ") and "error" in l]
            if p.returncode == 0:  # no check covers those bytes: the product of what they decode to
                with h5py.File("bad.h5", "r") as f, h5py.File("out_bad.h5", "r") as o:
                    try:
                        ok = same_bits(o["cv"][...], f["multBy"][...][None] * f[name][...])
                    except OSError:
                        ok = False
                check(ok, f"{name} flipped at +{at - c.byte_offset}: decoded as h5py decodes the same bytes")
            else:
                check(p.returncode == 3 and len(lines) == 1 and "bad.h5" in lines[0] and f"'{name}'" in lines[0]
                      and "chunk at" in lines[0] and not os.path.exists("out_bad.h5"),
                      f"{name} flipped at +{at - c.byte_offset}: exit 3, one line naming the file, dataset and chunk "
                      f"({p.returncode}: {lines})")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
