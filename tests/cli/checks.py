"""What every command-line test script shares: a check that prints its line
and remembers a failure (`failures`, which the script's exit status reads)."""
failures = []


def check(ok, what):
    """Prints the line; returns whether it held (for a script to skip what depends on it)."""
    print(f"{'ok' if ok else 'FAIL'}: {what}", flush=True)
    if not ok:
        failures.append(what)
    return bool(ok)


def first_use_lines(text):
    """The lines of `text` that say first use, each with the lines it wraps onto (those indented two
    spaces right after it: the run summary wraps one past 120 columns after a comma) joined back."""
    said, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("first use: "):
            for more in lines[i + 1:]:
                if not more.startswith("  "):
                    break
                line += " " + more[2:]
            said.append(line)
    return said


def host_kernels_only(cvest, why):
    """Exits 77 (ctest: not run) where the kernels of the build at `cvest` run on a device: `why` says what does not apply."""
    import subprocess
    import sys
    info = subprocess.run([cvest, "info"], capture_output=True, text=True).stdout
    if "(default OpenMP)" not in info and "(default Serial)" not in info:
        print(f"not run: the kernels run on a device here; {why}")
        sys.exit(77)
