#!/usr/bin/env python3
"""scripts/plot on the reports cvest writes: a run report gives the jobs
figure (every job in it) and the timeline of the job that wrote the output
(every span of it); a bench report gives one strategies figure per precision
(every strategy x layout). Each PNG is a real PNG, and each figure (built
again through report_plots' *_figure functions, the ones the PNGs are saved
from) draws the report's own numbers: every job's wall seconds and kernel
fraction of the roof, every span of the timeline where it ran, every row's
GB/s. A file that is not a report, and a --job out of range, get exit 2 and
one line naming the file.

    plot_reports.py CVEST_BINARY PLOT_SCRIPT
"""
import json
import os
import subprocess
import sys
import tempfile

cvest, plot = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(os.path.abspath(plot)))
import report_plots  # noqa: E402
env = dict(os.environ, OMP_PROC_BIND="spread", OMP_PLACES="threads")
failures = []


def run(cmd):
    return subprocess.run(cmd, env=env, capture_output=True, text=True)


def check(ok, what):
    print(f"{'ok' if ok else 'FAIL'}: {what}")
    if not ok:
        failures.append(what)


def is_png(path):
    try:
        with open(path, "rb") as f:
            return f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 10_000
    except OSError:
        return False


with tempfile.TemporaryDirectory(prefix="cvest-plot-") as work:
    deck = os.path.join(work, "deck.toml")
    with open(deck, "w") as f:
        f.write('[input]\nfile = "in.h5"\ngenerate = { dates = 8, ids = 20000, cols = 5 }\n[output]\nfile = "cv.h5"\n'
                '[run]\nstrategy = ["flat", "per_id"]\nlayout = "all"\nmemory_budget = "8MiB"\n'
                '[report]\njson = "run.json"\n')
    r = run([cvest, "run", deck])
    check(r.returncode == 0, f"cvest run exit {r.returncode}" + (f": {r.stderr.strip()[-300:]}" if r.returncode else ""))
    report = json.load(open(os.path.join(work, "run.json")))
    figs = os.path.join(work, "figs")
    r = run([plot, os.path.join(work, "run.json"), "--out", figs])
    check(r.returncode == 0, f"plot run.json exit {r.returncode} {r.stderr.strip()}")
    lines = r.stdout.splitlines()
    jobs_line = next((l for l in lines if l.startswith("run.jobs.png:")), "")
    for j in report["jobs"]:
        label = f"{j['strategy']}/{j['layout']}/{j['precision']} {j['seconds']['total']:.3f} s"
        check(label in jobs_line, f"jobs figure has {label}")
    writer = next(j for j in report["jobs"] if j["wrote_output"])
    spans = len(writer["timeline"])
    check(any(l.startswith(f"run.timeline.png: {spans} spans over {writer['blocks']} blocks")
              for l in lines), f"timeline figure has the writing job's {spans} spans")
    if writer["layout"] == "right" and report["backend"] != "Cuda":  # computed in place: no h2d, d2h lanes
        check(any(l.startswith("run.timeline.png:") and l.endswith("lanes read, kernel, write") for l in lines),
              "timeline of a host LayoutRight job has lanes read, kernel, write only")
    for name in ("run.jobs.png", "run.timeline.png"):
        check(is_png(os.path.join(figs, name)), f"{name} is a PNG")
    # What the figures draw: the report's numbers, bar by bar.
    fig = report_plots.jobs_figure(report)
    walls = [b.get_height() for b in fig.axes[0].containers[0]]
    fractions = [b.get_height() for b in fig.axes[1].patches]
    check(walls == [j["seconds"]["total"] for j in report["jobs"]], f"jobs figure: each job's wall seconds ({walls})")
    check(fractions == [j["kernel_roof_fraction"] for j in report["jobs"]],
          f"jobs figure: each job's kernel fraction of its roof ({fractions})")
    fig = report_plots.timeline_figure(writer["timeline"], "t")
    drawn = sorted((round(b.get_x(), 9), round(b.get_width(), 9)) for b in fig.axes[0].patches)
    lanes = report_plots.timeline_lanes(writer["timeline"])
    spans_drawn = sorted((round(s["begin_s"], 9), round(max(s["end_s"] - s["begin_s"], 1e-5), 9))
                         for s in writer["timeline"] if s["phase"] in lanes)
    check(drawn == spans_drawn and len(drawn) > 0, f"timeline figure: a bar where each of {len(drawn)} spans ran")

    bench = os.path.join(work, "bench.json")
    r = run([cvest, "bench", "-T", "4", "-N", "5000", "-K", "5", "--repeats", "1", "--warm", "0", "--precision", "double,float",
             "--strategies", "flat,per_date,elementwise", "--json", bench])
    check(r.returncode == 0, f"cvest bench exit {r.returncode}")
    r = run([plot, bench, "--out", figs])
    check(r.returncode == 0, f"plot bench.json exit {r.returncode} {r.stderr.strip()}")
    for name in ("bench.strategies.png", "bench.strategies.float.png"):
        check(f"{name}: 6 bars (3 strategies x 2 layouts)" in r.stdout, f"{name} has 3 strategies x 2 layouts")
        check(is_png(os.path.join(figs, name)), f"{name} is a PNG")
    results = json.load(open(bench))
    for precision in ("double", "float"):
        rows = [x for x in results["results"] if x["precision"] == precision]
        fig = report_plots.strategies_figure(rows, results["roof"], "t")
        for container, layout in zip(fig.axes[0].containers, ("right", "left")):
            want = [next(x["GBps"] for x in rows if x["strategy"] == s and x["layout"] == layout)
                    for s in ("flat", "per_date", "elementwise")]
            check(container.get_label() == f"Layout{layout.capitalize()}" and [b.get_height() for b in container] == want,
                  f"strategies figure ({precision}): Layout{layout.capitalize()}'s bars are its rows' GB/s")

    not_report = os.path.join(work, "deck.json")
    with open(not_report, "w") as f:
        json.dump({"jobs": []}, f)
    for args, pattern in (([not_report], "deck.json: not a cvest report"),
                          ([deck], "deck.toml: not JSON"),
                          ([os.path.join(work, "run.json"), "--job", "9", "--out", figs], "run.json: --job 9")):
        r = run([plot] + args)
        check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and pattern in r.stderr,
              f"plot {os.path.basename(args[0])} {' '.join(args[1:2])}: exit {r.returncode}, '{r.stderr.strip()}'")

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
