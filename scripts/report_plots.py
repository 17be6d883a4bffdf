"""Figures from cvest's reports, shared by scripts/plot (any report) and
bench/compare (its side-by-side run). Each function draws one PNG and
returns a one-line description of what it drew, so callers and tests can
check the figure's content without reading pixels.

matplotlib is imported inside the functions: importing this module costs
nothing for callers that only read reports.
"""
import os

PHASES = ["read", "h2d", "kernel", "d2h", "write"]


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt
    return plt


def input_filters(report):
    """', gzip input' and the like when the input is filtered (older reports: nothing)."""
    filters = (report.get("input_storage") or {}).get("filters") or []
    return f", {'+'.join(filters)} input" if filters else ""


def where(report):
    """', on <the GPU or CPU>' from a report's machine facts, or ''."""
    machine = report.get("machine") or {}
    device = machine.get("gpu") if report.get("backend") == "Cuda" else machine.get("cpu")
    return f"\non {device}" if device else ""


def strategies(rows, roof, title, path):
    """Bars of effective bandwidth per strategy, one per layout, with the
    copy roofs measured in the same run. rows: dicts with strategy, layout,
    GBps, streaming_stores (a cvest bench result or bench/compare's)."""
    fig = strategies_figure(rows, roof, title)
    _save(fig, path)
    names = list(dict.fromkeys(x["strategy"] for x in rows))
    layouts = [l for l in ("right", "left") if any(x["layout"] == l for x in rows)]
    best = max(rows, key=lambda x: x["GBps"])
    return (f"{os.path.basename(path)}: {len(rows)} bars ({len(names)} strategies x {len(layouts)} layouts), "
            f"best {best['strategy']}/{best['layout']} {best['GBps']:.1f} GB/s")


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)


def strategies_figure(rows, roof, title):
    """The figure strategies() saves: one axes, a bar container per layout
    (labelled LayoutRight, LayoutLeft) in strategy order, the two roofs."""
    plt = _pyplot()
    names = list(dict.fromkeys(x["strategy"] for x in rows))
    layouts = [l for l in ("right", "left") if any(x["layout"] == l for x in rows)]
    fig, ax = plt.subplots(figsize=(10, 5))
    width = 0.8 / max(len(layouts), 1)
    for j, layout in enumerate(layouts):
        vals = [next((x["GBps"] for x in rows if x["strategy"] == s and x["layout"] == layout), 0) for s in names]
        bars = ax.bar([i + (j - (len(layouts) - 1) / 2) * width for i in range(len(names))], vals, width,
                      label=f"Layout{layout.capitalize()}")
        for b, s in zip(bars, names):
            if next((x.get("streaming_stores") for x in rows if x["strategy"] == s and x["layout"] == layout), False):
                ax.annotate("NT", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                            fontsize=8)
    ax.axhline(roof["copy_streaming_GBps"], color="k", linestyle="--", label="copy roof (streaming stores)")
    ax.axhline(roof["copy_GBps"], color="grey", linestyle=":", label="copy roof (regular stores)")
    ax.set_ylim(0, 1.12 * max([roof["copy_GBps"], roof["copy_streaming_GBps"]] + [x["GBps"] for x in rows]))
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=20)
    ax.set_ylabel("effective bandwidth (GB/s)")
    ax.set_title(f"{title} (NT = streaming stores)")
    ax.legend(loc="upper left", fontsize=9)
    return fig


def timeline(spans, title, path, zoom_blocks=24):
    """The pipeline's spans (block, phase, begin_s, end_s) as lanes per
    phase: the whole run, and its first blocks enlarged."""
    fig = timeline_figure(spans, title, zoom_blocks)
    _save(fig, path)
    return (f"{os.path.basename(path)}: {len(spans)} spans over {max(s['block'] for s in spans) + 1} blocks, "
            f"{max(s['end_s'] for s in spans):.3f} s, lanes {', '.join(timeline_lanes(spans))}")


def timeline_lanes(spans):
    # Lanes only for phases that did something: on the host a LayoutRight
    # block is computed where it was read, so its h2d and d2h take no time.
    return [p for p in PHASES if any(s["phase"] == p and s["end_s"] > s["begin_s"] for s in spans)]


def timeline_figure(spans, title, zoom_blocks=24):
    """The figure timeline() saves: the whole run (axes 0, a bar per span of
    a lane that did something) and its first blocks (axes 1)."""
    plt = _pyplot()
    nblocks = max(s["block"] for s in spans) + 1
    zoom = min(nblocks, zoom_blocks)
    lanes = timeline_lanes(spans)
    fig, axes = plt.subplots(2, 1, figsize=(12, 6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, limit, part in ((axes[0], nblocks, f"whole run, {nblocks} blocks"), (axes[1], zoom, f"first {zoom} blocks")):
        for s in spans:
            if s["block"] < limit and s["phase"] in lanes:
                ax.barh(lanes.index(s["phase"]), max(s["end_s"] - s["begin_s"], 1e-5), left=s["begin_s"], height=0.7,
                        color=colors[s["block"] % len(colors)], edgecolor="none")
        ax.set_yticks(range(len(lanes)))
        ax.set_yticklabels(lanes)
        ax.invert_yaxis()
        ax.set_xlabel("time since the pipeline started (s)")
        ax.set_title(f"{title} ({part}); one color per block: bars stacked in time overlap")
    return fig


def jobs(report, path):
    """A cvest run report's jobs side by side: wall seconds (with the
    seconds each phase was busy, which overlap and so may sum to more), and
    the kernel's fraction of the block-sized copy roof."""
    fig = jobs_figure(report)
    _save(fig, path)
    js = report["jobs"]
    fastest = min(js, key=lambda j: j["seconds"]["total"])
    return (f"{os.path.basename(path)}: {len(js)} jobs ("
            + ", ".join(f"{j['strategy']}/{j['layout']}/{j['precision']} {j['seconds']['total']:.3f} s" for j in js)
            + f"); fastest {fastest['strategy']}/{fastest['layout']}")


def jobs_figure(report):
    """The figure jobs() saves: axes 0 holds the wall seconds (the first bar
    container, labelled wall) and the busy seconds per phase; axes 1 the
    kernel's roof fraction, a bar per job in report order."""
    plt = _pyplot()
    js = report["jobs"]
    labels = [f"{j['strategy']}\n{j['layout']}" + (f" {j['precision']}" if len({x['precision'] for x in js}) > 1 else "")
              + (f"\n{j['pipeline']}" if "pipeline" in j else "") for j in js]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(max(8, 1.1 * len(js) + 2), 8), sharex=True)
    x = range(len(js))
    width = 0.8 / (len(PHASES) + 1)
    a1.bar([i - 0.4 + width / 2 for i in x], [j["seconds"]["total"] for j in js], width, color="black", label="wall")
    for p, phase in enumerate(PHASES):
        if any(j["seconds"].get(phase, 0) > 0 for j in js):
            a1.bar([i - 0.4 + (p + 1.5) * width for i in x], [j["seconds"].get(phase, 0) for j in js], width,
                   label=f"{phase} (busy)")
    a1.set_ylabel("seconds (median of repeats)")
    a1.legend(fontsize=8, ncol=3)
    shape = report["shape"]
    a1.set_title(f"cvest run {os.path.basename(report.get('deck', ''))}: {shape['dates']} x {shape['ids']} x "
                 f"{shape['cols']}, {report['backend']} ({report['threads']} threads)"
                 + (f", gzip {report['output_gzip_level']} output" if report.get("output_compression") == "gzip"
                    else ", lzf output" if report.get("output_compression") == "lzf" else "")
                 + input_filters(report) + where(report))
    fractions = [j["kernel_roof_fraction"] for j in js]
    # The interval that holds the median with 95% confidence, where the job
    # had pairs enough (older reports: the range over the job's runs).
    def bounds(j):
        if "kernel_roof_interval" in j:
            return j["kernel_roof_interval"] or [j["kernel_roof_fraction"]] * 2
        if j.get("kernel_roof_fraction_max"):
            return [j["kernel_roof_fraction_min"], j["kernel_roof_fraction_max"]]
        return [j["kernel_roof_fraction"]] * 2
    low = [max(f - bounds(j)[0], 0) for f, j in zip(fractions, js)]
    high = [max(bounds(j)[1] - f, 0) for f, j in zip(fractions, js)]
    a2.bar(list(x), fractions, yerr=[low, high], capsize=3,
           color=["tab:blue" if j["layout"] == "right" else "tab:orange" for j in js])
    a2.axhline(1.0, color="k", linestyle="--",
               label="a copy of the same bytes by each sampled kernel call's thread, with its stores")
    a2.set_ylabel("kernel GB/s / copy roof")
    a2.set_xticks(list(x))
    a2.set_xticklabels(labels, fontsize=8)
    a2.legend(fontsize=8)
    return fig
