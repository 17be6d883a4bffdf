#!/usr/bin/env python3
"""In a folder other users can write (no sticky bit), cvest never follows,
truncates, adopts or removes a file someone else planted there.

    shared_folders.py CVEST_BINARY

- The reproduction: while six runs of a deck writing cv.h5 go on one after
  another, a planter keeps symbolic links at the temporary names of the next
  process ids (the host-and-pid names of earlier versions, the same with a
  token-shaped tail, and their journals), each pointing at a file of the
  running user's. Every run exits 0 with the right output, the target keeps
  its 16 bytes, and every planted link is still there.
- A killed run's temporary file and journal given to another user (uid
  54321): the next run neither resumes nor removes them (their bytes and
  owner unchanged) and writes a correct output; the same pair given back to
  the running user is resumed by the run after (so the check above could
  fail).
- A link planted at the lock's name: the run exits 3 with one line naming
  it; at the output's own name: exit 2, one line; nothing written through
  either, the links left in place.
- Report paths that are links: replaced by the reports, their targets unchanged.
Giving files away needs root (CI runs the tests as root): otherwise this
test fails saying so, rather than skipping the check.
"""
import glob
import hashlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from checks import check, failures

cvest = sys.argv[1]
OTHER_UID = 54321


def run(*args, fault=None, timeout=120):
    env = dict(os.environ, CVEST_JOURNAL_BATCH="1MiB", **({"CVEST_FAULT": fault} if fault else {}))
    return subprocess.run([cvest, *args], env=env, capture_output=True, text=True, timeout=timeout)


def error_lines(stderr):
    return [l for l in stderr.splitlines() if "error" in l]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def correct(path):
    import h5py
    import numpy
    with h5py.File("in.h5", "r") as i, h5py.File(path, "r") as o:
        expected = i["multBy"][...][None] * i["discount"][...]
        return numpy.array_equal(o["cv"][...].view(numpy.uint8), expected.view(numpy.uint8))


def host_tag():
    return re.sub(r"[^A-Za-z0-9._]", "_", socket.gethostname()) or "host"


def last_pid():
    with open("/proc/sys/kernel/ns_last_pid") as f:
        return int(f.read())


def deck(name, output, **extra):
    lines = ['[input]\nfile = "in.h5"\n', f'[output]\nfile = "{output}"\noverwrite = true\n',
             '[run]\nstrategy = "flat"\nmax_block = "100KiB"\npipeline = "overlapped"\n']
    if extra:
        lines.append("[report]\n" + "".join(f'{k} = "{v}"\n' for k, v in extra.items()))
    with open(name, "w") as f:
        f.write("".join(lines))
    return name


if os.geteuid() != 0:
    print("FAIL: this test gives files to another user (chown), which needs root; run it as root (CI does)")
    sys.exit(1)

with tempfile.TemporaryDirectory() as tmp:
    os.chdir(tmp)
    os.chmod(tmp, 0o777)  # writable by all, no sticky bit: anyone may plant names here
    check(run("generate", "-T", "12", "-N", "20000", "-K", "5", "-o", "in.h5").returncode == 0, "the input is generated")
    deck("deck.toml", "cv.h5")
    with open("target.txt", "w") as f:
        f.write("someone's notes\n")
    before = digest("target.txt")

    # 1. Links planted at the next process ids' temporary names, while runs go on.
    planted, removed = set(), []
    stop = threading.Event()

    def planter():
        """Keeps a link at every guessable name of the next 40 process ids,
        planting again any that went (and counting it)."""
        prefix = f".cv.h5.tmp-{host_tag()}-"
        while not stop.is_set():
            base = last_pid()
            for pid in range(base + 1, base + 40):
                for name in (f"{prefix}{pid}", f"{prefix}{pid}-AAAAAAAAAAAA", f"{prefix}{pid}-AAAAAAAAAAAA.journal-0",
                             f"{prefix}{pid}.journal-0"):
                    if os.path.lexists(name):
                        continue
                    if name in planted:
                        removed.append(name)
                    try:
                        os.symlink(os.path.abspath("target.txt"), name)
                        planted.add(name)
                    except FileExistsError:
                        pass
            time.sleep(0.002)

    thread = threading.Thread(target=planter)
    thread.start()
    time.sleep(0.2)
    results = []
    try:
        for r in range(6):
            p = run("run", "deck.toml")
            results.append((p.returncode, error_lines(p.stderr)))
            time.sleep(0.05)  # the planter catches up with the process ids
    finally:
        stop.set()
        thread.join()
    check(all(rc == 0 and not errs for rc, errs in results), f"six runs among planted links exit 0 ({results})")
    check(os.path.isfile("cv.h5") and not os.path.islink("cv.h5") and correct("cv.h5"),
          "and write the right output, a file of its own")
    check(digest("target.txt") == before, "the links' target keeps its bytes")
    still = [n for n in planted if os.path.islink(n)]
    check(len(planted) > 100 and not removed and len(still) == len(planted),
          f"every planted link is left in place ({len(still)} of {len(planted)} there, {len(removed)} removed meanwhile)")
    for n in planted:
        if os.path.lexists(n):
            os.remove(n)
    os.remove("cv.h5")

    # 2. A killed run's temporary file and journal, another user's.
    p = run("run", "deck.toml", fault="kill_after_blocks=8")
    check(p.returncode == -signal.SIGKILL, "a run killed after 8 blocks")
    pair = sorted(f for f in glob.glob(".cv.h5.tmp-*"))
    check(len(pair) == 2 and pair[1].endswith(".journal-0"), f"it left its temporary file and journal ({pair})")
    sums = {f: digest(f) for f in pair}
    for f in pair:
        os.chown(f, OTHER_UID, OTHER_UID)
    p = run("run", "deck.toml")
    check(p.returncode == 0 and "resuming" not in p.stderr and correct("cv.h5"),
          "the next run does not resume another user's pair, and writes the right output")
    check(all(os.path.exists(f) and os.stat(f).st_uid == OTHER_UID and digest(f) == sums[f] for f in pair),
          "the pair is neither removed nor changed")
    for f in pair:
        os.chown(f, os.geteuid(), os.getegid())
    p = run("run", "deck.toml")
    resumed = re.search(r"resuming cv\.h5: (\d+) blocks", p.stderr)
    check(p.returncode == 0 and resumed is not None and int(resumed.group(1)) > 0 and correct("cv.h5"),
          f"given back to the running user, the same pair is resumed ({resumed.group(0) if resumed else p.stderr})")
    check(not glob.glob(".cv.h5.tmp-*"), "and nothing is left beside the output")
    os.remove("cv.h5")

    # 3. Links at the lock's name and at the output's own name.
    for name, code, message in ((".cv.h5.lock", 3, ".cv.h5.lock is a symbolic link"),
                                ("cv.h5", 2, "cv.h5: output is a symbolic link")):
        os.symlink(os.path.abspath("target.txt"), name)
        p = run("run", "deck.toml")
        errs = error_lines(p.stderr)
        check(p.returncode == code and len(errs) == 1 and message in errs[0],
              f"a link at {name}: exit {code}, one line naming it ({p.returncode}, {errs})")
        check(os.path.islink(name) and digest("target.txt") == before
              and (os.path.islink("cv.h5") or not os.path.lexists("cv.h5")),
              "the link left in place, its target unchanged, no output")
        os.remove(name)

    # 4. Report paths that are links: replaced, targets unchanged.
    deck("reports.toml", "cv.h5", json="r.json", csv="r.csv")
    for name in ("r.json", "r.csv"):
        os.symlink(os.path.abspath("target.txt"), name)
    p = run("run", "reports.toml")
    check(p.returncode == 0 and not os.path.islink("r.json") and not os.path.islink("r.csv")
          and open("r.json").read().startswith("{") and digest("target.txt") == before,
          "report paths that are links are replaced by the reports, the target unchanged")
    left = [f for f in os.listdir(".") if ".tmp-" in f]
    check(not left, f"nothing temporary is left in the folder ({left})")

print(f"{len(failures)} failure(s)" if failures else "all shared-folder checks passed")
sys.exit(1 if failures else 0)
