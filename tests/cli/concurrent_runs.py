#!/usr/bin/env python3
"""Two runs writing one output never both succeed with a result lost.

    concurrent_runs.py CVEST_BINARY

- The batch-array case: two decks (different inputs) writing the same
  output at the same time, overwrite = false: exactly one exits 0, the
  other exits 3 with one line, and the output verifies against the
  winner's input. Five rounds.
- A second run of an output another run is writing is refused at its start
  (exit 3) with a line naming the other process (its pid).
- A file that appears at the output path while a run writes it (another
  program) is left as it is: the run exits 3, its output discarded.
- overwrite = true replaces the file the run found, and not one that
  replaced it meanwhile (exit 3, the newer file untouched).
- A run killed with SIGKILL holds no lock: the next run succeeds.
Runs are slowed (CVEST_FAULT=slow_write: 0.3 s before each block's write)
so that they overlap.
"""
import glob
import os
import signal
import subprocess
import sys
import tempfile
import time
from checks import check, failures

cvest = sys.argv[1]


def start(deck, slow=True, *extra):
    env = dict(os.environ, **({"CVEST_FAULT": "slow_write" if slow is True else slow} if slow else {}))
    return subprocess.Popen([cvest, "run", deck, *extra], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def finish(p, timeout=120):
    _, err = p.communicate(timeout=timeout)
    return p.returncode, [l for l in err.splitlines() if l.startswith("cvest: ") and "error" in l]


def wait_for_temp(folder, p, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and p.poll() is None:
        if glob.glob(os.path.join(folder, ".shared.h5.tmp-*")):
            return True
        time.sleep(0.02)
    return False


with tempfile.TemporaryDirectory() as tmp:
    os.chdir(tmp)
    for s in (1, 2):
        subprocess.run([cvest, "generate", "-T", "6", "-N", "20000", "-K", "5", "--seed", str(s), "-o", f"s{s}.h5"],
                       check=True, capture_output=True)
        with open(f"s{s}.toml", "w") as f:
            # 6 blocks of one date: 1.8 s slowed
            f.write(f'[input]\nfile = "s{s}.h5"\n[output]\nfile = "shared.h5"\n[run]\nstrategy = "flat"\n'
                    'max_block = "800KiB"\npipeline = "overlapped"\n')

    for round_ in range(5):
        if os.path.exists("shared.h5"):
            os.remove("shared.h5")
        a, b = start("s1.toml"), start("s2.toml")
        (ca, la), (cb, lb) = finish(a), finish(b)
        winners = [s for s, c in ((1, ca), (2, cb)) if c == 0]
        losers = [(c, l) for c, l in ((ca, la), (cb, lb)) if c != 0]
        check(len(winners) == 1, f"round {round_ + 1}: exactly one of two concurrent runs succeeds (exits {ca}, {cb})")
        if len(winners) == 1 and losers:
            code, lines = losers[0]
            check(code == 3 and len(lines) == 1, f"round {round_ + 1}: the other exits 3 with one line ({code}, {lines})")
            v = subprocess.run([cvest, "verify", "shared.h5", "--input", f"s{winners[0]}.h5"], capture_output=True)
            check(v.returncode == 0, f"round {round_ + 1}: the output is the winner's result")
        check(not glob.glob(".shared.h5.*"), f"round {round_ + 1}: no temporary or lock file left")

    # Refused at the start, naming the other process: the first holds each
    # of its 6 blocks 1 s, and is checked to be still running after the
    # second was refused (so the refusal was about it).
    os.remove("shared.h5")
    a = start("s1.toml", "slow_write=1000")
    check(wait_for_temp(tmp, a), "the first run is writing its output")
    b = start("s2.toml", False)
    cb, lb = finish(b)
    check(cb == 3 and len(lb) == 1 and f"pid {a.pid}" in lb[0] and "another cvest run is writing it" in lb[0],
          f"a second run of the same output is refused at once, naming the first ({cb}, {lb})")
    check(a.poll() is None, "the first was still running when the second was refused")
    ca, _ = finish(a)
    check(ca == 0, "the first run still succeeds")

    # A file that appears meanwhile stays, overwrite = false.
    os.remove("shared.h5")
    a = start("s1.toml")
    check(wait_for_temp(tmp, a), "the run is writing its output when another file appears")
    with open("shared.h5", "w") as f:
        f.write("another program's file\n")
    ca, la = finish(a)
    with open("shared.h5") as f:
        kept = f.read() == "another program's file\n"
    check(ca == 3 and len(la) == 1 and "appeared while this run wrote" in la[0] and kept,
          f"a file that appeared meanwhile is left as it is, the run exits 3 ({ca}, {la})")
    check(not glob.glob(".shared.h5.*"), "no temporary or lock file left")

    # overwrite = true replaces what it found, not a newer file.
    subprocess.run([cvest, "run", "s2.toml", "--set", "output.overwrite=true"], check=True, capture_output=True)
    a = start("s1.toml", True, "--set", "output.overwrite=true")
    check(wait_for_temp(tmp, a), "the run is writing its output when the file it found is replaced")
    with open("newer.h5", "w") as f:
        f.write("newer\n")
    os.replace("newer.h5", "shared.h5")
    ca, la = finish(a)
    with open("shared.h5") as f:
        kept = f.read() == "newer\n"
    check(ca == 3 and len(la) == 1 and "replaced by another process" in la[0] and kept,
          f"overwrite = true leaves a file that replaced the one it found ({ca}, {la})")
    os.remove("shared.h5")
    subprocess.run([cvest, "run", "s2.toml"], check=True, capture_output=True)
    a = start("s1.toml", True, "--set", "output.overwrite=true")
    ca, _ = finish(a)
    v = subprocess.run([cvest, "verify", "shared.h5", "--input", "s1.h5"], capture_output=True)
    check(ca == 0 and v.returncode == 0, "overwrite = true replaces the file it found")

    # SIGKILL: the kernel drops the lock; the next run takes it.
    a = start("s2.toml", True, "--set", "output.overwrite=true")
    check(wait_for_temp(tmp, a) and os.path.exists(".shared.h5.lock"), "the run holds the lock when it is killed")
    a.send_signal(signal.SIGKILL)
    a.wait()
    check(a.returncode == -signal.SIGKILL, "killed by SIGKILL")
    c = subprocess.run([cvest, "run", "s2.toml", "--set", "output.overwrite=true"], capture_output=True)
    v = subprocess.run([cvest, "verify", "shared.h5", "--input", "s2.h5"], capture_output=True)
    check(c.returncode == 0 and v.returncode == 0, "after a SIGKILL the next run takes the lock and succeeds")
    check(not glob.glob(".shared.h5.*"), "no temporary or lock file left")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
