#!/usr/bin/env python3
"""What a run prints (issue 61): read in ten seconds, explained on request.

    summary.py CVEST_BINARY SOURCE_DIR

The seed deck (inputs/seed.toml, run from a copy as a user runs it):
- its default summary (stdout, after the progress lines) fits a 120-column
  terminal in at most 25 lines, and says what a user compares: the table's
  columns, where the time goes, the verdict;
- `--explain` (and `-v`) still carries every sentence the summary carried
  before (fixtures/seed_run_main.txt: main's binary on this deck, numbers
  aside; the line on flat's runs from the machine's caches and the clause on
  kernel calls a roof copy warmed, which a run may or may not have, aside);
- in a log (stderr not a terminal) progress is a line a job, and one every
  10 s at most beside them.
`cvest bench`'s summary fits 120 columns too; its --explain has the legend.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from checks import check, failures

cvest, source = sys.argv[1], sys.argv[2]
WIDTH, LINES = 120, 25
JOBS = 8  # seed.toml: four strategies x two layouts


def normal(line):
    """A line with its numbers as '#', the fastest job's name as JOB (a run's may differ from main's), the clause a
    run may lack removed, spaces as one."""
    line = re.sub(r" \([0-9.]+ as run: the calls right after a roof copy ran from the caches it filled; counted at "
                  r"the others' speed\)", "", line)
    line = re.sub(r"^where the time goes \([a-z_]+/[a-z]+,", "where the time goes (JOB,", line)
    return " ".join(re.sub(r"[0-9]+(\.[0-9]+)?", "#", line).split())


def sentences(text):
    """Each line's parts between '; ' (the table's rows and the legend's clauses alike)."""
    return [part for line in text.splitlines() if line.strip() and not line.startswith("flat's runs on the host: ")
            for part in normal(line).split("; ")]


with tempfile.TemporaryDirectory(prefix="cvest-summary-", dir=os.getcwd()) as work:
    os.makedirs(os.path.join(work, "inputs"))
    shutil.copy(os.path.join(source, "inputs", "seed.toml"), os.path.join(work, "inputs"))

    def run(*args):
        began = time.monotonic()
        r = subprocess.run([cvest, *args], cwd=work, capture_output=True, text=True, timeout=300)
        return r, time.monotonic() - began

    r, wall = run("run", "inputs/seed.toml")
    lines = r.stdout.splitlines()
    widest = max((len(l) for l in lines), default=0)
    check(r.returncode == 0, f"the seed deck runs ({r.returncode}: {r.stderr.strip()[-300:]})")
    check(widest <= WIDTH, f"no line of the summary past {WIDTH} columns (widest {widest})")
    check(len(lines) <= LINES, f"the summary in at most {LINES} lines ({len(lines)})")
    rows = [l for l in lines if re.match(r"^(flat|per_date|per_id|elementwise) +(right|left) ", l)]
    check(len(rows) == JOBS and any(re.match(r"^strategy +layout +total s .* GB/s +x roof +\(95%\) +peak RSS +verified$", l)
                                     for l in lines),
          f"the table: strategy, layout, seconds, GB/s, x roof with its interval, peak RSS, verified ({len(rows)} rows)")
    check(any(l.startswith("input   ") for l in lines) and any(l.startswith("output  ") for l in lines),
          "a line each for how the input was read and the output written")
    check(any(l.startswith("where the time goes") for l in lines)
          and any(l.startswith("verdict: ") and "output verified" in l for l in lines),
          "where the time goes, and the verdict: verified")
    progress = [l for l in r.stderr.splitlines() if re.match(r"^\S+/\S+ block \d+/\d+ ", l)]
    jobs = {l.split()[0] for l in progress}
    check(len(jobs) == JOBS and len(progress) <= JOBS + int(wall / 10),
          f"in a log, a progress line a job and one every 10 s at most ({len(progress)} lines, {len(jobs)} jobs, "
          f"{wall:.1f} s)")
    print("\n".join(lines))

    fixture = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "seed_run_main.txt")).read()
    for flag in ("--explain", "-v"):
        e, _ = run("run", "inputs/seed.toml", flag)
        now = set(sentences(e.stdout))
        missing = [s for s in sentences(fixture) if s not in now]
        check(e.returncode == 0 and not missing,
              f"{flag}: every sentence main printed for the seed deck ({len(missing)} missing: {missing[:3]})")
        check(any(l.startswith("flat's runs on the host: ") for l in e.stdout.splitlines())
              == any(l.startswith("flat's runs on the host: ") for l in fixture.splitlines()),
              f"{flag}: flat's runs on the host, where main said them")

    b, _ = run("bench", "-T", "4", "-N", "5000", "-K", "5", "--strategies", "flat,per_id", "--repeats", "1",
               "--warm", "0")
    widest = max((len(l) for l in b.stdout.splitlines()), default=0)
    check(b.returncode == 0 and widest <= WIDTH and "best: " in b.stdout,
          f"cvest bench: its summary within {WIDTH} columns (widest {widest}), the best row")
    b, _ = run("bench", "-T", "4", "-N", "5000", "-K", "5", "--strategies", "flat,per_id", "--repeats", "1",
               "--warm", "0", "--explain")
    check(b.returncode == 0 and "\nroof: GB/s of the kind of copy of the row's bytes" in b.stdout
          and "work items" in b.stdout, "cvest bench --explain: the full table and its legend")

sys.exit(1 if failures else 0)
