#!/usr/bin/env python3
"""io/'s layers (docs/architecture.md): a file includes only its own folder's
files and those of the layers below it, never a higher one. Exit 1 naming
each include against the grain.
  io_layers.py SOURCE_DIR"""
import pathlib
import re
import sys

# Lower first; input and output stand side by side, over the cube.
LEVEL = {"os": 0, "hdf5": 1, "codecs": 2, "cube": 3, "input": 4, "output": 4}
INCLUDE = re.compile(r'^\s*#\s*include\s+"io/([A-Za-z0-9_]+)/[^"]+"', re.M)


def main(root):
    wrong = []
    for path in sorted((root / "io").glob("*/*.[ch]pp")):
        layer = path.parent.name
        for target in INCLUDE.findall(path.read_text()):
            if target in LEVEL and LEVEL[target] > LEVEL[layer] or (target != layer and LEVEL[target] == LEVEL[layer]):
                wrong.append(f"{path.relative_to(root)}: includes io/{target}/, above io/{layer}/")
    # io/os/ has no HDF5 (its CMake target has no HDF5 include path either).
    for path in sorted((root / "io" / "os").glob("*.[ch]pp")):
        if re.search(r'#\s*include\s+[<"](hdf5|H5)', path.read_text()):
            wrong.append(f"{path.relative_to(root)}: includes HDF5")
    print("\n".join(wrong) or "io/ layers os < hdf5 < codecs < cube < input, output: no include against the grain")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1])))
