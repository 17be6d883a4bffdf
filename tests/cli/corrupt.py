#!/usr/bin/env python3
"""Corrupt inputs end in one line, exit 2 or 3, no crash and no hang.

    corrupt.py CVEST_BINARY

h5py writes an input with a gzip, an lzf and a Fletcher32 discount; copies
of it are damaged: a byte flipped inside a gzip chunk, an lzf chunk and a
Fletcher32 chunk, the file cut short inside the chunks, a bitshuffle-LZ4
chunk beside one never written, and bits flipped in the HDF5 metadata before the first dataset's data (20 seeds). Every run has
a timeout; it must exit 2 or 3 with one line naming the file (and, for a
damaged chunk, the dataset and the chunk's dates and ids), or, where a flip
hit bytes nothing reads (or values no checksum guards), succeed with the
output equal bit for bit to multBy[None] * discount as h5py reads the damaged
file (or, where h5py cannot read it, as it reads the intact one); never
crash. Nothing is left at the output path after a failure. Some of the
metadata flips must be refused (a fixed seed: the same flips every run).
"""
import os
import random
import shutil
import subprocess
import sys
import tempfile

import h5py
import hdf5plugin
import numpy as np
from checks import check, failures

cvest = sys.argv[1]
counts = {}


def product(path, discount):
    """multBy[None] * discount as h5py reads `path`; None where it cannot."""
    try:
        with h5py.File(path, "r") as f:
            return f["multBy"][...][None] * f[discount][...]
    except Exception:
        return None


def run(path, discount, kind):
    with open("deck.toml", "w") as f:
        f.write(f'[input]\nfile = "{path}"\ndiscount = "{discount}"\n[output]\nfile = "out.h5"\noverwrite = true\n')
    if os.path.exists("out.h5"):
        os.remove("out.h5")
    try:
        p = subprocess.run([cvest, "run", "deck.toml"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        check(False, f"{kind}: finishes within 60 s")
        return None, []
    counts[kind] = counts.get(kind, 0) + 1
    lines = [l for l in p.stderr.splitlines() if l.startswith("cvest: ") and ("error" in l or "mismatch" in l)]
    check(p.returncode >= 0, f"{kind}: no crash (exit {p.returncode})")
    if p.returncode != 0:
        check(p.returncode in (2, 3) and len(lines) == 1 and path in lines[0] and not os.path.exists("out.h5"),
              f"{kind}: exit {p.returncode}, one line naming the file, no output ({lines})")
    else:
        expected = product(path, discount)
        if expected is None:
            expected = product("in.h5", discount)
        with h5py.File("out.h5", "r") as f:
            got = f["cv"][...]
        check(got.shape == expected.shape and np.array_equal(got.view(np.uint8), expected.view(np.uint8)),
              f"{kind}: exit 0, and the output is multBy * discount as h5py reads the file")
    return p.returncode, lines


def flip(src, dst, at, bit=0xFF):
    shutil.copy(src, dst)
    with open(dst, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ bit]))


with tempfile.TemporaryDirectory() as tmp:
    os.chdir(tmp)
    rng = np.random.default_rng(7)
    with h5py.File("in.h5", "w") as f:
        f["multBy"] = rng.random((3000, 5))
        for name, opts in [("gzip", dict(compression="gzip", shuffle=True)), ("lzf", dict(compression="lzf")),
                           ("fletcher32", dict(fletcher32=True))]:
            f.create_dataset(name, data=rng.random((4, 3000, 5)), chunks=(1, 1000, 5), **opts)
    with h5py.File("in.h5") as f:
        chunk = {name: f[name].id.get_chunk_info(5) for name in ("gzip", "lzf", "fletcher32")}
        first_data = min([f["multBy"].id.get_offset()] + [c.byte_offset for c in chunk.values()])
    for name in ("gzip", "lzf", "fletcher32"):
        p = run("in.h5", name, f"intact {name}")
        check(p[0] == 0, f"the intact {name} input runs")

    # A byte flipped in the middle of a chunk: (1, 2000, 0), dates 1, ids 2000-2999.
    for name in ("gzip", "lzf", "fletcher32"):
        c = chunk[name]
        flip("in.h5", "bad.h5", c.byte_offset + c.size // 2)
        rc, lines = run("bad.h5", name, f"{name} chunk flipped")
        if name == "lzf" and rc == 0:  # checked against h5py's reading of the same bytes in run()
            print("note: the flip decoded to other values of the right size (lzf has no checksum)")
            continue
        check(rc == 3 and lines and f"'{name}'" in lines[0] and "dates 1-1, ids " in lines[0],
              f"{name} chunk flipped: exit 3 naming the dataset and the dates and ids ({lines})")

    # Cut short inside the chunks.
    for name in ("gzip", "fletcher32"):
        shutil.copy("in.h5", "short.h5")
        with open("short.h5", "r+b") as f:
            f.truncate(chunk[name].byte_offset + chunk[name].size // 2)
        rc, lines = run("short.h5", name, f"{name}: file cut short")
        check(rc in (2, 3), f"{name}: file cut short: exit 2 or 3 ({rc}, {lines})")

    # Bits flipped in the metadata (before any dataset's data).
    random.seed(20261201)
    refused = 0
    for seed in range(20):
        data = bytearray(open("in.h5", "rb").read())
        for _ in range(3):
            at = random.randrange(0, first_data)
            data[at] ^= 1 << random.randrange(8)
        open("meta.h5", "wb").write(bytes(data))
        rc, _ = run("meta.h5", "gzip", "metadata flipped")
        refused += rc in (2, 3)
    check(refused > 0, f"metadata flips: {refused} of 20 refused, the rest checked against h5py")

    # A bitshuffle-LZ4 discount (h5py + hdf5plugin) with a chunk never
    # written (date 1, ids 0-999): HDF5 supplies its fill values, so HDF5 reads the blocks that
    # take it, through its bitshuffle plugin. That plugin trusts the sizes
    # it reads (a fuzzed file overran its buffer), so cvest decodes the
    # block's stored chunks first: one whose first LZ4 block claims more
    # bytes than the chunk stores ends in cvest's line, not in the plugin.
    with h5py.File("bs.h5", "w") as f:
        f["multBy"] = rng.random((3000, 5))
        ds = f.create_dataset("bitshuffle", shape=(4, 3000, 5), dtype="f8", chunks=(1, 1000, 5),
                              **hdf5plugin.Bitshuffle(cname="lz4"))
        ds[0], ds[1, 1000:], ds[2:] = rng.random((3000, 5)), rng.random((2000, 5)), rng.random((2, 3000, 5))
    with h5py.File("bs.h5") as f:
        unwritten = f["bitshuffle"].id.get_chunk_info_by_coord((1, 0, 0)).byte_offset
        c = f["bitshuffle"].id.get_chunk_info_by_coord((1, 1000, 0))
    check(unwritten is None, f"the chunk never written is not stored ({unwritten})")
    rc, lines = run("bs.h5", "bitshuffle", "bitshuffle, a chunk never written")
    check(rc == 0, f"bitshuffle with a chunk never written: runs, its fill values as h5py reads them ({lines})")
    shutil.copy("bs.h5", "bsbad.h5")
    with open("bsbad.h5", "r+b") as f:
        f.seek(c.byte_offset + 12)  # after the chunk's 12-byte header: its first block's stored size
        f.write(b"\x7f\xff\xff\xff")
    rc, lines = run("bsbad.h5", "bitshuffle", "bitshuffle chunk damaged, one never written")
    check(rc == 3 and lines and "'bitshuffle'" in lines[0] and "dates 1-1, ids 1000-1999" in lines[0],
          f"bitshuffle chunk damaged beside one never written: exit 3 naming the dataset and the chunk ({lines})")

print("corrupt inputs tried: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
