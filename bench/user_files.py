#!/usr/bin/env python3
"""cvest against h5py + NumPy on inputs as users' tools write them
(bench/user_corpus.py), file to file: `cvest run` (flat, LayoutRight, one
job) and the loop users write (h5py reading a date, NumPy multiplying it by
multBy, h5py writing it; the output fsynced), one after the other in each
round, each started with its output removed and the disk idle (cached: the
input in the page cache, read once before; cold: the page cache dropped,
which needs root). Prints per file its chunks and stored size, each
command's median seconds and spread, and h5py's time over cvest's.

    bench/user_files.py [--dates T] [--ids N] [--rounds R] [--only NAME ...] [--cold]
    CVEST_BENCH_DIR=/tmp/...   where the files go (default /tmp/cvest-user-files; ~3x a cube per file)
    CVEST_BUDGET=1GiB          the deck's memory_budget
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import h5py
import hdf5plugin  # noqa: F401  (the filters h5py reads through)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from user_corpus import corpus, values  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = r'''
import os, sys, h5py, hdf5plugin
src, dst = sys.argv[1], sys.argv[2]
with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
    m, d = f["multBy"][...], f["discount"]
    out = g.create_dataset("cv", d.shape, (m[None, :1] * d[0, :1]).dtype)
    for t in range(d.shape[0]):
        out[t] = m[None] * d[t]
    g.flush()
    os.fsync(g.id.get_vfd_handle())
'''


def idle(path):
    """sync, then wait until the disk holding `path` has nothing in flight
    (two quiet polls in a row, 30 s at most): it trims deleted blocks for
    seconds after a remove."""
    subprocess.run(["sync"])
    dev = os.path.basename(subprocess.run(["findmnt", "-no", "SOURCE", "--target", path], capture_output=True,
                                          text=True).stdout.strip())
    quiet = 0
    for _ in range(60):
        time.sleep(0.5)
        busy = [l.split()[11] for l in open("/proc/diskstats") if l.split()[2] == dev]
        quiet = quiet + 1 if not busy or busy[0] == "0" else 0
        if quiet >= 2:
            return


class Refused(Exception):
    pass


def timed(cmd, out, work, cold):
    if os.path.exists(out):
        os.remove(out)
    idle(work)
    if cold:
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
    begin = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - begin
    if proc.returncode == 2 and "memory_budget" in proc.stderr:  # the one-line refusal: said, and the next file
        raise Refused(proc.stderr.strip().splitlines()[-1])
    if proc.returncode != 0:
        sys.exit(f"bench/user_files.py: {' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return seconds, proc


def direct_floor(src, out, size, work):
    """Seconds to read `src` past the page cache, then to write `size`
    bytes to `out` past it (dd, bs 4M), each cold with the disk idle."""
    r, _ = timed(["dd", f"if={src}", "of=/dev/null", "bs=4M", "iflag=direct"], out, work, True)
    w, _ = timed(["dd", "if=/dev/zero", f"of={out}", "bs=4M", f"count={-(-size // (4 << 20))}",
                  "oflag=direct", "conv=fsync"], out, work, True)
    return r + w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dates", type=int, default=4)
    ap.add_argument("--ids", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--cold", action="store_true", help="drop the page cache before each command (root)")
    a = ap.parse_args()
    T, N, K = a.dates, a.ids, 5
    work = os.environ.get("CVEST_BENCH_DIR", "/tmp/cvest-user-files")
    budget = os.environ.get("CVEST_BUDGET", "1GiB")
    os.makedirs(work, exist_ok=True)
    build = subprocess.run([os.path.join(root, "scripts", "build"), "cvest"], capture_output=True,
                           text=True, check=True).stdout.strip().splitlines()[-1]
    cvest = os.path.join(build, "cvest")
    env_note = {k: os.environ.get(k) for k in ("OMP_PROC_BIND", "OMP_NUM_THREADS") if os.environ.get(k)}
    print(f"# {T} x {N} x {K}, budget {budget}, {'cold' if a.cold else 'cached'} inputs, {a.rounds} rounds, "
          f"{os.cpu_count()} CPUs {env_note or ''}; cvest: {cvest}", flush=True)
    m = d = None
    print(f"{'file':26} {'chunks':18} {'stored GB':>9} {'cvest s':>16} {'h5py+NumPy s':>16} {'h5py/cvest':>10}")
    for name, writer, dtype in corpus(T, N, K):
        if a.only and name not in a.only:
            continue
        src = os.path.join(work, f"{name}_{T}x{N}.h5")
        if not os.path.exists(src):
            if m is None:
                m, d = values(T, N, K)
            writer(src + ".part", m, d.astype(dtype))
            os.rename(src + ".part", src)
        with h5py.File(src, "r") as f:
            ds = f["discount"]
            chunks = ds.chunks
            stored = ds.id.get_storage_size() / 1e9
        deck = os.path.join(work, f"{name}.toml")
        out_cvest, out_peer = os.path.join(work, "cv_cvest.h5"), os.path.join(work, "cv_peer.h5")
        with open(deck, "w") as fh:
            fh.write(f'[input]\nfile = "{src}"\n[output]\nfile = "{out_cvest}"\noverwrite = true\n'
                     f'[run]\nstrategy = "flat"\nlayout = "right"\nmemory_budget = "{budget}"\n')
        if not a.cold:  # the input in the page cache, as a second run finds it
            subprocess.run(["cat", src], stdout=subprocess.DEVNULL)
        ours, theirs, how = [], [], ""
        try:
            timed([cvest, "run", "--plan", deck], out_cvest, work, False)
        except Refused as refusal:
            print(f"{name:26} {str(chunks):18} {stored:9.2f}  refused at {budget}: {refusal}", flush=True)
            continue
        # The floor for a cold plain input: the file read past the page
        # cache, then the output's bytes (T x N x K doubles) written past it
        # (dd, O_DIRECT), one after the other, in each round beside the two.
        floors = a.cold and name in ("date_chunks_plain", "contiguous")
        floor = []
        for _ in range(a.rounds):
            s, proc = timed([cvest, "run", deck, "--explain"], out_cvest, work, a.cold)
            ours.append(s)
            how = next((l for l in proc.stdout.splitlines() if l.startswith("input:")), how)
            s, _ = timed([sys.executable, "-c", PEER, src, out_peer], out_peer, work, a.cold)
            theirs.append(s)
            if floors:
                floor.append(direct_floor(src, out_peer, T * N * K * 8, work))
        for out in (out_cvest, out_peer):
            if os.path.exists(out):
                os.remove(out)
        mo, mt = statistics.median(ours), statistics.median(theirs)
        print(f"{name:26} {str(chunks):18} {stored:9.2f} {mo:7.2f} ({min(ours):.2f}-{max(ours):.2f}) "
              f"{mt:7.2f} ({min(theirs):.2f}-{max(theirs):.2f}) {mt / mo:10.2f}", flush=True)
        print(f"#   cvest {how}", flush=True)
        if floors:
            mf = statistics.median(floor)
            ratios = [c / f for c, f in zip(ours, floor)]  # round by round: the disk's rate drifts
            print(f"#   direct read of the file + direct write of the output's bytes: {mf:.2f} s ({min(floor):.2f}-{max(floor):.2f});"
                  f" cvest / that, round by round: {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})",
                  flush=True)
            if os.path.exists(out_peer):
                os.remove(out_peer)


if __name__ == "__main__":
    main()
