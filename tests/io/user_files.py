#!/usr/bin/env python3
"""Inputs as users' tools write them, read by cvest bit for bit against
NumPy's multBy[None] * discount, each chunk decoded once, within the budget:
h5py writing one date a chunk (plain, gzip, gzip after a shuffle, lzf, and
Blosc and bitshuffle through hdf5plugin), h5py's automatic chunks, chunks
of all dates and some ids, a contiguous cube, float32 discount beside a
float64 multBy, xarray's to_netcdf (h5netcdf) and Dask's to_hdf5 with a date
a chunk. One-date chunks here (6 MB) are larger than the decoding scratch a
32 MiB budget allows a thread, so they are held decoded while their blocks
run (one cell at 32 MiB, or parts of them where they decode in parts, two
at 64 MiB); one-date chunks of 24 MB at a
16 MiB budget a part of ids at a time (gzip, Blosc, bitshuffle; Dask's
multBy, one 24 MB chunk, read once and kept at 96 MiB, refused at 16 MiB); an lzf file whose 24 MB chunks do
not fit an 8 MiB budget is refused in one line before any block, with the
budget that would do and an h5repack line. One date of 24 MB chunks (more
threads than dates) in parts too.

    user_files.py CVEST_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

from cvest_deck import ENV, toml_value

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from user_corpus import corpus, values, write_h5py  # noqa: E402  (the bench's corpus, small here)

cvest = sys.argv[1]
failures = []
T, N, K = 3, 150_000, 5


def fail(case, why):
    failures.append(f"{case}: {why}")
    print(f"FAIL {case}: {why}", flush=True)


def run(work, tag, src, budget, layouts=("right", "left"), verify=False):
    deck = os.path.join(work, f"{tag}.toml")
    out, report = os.path.join(work, f"cv_{tag}.h5"), os.path.join(work, f"{tag}.json")
    sections = {"input": {"file": src}, "output": {"file": out, "overwrite": True},
                "run": {"strategy": ["flat"], "layout": list(layouts), "memory_budget": budget, "verify": verify},
                "report": {"json": report}}
    with open(deck, "w") as fh:
        for name, keys in sections.items():
            fh.write(f"[{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in keys.items()))
    proc = subprocess.run([cvest, "run", deck], env=ENV, capture_output=True, text=True)
    return proc, out, report


def check_run(tag, proc, out, report, m, d, budget_bytes, held, shape=(T, N, K)):
    if proc.returncode != 0:
        return fail(tag, f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}")
    with h5py.File(out, "r") as f:
        got = f["cv"][...]
    want = m[None] * d  # NumPy's promotion (float64 here)
    if got.dtype != want.dtype or not np.array_equal(got.view(np.uint8), want.view(np.uint8)):
        return fail(tag, "output differs from multBy[None] * discount")
    rep = json.load(open(report))
    storage = rep["input_storage"]
    if storage["held"] != held:
        fail(tag, f"input held {storage['held']}, expected {held} ({storage})")
    chunks = storage["chunk"]
    decoded = storage["read_by"] == "decode"
    expected = 0
    if decoded:
        # each chunk once, or each part of one (held_part_ids ids of it)
        expected = 1
        parts = storage.get("held_part_ids", 0)
        for extent, c in zip(shape, chunks[:1] + [parts or chunks[1]] + chunks[2:]):
            expected *= -(-extent // c)
    # (peak RSS not judged under AddressSanitizer: its shadow memory and
    # quarantine are not cvest's)
    for job in rep["jobs"]:
        if job["chunks_decoded"] != expected or job["chunks_decoded_distinct"] != expected:
            fail(tag, f"{job['layout']}: {job['chunks_decoded']} chunk decodes of "
                      f"{job['chunks_decoded_distinct']} chunks, expected each of {expected} once")
        if job["peak_rss_bytes"] > budget_bytes + (64 << 20) and not os.environ.get("CVEST_SANITIZED"):
            fail(tag, f"{job['layout']}: peak RSS {job['peak_rss_bytes'] / 2**20:.1f} MiB, over the budget + 64 MiB")
    return storage


with tempfile.TemporaryDirectory(prefix="cvest-userfiles-") as work:
    rng = np.random.default_rng(58)
    m, d64 = values(T, N, K)
    for tag, writer, dtype in corpus(T, N, K):
        src = os.path.join(work, f"{tag}.h5")
        d = d64.astype(dtype)
        writer(src, m, d)
        held = tag.startswith(("date_chunks_", "float32_", "xarray_", "dask_", "ids_")) and tag != "date_chunks_plain"
        for budget, budget_bytes in (("32MiB", 32 << 20), ("64MiB", 64 << 20)):
            proc, out, report = run(work, f"{tag}_{budget}", src, budget)
            storage = check_run(f"{tag} at {budget}", proc, out, report, m, d, budget_bytes, held)
            if storage and held:
                # 6 MB chunks and as much again to decode one: one cell at
                # 32 MiB, two at 64 MiB (float32's half as large: two at both)
                # (gzip, Blosc and bitshuffle: parts of the chunks, three or
                # two cells of them, where two whole cells do not fit)
                cells = 2 if budget == "64MiB" or dtype == np.float32 else 1
                line = f"{cells} cell{'s' if cells > 1 else ''} of 1 chunk (1, {N}, {K}) held decoded at once"
                if cells == 1 and tag in ("date_chunks_gzip", "date_chunks_blosc", "date_chunks_bitshuffle"):
                    line = f"ids of 1 chunk (1, {N}, {K}) held decoded at once, each chunk decoded in"
                if tag.startswith(("date_chunks_", "float32_")) and line not in proc.stdout + proc.stderr:
                    fail(f"{tag} at {budget}", f"expected '{line}' in the plan's lines")
        print(f"{'ok' if not failures else 'so far ' + str(len(failures)) + ' failed,'} {tag}: "
              f"{storage and storage['read_by']}", flush=True)

    # One-date chunks of 24 MB (more than HDF5 may cache for a run) that a
    # 16 MiB budget cannot hold decoded whole: gzip (h5py's and xarray's),
    # Blosc and bitshuffle are decoded a part of ids at a time, each part
    # once, bit for bit; shuffled gzip has no parts, and is refused.
    Tp, Np = 2, 600_000
    mp, dp = values(Tp, Np, K)
    for tag, writer, dtype in corpus(Tp, Np, K):
        parts = tag in ("date_chunks_gzip", "date_chunks_blosc", "date_chunks_bitshuffle", "xarray_date_chunks",
                        "dask_date_chunks")
        if not parts and tag != "date_chunks_shuffle_gzip":
            continue
        src = os.path.join(work, f"parts_{tag}.h5")
        writer(src, mp, dp)
        budget = 16 << 20
        if tag == "dask_date_chunks":
            # multBy, one (N, K) chunk of 24 MB, is read once and kept (two
            # copies: staged and computed from): refused at 16 MiB in one
            # line, read at 96 MiB.
            proc, out, _ = run(work, f"parts_{tag}_refused", src, "16MiB")
            if proc.returncode != 2 or "'multBy'" not in proc.stderr or "h5repack -l multBy:CHUNK=" not in proc.stderr:
                fail(f"parts {tag}", f"exit {proc.returncode}, expected 2 and multBy's refusal: {proc.stderr.strip()}")
            budget = 96 << 20
        # (Dask's kept multBy, decoded by cvest, verified: cross-checked against HDF5)
        proc, out, report = run(work, f"parts_{tag}", src, f"{budget >> 20}MiB", verify=tag == "dask_date_chunks")
        if not parts:
            if proc.returncode != 2 or "h5repack -l discount:CHUNK=1x" not in proc.stderr:
                fail(f"parts {tag}", f"exit {proc.returncode}, expected 2 and the refusal: {proc.stderr.strip()}")
            continue
        storage = check_run(f"parts {tag}", proc, out, report, mp, dp, budget, True, (Tp, Np, K))
        if storage and not 0 < storage.get("held_part_ids", 0) < Np:
            fail(f"parts {tag}", f"expected parts of the chunk's ids held: {storage}")
        if storage and f"ids of 1 chunk (1, {Np}, {K}) held decoded at once, each chunk decoded in" not in (
                proc.stdout + proc.stderr):
            fail(f"parts {tag}", "expected the parts held in the plan's lines")
        # (Dask's multBy: its rows read a block at a time would decode the
        # chunk whole for every block)
        if tag == "dask_date_chunks" and "'multBy': chunks too large to read by rows; read once and kept" not in (
                proc.stdout + proc.stderr):
            fail(f"parts {tag}", "expected multBy read once and kept in the plan's lines")
        print(f"{'ok' if not failures else 'so far ' + str(len(failures)) + ' failed,'} parts {tag}", flush=True)

    # One date, more threads than dates: the parts of the one chunk's stream
    # taken in turn by both threads, each part decoded once, bit for bit.
    m1, d1 = values(1, Np, K)
    for tag, writer, dtype in corpus(1, Np, K):
        if tag not in ("date_chunks_gzip", "date_chunks_bitshuffle"):
            continue
        src = os.path.join(work, f"one_date_{tag}.h5")
        writer(src, m1, d1)
        proc, out, report = run(work, f"one_date_{tag}", src, "16MiB")
        storage = check_run(f"one date {tag}", proc, out, report, m1, d1, 16 << 20, True, (1, Np, K))
        if storage and not 0 < storage.get("held_part_ids", 0) < Np:
            fail(f"one date {tag}", f"expected parts of the chunk's ids held: {storage}")
        print(f"{'ok' if not failures else 'so far ' + str(len(failures)) + ' failed,'} one date {tag}", flush=True)

    # One-date chunks of one column each (16.8 MB) and an edge chunk that
    # N ends inside: parts of each column's chunk, held together for a cell,
    # the edge chunk's stream closed at N; bit for bit, each part once.
    Nc, ci = 2_200_000, 2_100_000
    mc, dc = values(2, Nc, K)
    src = os.path.join(work, "parts_columns.h5")
    write_h5py(src, mc, dc, chunks=(1, ci, 1), compression="gzip", compression_opts=1)
    proc, out, report = run(work, "parts_columns", src, "64MiB")
    storage = check_run("parts columns", proc, out, report, mc, dc, 64 << 20, True, (2, Nc, K))
    if storage and not 0 < storage.get("held_part_ids", 0) < ci:
        fail("parts columns", f"expected parts of the chunks' ids held: {storage}")
    if storage and f"of {K} chunks (1, {ci}, 1) held decoded at once" not in proc.stdout + proc.stderr:
        fail("parts columns", "expected the columns' chunks held together in the plan's lines")
    print(f"{'ok' if not failures else 'so far ' + str(len(failures)) + ' failed,'} parts columns", flush=True)

    # One-date lzf chunks of 24 MB, which an 8 MiB budget cannot hold
    # decoded, nor HDF5's chunk cache within the slack a run has over its
    # budget: refused at once, in one line, nothing written.
    src = os.path.join(work, "large_chunks_lzf.h5")
    big = 600_000
    write_h5py(src, rng.uniform(0.5, 1.5, (big, K)), rng.uniform(0, 1, (2, big, K)), chunks=(1, big, K),
               compression="lzf")
    proc, out, _ = run(work, "refused", src, "8MiB")
    lines = [l for l in proc.stderr.splitlines() if "error" in l]
    if proc.returncode != 2 or len(lines) != 1:
        fail("refusal", f"exit {proc.returncode}, expected 2 and one error line: {proc.stderr.strip()}")
    else:
        for part in (src, "'discount'", f"(1, {big}, {K})", "memory_budget = ", f"h5repack -l discount:CHUNK=1x"):
            if part not in lines[0]:
                fail("refusal", f"expected {part!r} in: {lines[0]}")
    if os.path.exists(out):
        fail("refusal", f"{out} was written")
    print("refusal checked", flush=True)

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
