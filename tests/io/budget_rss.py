#!/usr/bin/env python3
"""Peak RSS of a whole `cvest run` process stays within memory_budget plus the
fixed overhead README states (64 MiB: the program, Kokkos, HDF5), whatever
the deck: several jobs (they once kept freed buffers, 331 MiB under a 256 MiB
budget), both pipelines, both layouts, blocks as large as the budget allows
(max_block = 0), and the verification after them.

    budget_rss.py CVEST_BINARY
"""
import os
import subprocess
import sys
import tempfile

from cvest_deck import ENV

cvest = sys.argv[1]
MiB = 1 << 20
OVERHEAD = 64 * MiB


def peak_rss(args, cwd):
    """Runs a command; returns (exit code, its peak RSS in bytes, stderr)."""
    with open(os.path.join(cwd, "stderr.txt"), "w") as err:
        p = subprocess.Popen(args, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
    with open(os.path.join(cwd, "stderr.txt")) as err:
        return os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024, err.read()


failures = 0
with tempfile.TemporaryDirectory(prefix="cvest-rss-") as work:
    subprocess.run([cvest, "generate", "-T", "50", "-N", "200000", "-K", "5", "--out", "in.h5"], cwd=work, env=ENV,
                   check=True, stdout=subprocess.DEVNULL)
    # blocks as large as the budget allows (buffers made anew job by job),
    # 2 MiB blocks (buffers kept from job to job, both layouts' beside each
    # other), and a compressed output (the codecs' own working memory per thread)
    blosc = 'compression = "blosc"\ncodec = "zstd"\n'
    for pipeline, budget, max_block, output in (("auto", "256MiB", "0", ""), ("auto", "96MiB", "0", ""),
                                                ("overlapped", "256MiB", "0", ""), ("overlapped", "96MiB", "0", ""),
                                                ("auto", "48MiB", '"2MiB"', ""), ("auto", "96MiB", "0", blosc),
                                                ("overlapped", "48MiB", '"2MiB"', blosc)):
            with open(os.path.join(work, "deck.toml"), "w") as f:
                f.write(f'[input]\nfile = "in.h5"\n[output]\nfile = "cv.h5"\noverwrite = true\n{output}[run]\n'
                        'strategy = ["flat", "per_date", "per_id", "elementwise"]\nlayout = "all"\n'
                        f'memory_budget = "{budget}"\nmax_block = {max_block}\npipeline = "{pipeline}"\nverify = true\n')
            code, rss, err = peak_rss([cvest, "run", "deck.toml"], work)
            limit = int(budget[:-3]) * MiB + OVERHEAD
            # under AddressSanitizer (CI's checking build) the runs must
            # succeed, but its shadow memory and quarantine are not cvest's RSS
            judged = not os.environ.get("CVEST_SANITIZED")
            ok = code == 0 and (rss <= limit or not judged)
            print(f"{'ok' if ok else 'FAIL'} pipeline={pipeline} budget={budget} max_block={max_block}"
                  f"{' blosc-zstd output' if output else ''}: 8 jobs + verify, peak RSS "
                  f"{rss / MiB:.1f} MiB (limit {limit / MiB:.0f} MiB{'' if judged else ', not judged under a sanitizer'})"
                  f"{'' if code == 0 else f'; exit {code}: {err}'}")
            failures += not ok
sys.exit(1 if failures else 0)
