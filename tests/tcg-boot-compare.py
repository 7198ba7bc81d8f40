#!/usr/bin/env python3
"""tcg-boot-compare.py - perf script vs vmtrace script on a whole TCG boot,
streamed (scripts/tcg-boot-compare.sh: GiBs of lines, bounded memory).

    tcg-boot-compare.py PERF.OUT VMTRACE.OUT POKED-PAGES [REC.JSON [FILES...]]
    tcg-boot-compare.py --errors PERF.OUT POKED-PAGES

--errors: one pass over perf's output only: its branch lines and errors,
an error counted on a poked page when its ip or a page of perf's branches
since its previous error or resync ("0 =>") is poked, or after a FUP
resync: a "Trace doesn't match" (code 6) error within 3 lines of perf's
resync right after an error on a poked page - perf 6.1 synced at an
interrupt's FUP and took its TIP for an indirect branch's (tests/t0061;
all 49 of one boot, checked against perf's --itrace=d+e log: "Setting IP"
from a FUP, then that TIP).  The first few others printed.

Both outputs: --itrace=be -F tid,ip,addr (no time, no symbols: the same
text where they agree).  Walks them in step; where they differ, the next
K perf lines are looked for in vmtrace's next lines (NEAR of them, LOOK
after a perf error: perf resyncs at the next PSB).  Every difference is
classified:
  perf errors: on a poked page (the error's ip, or a page perf walked
    since its last line vmtrace has too: branch sources and targets and
    the code between them - perf 6.1 ignores guest-kernel TEXT_POKE and
    decodes the first bytes there, strays, and errs later), or not;
  perf lines vmtrace lacks: in an error stretch (the BEFORE perf lines
    before an error, its resync line), on a poked page (the old bytes
    decoded without an error), or neither;
  vmtrace lines perf lacks: after a perf error (lost up to perf's resync)
    or not.
Anything in none of the explained classes is a bug to explain.  FILES:
one-line files (times) added as they are.  Prints one JSON object.
"""
import collections
import json
import re
import sys

ERR = re.compile(r"instruction trace error .* ip (0x[0-9a-f]+)")
K = 2
NEAR = 256
LOOK = 50000                              # perf's PSB period: ~20000 lines here
CANDIDATES = 64
LOST = 8
BEFORE = 64


def page(x):
    return x >> 12 << 12


def pages_of(line, prev_dst):
    """The pages of a branch line (source, target, the code walked to the
    source from prev_dst) and its target."""
    f = line.split()
    src, dst = int(f[1], 16), int(f[3], 16)
    out = {page(src), page(dst)}
    if prev_dst is not None and 0 <= src - prev_dst <= 1 << 16:
        out.update(range(page(prev_dst), src + 1, 4096))
    return out, dst


class Vt:
    """vmtrace's lines, read ahead into buf[head:] as needed, indexed by
    text (absolute positions) for the searches."""

    def __init__(self, f):
        self.f, self.buf, self.head, self.base = f, [], 0, 0   # base: absolute index of buf[0]
        self.pos = collections.defaultdict(collections.deque)
        self.errors, self.total, self.eof = 0, 0, False

    def _read(self):
        while True:
            line = self.f.readline()
            if not line:
                self.eof = True
                return None
            if "error" in line:
                self.errors += 1
                continue
            self.total += 1
            return line

    def fill(self, n):
        while len(self.buf) - self.head < n and not self.eof:
            line = self._read()
            if line is None:
                break
            self.pos[line].append(self.base + len(self.buf))
            self.buf.append(line)

    def at(self, i):
        """Line i ahead (0: the next), None past the end."""
        if len(self.buf) - self.head <= i:
            self.fill(i + 1)
        return self.buf[self.head + i] if len(self.buf) - self.head > i else None

    def drop(self, n):
        for line in self.buf[self.head:self.head + n]:
            q = self.pos[line]
            q.popleft()
            if not q:
                del self.pos[line]
        self.head += n
        if self.head > 65536:
            del self.buf[:self.head]
            self.base += self.head
            self.head = 0

    def find(self, lines, limit):
        """How far ahead `lines` start (within limit), None if not."""
        self.fill(limit)
        now = self.base + self.head
        for c, a in enumerate(self.pos.get(lines[0], ())):
            i = a - now
            if i >= limit or c == CANDIDATES:
                break
            if all(self.at(i + k) == lines[k] for k in range(1, len(lines))):
                return i
        return None

    def rest(self):
        n = len(self.buf) - self.head
        while self._read() is not None:
            n += 1
        return n


def main():
    poked = {int(l, 16) for l in open(sys.argv[3]) if l.strip()}
    vt = Vt(open(sys.argv[2]))
    out = collections.Counter()
    err_pages = collections.Counter()
    recent = collections.deque()         # unmatched perf lines among the last BEFORE (not yet explained)
    last_match = None                    # perf's last line vmtrace has too
    stretch, stretch_dst = set(), None   # pages perf walked since then
    since_error = False
    lost = 0                             # perf lines not found since the last match
    pending = []                         # perf lines read ahead (lookahead)
    f = open(sys.argv[1])
    n = 0

    def next_perf():
        return pending.pop(0) if pending else f.readline()

    def ahead(k):
        """The next k-1 perf branch lines after the current one (to an error)."""
        while len(pending) < k - 1:
            line = f.readline()
            if not line:
                break
            pending.append(line)
        got = []
        for line in pending[:k - 1]:
            if "=>" not in line or "error" in line:
                break
            got.append(line)
        return got

    def grow(line):
        nonlocal stretch_dst
        if last_match is not None and not stretch:
            p, stretch_dst = pages_of(last_match, None)
            stretch.update(p)
        p, stretch_dst = pages_of(line, stretch_dst)
        stretch.update(p)

    while True:
        line = next_perf()
        if not line:
            break
        n += 1
        if "=>" in line and "error" not in line:
            out["perf_branches"] += 1
            if vt.at(0) == line:                          # in step: the fast path
                vt.drop(1)
                out["matched"] += 1
                last_match, since_error = line, False
                if stretch:
                    stretch.clear()
                continue
            # far after an error (perf resyncs at the next PSB) or when
            # out of step for a while (a wrong anchor in a loop)
            k = vt.find([line] + ahead(K), LOOK if since_error or lost >= LOST else NEAR)
            if k is None:
                lost += 1
                grow(line)
                if since_error and line.split()[1] == "0":
                    out["perf_unmatched_in_error_stretch"] += 1      # its resync line
                elif stretch & poked:
                    out["perf_unmatched_on_poked_pages"] += 1        # old bytes, no error
                else:
                    recent.append((n, line))
                continue
            if k:
                out["vmtrace_only_after_perf_error" if since_error else "vmtrace_only_unexplained"] += k
                out["vmtrace_only_stretches"] += 1
                if not since_error and out["vmtrace_only_unexplained"] == k:
                    out["first_vmtrace_only_unexplained"] = vt.at(0).strip()
            vt.drop(k + 1)
            out["matched"] += 1
            last_match, since_error, lost = line, False, 0
            stretch.clear()
        else:
            m = ERR.search(line)
            if not m:
                continue
            out["perf_errors"] += 1
            ip = int(m.group(1), 16)
            if last_match is not None and not stretch:
                p, stretch_dst = pages_of(last_match, None)
                stretch.update(p)
            hit = ({page(ip)} | stretch) & poked
            if hit:
                out["perf_errors_on_poked_pages"] += 1
                err_pages[min(hit)] += 1
            elif "first_perf_error_unexplained" not in out:
                out["first_perf_error_unexplained"] = line.strip()
            out["perf_unmatched_in_error_stretch"] += len(recent)
            recent.clear()
            since_error = True
        while recent and recent[0][0] < n - BEFORE:
            _, l = recent.popleft()
            out["perf_unmatched_unexplained"] += 1
            out.setdefault("first_perf_unmatched_unexplained", l.strip())
    out["perf_unmatched_unexplained"] += len(recent)
    out["vmtrace_only_after_perf_end"] = vt.rest()
    out["vmtrace_branches"] = vt.total
    out["vmtrace_errors"] = vt.errors
    out["poked_pages"] = len(poked)
    out["poked_pages_with_perf_errors"] = len(err_pages)
    out["perf_errors_most_on_one_page"] = max(err_pages.values()) if err_pages else 0
    if len(sys.argv) > 4:
        rec = json.load(open(sys.argv[4]))
        for key in ("instructions", "started", "smc_translations", "aux_bytes", "seconds"):
            out["record_" + key] = rec.get(key)
    for name in sys.argv[5:]:
        out[name.rsplit("/", 1)[-1]] = open(name).read().strip()
    print(json.dumps(dict(out), sort_keys=True))


def errors_only(path, poked_path):
    poked = {int(l, 16) for l in open(poked_path) if l.strip()}
    pages, per, out, others = set(), collections.Counter(), collections.Counter(), []
    prev_explained, since = False, []     # since the previous error: perf's lines
    for line in open(path):
        if "error" in line:
            out["perf_errors"] += 1
            m = ERR.search(line)
            hit = (({page(int(m.group(1), 16))} if m else set()) | pages) & poked
            if hit:
                out["perf_errors_on_poked_pages"] += 1
                per[min(hit)] += 1
            elif prev_explained and since and since[0] == "0" and len(since) <= 3 and "code 6:" in line:
                # perf resynced (at an interrupt's FUP: tests/t0061) right
                # after an explained error and erred before its next packet
                out["perf_errors_after_fup_resync"] += 1
            elif len(others) < 5:
                others.append(line.strip())
            prev_explained = bool(hit)
            pages, since = set(), []
            continue
        f = line.split()
        if "=>" not in f:
            continue
        i = f.index("=>")
        src, dst = f[i - 1], f[i + 1]
        out["perf_branches"] += 1
        since.append(src)
        if src == "0":
            pages = set()
            continue
        pages.update((page(int(src, 16)), page(int(dst, 16))))
    out["poked_pages"] = len(poked)
    out["poked_pages_with_perf_errors"] = len(per)
    out["perf_errors_most_on_one_page"] = max(per.values()) if per else 0
    print(json.dumps(dict(out, first_others=others), sort_keys=True))


if sys.argv[1] == "--errors":
    errors_only(sys.argv[2], sys.argv[3])
else:
    main()
