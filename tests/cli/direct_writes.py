#!/usr/bin/env python3
"""An uncompressed output's data goes past the page cache (O_DIRECT) where
the file system allows it, and through it, said once, where it does not.

    direct_writes.py CVEST_BINARY

On this folder's file system (the build's, a disk), direct = true: shapes whose chunks are
no multiple of 4096 bytes (N and K odd, `[output] chunk` set), one-date and
many-date blocks, LayoutRight and LayoutLeft, double and float: every output
is bit-identical to multBy * discount (cvest's verify, and h5py against
NumPy), strace sees the data written through O_DIRECT descriptors, aligned,
and the run table says the writes went past the page cache (the share of bytes below 100% where chunks leave
unaligned heads and tails). auto: a small output goes through the page
cache, saying why; one past the write-back threshold (lowered by a fault
hook) goes direct. A file system that takes O_DIRECT at open but
refuses its writes (the direct_refused fault): the run goes on through the
page cache and says so. A ramfs (which refuses O_DIRECT, as tmpfs did before
Linux 6.6; needs root to mount, as CI runs): `auto` falls back and says so once for two jobs, `true` exits 3
with one line and leaves nothing, `false` writes through the cache silently.
"""
import os
import subprocess
import sys
import tempfile
from checks import check, failures
from strace_direct import direct_io

cvest = sys.argv[1]


def run(*args, fault=None):
    env = dict(os.environ, **({"CVEST_FAULT": fault} if fault else {}))
    env["CVEST_CACHE_DIR"] = os.path.join(os.getcwd(), "no-records")  # auto's stated default, whatever tune measured here
    return subprocess.run([cvest, *args], env=env, capture_output=True, text=True, timeout=300)


def deck(path, inp, out, direct=None, chunk=None, layouts='"all"', precision=None, max_block="64KiB"):
    with open(path, "w") as f:
        f.write(f'[input]\nfile = "{inp}"\n[output]\nfile = "{out}"\noverwrite = true\n')
        if direct is not None:
            f.write(f"direct = {direct}\n")
        if chunk:
            f.write(f"chunk = {chunk}\n")
        f.write(f'[run]\nstrategy = ["flat", "per_date"]\nlayout = {layouts}\nmax_block = "{max_block}"\n'
                'verify = true\n')
        if precision:
            f.write(f'precision = "{precision}"\n')


def numpy_equal(inp, out):
    """The output's cv against NumPy's multBy * discount, bit for bit, read
    with h5py (not from cvest's own verify)."""
    import h5py
    import numpy
    with h5py.File(inp, "r") as i, h5py.File(out, "r") as o:
        cv = o["cv"][...]
        # float32 decks compute in float32 from the double inputs
        expected = i["multBy"][...].astype(cv.dtype)[None, :, :] * i["discount"][...].astype(cv.dtype)
        return cv.shape == expected.shape and numpy.array_equal(cv.view(numpy.uint8), expected.view(numpy.uint8))


def direct_share(args, data_bytes):
    """Runs cvest under strace: the bytes written through descriptors opened
    with O_DIRECT, their largest misalignment (offset and size modulo 512),
    and all bytes pwritten to the output's temporary file."""
    trace = subprocess.run(["strace", "-f", "-s", "0", "-e", "trace=openat,close,pwrite64", "-o", "trace.txt",
                            cvest, *args], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0:" + os.environ.get("ASAN_OPTIONS", "")))
    direct_bytes, misaligned, _ = direct_io("trace.txt", "pwrite64")
    os.remove("trace.txt")
    return trace.returncode, direct_bytes, misaligned


def table_line(stdout):
    return next((l for l in stdout.splitlines() if l.startswith("output: written")), "")


with tempfile.TemporaryDirectory(prefix="cvest-direct-", dir=os.getcwd()) as work:
    os.chdir(work)
    # (dates, ids, cols, chunk ids, block cap): chunks of 3 * 8 * 1001 bytes;
    # a default chunk; one date per block (a cap below a date's bytes).
    cases = [(9, 1001, 3, 1001, "64KiB"), (7, 30011, 5, None, "256KiB"), (5, 20000, 7, 333, "8KiB")]
    for T, N, K, chunk, cap in cases:
        inp = f"in_{T}x{N}x{K}.h5"
        g = run("generate", "-T", str(T), "-N", str(N), "-K", str(K), "-o", inp)
        check(g.returncode == 0, f"generate {inp}")
        for precision in ("float64", "float32"):
            deck("deck.toml", inp, "cv.h5", chunk=chunk, precision=precision, max_block=cap, direct="true")
            r = run("run", "deck.toml", "--explain")
            line = table_line(r.stdout)
            what = f"{T}x{N}x{K}, chunk {chunk or 'default'}, blocks up to {cap}, {precision}"
            check(r.returncode == 0 and "verified:" in r.stdout,
                  f"{what}: every job's output equals multBy * discount ({r.returncode}, {r.stderr.strip()[-300:]})")
            check("past the page cache (O_DIRECT" in line, f"{what}: the table says the writes went direct ({line})")
            check(r.returncode == 0 and numpy_equal(inp, "cv.h5"),
                  f"{what}: the output read with h5py equals NumPy's multBy * discount bit for bit")
            if chunk is None:  # default chunks are whole pages: every byte direct but a date's last chunk's tail
                check("% of the bytes" in line, f"{what}: the table gives the direct share ({line})")

    # What the kernel saw: the writes through an O_DIRECT descriptor (strace),
    # aligned, most of the data, for a shape whose chunks are whole pages.
    T, N, K = 7, 30011, 5
    deck("deck.toml", f"in_{T}x{N}x{K}.h5", "cv.h5", max_block="256KiB", direct="true", layouts='"right"')
    rc, direct_bytes, misaligned = direct_share(["run", "deck.toml", "--explain"], T * N * K * 8)
    data = T * N * K * 8  # the first job writes the cube; the second compares with it ("matches")
    check(rc == 0 and direct_bytes >= 0.9 * data and misaligned == 0,
          f"direct = true: {direct_bytes} of {data} data bytes written through O_DIRECT descriptors (strace), "
          f"offsets and sizes 512-byte aligned (worst remainder {misaligned})")
    deck("deck.toml", f"in_{T}x{N}x{K}.h5", "cv.h5", max_block="256KiB", direct="false", layouts='"right"')
    rc, direct_bytes, _ = direct_share(["run", "deck.toml", "--explain"], T * N * K * 8)
    check(rc == 0 and direct_bytes == 0, f"direct = false: no byte through an O_DIRECT descriptor ({direct_bytes})")

    # auto: an output the page cache takes whole goes through it (a sync at
    # the end wrote it faster); past the write-back threshold, direct.
    deck("deck.toml", "in_9x1001x3.h5", "cv.h5", layouts='"right"')
    r = run("run", "deck.toml", "--explain")
    line = table_line(r.stdout)
    check(r.returncode == 0 and "through the page cache: the output" in line and "write-back threshold" in line,
          f"auto, a small output: through the page cache, and the table says why ({line})")
    r = run("run", "deck.toml", "--explain", fault="writeback_threshold=0")
    line = table_line(r.stdout)
    check(r.returncode == 0 and "verified:" in r.stdout and "past the page cache (O_DIRECT" in line,
          f"auto, an output past the write-back threshold: direct ({line})")

    # Taken at open, refused at the first write: the rest goes through the cache.
    deck("deck.toml", "in_9x1001x3.h5", "cv.h5", chunk=1001)
    r = run("run", "deck.toml", "--explain", fault="direct_refused")
    line = table_line(r.stdout)
    check(r.returncode == 0 and "verified:" in r.stdout and "through the page cache" in line
          and "refused an O_DIRECT write" in line,
          f"O_DIRECT refused at the first write: the run finishes through the page cache and says so ({line})")
    deck("deck.toml", "in_9x1001x3.h5", "cv2.h5", chunk=1001, direct="true")
    r = run("run", "deck.toml", "--explain", fault="direct_refused")
    errors = [l for l in r.stderr.splitlines() if "error" in l]
    check(r.returncode == 3 and len(errors) == 1 and "direct = true" in errors[0] and not os.path.exists("cv2.h5"),
          f"direct = true, O_DIRECT refused: exit 3, one line, no output ({r.returncode}, {errors})")

    deck("deck.toml", "in_9x1001x3.h5", "cv.h5", direct='"sometimes"')
    r = run("run", "deck.toml", "--explain")
    check(r.returncode == 2 and "[output] direct" in r.stderr and "auto, true, false" in r.stderr,
          f"direct = \"sometimes\": exit 2 naming the key and the valid values ({r.returncode}, {r.stderr.strip()})")

    # cvest tune: measured here, recorded, taken by auto (the table says so), listed by info.
    cache = dict(os.environ, CVEST_CACHE_DIR=os.path.join(work, "cache"), CVEST_TUNE_NO_WAIT="1")  # shapes, not timings
    t = subprocess.run([cvest, "tune", work, "--size", "8MiB", "--repeats", "2", "--walk-size", "4MiB"], env=cache, capture_output=True,
                       text=True, timeout=300)
    check(t.returncode == 0 and "recorded in" in t.stdout and t.stderr.count("pass ") == 4
          and os.path.exists(os.path.join(work, "cache", "write-modes.json")),
          f"cvest tune: 2 passes each way, recorded ({t.returncode}: {t.stdout.strip()[-200:]})")
    deck("deck.toml", "in_9x1001x3.h5", "cv.h5", layouts='"right"')
    r = subprocess.run([cvest, "run", "deck.toml", "--explain"], env=cache, capture_output=True, text=True, timeout=300)
    line = table_line(r.stdout)
    check(r.returncode == 0 and "measured on this file system on" in line,
          f"auto after cvest tune: the table says the mode was measured here ({line})")
    i = subprocess.run([cvest, "info"], env=cache, capture_output=True, text=True)
    check("write modes measured" in i.stdout and "file system " in i.stdout and ": 1\n" in i.stdout,
          "cvest info lists the record")
    t = subprocess.run([cvest, "tune", os.path.join(work, "missing")], env=cache, capture_output=True, text=True)
    errors = [l for l in t.stderr.splitlines() if "error" in l]
    check(t.returncode == 2 and len(errors) == 1 and "not a folder" in errors[0],
          f"cvest tune on a missing folder: exit 2, one line ({t.returncode}, {errors})")

    fs = os.path.join(work, "fs")
    os.mkdir(fs)
    mount = subprocess.run(["mount", "-t", "ramfs", "ramfs", fs], capture_output=True, text=True)
    if mount.returncode != 0:
        print(f"FAIL: cannot mount a ramfs (needs root): {mount.stderr.strip()}")
        sys.exit(1)
    try:
        deck("deck.toml", "in_9x1001x3.h5", "fs/cv.h5", layouts='"right"')
        r = run("run", "deck.toml", "--explain", fault="writeback_threshold=0")  # auto tries O_DIRECT
        said = [l for l in r.stderr.splitlines() if "refuses O_DIRECT" in l]
        line = table_line(r.stdout)
        check(r.returncode == 0 and "verified:" in r.stdout and len(said) == 1 and "fs/cv.h5" in said[0] and "ramfs" in said[0],
              f"ramfs, direct = auto: falls back, said once for two jobs ({said})")
        check("through the page cache" in line and "ramfs" in line, f"ramfs: the table says why ({line})")
        deck("deck.toml", "in_9x1001x3.h5", "fs/cv2.h5", direct="true", layouts='"right"')
        r = run("run", "deck.toml", "--explain")
        errors = [l for l in r.stderr.splitlines() if "error" in l]
        check(r.returncode == 3 and len(errors) == 1 and "fs/cv2.h5" in errors[0] and "ramfs" in errors[0]
              and sorted(os.listdir(fs)) == ["cv.h5"],
              f"ramfs, direct = true: exit 3, one line naming the output and the file system, nothing left "
              f"({r.returncode}, {errors}, {sorted(os.listdir(fs))})")
        deck("deck.toml", "in_9x1001x3.h5", "fs/cv.h5", direct="false", layouts='"right"')
        r = run("run", "deck.toml", "--explain")
        line = table_line(r.stdout)
        check(r.returncode == 0 and "refuses" not in r.stderr and "direct = false" in line,
              f"ramfs, direct = false: through the page cache, nothing said but the table's line ({line})")
    finally:
        subprocess.run(["umount", fs])

sys.exit(1 if failures else 0)
