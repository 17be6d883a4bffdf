"""Reading an strace record (strace -f -s 0 -e trace=openat,close,CALL -o
FILE) for the bytes a process moved through descriptors it opened with
O_DIRECT: what the kernel saw, not what cvest says it did."""
import re


def direct_io(trace_file, call, access=None):
    """The bytes `call` (pread64 or pwrite64) moved through O_DIRECT
    descriptors (opened with `access`, e.g. "O_RDONLY", where given), the
    largest misalignment of their offsets and sizes modulo 512, and whether
    any such descriptor was opened. Calls another thread's call split in two
    lines ("<unfinished ...>", "<... resumed>") are joined first."""
    direct, moved, misaligned, opened, pending = set(), 0, 0, False, {}
    with open(trace_file) as f:
        for line in f:
            pid, _, text = line.partition(" ")
            text = text.strip()
            if text.endswith("<unfinished ...>"):  # any call another thread's came in the middle of
                pending[pid] = text[: -len("<unfinished ...>")].rstrip()
                continue
            m = re.match(r"<\.\.\. \w+ resumed>", text)
            if m and pid in pending:
                text = pending.pop(pid) + text[m.end():]
            if text.startswith("openat(") and re.search(r"O_DIRECT(?!ORY)", text) and (access is None or access in text):
                m = re.search(r"= (\d+)$", text)
                if m:
                    direct.add(int(m.group(1)))
                    opened = True
            elif text.startswith("close("):
                direct.discard(int(re.match(r"close\((\d+)", text).group(1)))
            else:
                m = re.match(call + r"\((\d+),\s*.*,\s*(\d+),\s*(\d+)\)\s*=\s*(\d+)$", text)
                if m and int(m.group(1)) in direct:
                    moved += int(m.group(4))
                    misaligned = max(misaligned, int(m.group(2)) % 512, int(m.group(3)) % 512)
    return moved, misaligned, opened
