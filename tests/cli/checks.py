"""What every command-line test script shares: a check that prints its line
and remembers a failure (`failures`, which the script's exit status reads)."""
failures = []


def check(ok, what):
    """Prints the line; returns whether it held (for a script to skip what depends on it)."""
    print(f"{'ok' if ok else 'FAIL'}: {what}", flush=True)
    if not ok:
        failures.append(what)
    return bool(ok)
