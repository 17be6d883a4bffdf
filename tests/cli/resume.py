#!/usr/bin/env python3
"""A killed run resumes to the same bytes; faults lose nothing.

    resume.py CVEST_BINARY kills|faults

kills: `kill -9` at 32 or more random moments of a multi-block run (every
  other one at a random moment after the journal's first record; each
  next run resumes what the last left, until one finishes), and at fixed
  points (after a batch of blocks is on disk but before the journal records
  it; while committing, after the journal is gone); the finished output is
  byte-identical (the cv data) to an uninterrupted run's, the blocks resumed are counted,
  and nothing is left beside the output; killed after 24 blocks are written,
  the next run resumes exactly the blocks the journal had recorded. Journals are written every block
  here (CVEST_JOURNAL_BATCH=1MiB) so every kill point has blocks to resume.
faults: a journal cut at random offsets (as if its last writes never reached
  the disk) or with a damaged record resumes to identical bytes (fewer blocks)
  or starts over; a changed input refuses to resume and says why; --no-resume
  starts over; SIGTERM (a scheduler's time limit) keeps the output's
  temporary file and journal, and the next run continues; a failed fsync
  exits 3 with nothing at the output path and a pre-existing output
  untouched; a compressed output says it starts over.
"""
import glob
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from checks import check, failures

cvest, case = sys.argv[1], sys.argv[2]
env = dict(os.environ, CVEST_JOURNAL_BATCH="1MiB")
random.seed(int(os.environ.get("CVEST_TEST_SEED", "20261201")))


def run(*args, fault=None, timeout=120):
    e = dict(env, **({"CVEST_FAULT": fault} if fault else {}))
    return subprocess.run([cvest, *args], env=e, capture_output=True, text=True, timeout=timeout)


def start(*args, fault=None):
    e = dict(env, **({"CVEST_FAULT": fault} if fault else {}))
    return subprocess.Popen([cvest, *args], env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def same_file(a, b):
    """The same cv data, bit for bit (a resumed file's metadata may lie
    elsewhere: HDF5 places what a reopened file adds anew)."""
    import h5py
    import numpy
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        x, y = fa["cv"][...], fb["cv"][...]
        return x.dtype == y.dtype and x.shape == y.shape and numpy.array_equal(x.view(numpy.uint8), y.view(numpy.uint8))


def leftovers():
    return sorted(glob.glob(".out.h5.*"))


def wait_for_record(p, seconds):
    """Until the running p's journal holds a record, p ends, or seconds pass.
    Kills at uniform moments alone land mostly before the first record or
    after the rename on a slow build (startup and exit dominate it: under
    ASan 1 run in 15 resumed, and once none did), so every other kill waits
    for one and lands before the uninterrupted run had renamed its output."""
    deadline = time.monotonic() + seconds
    while p.poll() is None and time.monotonic() < deadline:
        for j in glob.glob(".out.h5.tmp-*.journal-0"):
            try:
                body = open(j, "rb").read()
            except FileNotFoundError:
                continue
            end = body.find(b"\n\n")
            if end >= 0 and len(body) > end + 2:
                return True
        time.sleep(0.002)
    return False


def resumed_blocks(stderr):
    m = re.search(r"resuming out\.h5: (\d+) blocks", stderr)
    return int(m.group(1)) if m else 0


with tempfile.TemporaryDirectory() as tmp:
    os.chdir(tmp)
    run("generate", "-T", "24", "-N", "40000", "-K", "5", "-o", "in.h5")
    with open("deck.toml", "w") as f:  # 48 blocks of 0.8 MB
        f.write('[input]\nfile = "in.h5"\n[output]\nfile = "out.h5"\n[run]\nstrategy = "flat"\nmax_block = "800KiB"\n'
                'pipeline = "overlapped"\n')
    p = run("run", "deck.toml", "--set", "output.file=ref.h5")
    check(p.returncode == 0, "the uninterrupted reference run")
    started = time.monotonic()
    p = start("run", "deck.toml")
    wait_for_record(p, 120)
    first_record = time.monotonic() - started
    while p.poll() is None and not os.path.exists("out.h5"):
        time.sleep(0.002)
    committed = time.monotonic() - started
    p.communicate()
    full = time.monotonic() - started
    check(p.returncode == 0 and same_file("out.h5", "ref.h5"), "two uninterrupted runs write the same data")
    print(f"an uninterrupted run: first journal record at {first_record:.3f} s, output renamed at {committed:.3f} s, "
          f"exited at {full:.3f} s")
    os.remove("out.h5")

    if case == "kills":
        kills = finished = runs_resumed = blocks_resumed = 0
        while kills < 32 or not os.path.exists("out.h5"):
            if os.path.exists("out.h5"):  # a cycle finished: check it, start the next
                check(same_file("out.h5", "ref.h5"), f"after {kills} kills, the resumed output is byte-identical")
                # A kill can land after the rename, before the run drops its
                # lock file and its output's seal: those (unlocked; a seal
                # of a file no longer there, which the next run removes) are
                # all it may leave.
                left = [f for f in leftovers() if f != ".out.h5.lock" and
                        not (f.endswith(".sealed") and not os.path.exists(f[: -len(".sealed")]))]
                check(not left, f"after {kills} kills, nothing left beside the output but a lock file or a spent "
                                f"seal ({left})")
                os.remove("out.h5")
                finished += 1
            if kills >= 32:
                p = run("run", "deck.toml")
                blocks_resumed += resumed_blocks(p.stderr)
                runs_resumed += resumed_blocks(p.stderr) > 0
                continue
            p = start("run", "deck.toml")
            if kills % 2 == 0:
                time.sleep(random.uniform(0, full * 1.1))
            elif wait_for_record(p, full * 3):
                time.sleep(random.uniform(0, committed - first_record))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                kills += 1
            _, err = p.communicate()
            blocks_resumed += resumed_blocks(err)
            runs_resumed += resumed_blocks(err) > 0
        check(same_file("out.h5", "ref.h5"), "the last cycle's output is byte-identical")
        print(f"kill points tried: {kills} at random moments (every other one after a journal record); runs that finished: {finished + 1}; runs that resumed: "
              f"{runs_resumed}, {blocks_resumed} blocks resumed in all")
        check(runs_resumed > 0, "some runs resumed blocks a killed run left")
        os.remove("out.h5")
        # Fixed points: data on disk but not yet journaled; mid-commit.
        for fault, what in [("kill_before_journal", "after the data's sync, before the journal record"),
                            ("kill_at_commit", "while committing (journal gone, not renamed)")]:
            p = run("run", "deck.toml", fault=fault)
            check(p.returncode == -signal.SIGKILL, f"killed {what}")
            p = run("run", "deck.toml")
            check(p.returncode == 0 and same_file("out.h5", "ref.h5") and not leftovers(),
                  f"killed {what}: the next run finishes with identical bytes, nothing left")
            os.remove("out.h5")
        # Killed as the 24th of 48 blocks is written: the next run resumes
        # exactly the blocks the journal had recorded (none lost, none
        # claimed that were not on disk) and redoes only those written but
        # not yet recorded (in flight: the batch being synced, and blocks
        # written since).
        p = run("run", "deck.toml", fault="kill_after_blocks=24")
        m = re.search(r"killed after 24 blocks written, (\d+) recorded", p.stderr)
        check(p.returncode == -signal.SIGKILL and m is not None, "killed after 24 blocks written, saying how many were recorded")
        if m:
            recorded = int(m.group(1))
            p = run("run", "deck.toml")
            resumed = resumed_blocks(p.stderr)
            check(p.returncode == 0 and same_file("out.h5", "ref.h5") and resumed == recorded and not leftovers(),
                  f"killed after 24 blocks written: resumed {resumed} (the journal had recorded {recorded}), "
                  f"redid {48 - resumed} of 48, {24 - resumed} of them written before the kill; identical bytes")
            os.remove("out.h5")

    elif case == "faults":
        def killed_run():
            """A run killed half-way: its temporary file and journal (with records)."""
            p = start("run", "deck.toml", fault="slow_write")  # 0.3 s a block
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and p.poll() is None:
                journals = glob.glob(".out.h5.tmp-*.journal-0")
                if journals and os.path.getsize(journals[0]) > 400 + 40 * 6:
                    break
                time.sleep(0.01)
            p.send_signal(signal.SIGKILL)
            p.wait()
            return glob.glob(".out.h5.tmp-*.journal-0")

        # Journals cut at random offsets, and one with a damaged record.
        cuts = 0
        for trial in range(6):
            journals = killed_run()
            if not journals:
                check(False, "a killed run left its journal")
                continue
            size = os.path.getsize(journals[0])
            with open(journals[0], "r+b") as f:
                if trial == 5:  # damage a record's bytes in the middle
                    body = f.read()
                    start_ = body.index(b"\n\n") + 2
                    at = start_ + (len(body) - start_) // 2
                    f.seek(at)
                    f.write(bytes([body[at] ^ 0xFF]))
                else:
                    f.truncate(random.randrange(0, size))
                    cuts += 1
            p = run("run", "deck.toml")
            check(p.returncode == 0 and same_file("out.h5", "ref.h5") and not leftovers(),
                  f"journal {'damaged' if trial == 5 else 'cut'}: resumed {resumed_blocks(p.stderr)} blocks "
                  f"or started over ({'resuming' in p.stderr}), identical bytes")
            os.remove("out.h5")
        print(f"journals cut at random offsets: {cuts}; damaged: 1")

        # Cut where the count of intact records is known: at a record's end,
        # and 17 bytes into the next (a record is 40 bytes after the header's
        # empty line). The next run resumes exactly the intact records.
        for into in (0, 17):
            journals = killed_run()
            if not journals:
                check(False, "a killed run left its journal")
                continue
            with open(journals[0], "r+b") as f:
                body = f.read()
                records_at = body.index(b"\n\n") + 2
                whole = (len(body) - records_at) // 40
                keep = max(1, whole // 2)
                f.truncate(records_at + keep * 40 + into)
            p = run("run", "deck.toml")
            resumed = resumed_blocks(p.stderr)
            check(whole >= 2 and p.returncode == 0 and resumed == keep and same_file("out.h5", "ref.h5")
                  and not leftovers(),
                  f"journal of {whole} records cut after {keep}" + (f" and {into} bytes" if into else "") +
                  f": resumed exactly {resumed} blocks, identical bytes")
            os.remove("out.h5")

        # A journal with no records (its run stopped before a block was
        # recorded): not resumed, saying why, and the run starts over (it
        # printed "resuming out.h5: 0 blocks (0 B) are on disk" before).
        journals = killed_run()
        if journals:
            with open(journals[0], "r+b") as f:
                f.truncate(f.read().index(b"\n\n") + 2)
        p = run("run", "deck.toml")
        check(p.returncode == 0 and "recorded no finished blocks" in p.stderr and "resuming out.h5" not in p.stderr
              and same_file("out.h5", "ref.h5") and not leftovers(),
              "a journal without records: not resumed, says so, starts over, identical bytes, nothing left")
        os.remove("out.h5")

        # The output's temporary file cut at random offsets (its last writes
        # lost): HDF5 refuses a file shorter than its metadata says, and the
        # run starts over; never a block claimed that is not there.
        for trial in range(3):
            killed_run()
            temps = [t for t in glob.glob(".out.h5.tmp-*") if ".journal" not in t]
            if temps:
                with open(temps[0], "r+b") as f:
                    f.truncate(random.randrange(0, os.path.getsize(temps[0])))
            p = run("run", "deck.toml")
            check(p.returncode == 0 and same_file("out.h5", "ref.h5") and not leftovers(),
                  f"output cut short: resumed {resumed_blocks(p.stderr)} blocks or started over "
                  f"({'starting over' in p.stderr}), identical bytes")
            os.remove("out.h5")

        # A changed input refuses to resume, saying why.
        killed_run()
        os.utime("in.h5", None)
        p = run("run", "deck.toml")
        check(p.returncode == 0 and "not resuming" in p.stderr and "input changed" in p.stderr
              and same_file("out.h5", "ref.h5") and not leftovers(),
              "a changed input: not resumed, says why, starts over, identical bytes")
        os.remove("out.h5")

        # A changed output (dataset name, chunks, element type) refuses to
        # resume, naming the output as what changed, and starts over.
        for what, change in (("dataset name", "output.dataset=rates"), ("chunks", "output.chunk=1000"),
                             ("element type", "run.precision=float32")):
            killed_run()
            p = run("run", "deck.toml", "--set", change)
            check(p.returncode == 0 and "not resuming" in p.stderr and "output changed" in p.stderr
                  and "cvest: resuming" not in p.stderr and not leftovers(),
                  f"a changed output {what} ({change}): not resumed, says the output changed, starts over "
                  f"({p.returncode}: {[l for l in p.stderr.splitlines() if 'resuming' in l]})")
            os.remove("out.h5")

        # --no-resume starts over.
        killed_run()
        p = run("run", "deck.toml", "--no-resume")
        check(p.returncode == 0 and "resuming" not in p.stderr and same_file("out.h5", "ref.h5") and not leftovers(),
              "--no-resume starts over, identical bytes, nothing left")
        os.remove("out.h5")

        # SIGTERM keeps the temporary file and journal; the next run continues.
        if os.path.exists("out.h5"):
            os.remove("out.h5")
        p = start("run", "deck.toml", fault="slow_write")  # 0.3 s a block: SIGTERM lands mid-run
        while p.poll() is None:
            journals = glob.glob(".out.h5.tmp-*.journal-0")
            if journals and os.path.getsize(journals[0]) > 400 + 40 * 2:
                break
            time.sleep(0.01)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate()
        kept = glob.glob(".out.h5.tmp-*")
        check(p.returncode == -signal.SIGTERM and len(kept) == 2 and "run the same deck again" in err,
              f"SIGTERM keeps the temporary file and its journal ({p.returncode}, {kept})")
        p = run("run", "deck.toml")
        check(p.returncode == 0 and "cvest: resuming" in p.stderr and resumed_blocks(p.stderr) > 0
              and same_file("out.h5", "ref.h5") and not leftovers(),
              f"after SIGTERM the next run resumes ({resumed_blocks(p.stderr)} blocks) to identical bytes")

        # A failed fsync: exit 3, nothing at the final path, an existing output untouched.
        before = open("out.h5", "rb").read()
        p = run("run", "deck.toml", "--set", "output.overwrite=true", fault="fsync")
        lines = [l for l in p.stderr.splitlines() if "error" in l]
        check(p.returncode == 3 and len(lines) == 1 and "sync failed" in lines[0] and open("out.h5", "rb").read() == before
              and not leftovers(), f"fsync fails: exit 3, one line, the existing output untouched ({p.returncode}, {lines})")
        os.remove("out.h5")
        p = run("run", "deck.toml", fault="fsync")
        check(p.returncode == 3 and not os.path.exists("out.h5") and not leftovers(),
              "fsync fails on a new output: exit 3, nothing at the output path")

        # A write that fails with EIO or ENOSPC: exit 3, one line, an existing output untouched.
        for fault, says in (("write_eio", "Input/output error"), ("write", "No space left on device")):
            run("run", "deck.toml", "--set", "output.overwrite=true")
            before = open("out.h5", "rb").read()
            p = run("run", "deck.toml", "--set", "output.overwrite=true", fault=fault)
            lines = [l for l in p.stderr.splitlines() if "error" in l]
            check(p.returncode == 3 and len(lines) == 1 and says in lines[0] and open("out.h5", "rb").read() == before
                  and not leftovers(), f"a write fails ({says}): exit 3, one line, the existing output untouched ({lines})")
        os.remove("out.h5")

        # Compressed output: killed mid-run (0.3 s a block), the next run says
        # it starts over, finishes with the right data, leaves nothing.
        p = start("run", "deck.toml", "--set", "output.compression=gzip", fault="slow_write")
        deadline = time.monotonic() + 60
        while not glob.glob(".out.h5.tmp-*") and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(0.5)
        p.send_signal(signal.SIGKILL)
        p.wait()
        check(p.returncode == -signal.SIGKILL and len(glob.glob(".out.h5.tmp-*")) == 1 and not os.path.exists("out.h5"),
              f"a compressed run killed mid-run leaves its temporary file ({p.returncode}, {glob.glob('.out.h5.tmp-*')})")
        p = run("run", "deck.toml", "--set", "output.compression=gzip")
        check(p.returncode == 0 and "compressed output is not resumed" in p.stderr and "resuming" not in p.stderr
              and same_file("out.h5", "ref.h5") and not leftovers(),
              "the next run says it starts over, and finishes with identical data, nothing left")
    else:
        check(False, f"unknown case {case}")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
