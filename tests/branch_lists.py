"""branch_lists.py - what tests/script-compare.py and tests/time-check.py
share: synth's ground truth (`vmtrace synth --branches`: QUEUE TID KIND
FROM TO ...) per thread, and perf's two-line halves joined."""
import collections


def load_truth(path, per_cpu, extra=None):
    """The truth's branches per (CPU or -1, tid): (from, to), with
    extra(fields) appended when given (e.g. the branch's time)."""
    per = collections.defaultdict(list)
    for raw in open(path):
        if raw.startswith('#'):
            continue
        f = raw.split()
        item = (int(f[3], 16), int(f[4], 16))
        per[(int(f[0]) if per_cpu else -1, int(f[1]))].append(item + (extra(f),) if extra else item)
    return per


def joined(seq):
    """X => 0, 0 => Y (a VM entry/exit, trace end + start) as X => Y, with
    the first half's other fields (its time)."""
    out, i = [], 0
    while i < len(seq):
        if seq[i][1] == 0 and i + 1 < len(seq) and seq[i + 1][0] == 0:
            out.append((seq[i][0], seq[i + 1][1]) + tuple(seq[i][2:]))
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return out
