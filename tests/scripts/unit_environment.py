#!/usr/bin/env python3
"""The unit tests ctest discovered carry the thread placement they are meant
to run under: OMP_PROC_BIND=spread and OMP_PLACES=threads, both, on every
one (a list given to catch_discover_tests' ENVIRONMENT once lost the second).

    unit_environment.py CTEST BUILD_TESTS_DIR
"""
import json
import subprocess
import sys

ctest, folder = sys.argv[1], sys.argv[2]
tests = json.loads(subprocess.run([ctest, "--show-only=json-v1", "-L", "unit"], cwd=folder, capture_output=True,
                                  text=True, check=True).stdout)["tests"]
wrong = []
for t in tests:
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    env = props.get("ENVIRONMENT", [])
    mods = props.get("ENVIRONMENT_MODIFICATION", [])
    if "OMP_PROC_BIND=spread" not in env or ("OMP_PLACES=set:threads" not in mods and "OMP_PLACES=threads" not in env):
        wrong.append((t["name"], env, mods))
print(f"{len(tests)} unit tests, {len(wrong)} without both OMP_PROC_BIND=spread and OMP_PLACES=threads")
for w in wrong[:5]:
    print("  ", w)
sys.exit(1 if wrong or len(tests) < 50 else 0)
