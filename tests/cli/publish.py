#!/usr/bin/env python3
"""Nothing lost at the last step: every file cvest puts in place.

    publish.py CVEST_BINARY steps|steps_more|syscalls|owners|writers

steps: SIGKILL and SIGINT at every step of putting an output, a generated
  input and a report in place (CVEST_FAULT=kill_at / interrupt_at, io/os/Faults.hpp)
  over an existing file: the path holds the old file or the new one, whole
  (bytes compared), and the next run leaves the new one there (an output
  sealed before the kill is put in place, not computed again), with nothing
  left beside it.
steps_more: a run that took a sealed output over and was killed again
  leaves it sealed; a sealed output of a changed deck is not taken; without
  RENAME_EXCHANGE (rename(2) over the file found) every step still leaves
  the old or the new file; a folder at a report's path is refused, kept.
syscalls: strace of a run over an existing output and report, and of
  `generate --overwrite`: no unlink of a final name; each rename onto it
  comes after the file's last write and then its fsync, and the folder is
  fsync'd after each rename (the journal's and the seal's too) before the
  next rename or unlink.
owners: a second real user's cv.h5 in a sticky 1777 folder: the run (as a
  third user) is refused before its first block, exit 3, one line naming the
  owner, nothing left; an immutable and an append-only output (chattr +i,
  +a) are refused the same way, no block in stdout or stderr. Needs root
  (useradd, setpriv) and chattr: exits 77 (ctest: not run) otherwise, saying why.
writers: the direct writer's memory and threads: a per-thread run over 16
  threads (blocks of 8 MiB, each written in four lanes) with direct = true
  peaks within memory_budget + 64 MiB; a run whose
  user may not start its threads (RLIMIT_NPROC, as a non-root user) exits 3
  with one line and leaves nothing, or (the direct writer's own lanes) runs
  with fewer lanes and writes the right bytes. Needs root as `owners` does.
"""
import glob
import json
import os
import pwd
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from checks import check, failures

cvest, case = os.path.abspath(sys.argv[1]), sys.argv[2]
SKIP = 77
WRITES = ("write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate", "fallocate")


def run(*args, fault=None, env=None, timeout=300, **kw):
    e = dict(os.environ, CVEST_JOURNAL_BATCH="1MiB", **(env or {}))
    if fault:
        e["CVEST_FAULT"] = fault
    return subprocess.run([cvest, *args], env=e, capture_output=True, text=True, timeout=timeout, **kw)


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def leftovers(name):
    return sorted(glob.glob("." + name + ".tmp-*"))


def error_lines(stderr):
    return [l for l in stderr.splitlines() if "error" in l]


DECK = """[input]
file = "in.h5"
[output]
file = "cv.h5"
overwrite = true
[run]
strategy = "flat"
max_block = "64KiB"
[report]
json = "r.json"
"""


def steps():
    run("generate", "--dates", "12", "--ids", "3000", "--cols", "5", "--seed", "7", "--out", "in.h5")
    write("deck.toml", DECK.encode())
    p = run("run", "deck.toml")
    check(p.returncode == 0, "a clean run writes the reference output")
    new_output = read("cv.h5")
    run("generate", "--dates", "12", "--ids", "3000", "--cols", "5", "--seed", "8", "--out", "new_in.h5")
    new_input = read("new_in.h5")
    old = {"output": b"the old output, whole\n", "input": read("in.h5"), "report": b'{"old": "report"}\n'}

    def is_new(what, data):
        if what == "output":
            return data == new_output
        if what == "input":
            return data == new_input
        try:
            return "jobs" in json.loads(data)
        except (TypeError, ValueError):
            return False

    def command(what):
        if what == "input":
            return ["generate", "--dates", "12", "--ids", "3000", "--cols", "5", "--seed", "8", "--out", "in.h5",
                    "--overwrite"]
        return ["run", "deck.toml"]

    paths = {"output": "cv.h5", "input": "in.h5", "report": "r.json"}
    points = {"output": ["journal_gone", "sealed", "synced", "renamed", "done"],
              "input": ["synced", "renamed", "done"], "report": ["synced", "renamed", "done"]}
    for what, whens in points.items():
        for when in whens:
            for how, sig in [("kill_at", signal.SIGKILL), ("interrupt_at", signal.SIGINT)]:
                write(paths[what], old[what])
                if what != "input":
                    write("in.h5", old["input"])
                p = run(*command(what), fault=f"{how}={what}.{when}")
                now = read(paths[what])
                label = f"{how}={what}.{when}"
                check(p.returncode == -sig, f"{label}: stopped by {sig.name} (exit {p.returncode})")
                check(now == old[what] or is_new(what, now),
                      f"{label}: {paths[what]} holds the old file or the new one, whole")
                p = run(*command(what))
                ok = p.returncode == 0 and is_new(what, read(paths[what]))
                check(ok, f"{label}: the next run leaves the new {what} at {paths[what]}" +
                      ("" if ok else f" ({p.returncode}: {p.stderr.strip()[-300:]})"))
                if what == "output" and how == "kill_at" and when in ("sealed", "synced", "renamed"):
                    sealed = when != "renamed"
                    check(("putting it in place" in p.stderr) == sealed,
                          f"{label}: the next run puts the sealed output in place without computing it again"
                          if sealed else f"{label}: nothing sealed is left to finish")
                check(not leftovers(paths[what]), f"{label}: nothing left beside {paths[what]}: {leftovers(paths[what])}")


def steps_more():
    """What the next runs do with a sealed output: one killed again after
    taking it over leaves it sealed; a deck changed since is not given it;
    without RENAME_EXCHANGE (rename(2) over the checked file) every step
    still leaves the old or the new file; a report path that is a folder is
    refused, its contents kept."""
    run("generate", "--dates", "12", "--ids", "3000", "--cols", "5", "--seed", "7", "--out", "in.h5")
    write("deck.toml", DECK.encode())
    check(run("run", "deck.toml").returncode == 0, "a clean run writes the reference output")
    new_output = read("cv.h5")
    old = b"the old output, whole\n"
    write("cv.h5", old)
    p = run("run", "deck.toml", fault="kill_at=output.sealed")
    p = run("run", "deck.toml", fault="kill_at=output.synced")
    taken = "putting it in place" in p.stderr
    check(p.returncode == -signal.SIGKILL and taken and read("cv.h5") == old,
          "a run that took over a sealed output and was killed before its rename left the old file")
    p = run("run", "deck.toml")
    check(p.returncode == 0 and "putting it in place" in p.stderr and read("cv.h5") == new_output,
          "the run after it finds the output still sealed and puts it in place")
    check(not leftovers("cv.h5"), "nothing left beside cv.h5")
    # The deck changed between the kill and the next run: not taken over.
    write("cv.h5", old)
    run("run", "deck.toml", fault="kill_at=output.sealed")
    write("deck.toml", DECK.replace('strategy = "flat"', 'strategy = "per_date"').encode())
    p = run("run", "deck.toml")
    import h5py
    with h5py.File("cv.h5", "r") as f:
        strategy = f["cv"].attrs.get("strategy")
    strategy = strategy.decode() if isinstance(strategy, bytes) else strategy
    check(p.returncode == 0 and "putting it in place" not in p.stderr and strategy == "per_date",
          f"a sealed output of another deck (strategy flat) is not put in place for per_date ({strategy})")
    check(not leftovers("cv.h5"), "its file removed as left over")
    write("deck.toml", DECK.encode())
    # No RENAME_EXCHANGE: rename(2) over the file found.
    for when in ("sealed", "synced", "renamed", "done"):
        write("cv.h5", old)
        p = run("run", "deck.toml", fault=f"kill_at=output.{when},no_exchange")
        now = read("cv.h5")
        check(p.returncode == -signal.SIGKILL and now in (old, new_output),
              f"no exchange, killed at output.{when}: the old file or the new one, whole")
        p = run("run", "deck.toml", fault="no_exchange")
        check(p.returncode == 0 and read("cv.h5") == new_output and not leftovers("cv.h5"),
              f"no exchange, killed at output.{when}: the next run leaves the new output, nothing beside it")
    # A folder at the report's path.
    os.remove("r.json")
    os.makedirs("r.json/keep")
    write("r.json/keep/x", b"theirs")
    p = run("run", "deck.toml")
    lines = error_lines(p.stderr)
    check(p.returncode == 3 and len(lines) == 1 and "r.json" in lines[0] and "directory" in lines[0],
          f"a folder at the report's path: exit 3, one line ({p.returncode}: {lines})")
    check(read("r.json/keep/x") == b"theirs" and not leftovers("r.json"), "the folder and its contents kept")


def syscalls():
    if not shutil.which("strace"):
        print("strace is missing (scripts/setup installs it): not run")
        return SKIP
    run("generate", "--dates", "8", "--ids", "3000", "--cols", "5", "--out", "in.h5")
    write("deck.toml", DECK.encode())
    check(run("run", "deck.toml").returncode == 0, "a first run writes cv.h5 and r.json")
    folder = os.getcwd()

    def trace(*args):
        # LeakSanitizer (a sanitizer build) refuses to run under ptrace.
        # Writes too (their data left out: -s 0): a sync must follow the last one.
        e = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
        p = subprocess.run(["strace", "-f", "-y", "-qq", "-s", "0", "-e",
                            "trace=unlink,unlinkat,rename,renameat,renameat2,fsync,fdatasync,"
                            "write,pwrite64,writev,pwritev,pwritev2,ftruncate,fallocate", cvest, *args],
                           capture_output=True, text=True, timeout=300, env=e)
        check(p.returncode == 0, f"strace cvest {' '.join(args)} exits 0")
        lines, unfinished = [], {}
        for line in p.stderr.splitlines():  # a call another thread interrupted comes in two lines: joined
            pid = line.split("]", 1)[0] if line.startswith("[pid") else ""
            if line.endswith("<unfinished ...>"):
                unfinished[pid] = line[: -len("<unfinished ...>")]
            elif "resumed>" in line and pid in unfinished:
                lines.append(unfinished.pop(pid) + line.split("resumed>", 1)[1])
            else:
                lines.append(line)
        return [l for l in lines if re.search(r"= (\d+|-1 )", l)]

    def call(line):
        """(the call's name, the path of the file its first argument is a descriptor of, or '')"""
        m = re.match(r"(?:\[pid\s+\d+\]\s*)?(\w+)\((?:\d+<([^>]*)>)?", line)
        return (m.group(1), m.group(2) or "") if m else ("", "")

    def syncs(lines, path, end, calls=("fsync",)):
        return [j for j, l in enumerate(lines[:end]) if call(l) in [(c, path) for c in calls]]

    def folder_synced_next(lines, i, what):
        """The folder fsync'd after the rename at line i, before the next
        rename or unlink (a later sync of the folder, for another file,
        would leave this name's rename unsynced meanwhile)."""
        after = [j for j in range(i + 1, len(lines)) if call(lines[j])[0].startswith(("rename", "unlink"))]
        end = after[0] if after else len(lines)
        check(any(call(l) == ("fsync", folder) for l in lines[i + 1:end]),
              f"{what}: the folder fsync'd after the rename, before the next rename or unlink "
              f"({lines[end].strip()[:80] if after else 'none'})")

    def assert_order(lines, name):
        final = [i for i, l in enumerate(lines) if "rename" in l and f'"{name}"' in l.split(",", 2)[-1]]
        check(len(final) == 1, f"{name}: renamed onto once ({len(final)})")
        unlinked = [l for l in lines if "unlink" in l and (f'"{name}"' in l or f'/{name}"' in l)]
        check(not unlinked, f"{name}: never unlinked ({unlinked[:1]})")
        if not final:
            return
        i = final[0]
        source = lines[i].split('"')[1]
        temp, path = os.path.join(folder, source), os.path.join(folder, name)
        synced = syncs(lines, temp, i)
        check(bool(synced), f"{name}: {source} fsync'd before its rename")
        # The file's writes: through its temporary name before the rename,
        # through its own name after it (the descriptor's path follows the file).
        writes = [j for j, l in enumerate(lines) if call(l)[0] in WRITES and call(l)[1] == (temp if j < i else path)]
        check(bool(writes) and bool(synced) and writes[-1] < synced[-1],
              f"{name}: {source}'s last write (line {writes[-1] if writes else None} of {len(lines)}) before its "
              f"last fsync (line {synced[-1] if synced else None}), before its rename (line {i})")
        folder_synced_next(lines, i, name)

    lines = trace("run", "deck.toml")
    assert_order(lines, "cv.h5")
    assert_order(lines, "r.json")
    # The journal and the seal (io/output/Journal.cpp create_whole): written to
    # NAME.new, synced, renamed onto NAME, the folder synced after.
    for kind in (".journal-", ".sealed"):
        renames = [i for i, l in enumerate(lines) if "rename" in l and kind in l.split(",", 2)[-1]]
        check(len(renames) >= 1, f"the output's {kind.strip('.-')}: put in place with a rename ({len(renames)})")
        for i in renames:
            source = os.path.join(folder, lines[i].split('"')[1])
            synced = syncs(lines, source, i, ("fsync", "fdatasync"))
            check(bool(synced) and source.endswith(".new"),
                  f"{os.path.basename(source)}: synced before its rename ({len(synced)} syncs)")
            folder_synced_next(lines, i, os.path.basename(source))
    lines = trace("generate", "--dates", "8", "--ids", "3000", "--cols", "5", "--out", "in.h5", "--overwrite")
    assert_order(lines, "in.h5")


# --- another user's files ---------------------------------------------------------------------------------------

def need_root():
    if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"):
        print("not run: creating users and running as them needs root, useradd and setpriv")
        sys.exit(SKIP)


def user(name):
    try:
        return pwd.getpwnam(name)
    except KeyError:
        p = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(f"not run: useradd {name} failed: {p.stderr.strip()}")
            sys.exit(SKIP)
        return pwd.getpwnam(name)


def portable_cvest(folder):
    """cvest and the libraries it finds outside the system's folders (e.g.
    Kokkos under root's ~/.cache), copied where another user can run them."""
    os.makedirs(folder, exist_ok=True)
    shutil.copy2(cvest, os.path.join(folder, "cvest"))
    for line in subprocess.run(["ldd", cvest], capture_output=True, text=True).stdout.splitlines():
        parts = line.split("=>")
        if len(parts) == 2 and parts[1].strip().startswith("/"):
            lib = parts[1].split("(")[0].strip()
            if not lib.startswith(("/lib", "/usr/lib")):
                shutil.copy2(lib, os.path.join(folder, os.path.basename(lib)))
    os.chmod(folder, 0o755)
    for f in os.listdir(folder):
        os.chmod(os.path.join(folder, f), 0o755)
    return os.path.join(folder, "cvest")


def as_user(account, binary, args, limit_threads=None, env=None):
    # LeakSanitizer's exit check (a sanitizer build) starts a thread of its
    # own and stops the process's others: not what these runs test.
    e = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(binary), HOME=os.getcwd(),
             ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    e.update(env or {})

    def limit():
        if limit_threads is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (limit_threads, limit_threads))

    return subprocess.run(["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups",
                           binary, *args], env=e, capture_output=True, text=True, timeout=300, preexec_fn=limit)


def owners():
    need_root()
    owner, runner = user("cvest-owner"), user("cvest-runner")
    binary = portable_cvest(os.path.join(os.getcwd(), "bin"))
    os.makedirs("shared")
    os.chmod("shared", 0o1777)
    os.chdir("shared")
    run("generate", "--dates", "40", "--ids", "20000", "--cols", "5", "--out", "in.h5")
    write("deck.toml", DECK.replace('[report]\njson = "r.json"\n', "").encode())
    write("cv.h5", b"cvest-owner's results\n")
    os.chown("cv.h5", owner.pw_uid, owner.pw_gid)
    before = sorted(os.listdir("."))
    p = as_user(runner, binary, ["run", "deck.toml"])
    lines = error_lines(p.stderr)
    check(p.returncode == 3, "another user's cv.h5 in a sticky folder: exit 3" +
          ("" if p.returncode == 3 else f" ({p.returncode}: {p.stderr.strip()[-300:]})"))
    check(len(lines) == 1 and "cvest-owner" in lines[0] and "sticky" in lines[0] and "cv.h5" in lines[0],
          f"one line naming the file, its owner and the sticky folder: {lines}")
    check("block" not in p.stdout + p.stderr, "refused before the first block")
    check(sorted(os.listdir(".")) == before and read("cv.h5") == b"cvest-owner's results\n",
          "nothing left, their file untouched")
    # The owner themself may replace it.
    os.chmod("in.h5", 0o644)
    p = as_user(owner, binary, ["run", "deck.toml"])
    ok = p.returncode == 0 and read("cv.h5") != b"cvest-owner's results\n" and os.stat("cv.h5").st_uid == owner.pw_uid
    check(ok, "its owner replaces it" + ("" if ok else f" ({p.returncode}: {p.stderr.strip()[-200:]})"))
    # Immutable or append-only (root cannot replace it either): refused up
    # front, not at the rename after the work (which refuses with the same
    # line): no block in either stream (the plan and the progress go to stderr).
    for flag, word in (("i", "immutable"), ("a", "append-only")):
        name = f"{word}.h5"
        write(f"{word}.toml", DECK.replace("cv.h5", name).replace('[report]\njson = "r.json"\n', "").encode())
        write(name, f"{word}\n".encode())
        if subprocess.run(["chattr", f"+{flag}", name], capture_output=True).returncode != 0:
            print(f"not run: chattr +{flag} is not supported on this file system (the {word} output case)")
            return SKIP
        try:
            p = run("run", f"{word}.toml")
            lines = error_lines(p.stderr)
            blocks = [l for l in (p.stdout + p.stderr).splitlines() if "block" in l and l not in lines]
            check(p.returncode == 3 and len(lines) == 1 and word in lines[0] and not blocks,
                  f"an {word} output: refused before the first block, exit 3, one line ({p.returncode}: {lines}; "
                  f"{blocks[:1]})")
        finally:
            subprocess.run(["chattr", f"-{flag}", name])
        check(read(name) == f"{word}\n".encode() and not leftovers(name), f"the {word} file untouched, nothing left")
    return 0


def writers():
    need_root()
    # Memory: 16 threads, each with blocks to write direct.
    run("generate", "--dates", "40", "--ids", "250000", "--cols", "5", "--out", "in.h5")
    budget = 512 << 20
    write("big.toml", f"""[input]
file = "in.h5"
[output]
file = "big.h5"
overwrite = true
direct = true
[run]
strategy = "flat"
pipeline = "per_thread"
memory_budget = "512MiB"
max_block = "8MiB"
""".encode())
    e = dict(os.environ, OMP_NUM_THREADS="16", OMP_PROC_BIND="false")
    p = subprocess.Popen([cvest, "run", "big.toml", "--explain"], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=600)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = usage.ru_maxrss * 1024
    threads = re.search(r"per_thread:(\d+)", out)
    ok = p.returncode == 0 and threads is not None and int(threads.group(1)) >= 8
    check(ok, f"a per-thread run over {threads.group(1) if threads else '?'} threads (8 or more), direct" +
          ("" if ok else f" ({p.returncode}: {err.strip()[-300:]})"))
    if os.environ.get("CVEST_SANITIZED"):  # AddressSanitizer's shadow memory is not cvest's
        print(f"peak RSS {peak / 2**20:.0f} MiB on a sanitizer build: not judged")
    else:
        check(peak <= budget + (64 << 20), f"its peak RSS {peak / 2**20:.0f} MiB is within memory_budget (512 MiB) + 64 MiB")
    # Threads: as a user whose thread limit stops cvest at each of its own thread starts.
    runner = user("cvest-runner")
    binary = portable_cvest(os.path.join(os.getcwd(), "bin"))
    os.makedirs("limited")
    os.chmod("limited", 0o1777)
    shutil.copy2("in.h5", "limited/in.h5")
    os.chmod("limited/in.h5", 0o644)
    os.chdir("limited")
    write("deck.toml", DECK.replace('[report]\njson = "r.json"\n', "").replace(
        'max_block = "64KiB"', 'max_block = "8MiB"\npipeline = "overlapped"').replace(
        "overwrite = true", "overwrite = true\ndirect = true").encode())
    env = {"OMP_NUM_THREADS": "2", "OMP_PROC_BIND": "false"}
    failed_at = set()
    for limit in range(2, 9):
        p = as_user(runner, binary, ["run", "deck.toml"], limit_threads=limit, env=env)
        lines = error_lines(p.stderr)
        left = [f for f in os.listdir(".") if f not in ("in.h5", "deck.toml", "cv.h5")]
        if p.returncode != 0 and os.path.exists("cv.h5"):
            left.append("cv.h5")
        if p.returncode == 0:
            check(not left, f"at most {limit} threads: the run finishes, nothing left ({left})")
            import h5py
            import numpy
            with h5py.File("in.h5") as i, h5py.File("cv.h5") as o:
                same = numpy.array_equal(o["cv"][...], i["multBy"][...][None] * i["discount"][...])
            check(same, f"at most {limit} threads: the right bytes")
            os.remove("cv.h5")
            break
        ok = p.returncode == 3 and len(lines) == 1 and "cannot start" in lines[0] and not left
        check(ok, f"at most {limit} threads: exit 3, one line, nothing left" +
              (f" ({lines[0].split(': ', 2)[-1][:60]}...)" if ok else f" ({p.returncode}: {p.stderr.strip()[-300:]}; left {left})"))
        failed_at.add(lines[0].split("cannot start ")[-1].split(":")[0] if lines else "?")
    print(f"thread starts refused: {sorted(failed_at)}")
    check(len(failed_at) >= 2, "the limit was met at more than one of cvest's thread starts")
    return 0


with tempfile.TemporaryDirectory(prefix="cvest-publish-") as d:
    os.chmod(d, 0o755)
    os.chdir(d)
    status = {"steps": steps, "steps_more": steps_more, "syscalls": syscalls, "owners": owners,
              "writers": writers}[case]()
if failures:  # a failure before a part that could not run is still a failure
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
sys.exit(SKIP if status == SKIP else 0)
