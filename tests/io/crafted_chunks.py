#!/usr/bin/env python3
"""Chunk records and filter records no honest writer makes, crafted with
h5py (write_direct_chunk, and bytes patched in the file): each is refused in
one line naming the file, the dataset and what was wrong, exit 2 or 3,
before anything of its size is allocated, and no output is left.

- a chunk shape claiming 1.9 GB in a file of kilobytes: refused as the plan
  is made (the budget it would need, and an h5repack line), not one decoding
  scratch per thread of the chunk's size;
- a chunk record claiming more bytes than its filter stores a chunk in;
- bitshuffle's block size in the filter's record not a multiple of 8 (its
  own plugin refuses it; cvest read it as the default);
- in a file with a user block, a chunk record that ends past the end of the
  file only once the user block's offset is added.

    crafted_chunks.py CVEST_BINARY
"""
import os
import struct
import subprocess
import sys
import tempfile

import h5py
import hdf5plugin  # noqa: F401  (bitshuffle's filter, to write its record)
import numpy as np

from cvest_deck import ENV, toml_value

cvest = sys.argv[1]
failures = []


def refused(work, tag, src, wanted, codes=(2, 3)):
    deck, out = os.path.join(work, f"{tag}.toml"), os.path.join(work, f"cv_{tag}.h5")
    with open(deck, "w") as fh:
        fh.write(f"[input]\nfile = {toml_value(src)}\n[output]\nfile = {toml_value(out)}\n"
                 f"[run]\nstrategy = \"flat\"\nlayout = [\"right\", \"left\"]\nmemory_budget = \"256MiB\"\n")
    proc = subprocess.run([cvest, "run", deck], env=ENV, capture_output=True, text=True, timeout=120)
    errors = [l for l in proc.stderr.splitlines() if l.startswith("cvest: error") or l.startswith("cvest: I/O error")]
    why = None
    if proc.returncode not in codes or len(errors) != 1:
        why = f"exit {proc.returncode}, expected one of {codes} and one error line:\n{proc.stderr.strip()}"
    else:
        for part in (src, "'discount'") + tuple(wanted):
            if part not in errors[0]:
                why = f"expected {part!r} in: {errors[0]}"
    if os.path.exists(out):
        why = f"{out} was left behind"
    if why:
        failures.append(f"{tag}: {why}")
        print(f"FAIL {tag}: {why}", flush=True)
    else:
        print(f"ok {tag}: {errors[0]}", flush=True)


def patch(path, old, new):
    data = open(path, "rb").read()
    assert data.count(old) == 1, f"{path}: the bytes to patch occur {data.count(old)} times"
    open(path, "wb").write(data.replace(old, new))


with tempfile.TemporaryDirectory(prefix="cvest-crafted-") as work:
    m = np.ones((1000, 5))
    plain = np.linspace(0.5, 0.6, 2 * 1000 * 5).reshape(2, 1000, 5)

    # A chunk shape of 1.9 GB decoded, one chunk of 100 bytes stored.
    src = os.path.join(work, "huge_chunk.h5")
    with h5py.File(src, "w") as f:
        f["multBy"] = np.ones((10, 5))
        d = f.create_dataset("discount", (1, 10, 5), "f8", maxshape=(None, None, 5), chunks=(1, 50_000_000, 5),
                             compression="lzf")
        d.id.write_direct_chunk((0, 0, 0), bytes(100))
    refused(work, "huge_chunk", src, ["(1, 50000000, 5)", "memory_budget = ", "h5repack -l discount:CHUNK="])

    # A chunk of 40,000 bytes whose record claims 60,000 (lzf stores it in
    # at most 40,000 + 1/32 + 64).
    src = os.path.join(work, "oversized_record.h5")
    with h5py.File(src, "w") as f:
        f["multBy"] = m
        d = f.create_dataset("discount", (2, 1000, 5), "f8", chunks=(1, 1000, 5), compression="lzf")
        d[...] = plain
        d.id.write_direct_chunk((1, 0, 0), bytes(range(256)) * 234 + bytes(96))
    refused(work, "oversized_record", src, ["chunk at (1, 0, 0)", "recorded as 60000 bytes", "more than its filters"])

    # bitshuffle with blocks of 16 elements, its record's block size then
    # patched to 12.
    src = os.path.join(work, "bitshuffle_block.h5")
    with h5py.File(src, "w") as f:
        f["multBy"] = m
        d = f.create_dataset("discount", (2, 1000, 5), "f8", chunks=(1, 1000, 5), compression=32008,
                             compression_opts=(16, 2))
        d[...] = plain
        values = d.id.get_create_plist().get_filter(0)[2]
    at = list(values).index(16)
    patch(src, struct.pack(f"<{len(values)}I", *values),
          struct.pack(f"<{len(values)}I", *values[:at], 12, *values[at + 1:]))
    refused(work, "bitshuffle_block", src, ["block size 12", "not a multiple of 8"])

    # A user block of 512 bytes; the last chunk's record made 300 bytes
    # longer: inside the file counted from HDF5's base, past its end from
    # the file's start.
    src = os.path.join(work, "userblock_record.h5")
    with h5py.File(src, "w", userblock_size=512) as f:
        f["multBy"] = m
        d = f.create_dataset("discount", (2, 1000, 5), "f8", chunks=(1, 1000, 5), compression="lzf")
        d[...] = plain
        last = d.id.get_chunk_info(1)
    size = os.path.getsize(src)
    assert last.byte_offset + last.size + 300 <= size < 512 + last.byte_offset + last.size + 300
    key = struct.pack("<II4Q", last.size, 0, 1, 0, 0, 0)  # the B-tree key: size, filter mask, offset
    patch(src, key, struct.pack("<II4Q", last.size + 300, 0, 1, 0, 0, 0))
    refused(work, "userblock_record", src, ["chunk at (1, 0, 0)", f"beyond the file's {size} bytes"])

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
