#!/usr/bin/env python3
"""One deck over several MPI ranks writes the same output as one process.

    mpi.py CVEST_BINARY identical|compressed|failures|first_use

identical: decks covering both layouts, both precisions, the per-thread and
  overlapped pipelines, every strategy, and uneven splits (more ranks than
  blocks, N not divisible by the ranks), each run as one plain process and
  under `mpiexec -n 1, 2, 4` (oversubscribed on a small machine): the whole
  output file is byte-identical (uncompressed output is written at its file
  offsets by every rank; metadata by rank 0).
compressed: gzip, lzf, Blosc and bitshuffle-LZ4 outputs (chunks compressed by every rank, stored by
  rank 0) read back bit-identical to one process's, store every chunk byte
  for byte as it does (compressed bytes and filter mask; where each chunk
  lies in the file may differ), and verify.
failures: one rank's input unreadable, the disk full on one rank, a rank
  killed (CVEST_FAULT, io/os/Faults.hpp): the same exit code from mpiexec, one
  line naming the rank, nothing at the output path, no temporary file left
  (after a kill: removed by the next run, which succeeds), and no hang (every
  run has a timeout).
first_use: flat's choices measured on first use under 2 ranks: measured
  once (in turns), said once, recorded once; the next run measures nothing.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from checks import check, failures, first_use_lines

cvest, case = sys.argv[1], sys.argv[2]
mpiexec = shutil.which("mpiexec")
# OpenMPI in containers and CI: run as root, more ranks than cores, no
# binding; leak checks off under the sanitizer build (OpenMPI's own
# allocations live until exit).
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_hwloc_base_binding_policy="none",
           ASAN_OPTIONS="detect_leaks=0:" + os.environ.get("ASAN_OPTIONS", ""))
env.pop("OMP_PROC_BIND", None)
env.pop("OMP_PLACES", None)
TIMEOUT = 120


def run(args, ranks=None, extra_env=None, expect=0):
    cmd = ([mpiexec, "-q", "-n", str(ranks)] if ranks else []) + [cvest] + args
    try:
        p = subprocess.run(cmd, env=dict(env, **(extra_env or {})), capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        check(False, f"{' '.join(cmd)} finished within {TIMEOUT} s (hung)")
        return None
    if expect is not None and p.returncode != expect:
        print(p.stdout[-2000:], p.stderr[-3000:])
    return p


def deck(folder, name, input_file, **sections):
    sections.setdefault("output", {})
    sections["output"] = dict({"file": f'"{name}.h5"'}, **sections["output"])
    text = f'[input]\nfile = "{input_file}"\n'
    for section, keys in sections.items():
        text += f"[{section}]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items())
    path = os.path.join(folder, name + ".toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def same_values(a, b):
    import h5py
    import numpy
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        x, y = fa["cv"][...], fb["cv"][...]
        return x.dtype == y.dtype and x.shape == y.shape and numpy.array_equal(x.view(numpy.uint8), y.view(numpy.uint8))


def same_chunks(a, b):
    """Every stored chunk of cv, compressed bytes and filter mask, the same in
    both files (where in the file each lies may differ: ranks store them as
    they come)."""
    import h5py
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        x, y = fa["cv"], fb["cv"]
        if x.chunks != y.chunks or x.shape != y.shape or x.compression != y.compression:
            return False
        n = x.id.get_num_chunks()
        if n != y.id.get_num_chunks() or n == 0:
            return False
        for i in range(n):
            offset = x.id.get_chunk_info(i).chunk_offset
            if x.id.read_direct_chunk(offset) != y.id.read_direct_chunk(offset):
                return False
        return True


def leftovers(folder):
    return [p for p in glob.glob(os.path.join(folder, ".*tmp-*"))]


with tempfile.TemporaryDirectory() as tmp:
    if mpiexec is None:
        check(False, "mpiexec on PATH (scripts/setup installs openmpi-bin)")
        sys.exit(1)
    # N = 10001 divides by none of 2 and 4; 3 dates: 4 ranks outnumber a
    # LayoutRight plan's date blocks.
    for name, args in [("d3", ["-T", "3", "-N", "10001", "-K", "3"]),
                       ("f7", ["-T", "7", "-N", "20011", "-K", "5", "--precision", "float"])]:
        p = run(["generate", *args, "-o", os.path.join(tmp, name + ".h5")])
        check(p is not None and p.returncode == 0, f"generate {name}")

    if case == "identical":
        decks = [
            # every strategy on both layouts, blocks of 2 MiB or less
            (deck(tmp, "all_strategies", "d3.h5", run={"strategy": '"all"', "layout": '"all"',
                                                        "memory_budget": '"8MiB"'}), {}),
            # float, many small blocks, the per-thread pipeline on 2 threads a rank
            (deck(tmp, "per_thread", "f7.h5", run={"strategy": '["flat", "per_date"]', "layout": '"all"',
                                                    "memory_budget": '"32MiB"', "max_block": '"256KiB"',
                                                    "pipeline": '"per_thread"'}),
             {"OMP_NUM_THREADS": "2"}),
            # the overlapped pipeline, blocks as large as the budget allows, float
            (deck(tmp, "overlapped", "f7.h5", run={"strategy": '"per_id"', "layout": '["left", "right"]',
                                                    "max_block": "0", "pipeline": '"overlapped"'}), {}),
            # more ranks than blocks: one block of the whole cube
            (deck(tmp, "one_block", "d3.h5", run={"strategy": '"flat"', "max_block": "0"}), {}),
        ]
        for path, extra in decks:
            name = os.path.basename(path)[:-5]
            ref = os.path.join(tmp, name + "-one.h5")
            p = run(["run", path, "--set", f"output.file={name}-one.h5"], extra_env=extra)
            check(p is not None and p.returncode == 0, f"{name}: one process")
            for ranks in (1, 2, 4):
                out = f"{name}-{ranks}.h5"
                p = run(["run", path, "--set", f"output.file={out}"], ranks=ranks, extra_env=extra)
                ok = p is not None and p.returncode == 0
                check(ok, f"{name}: mpiexec -n {ranks} exits 0")
                if ok:
                    check(same_bytes(ref, os.path.join(tmp, out)), f"{name}: -n {ranks} output byte-identical to one process's")
                    check(f"{ranks} ranks" in p.stderr or ranks == 1, f"{name}: -n {ranks} says how many ranks ran")
        # Rank 0's report: every rank's figures, and the split --plan shows.
        path = decks[0][0]
        p = run(["run", path, "--set", "output.file=report.h5", "--set", "report.json=report.json"], ranks=2)
        check(p is not None and p.returncode == 0, "report: mpiexec -n 2 with a JSON report exits 0")
        if p is not None and p.returncode == 0:
            import json
            with open(os.path.join(tmp, "report.json")) as f:
                report = json.load(f)
            check(report["ranks"] == 2, "report: ranks = 2")
            one = run(["run", path, "--set", "output.file=report-one.h5", "--set", "report.json=report-one.json"])
            check(one is not None and one.returncode == 0, "report: one process with a JSON report exits 0")
            with open(os.path.join(tmp, "report-one.json")) as f:
                jobs_one = [(j["strategy"], j["layout"]) for j in json.load(f)["jobs"]]
            jobs = [(j["strategy"], j["layout"]) for j in report["jobs"]]
            check(len(jobs) > 1 and jobs == jobs_one, f"report: every job of the deck, as one process reports ({jobs})")
            for job in report["jobs"]:
                blocks = len(report["block_plans"][job["layout"]]["blocks"])
                ok = (len(job["per_rank"]) == 2 and sum(r["blocks"] for r in job["per_rank"]) == blocks
                      and job["load_balance"] >= 1 and job["seconds"]["total"] == max(r["total_s"] for r in job["per_rank"]))
                check(ok, f"report: {job['strategy']}/{job['layout']} has both ranks' figures, every block once")
            shares = report["block_plans"]["right"]["rank_blocks"]
            check(shares[0][0] == 0 and shares[0][1] == shares[1][0] and shares[1][1] == len(report["block_plans"]["right"]["blocks"]),
                  "report: rank_blocks cover the plan, rank by rank")
            check("slowest rank" in p.stdout and "load balance" in p.stdout, "table: slowest rank and load balance")
        p = run(["run", path, "--plan"], ranks=2)
        check(p is not None and p.returncode == 0 and "ranks   LayoutRight: 2 ranks, blocks by rank [0, " in p.stdout,
              "--plan under 2 ranks shows each rank's blocks")
        check(not leftovers(tmp), "no temporary files left")

    elif case == "first_use":
        # A new user's empty cache folder under 2 ranks of one node: they
        # measure flat's choices in turn (app/run/RunDeck.cpp), so the first
        # measures, the second takes its records; rank 0 says it once.
        path = deck(tmp, "first_use", "d3.h5", run={"strategy": '"flat"', "layout": '"all"'})
        cache = os.path.join(tmp, "cache")
        extra = {"CVEST_FIRST_USE": "on", "CVEST_CACHE_DIR": cache}
        p = run(["run", path], ranks=2, extra_env=extra)
        said = first_use_lines(p.stdout) if p else []
        check(p is not None and p.returncode == 0 and len(said) == 1 and "flat measured in " in said[0],
              f"first use: mpiexec -n 2 measures and rank 0 says it once ({said})")
        # In turns, the second rank finds the first's records (where they were
        # kept: a busy machine's are not, and then each rank measures).
        check(not said or "), recorded" not in said[0] or "ranks measured" not in said[0],
              f"first use: one rank of the node measured, the other took its records ({said})")
        if said and "), recorded" in said[0]:
            import json
            with open(os.path.join(cache, "flat-walks.json")) as f:
                records = json.load(f)["records"]
            mine = [r for r in records if r.get("by") == "first use" and r.get("precision") == "double"]
            check(len(mine) == len({r["walk"] for r in mine}) and len(mine) >= 1,
                  f"first use: each choice recorded once, not once a rank ({[(r['walk'], r['key']) for r in mine]})")
            again = run(["run", path, "--set", "output.file=first_use-2.h5"], ranks=2, extra_env=extra)
            check(again is not None and again.returncode == 0 and "first use: " not in again.stdout,
                  "first use: the next run under 2 ranks measures nothing")
        p = run(["run", path, "--set", "output.file=first_use-3.h5"], ranks=2,
                extra_env=dict(extra, CVEST_FIRST_USE="maybe"), expect=None)
        check(p is not None and p.returncode != 0 and p.stderr.count("CVEST_FIRST_USE") == 1,
              f"first use: a bad CVEST_FIRST_USE under 2 ranks is one error line ({p.stderr[-300:] if p else ''})")
        check(not leftovers(tmp), "first use: no temporary files left")

    elif case == "compressed":
        for compression, settings in (("gzip", {}), ("lzf", {}), ("blosc", {"codec": '"zstd"', "shuffle": '"bit"'}),
                                      ("bitshuffle-lz4", {})):
            path = deck(tmp, compression, "f7.h5", output={"compression": f'"{compression}"', **settings},
                        run={"strategy": '["flat", "team"]', "layout": '"all"', "memory_budget": '"4MiB"'})
            p = run(["run", path, "--set", f"output.file={compression}-one.h5"])
            check(p is not None and p.returncode == 0, f"{compression}: one process")
            for ranks in (2, 4):
                out = f"{compression}-{ranks}.h5"
                p = run(["run", path, "--set", f"output.file={out}"], ranks=ranks)
                ok = p is not None and p.returncode == 0
                check(ok, f"{compression}: mpiexec -n {ranks} exits 0")
                if ok:
                    check(same_values(os.path.join(tmp, f"{compression}-one.h5"), os.path.join(tmp, out)),
                          f"{compression}: -n {ranks} reads back bit-identical to one process's")
                    check(same_chunks(os.path.join(tmp, f"{compression}-one.h5"), os.path.join(tmp, out)),
                          f"{compression}: -n {ranks} stores every chunk byte for byte as one process does "
                          "(compressed bytes and filter mask)")
                    v = run(["verify", os.path.join(tmp, out), "--input", os.path.join(tmp, "f7.h5")])
                    check(v is not None and v.returncode == 0, f"{compression}: -n {ranks} output verifies")
        check(not leftovers(tmp), "no temporary files or part files left")

    elif case == "failures":
        path = deck(tmp, "fail", "d3.h5", run={"strategy": '["flat", "per_id"]', "layout": '"all"',
                                                "memory_budget": '"4MiB"'})
        gz = deck(tmp, "fail_gzip", "d3.h5", output={"compression": '"gzip"'}, run={"memory_budget": '"4MiB"'})
        for what, fault, deck_path, code, says in [
                ("rank 1's input unreadable", "open_input@1", path, 2, "rank 1 of 2: "),
                ("disk full on rank 1", "write@1", path, 3, "rank 1 of 2: "),
                ("disk full on rank 0", "write@0", path, 3, "rank 0 of 2: "),
                ("disk full on rank 1, gzip output", "write@1", gz, 3, "rank 1 of 2: ")]:
            out = os.path.join(tmp, os.path.basename(deck_path)[:-5] + ".h5")
            p = run(["run", deck_path], ranks=2, extra_env={"CVEST_FAULT": fault}, expect=code)
            if p is None:
                continue
            check(p.returncode == code, f"{what}: mpiexec exits {code} (got {p.returncode})")
            lines = [l for l in p.stderr.splitlines() if l.startswith("cvest: ") and ("error" in l or "mismatch" in l)]
            check(len(lines) == 1 and says in lines[0], f"{what}: one line naming the rank ({lines})")
            check(not os.path.exists(out), f"{what}: nothing at the output path")
            check(not leftovers(tmp), f"{what}: no temporary file left")
        # A rank killed: mpiexec ends the others; the next run cleans up and succeeds.
        out = os.path.join(tmp, "fail.h5")
        p = run(["run", path], ranks=2, extra_env={"CVEST_FAULT": "kill@0"}, expect=None)
        if p is not None:
            check(p.returncode != 0, f"rank 0 killed: mpiexec exits non-zero (got {p.returncode})")
            check(not os.path.exists(out), "rank 0 killed: nothing at the output path")
            p = run(["run", path], ranks=2)
            check(p is not None and p.returncode == 0 and "no longer runs" in p.stderr,
                  "after the kill, the next run removes what it left and succeeds")
            check(not leftovers(tmp), "after the rerun, no temporary file left")
        os.remove(out)
        p = run(["run", path], ranks=2, extra_env={"CVEST_FAULT": "kill@1"}, expect=None)
        if p is not None:
            check(p.returncode != 0, f"rank 1 killed: mpiexec exits non-zero (got {p.returncode})")
            check(not os.path.exists(out), "rank 1 killed: nothing at the output path")
            # mpiexec stops rank 0 with SIGTERM: it keeps the output's
            # temporary file and journal (resumable); the next run continues.
            p = run(["run", path], ranks=2)
            check(p is not None and p.returncode == 0 and os.path.exists(out) and not leftovers(tmp),
                  "rank 1 killed: the next run finishes, nothing left")
            v = run(["verify", out, "--input", os.path.join(tmp, "d3.h5")])
            check(v is not None and v.returncode == 0, "rank 1 killed: the next run's output verifies")
        # Resumed at any rank count (docs/robustness.md): a run of 2 ranks
        # whose rank 1 is killed after blocks are journaled (mpiexec then
        # stops rank 0 with SIGTERM, which keeps the file and journals),
        # continued by 1, 2 and 3 ranks: each says it resumes blocks on disk
        # and writes one process's values, nothing left beside them.
        p = run(["generate", "-T", "60", "-N", "40000", "-K", "5", "-o", os.path.join(tmp, "r60.h5")])
        check(p is not None and p.returncode == 0, "generate r60")
        rdeck = deck(tmp, "resume", "r60.h5", run={"strategy": '"flat"', "layout": '"right"', "max_block": '"64KiB"'})
        rout = os.path.join(tmp, "resume.h5")
        p = run(["run", rdeck, "--set", "output.file=resume-one.h5"])
        check(p is not None and p.returncode == 0, "resume: one process writes the reference")
        for ranks in (1, 2, 3):
            p = run(["run", rdeck], ranks=2, expect=None,
                    extra_env={"CVEST_FAULT": "kill_after_blocks=12@1", "CVEST_JOURNAL_BATCH": "1"})
            if p is None:
                continue
            killed = re.search(r"killed after 12 blocks written, (\d+) recorded", p.stderr)
            check(p.returncode != 0 and killed is not None and int(killed.group(1)) > 0 and not os.path.exists(rout),
                  f"resume: rank 1 of 2 killed after {killed.group(1) if killed else '?'} blocks recorded, "
                  f"nothing at the output path (exit {p.returncode})")
            p = run(["run", rdeck], ranks=ranks)
            if p is None:
                continue
            resumed = re.search(r"resuming .*?: (\d+) blocks", p.stderr)
            check(p.returncode == 0 and resumed is not None and killed is not None
                  and int(resumed.group(1)) >= int(killed.group(1)),
                  f"resume: mpiexec -n {ranks} resumes the blocks on disk "
                  f"({resumed.group(1) + ' blocks' if resumed else 'not said: ' + p.stderr.strip()[-200:]})")
            # The data bit for bit (the file's own layout may differ: its
            # metadata goes where the reopened file has room).
            check(p.returncode == 0 and same_values(os.path.join(tmp, "resume-one.h5"), rout),
                  f"resume: -n {ranks} writes one process's values, bit for bit")
            v = run(["verify", rout, "--input", os.path.join(tmp, "r60.h5")]) if p.returncode == 0 else None
            check(v is not None and v.returncode == 0, f"resume: -n {ranks}: the output verifies")
            check(not leftovers(tmp), f"resume: -n {ranks} leaves nothing beside the output")
            if os.path.exists(rout):
                os.remove(rout)
        # Commands other than run refuse several ranks.
        p = run(["info"], ranks=2, expect=2)
        check(p is not None and p.returncode == 2 and p.stderr.count("only 'cvest run'") == 1,
              "cvest info under mpiexec -n 2: exit 2, one line")
    else:
        check(False, f"unknown case {case}")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
