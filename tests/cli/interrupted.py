#!/usr/bin/env python3
"""A cvest stopped by a signal leaves nothing half-written: SIGINT (Ctrl-C)
or SIGTERM (a batch scheduler) during `cvest run` (where SIGTERM lands after
the output's resume journal exists, the temporary file and journal stay,
and the next run continues), and SIGHUP during
`cvest generate`, end the process with that signal and leave no temporary
file, no output and no report. A SIGINT that the parent ignores (nohup, a
background job) stays ignored: the run finishes and writes its output. A
SIGINT, SIGTERM or SIGHUP during a run that would replace an existing
output leaves that output and its reports as they were.
SIGTERM at each of the output's steps (its journal just made, its journal
gone, its seal written) keeps the file only beside a record that resumes it.
SIGKILL cannot be caught: the temporary file it leaves (and its unlocked
lock file) are removed by the next run to the same output, which then
completes.

    interrupted.py CVEST_BINARY
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
env = dict(os.environ, OMP_PROC_BIND="spread", OMP_PLACES="threads")


def signal_when_temp_appears(cmd, folder, sig, ignore_sigint=False):
    """Starts cmd, sends sig once a temporary file appears in folder; returns
    (returncode, stderr, whether the signal was sent while it ran)."""
    def child_setup():
        if ignore_sigint:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         preexec_fn=child_setup)
    sent = False
    deadline = time.monotonic() + 30
    while p.poll() is None and time.monotonic() < deadline:
        if glob.glob(os.path.join(folder, ".*.tmp-*")):
            p.send_signal(sig)
            sent = True
            break
        time.sleep(0.002)
    _, err = p.communicate(timeout=120)
    return p.returncode, err, sent


with tempfile.TemporaryDirectory(prefix="cvest-signal-") as work:
    src = os.path.join(work, "in.h5")
    subprocess.run([cvest, "generate", "--dates", "40", "--ids", "200000", "--cols", "5", "--out", src], env=env,
                   check=True, capture_output=True)
    out = os.path.join(work, "out")
    os.makedirs(out)
    deck = os.path.join(work, "deck.toml")
    with open(deck, "w") as f:
        f.write(f'[input]\nfile = "{src}"\n[output]\nfile = "out/cv.h5"\n'
                '[run]\nstrategy = ["one_worker", "flat"]\nlayout = "left"\nrepeats = 4\nmax_block = "256KiB"\n'
                'verify = true\n[report]\njson = "out/report.json"\ncsv = "out/report.csv"\n')

    for sig in (signal.SIGINT, signal.SIGTERM):
        rc, err, sent = signal_when_temp_appears([cvest, "run", deck], out, sig)
        left = sorted(os.listdir(out))
        check(sent and rc == -sig, f"run, {sig.name} while writing: exit {rc} (expected {-sig}), signal sent: {sent}")
        if sig == signal.SIGTERM and left:
            # A scheduler's SIGTERM after the output's journal exists keeps
            # the temporary file and journal for the next run, saying so; that
            # run resumes and leaves nothing else.
            kept = len(left) == 2 and left[0].startswith(".cv.h5.tmp-") and left[1].endswith(".journal-0")
            check(kept and "run the same deck again" in err, f"run, SIGTERM: the resumable output kept ({left})")
            rerun = subprocess.run([cvest, "run", deck], env=env, capture_output=True, text=True)
            resumed = "cvest: resuming" in rerun.stderr and "not resuming" not in rerun.stderr
            check(rerun.returncode == 0 and resumed
                  and sorted(os.listdir(out)) == ["cv.h5", "report.csv", "report.json"],
                  f"run after SIGTERM: resumes and completes ({resumed}), nothing else left")
            for name in os.listdir(out):
                os.remove(os.path.join(out, name))
        else:
            check(left == [], f"run, {sig.name}: nothing left in the output folder (found {left})")

    # SIGTERM at the output's own steps (CVEST_FAULT=terminate_at): its
    # journal made but holding no block yet, nothing could resume the file:
    # nothing kept, nothing said (a SIGTERM there once left the journal
    # alone); once the journal records blocks, the file and journal are kept
    # and the next run resumes them; between the journal's removal and the
    # seal nothing is kept; once sealed (a compressed output too), the file
    # and its seal are kept and the next run puts it in place.
    gz_deck = os.path.join(work, "deck-gzip.toml")
    with open(deck) as f, open(gz_deck, "w") as g:
        g.write(f.read().replace("[output]\n", '[output]\ncompression = "gzip"\n'))
    for d, when, record, again in ((deck, "journal_made", None, None),
                                   (deck, "recorded", ".journal-0", "cvest: resuming"),
                                   (deck, "journal_gone", None, None),
                                   (deck, "sealed", ".sealed", "putting it in place"),
                                   (gz_deck, "sealed", ".sealed", "putting it in place")):
        p = subprocess.run([cvest, "run", d], env=dict(env, CVEST_FAULT=f"terminate_at=output.{when}",
                                                          CVEST_JOURNAL_BATCH="1MiB"),
                           capture_output=True, text=True)
        when = when + (" (gzip)" if d == gz_deck else "")
        left = sorted(os.listdir(out))
        said = "run the same deck again" in p.stderr
        if record:
            kept = len(left) == 2 and left[0].startswith(".cv.h5.tmp-") and left[1] == left[0] + record
            check(p.returncode == -signal.SIGTERM and kept and said,
                  f"SIGTERM at output.{when}: exit {p.returncode}, the file and its {record[1:]} kept ({left}), "
                  f"said so: {said}")
            rerun = subprocess.run([cvest, "run", d], env=env, capture_output=True, text=True)
            check(rerun.returncode == 0 and again in rerun.stderr and "not resuming" not in rerun.stderr
                  and sorted(os.listdir(out)) == ["cv.h5", "report.csv", "report.json"],
                  f"SIGTERM at output.{when}: the next run says '{again}' and completes, nothing else left")
            for name in os.listdir(out):
                os.remove(os.path.join(out, name))
        else:
            check(p.returncode == -signal.SIGTERM and left == [] and not said,
                  f"SIGTERM at output.{when}: exit {p.returncode}, nothing left ({left}), no file said kept ({said})")

    gen = os.path.join(work, "gen")
    os.makedirs(gen)
    rc, err, sent = signal_when_temp_appears([cvest, "generate", "--dates", "60", "--ids", "200000", "--cols", "5",
                                              "--out", os.path.join(gen, "big.h5")], gen, signal.SIGHUP)
    left = sorted(os.listdir(gen))
    check(sent and rc == -signal.SIGHUP, f"generate, SIGHUP: exit {rc} (expected {-signal.SIGHUP}), signal sent: {sent}")
    check(left == [], f"generate, SIGHUP: nothing left (found {left})")

    rc, err, sent = signal_when_temp_appears([cvest, "run", deck], out, signal.SIGINT, ignore_sigint=True)
    left = sorted(os.listdir(out))
    check(sent and rc == 0, f"run with SIGINT ignored: exit {rc} (expected 0), signal sent: {sent}"
          + (f": {err.strip()[-300:]}" if rc else ""))
    check(left == ["cv.h5", "report.csv", "report.json"], f"run with SIGINT ignored: output and reports written ({left})")

    # A signal during a run that would replace an existing output (and its
    # reports) leaves them as they were.
    before = {name: open(os.path.join(out, name), "rb").read() for name in left}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        rc, err, sent = signal_when_temp_appears([cvest, "run", deck, "--set", "output.overwrite=true"], out, sig)
        kept = {name: open(os.path.join(out, name), "rb").read() for name in before}
        check(sent and rc == -sig and kept == before,
              f"run replacing an output, {sig.name}: exit {rc}, the output and reports untouched ({kept == before})")
        for name in glob.glob(os.path.join(out, ".cv.h5.*")):  # SIGTERM's resumable temporary and journal
            os.remove(name)

    for name in os.listdir(out):
        os.remove(os.path.join(out, name))
    rc, err, sent = signal_when_temp_appears([cvest, "run", deck], out, signal.SIGKILL)
    left = sorted(os.listdir(out))
    # The lock file stays too, unlocked (the kernel drops a killed process's
    # locks): the next run takes it, and removes it when done.
    # (A kill while its journal is being written leaves that one's temporary
    # name too, ".journal-0.new"; the next run removes it with the rest.)
    left = [f for f in left if not f.endswith(".journal-0.new")]
    check(sent and rc == -signal.SIGKILL and len(left) in (2, 3) and left[0] == ".cv.h5.lock"
          and all(f.startswith(".cv.h5.tmp-") for f in left[1:]),
          f"run, SIGKILL: exit {rc}, its temporary and lock files stay behind ({left})")
    rerun = subprocess.run([cvest, "run", deck], env=env, capture_output=True, text=True)
    after = sorted(os.listdir(out))
    check(rerun.returncode == 0 and after == ["cv.h5", "report.csv", "report.json"] and "removed" in rerun.stderr,
          f"the next run removes it and completes: exit {rerun.returncode}, {after}, "
          f"says so: {'removed' in rerun.stderr}")

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
