#!/usr/bin/env python3
"""flat's choices measured on first use (app/FirstUse.hpp), as a new user
meets it: an empty cache folder, no cvest tune. The first flat bench in
float measures float's three choices (records by "first use"), says so once
in its header, and `cvest info` lists them; the next bench measures nothing;
CVEST_FIRST_USE=off and a deck's [run] measure_first_use = false measure
nothing; a bad CVEST_FIRST_USE is one error line; two processes measuring
at once (one in double, one in float) both keep their records.

    first_use.py CVEST_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile
from checks import check, failures, first_use_lines, host_kernels_only

cvest = sys.argv[1]

host_kernels_only(cvest, "flat's host choices do not apply")
# A build without streaming stores measures flat/right's dates alone (its
# stores are regular and flat/left walks one stream whatever the count).
no_streaming = "this build has no streaming stores" in subprocess.run([cvest, "info"], capture_output=True,
                                                                       text=True).stdout
walks = ["right dates"] if no_streaming else ["left streams", "right dates", "stores"]

with tempfile.TemporaryDirectory(prefix="cvest-first-use-", dir=os.getcwd()) as work:
    def env_with(cache, first_use="on"):
        env = dict(os.environ, CVEST_CACHE_DIR=os.path.join(work, cache), CVEST_FIRST_USE=first_use)
        for forced in ("CVEST_FLAT_DATES", "CVEST_FLAT_STORES"):
            env.pop(forced, None)
        return env

    def bench(env, precision="float", layout="left"):
        return subprocess.run([cvest, "bench", "--dates", "8", "--ids", "2000", "--cols", "5", "--strategies", "flat",
                               "--layouts", layout, "--precision", precision, "--repeats", "1", "--warm", "0"],
                              env=env, capture_output=True, text=True, timeout=300)

    def records(cache):
        path = os.path.join(work, cache, "flat-walks.json")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return json.load(f)["records"]

    env = env_with("new-user")
    b = bench(env)
    said = [l for l in b.stdout.splitlines() if l.startswith("first use: ")]
    def recorded(line):
        """Whether a first-use line says its records were kept (not where the machine was busy)."""
        return "), recorded" in line

    def busy(line):
        return "), not recorded" in line and "the machine busy" in line

    check(b.returncode == 0 and len(said) == 1 and said[0].startswith("first use: flat measured in ")
          and ("(float: right " if no_streaming else "(float: left ") in said[0] and "right " in said[0]
          and (recorded(said[0]) or busy(said[0])),
          f"the first flat bench measures float's choices and says so once in its header ({b.returncode}: {said}, "
          f"{b.stderr.strip()[-300:]})")
    for attempt in range(3):  # a busy machine records nothing: the next bench measures again
        if not said or recorded(said[0]):
            break
        b = bench(env)
        said = [l for l in b.stdout.splitlines() if l.startswith("first use: ")]
    rec = records("new-user")
    if said and busy(said[0]):  # busy three times over (other tests beside it): nothing kept
        check(not rec, f"a busy machine's measurement is not recorded ({said[0]})")
    else:
        check(sorted(r["walk"] for r in rec) == walks
              and all(r["precision"] == "float" and r["by"] == "first use" and len(r["shapes"]) == 3 for r in rec),
              f"the records of {walks}, float's, by first use, three shapes each "
              f"({[(r['walk'], r['precision'], r['by']) for r in rec]})")
        b = bench(env)
        check(b.returncode == 0 and "first use" not in b.stdout and len(records("new-user")) == len(walks),
              f"the next bench measures nothing ({b.stdout[:300]})")
    seconds = float(said[0].split(" in ")[1].split(" s ")[0]) if said else -1
    print(f"first use took {seconds:.2f} s")
    i = subprocess.run([cvest, "info"], env=env, capture_output=True, text=True)
    check("flat measured on first use where unrecorded: on" in i.stdout
          and "flat/left streams at once (float), at most: " in i.stdout and "flat's stores (float): " in i.stdout
          and i.stdout.count("measured on first use on ") == len(rec)
          and ("(measured here on first use on " in i.stdout) == bool(rec),
          f"cvest info lists the records and what they set ({i.stdout[-900:]})")

    off = env_with("off", "off")
    b = bench(off)
    i = subprocess.run([cvest, "info"], env=off, capture_output=True, text=True)
    check(b.returncode == 0 and "first use" not in b.stdout and not records("off")
          and "flat measured on first use where unrecorded: off" in i.stdout,
          "CVEST_FIRST_USE=off: nothing measured, nothing recorded, cvest info says it is off")
    b = bench(env_with("bad", "maybe"))
    errors = [l for l in b.stderr.splitlines() if "CVEST_FIRST_USE" in l]
    check(b.returncode != 0 and len(errors) == 1 and "expected on or off" in errors[0],
          f"a bad CVEST_FIRST_USE: one error line ({b.returncode}, {errors})")

    # A run whose deck turns it off measures nothing; the same deck with it on does.
    deck_env = env_with("deck")
    deck = os.path.join(work, "deck.toml")
    with open(deck, "w") as f:
        f.write(f'[input]\nfile = "{work}/in.h5"\n[input.generate]\ndates = 4\nids = 300\ncols = 5\n'
                f'[output]\nfile = "{work}/out.h5"\noverwrite = true\n[run]\nmeasure_first_use = false\n')
    r = subprocess.run([cvest, "run", deck], env=deck_env, capture_output=True, text=True, timeout=300)
    check(r.returncode == 0 and "first use" not in r.stdout and not records("deck"),
          f"[run] measure_first_use = false: nothing measured ({r.returncode}: {r.stderr.strip()[-300:]})")
    r = subprocess.run([cvest, "run", deck, "--set", "run.measure_first_use=true"], env=deck_env, capture_output=True,
                       text=True, timeout=300)
    said = [l for l in first_use_lines(r.stdout) if l.startswith("first use: flat measured in ")]
    check(r.returncode == 0 and len(said) == 1 and (len(records("deck")) == len(walks)) == recorded(said[0]),
          f"the same deck with it on: measured, said once in the run's text ({r.returncode}: {r.stdout[:600]})")

    # Two processes measuring at once into one folder: both keep their
    # records (where their passes were steady enough to record at all: two
    # at once on two CPUs may leave either busy).
    both = env_with("both")
    runs = [subprocess.Popen([cvest, "bench", "--dates", "8", "--ids", "2000", "--cols", "5", "--strategies", "flat",
                              "--layouts", "right", "--precision", p, "--repeats", "1", "--warm", "0"],
                             env=both, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for p in ("double", "float")]
    outs = [p.communicate(timeout=300) for p in runs]
    rec = records("both")
    kept = [p for p, (o, _) in zip(("double", "float"), outs) if recorded(o)]
    check(all(p.returncode == 0 for p in runs) and all("first use: " in o for o, _ in outs)
          and sorted((r["precision"], r["walk"]) for r in rec)
          == sorted((p, w) for p in kept for w in walks),
          f"two processes at once: each measured, every record of those that recorded kept ({kept}: "
          f"{[(r['precision'], r['walk']) for r in rec]})")

sys.exit(1 if failures else 0)
