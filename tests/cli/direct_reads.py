#!/usr/bin/env python3
"""An input's bytes the page cache does not hold are read past it (O_DIRECT);
those it holds come from it; compressed inputs are decoded as before.

    direct_reads.py CVEST_BINARY

Inputs dropped from the page cache first (fsync, POSIX_FADV_DONTNEED): the
one `cvest generate` writes, h5py's with odd chunks (1, 777, K) in double and
float, h5py's contiguous one. Each run's output equals NumPy's multBy *
discount (read with h5py), strace sees most of discount's bytes pread through
a descriptor opened with O_DIRECT, and the run table says the share. The same
input cached: no byte read direct. A gzip input: decoded by cvest's threads,
nothing direct. A cold input with memory_budget 32 MiB (under the 64 MiB
that holds the direct reader's buffers): no O_DIRECT descriptor, and the
table says why. `[input] direct = false`: no O_DIRECT descriptor. A file
system that refuses O_DIRECT (the direct_refused fault; a ramfs where root
may mount one): auto reads through the cache and the table says why; `true`
exits 3 with one line naming the input. cvest tune records reads too, and
auto then says so. Read direct, the per-thread pipeline's threads read
their next block ahead and the table says so; CVEST_READ_AHEAD=0 turns it off.
Without strace, or a ramfs (root mounts one), what needs it is not checked
and the script exits 77 (ctest: not run).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from checks import check, failures
from strace_direct import direct_io

cvest = sys.argv[1]


def run(*args, fault=None, cache_dir=None, extra=None):
    env = dict(os.environ, **({"CVEST_FAULT": fault} if fault else {}), **(extra or {}))
    env["CVEST_CACHE_DIR"] = cache_dir or os.path.join(os.getcwd(), "no-records")  # auto's stated default
    return subprocess.run([cvest, *args], env=env, capture_output=True, text=True, timeout=300)


def deck(path, inp, direct=None, precision=None, out="cv.h5", budget=None):
    with open(path, "w") as f:
        f.write(f'[input]\nfile = "{inp}"\n')
        if direct is not None:
            f.write(f"direct = {direct}\n")
        f.write(f'[output]\nfile = "{out}"\noverwrite = true\n[run]\nstrategy = "flat"\nlayout = "right"\n'
                'max_block = "256KiB"\n')
        if precision:
            f.write(f'precision = "{precision}"\n')
        if budget:
            f.write(f'memory_budget = "{budget}"\n')


def drop(path):
    """The file on disk and out of the page cache (its pages clean, then dropped)."""
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def cache(path):
    with open(path, "rb") as f:
        while f.read(1 << 22):
            pass


def numpy_equal(inp, out):
    import h5py
    import numpy
    with h5py.File(inp, "r") as i, h5py.File(out, "r") as o:
        cv = o["cv"][...]
        expected = i["multBy"][...].astype(cv.dtype)[None, :, :] * i["discount"][...].astype(cv.dtype)
        return cv.shape == expected.shape and numpy.array_equal(cv.view(numpy.uint8), expected.view(numpy.uint8))


def traced(args, inp):
    """Runs cvest under strace: the bytes pread through descriptors opened
    with O_DIRECT, and whether any such descriptor was opened."""
    r = subprocess.run(["strace", "-f", "-s", "0", "-e", "trace=openat,close,pread64", "-o", "trace.txt", cvest, *args],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, CVEST_CACHE_DIR=os.path.join(os.getcwd(), "no-records"),
                                ASAN_OPTIONS="detect_leaks=0:" + os.environ.get("ASAN_OPTIONS", "")))
    direct_bytes, _, opened = direct_io("trace.txt", "pread64", access="O_RDONLY")
    os.remove("trace.txt")
    return r, direct_bytes, opened


def input_line(stdout):
    return next((l for l in stdout.splitlines() if l.startswith("input: read")), "")


AHEAD = "each per-thread pipeline thread reads its next block ahead"


def per_thread(stdout):
    return re.search(r"\sper_thread:\d+\s", stdout) is not None


# What the kernel saw needs strace, and a file system that refuses O_DIRECT
# needs root to mount one: without either the parts that need it are not
# run, and the script exits 77 (ctest: not run), never passing on cvest's
# own account of what it did.
have_strace = shutil.which("strace") is not None
missing = [] if have_strace else ["strace (scripts/setup installs it): no byte read direct or not is seen"]
with tempfile.TemporaryDirectory(prefix="cvest-direct-reads-", dir=os.getcwd()) as work:
    os.chdir(work)
    import h5py
    import numpy
    T, N, K = 12, 200003, 5
    g = run("generate", "-T", str(T), "-N", str(N), "-K", str(K), "-o", "gen.h5")
    check(g.returncode == 0, f"generate gen.h5 ({g.stderr.strip()})")
    with h5py.File("gen.h5", "r") as src:
        m, d = src["multBy"][...], src["discount"][...]
    for name, kw, dtype in [("odd64.h5", {"chunks": (1, 777, K)}, "f8"), ("odd32.h5", {"chunks": (1, 777, K)}, "f4"),
                            ("contiguous.h5", {}, "f8"), ("gzip.h5", {"chunks": (2, 40000, K), "compression": "gzip",
                                                                      "shuffle": True}, "f8")]:
        with h5py.File(name, "w") as f:
            f["multBy"] = m.astype(dtype)
            f.create_dataset("discount", data=d.astype(dtype), **kw)
    data = {"gen.h5": T * N * K * 8, "odd64.h5": T * N * K * 8, "odd32.h5": T * N * K * 4,
            "contiguous.h5": T * N * K * 8}

    for inp, discount_bytes in data.items():
        deck("deck.toml", inp)
        drop(inp)
        if have_strace:
            r, direct_bytes, _ = traced(["run", "deck.toml", "--explain"], inp)
        else:
            r, direct_bytes = run("run", "deck.toml", "--explain"), None
        line = input_line(r.stdout)
        share = re.search(r"O_DIRECT; ([\d.]+)% of the bytes", line)
        check(r.returncode == 0 and numpy_equal(inp, "cv.h5"),
              f"{inp}, cold: the output equals NumPy's multBy * discount bit for bit ({r.returncode}, "
              f"{r.stderr.strip()[-300:]})")
        check(share is not None and float(share.group(1)) >= 99.0,
              f"{inp}, cold: the table says discount was read past the page cache ({line})")
        check(AHEAD in r.stdout and per_thread(r.stdout) if (os.cpu_count() or 1) >= 2 else AHEAD not in r.stdout,
              f"{inp}, cold: the per-thread pipeline's threads read ahead and the table says so "
              f"({'per-thread' if per_thread(r.stdout) else 'overlapped'} pipeline)")
        if direct_bytes is not None:
            check(direct_bytes >= 0.99 * discount_bytes,
                  f"{inp}, cold: {direct_bytes} of discount's {discount_bytes} bytes pread through an O_DIRECT "
                  f"descriptor (strace)")

    # The same input cached: read from the cache, nothing direct.
    deck("deck.toml", "odd64.h5")
    cache("odd64.h5")
    r, direct_bytes, _ = traced(["run", "deck.toml", "--explain"], "odd64.h5") if have_strace else (run("run", "deck.toml", "--explain"), 0, 0)
    line = input_line(r.stdout)
    check(r.returncode == 0 and "through the page cache: the page cache held 100% of the file" in line
          and direct_bytes == 0, f"odd64.h5, cached: every byte from the page cache ({direct_bytes} direct"
          f"{'' if have_strace else ', not seen without strace'}; {line})")
    check(AHEAD not in r.stdout, "odd64.h5, cached: no reading ahead (no read waits on the device)")

    # CVEST_READ_AHEAD=0: a cold input read direct, one block at a time a thread; a bad value is one line.
    deck("deck.toml", "odd64.h5")
    drop("odd64.h5")
    r = run("run", "deck.toml", "--explain", extra={"CVEST_READ_AHEAD": "0"})
    check(r.returncode == 0 and numpy_equal("odd64.h5", "cv.h5") and AHEAD not in r.stdout
          and "O_DIRECT" in input_line(r.stdout),
          f"CVEST_READ_AHEAD=0: read direct, not ahead, the same output ({r.returncode}, {input_line(r.stdout)})")
    r = run("run", "deck.toml", "--explain", extra={"CVEST_READ_AHEAD": "yes"})
    errors = [l for l in r.stderr.splitlines() if "error" in l]
    check(r.returncode == 2 and len(errors) == 1 and "CVEST_READ_AHEAD" in errors[0] and "'yes'" in errors[0],
          f"CVEST_READ_AHEAD=yes: exit 2, one line ({r.returncode}, {errors})")

    # gzip: cvest's threads decode its chunks, as before; nothing direct.
    deck("deck.toml", "gzip.h5")
    drop("gzip.h5")
    r, direct_bytes, _ = traced(["run", "deck.toml", "--explain"], "gzip.h5") if have_strace else (run("run", "deck.toml", "--explain"), 0, 0)
    line = input_line(r.stdout)
    check(r.returncode == 0 and numpy_equal("gzip.h5", "cv.h5") and direct_bytes <= N * K * 8 + 8192
          and "chunks decoded by cvest's threads" in line,
          f"gzip.h5: decoded by cvest's threads, no byte of discount direct ({r.returncode}, {direct_bytes} bytes "
          f"direct{'' if have_strace else ' (not seen without strace)'}, at most multBy's {N * K * 8} in whole "
          f"pages; {line})")

    # A budget under 64 MiB leaves no room for the direct reader's buffers:
    # auto reads a cold input through the page cache, and the table says why.
    deck("deck.toml", "gen.h5", budget="32MiB")
    drop("gen.h5")
    r, direct_bytes, opened = traced(["run", "deck.toml", "--explain"], "gen.h5") if have_strace else \
        (run("run", "deck.toml", "--explain"), 0, 0)
    line = input_line(r.stdout)
    check(r.returncode == 0 and numpy_equal("gen.h5", "cv.h5") and not opened and direct_bytes == 0
          and line == "input: read through the page cache: memory_budget below 64.00 MiB leaves no room for direct "
                      "reads' buffers",
          f"memory_budget 32 MiB, cold: no O_DIRECT descriptor ({'opened' if opened else 'none'}, {direct_bytes} "
          f"bytes direct{'' if have_strace else ', not seen without strace'}), and the table says why ({line})")

    # direct = false: no O_DIRECT descriptor at all.
    deck("deck.toml", "gen.h5", direct="false")
    drop("gen.h5")
    if have_strace:
        r, direct_bytes, opened = traced(["run", "deck.toml", "--explain"], "gen.h5")
        check(r.returncode == 0 and not opened and input_line(r.stdout) == "input: read through the page cache: "
              "[input] direct = false", f"direct = false: no O_DIRECT descriptor ({input_line(r.stdout)})")

    # A file system that refuses O_DIRECT: auto reads through the cache and says why; true fails in one line.
    deck("deck.toml", "gen.h5")
    r = run("run", "deck.toml", "--explain", fault="direct_refused")
    line = input_line(r.stdout)
    check(r.returncode == 0 and numpy_equal("gen.h5", "cv.h5") and "through the page cache" in line
          and "refuses O_DIRECT" in line,
          f"O_DIRECT refused, auto: through the page cache, the table says why ({r.returncode}; {line})")
    deck("deck.toml", "gen.h5", direct="true", out="cv2.h5")
    r = run("run", "deck.toml", "--explain", fault="direct_refused")
    errors = [l for l in r.stderr.splitlines() if "error" in l]
    check(r.returncode == 3 and len(errors) == 1 and "gen.h5" in errors[0] and "[input] direct = true" in errors[0]
          and not os.path.exists("cv2.h5"),
          f"O_DIRECT refused, direct = true: exit 3, one line naming the input, no output ({r.returncode}, {errors})")
    deck("deck.toml", "gen.h5", direct='"often"')
    r = run("run", "deck.toml", "--explain")
    check(r.returncode == 2 and "[input] direct" in r.stderr,
          f"direct = \"often\": exit 2 naming the key ({r.returncode}, {r.stderr.strip()})")

    # cvest tune measures reads too; auto then takes the measurement and says so.
    records = os.path.join(work, "cache")
    t = subprocess.run([cvest, "tune", work, "--size", "8MiB", "--repeats", "2", "--walk-size", "4MiB"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, CVEST_CACHE_DIR=records, CVEST_TUNE_NO_WAIT="1"))
    check(t.returncode == 0 and t.stderr.count("read ") == 4, f"cvest tune: 2 reads each way ({t.stderr[-300:]})")
    deck("deck.toml", "gen.h5")
    drop("gen.h5")
    r = run("run", "deck.toml", "--explain", cache_dir=records)
    line = input_line(r.stdout)
    check(r.returncode == 0 and "reads measured on this file system on" in line,
          f"auto after cvest tune: the table says the read mode was measured here ({line})")

    fs = os.path.join(work, "fs")
    os.mkdir(fs)
    mounted = subprocess.run(["mount", "-t", "ramfs", "ramfs", fs], capture_output=True, text=True) \
        if os.geteuid() == 0 else None
    if not mounted or mounted.returncode != 0:
        missing.append("a ramfs to read from (an input on a file system that refuses O_DIRECT): "
                       + ("not root" if not mounted else mounted.stderr.strip()))
    else:
        try:
            shutil.copy("gen.h5", fs)
            deck("deck.toml", "fs/gen.h5")
            r = run("run", "deck.toml", "--explain")
            line = input_line(r.stdout)
            check(r.returncode == 0 and numpy_equal("fs/gen.h5", "cv.h5") and "ramfs" in line
                  and "refuses O_DIRECT" in line, f"an input on a ramfs: through the page cache, and why ({line})")
            deck("deck.toml", "fs/gen.h5", direct="true")
            r = run("run", "deck.toml", "--explain")
            errors = [l for l in r.stderr.splitlines() if "error" in l]
            check(r.returncode == 3 and len(errors) == 1 and "ramfs" in errors[0],
                  f"an input on a ramfs, direct = true: exit 3, one line ({r.returncode}, {errors})")
        finally:
            subprocess.run(["umount", fs])

if failures:
    sys.exit(1)
for why in missing:
    print(f"not run: {why}")
sys.exit(77 if missing else 0)
