#!/usr/bin/env python3
"""A file system that really fills up mid-run (ENOSPC from the kernel, not
RLIMIT_FSIZE's EFBIG nor an injected fault): exit 3, one line saying the
disk is full, nothing left on that file system but what was there, and an
output that was there before untouched.

    disk_full_fs.py CVEST_BINARY

The test mounts a 24 MiB tmpfs of its own (CI runs as root) and removes it
after. A run writing a 9.6 MB output there passes the free-space check;
once its temporary file appears (blocks slowed to 0.2 s each), another file
takes every free byte, so a later write of the run's fails:
  - plain output: cvest's own pwrite of a block;
  - gzip output: HDF5's H5Dwrite_chunk and its metadata;
  - a generated input (`cvest generate`, a date every 0.2 s): HDF5's own
    writes of data and metadata;
and an output that was there before a run that fails so stays as it was.
Where the mount is refused (not root, no tmpfs), the test fails saying so.
"""
import errno
import glob
import os
import subprocess
import sys
import tempfile
import time
from checks import check, failures

cvest = sys.argv[1]


def fill(path):
    """Writes zeros to `path` until the file system refuses: True on ENOSPC."""
    chunk = b"\0" * (64 << 10)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        while True:
            os.write(fd, chunk)
    except OSError as e:
        return e.errno == errno.ENOSPC
    finally:
        os.close(fd)


def wait_for(pattern, p, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and p.poll() is None:
        if glob.glob(pattern):
            return True
        time.sleep(0.005)
    return False


def error_lines(stderr):
    return [l for l in stderr.splitlines() if "error" in l]


def filled_mid_run(args, temp_pattern):
    """Starts cvest ARGS slowed (0.2 s a block), fills the file system once
    its temporary file is there and a block or two are written; returns
    (whether it was running then, whether the fill reached ENOSPC, exit
    code, error lines)."""
    p = subprocess.Popen([cvest, *args], env=dict(os.environ, CVEST_FAULT="slow_write=200"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started = wait_for(temp_pattern, p)
    time.sleep(0.3)
    filled = fill(os.path.join(fs, "filler"))
    _, err = p.communicate(timeout=120)
    return started, filled, p.returncode, error_lines(err)


with tempfile.TemporaryDirectory(prefix="cvest-full-") as work:
    os.chdir(work)
    fs = os.path.join(work, "fs")
    os.mkdir(fs)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", fs], capture_output=True, text=True)
    if mount.returncode != 0:
        print(f"FAIL: cannot mount a tmpfs to fill (needs root): {mount.stderr.strip()}")
        sys.exit(1)
    try:
        subprocess.run([cvest, "generate", "-T", "12", "-N", "20000", "-K", "5", "-o", "in.h5"], check=True,
                       capture_output=True)
        with open(os.path.join(fs, "notes.txt"), "w") as f:
            f.write("someone's notes\n")
        temp = os.path.join(fs, ".cv.h5.tmp-*")
        for compression in ("none", "gzip"):
            with open("deck.toml", "w") as f:
                f.write(f'[input]\nfile = "in.h5"\n[output]\nfile = "fs/cv.h5"\ncompression = "{compression}"\n'
                        '[run]\nstrategy = "flat"\nmax_block = "100KiB"\npipeline = "overlapped"\n')
            started, filled, rc, lines = filled_mid_run(["run", "deck.toml"], temp)
            check(started and filled, f"{compression}: the run was writing when the file system filled")
            # The write that met the full disk says so: cvest's own pwrite of a
            # block, or HDF5's H5Dwrite_chunk of a compressed chunk.
            says = "fs/cv.h5: write failed: No space left on device" if compression == "none" else \
                "fs/cv.h5: dataset 'cv': write of chunk at"
            check(rc == 3 and len(lines) == 1 and says in lines[0],
                  f"{compression}: exit 3, one line naming the output and the write the full disk refused ({rc}, {lines})")
            left = sorted(os.listdir(fs))
            check(left == ["filler", "notes.txt"], f"{compression}: nothing of the run's left on it ({left})")
            check(open(os.path.join(fs, "notes.txt")).read() == "someone's notes\n", f"{compression}: other files untouched")
            os.remove(os.path.join(fs, "filler"))

        # An output that was there before a run that fails for want of space stays as it was.
        with open("deck.toml", "w") as f:
            f.write('[input]\nfile = "in.h5"\n[output]\nfile = "fs/cv.h5"\noverwrite = true\n'
                    '[run]\nstrategy = "flat"\nmax_block = "100KiB"\npipeline = "overlapped"\n')
        first = subprocess.run([cvest, "run", "deck.toml"], capture_output=True, text=True)
        before = open(os.path.join(fs, "cv.h5"), "rb").read()
        started, filled, rc, lines = filled_mid_run(["run", "deck.toml"], temp)
        check(first.returncode == 0 and started and filled and rc == 3 and len(lines) == 1
              and open(os.path.join(fs, "cv.h5"), "rb").read() == before,
              f"overwrite: the disk fills mid-run, exit 3, the earlier output untouched ({rc}, {lines})")
        os.remove(os.path.join(fs, "filler"))
        os.remove(os.path.join(fs, "cv.h5"))

        # generate, the disk filling mid-way: HDF5's own writes of data and metadata.
        started, filled, rc, lines = filled_mid_run(
            ["generate", "-T", "20", "-N", "20000", "-K", "5", "-o", "fs/gen.h5"], os.path.join(fs, ".gen.h5.tmp-*"))
        check(started and filled and rc == 3 and len(lines) == 1 and "fs/gen.h5" in lines[0],
              f"generate, the disk filling mid-way: exit 3, one line naming it ({rc}, {lines})")
        left = sorted(os.listdir(fs))
        check(left == ["filler", "notes.txt"], f"generate: nothing of it left ({left})")
    finally:
        os.chdir("/")
        subprocess.run(["umount", fs], capture_output=True)

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
