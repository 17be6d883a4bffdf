"""What the peer tests share: a deck written from Python values and run by
`cvest run`."""
import os
import subprocess

ENV = dict(os.environ, OMP_PROC_BIND="spread", OMP_PLACES="threads")


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return str(v)


def run_deck(cvest, work, tag, **sections):
    """Writes WORK/deck_TAG.toml from sections (input={...}, output={...},
    run={...}; the output file defaults to WORK/cv_TAG.h5) and runs `cvest run`
    on it. Returns (output path, None), or (output path, the error)."""
    sections.setdefault("output", {}).setdefault("file", os.path.join(work, f"cv_{tag}.h5"))
    deck = os.path.join(work, f"deck_{tag}.toml")
    with open(deck, "w") as fh:
        for name, keys in sections.items():
            fh.write(f"[{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in keys.items()))
    run = subprocess.run([cvest, "run", deck], env=ENV, capture_output=True, text=True)
    error = None if run.returncode == 0 else f"cvest run exit {run.returncode}: {run.stderr.strip()}"
    return sections["output"]["file"], error
