#!/usr/bin/env python3
"""The layers (docs/architecture.md): core/ < io/ < app/, and io/'s own
folders in order. A file includes only its own folder's files and those of
the layers below it, never a higher one: nothing in io/ or core/ includes
app/, nothing in core/ includes io/, and within io/ no folder a higher or
sibling one. Exit 1 naming each include against the grain.
  io_layers.py SOURCE_DIR"""
import pathlib
import re
import sys

# Lower first; input and output stand side by side, over the cube.
LEVEL = {"os": 0, "hdf5": 1, "codecs": 2, "cube": 3, "input": 4, "output": 4}
INCLUDE = re.compile(r'^\s*#\s*include\s+"io/([A-Za-z0-9_]+)/[^"]+"', re.M)
# The top folders: a file includes its own and lower ones only.
TOP = {"core": 0, "io": 1, "app": 2}
TOP_INCLUDE = re.compile(r'^\s*#\s*include\s+"(core|io|app)/[^"]+"', re.M)


def sources(folder):
    return sorted(p for p in folder.rglob("*") if p.is_file() and re.search(r"\.[ch]pp(\.in)?$", p.name))


def against_top(root):
    """Includes of app/ from io/ or core/, and of io/ from core/."""
    wrong = []
    for top in ("core", "io"):
        for path in sources(root / top):
            for target in TOP_INCLUDE.findall(path.read_text()):
                if TOP[target] > TOP[top]:
                    wrong.append(f"{path.relative_to(root)}: includes {target}/, above {top}/")
    return wrong


def main(root):
    wrong = against_top(root)
    # Every io/ file sits in a layer's folder: none loose in io/ itself.
    wrong += [f"{p.relative_to(root)}: in io/ outside its layers" for p in sorted((root / "io").glob("*.[ch]pp"))]
    for path in sorted((root / "io").glob("*/*.[ch]pp")):
        layer = path.parent.name
        for target in INCLUDE.findall(path.read_text()):
            if target in LEVEL and LEVEL[target] > LEVEL[layer] or (target != layer and LEVEL[target] == LEVEL[layer]):
                wrong.append(f"{path.relative_to(root)}: includes io/{target}/, above io/{layer}/")
    # io/os/ has no HDF5 (its CMake target has no HDF5 include path either).
    for path in sorted((root / "io" / "os").glob("*.[ch]pp")):
        if re.search(r'#\s*include\s+[<"](hdf5|H5)', path.read_text()):
            wrong.append(f"{path.relative_to(root)}: includes HDF5")
    print("\n".join(wrong) or "core/ < io/ < app/, and io/'s os < hdf5 < codecs < cube < input, output: no include "
                               "against the grain")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1])))
