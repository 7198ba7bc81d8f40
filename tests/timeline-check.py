#!/usr/bin/env python3
"""timeline-check.py - checks `vmtrace timeline` outputs against synth's
ground truth (the branch list of --branches: QUEUE TID KIND FROM TO WHERE
VCPU) and the kallsyms of the code directories.

  timeline-check.py expect BRANCHES HOST_KALLSYMS GUEST_KALLSYMS
      what must be drawn, one line per vCPU and kind:
      "VCPU function NAME" (the vCPU's first guest call) and
      "VCPU exit VM exit: HANDLER" (its first VM exit: the first host
      function called before the entry); then "VCPU counts EXITS CALLS".
  timeline-check.py perfetto DECODED BRANCHES HOST_KALLSYMS GUEST_KALLSYMS
      DECODED is `protoc --decode=perfetto.protos.Trace` of the trace:
      sequence and interning rules, every track declared before use,
      slices balanced and in time order per track, and per vCPU thread
      the slices the truth implies (one per call, one per VM exit, the
      known ones above on the right lane).
  timeline-check.py dom DOM LANE NAME KIND
      DOM (chromium --dump-dom) drew NAME on LANE as a slice of KIND
      ("function"/"exit") and shows it in the details panel.
  timeline-check.py target DOM LANE NAME
      "START,END X,Y": the view of DOM and where NAME is drawn on LANE
      (the middle of the slice), for a #view=START,END&click=X,Y load.
  timeline-check.py clicked DOM NAME KIND
      the details panel of DOM shows NAME (of KIND) - and nothing was found
      by #find: the click chose it.
"""
import bisect
import importlib.util
import os
import sys
from html.parser import HTMLParser

_spec = importlib.util.spec_from_file_location("report_truth", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                          "report-truth.py"))
rt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rt)


def kallsyms(path):
    syms = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 3 and f[1] in "tTwW":
            syms.setdefault(int(f[0], 16), f[2])
    return syms


def callee(lines, i, thunks, names):
    """the function call i enters: through thunk code (a retpoline), where the
    thread leaves it (the thunk itself when it returns to the call)"""
    _, tid, kind, frm, to, where = lines[i][:6]
    t = int(to, 16)
    if not rt.in_ranges(thunks[where], t):
        return names[where].get(t, "%#x" % t)
    for g in lines[i + 1:]:
        if g[1] == tid and g[5] == where and g[2] in ("call", "return", "jump") and \
                rt.in_ranges(thunks[where], int(g[3], 16)) and not rt.in_ranges(thunks[where], int(g[4], 16)):
            u = int(g[4], 16)
            return names[where].get(t if u == int(lines[i][8], 16) else u, "%#x" % u)
    return names[where].get(t, "%#x" % t)


def truth(path, host, guest, thunks):
    """per vCPU: first guest call's name, first exit's name, exits, calls (a call
    from thunk code into thunk code is none: analyze sees through retpolines)"""
    per = {}
    names = {"host": host, "guest": guest}
    lines = [l.split() for l in open(path) if not l.startswith("#")]
    for i, f in enumerate(lines):
        _, tid, kind, frm, to, where, vcpu = f[:7]
        v = per.setdefault(int(vcpu), {"tid": int(tid), "function": None, "exit": None, "exits": 0, "calls": 0})
        if kind == "call" and not (rt.in_ranges(thunks[where], int(frm, 16)) and
                                   rt.in_ranges(thunks[where], int(to, 16))):
            v["calls"] += 1
            if where == "guest" and v["function"] is None:
                v["function"] = callee(lines, i, thunks, names)
        elif kind == "vmexit":
            v["exits"] += 1
            if v["exit"] is None:
                handler = "(no host call)"
                for k in range(i + 1, len(lines)):
                    g = lines[k]
                    if g[6] != vcpu:
                        continue
                    if g[2] == "call":
                        handler = callee(lines, k, thunks, names)
                        break
                    if g[2] in ("vmentry", "vmexit"):
                        break
                v["exit"] = "VM exit: " + handler
    return per


def expect(args):
    per = truth(args[0], kallsyms(args[1]), kallsyms(args[2]),
                {"host": rt.load_thunks(args[1]), "guest": rt.load_thunks(args[2])})
    for n in sorted(per):
        print(n, "function", per[n]["function"])
        print(n, "exit", per[n]["exit"])
        print(n, "counts", per[n]["exits"], per[n]["calls"])


# ---------------------------------------------------------------- protobuf text
def parse_text(path):
    """protoc's text format -> nested dicts of lists"""
    root, stack = {}, []
    cur = root
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        if line.endswith("{"):
            child = {}
            cur.setdefault(line[:-1].strip(), []).append(child)
            stack.append(cur)
            cur = child
        elif line == "}":
            cur = stack.pop()
        else:
            k, v = line.split(":", 1)
            v = v.strip()
            if v.startswith('"'):
                v = bytes(v[1:-1], "utf-8").decode("unicode_escape")
            elif v.lstrip("-").isdigit():
                v = int(v)
            cur.setdefault(k, []).append(v)
    return root


def one(d, k, default=None):
    return d[k][0] if k in d else default


def perfetto(args):
    trace = parse_text(args[0])
    per = truth(args[1], kallsyms(args[2]), kallsyms(args[3]),
                {"host": rt.load_thunks(args[2]), "guest": rt.load_thunks(args[3])})
    packets = trace.get("packet", [])
    assert packets, "no packets"
    assert one(packets[0], "sequence_flags") == 1, "first packet does not clear the incremental state"
    tracks, names, keys = {}, {}, {}
    open_, last_ts = {}, {}
    slices = {}          # (uuid) -> list of (name, annotations)
    counters = {}
    for p in packets:
        assert one(p, "trusted_packet_sequence_id") == 1, "packet without the sequence id"
        if p is not packets[0]:
            assert one(p, "sequence_flags") == 2, "later packet does not need the incremental state"
        for i in p.get("interned_data", []):
            for e in i.get("event_names", []):
                assert one(e, "iid") not in names, "event name iid interned twice"
                names[one(e, "iid")] = one(e, "name")
            for e in i.get("debug_annotation_names", []):
                keys[one(e, "iid")] = one(e, "name")
        for td in p.get("track_descriptor", []):
            uuid = one(td, "uuid")
            assert uuid and uuid not in tracks, "track uuid missing or reused"
            parent = one(td, "parent_uuid")
            assert parent is None or parent in tracks, "parent track declared later"
            tracks[uuid] = td
        for ev in p.get("track_event", []):
            uuid, ts, typ = one(ev, "track_uuid"), one(p, "timestamp"), one(ev, "type")
            assert uuid in tracks, "event on an undeclared track"
            assert ts is not None, "event without a timestamp"
            assert ts >= last_ts.get(uuid, 0), "track %d goes back in time" % uuid
            last_ts[uuid] = ts
            ann = {keys[one(a, "name_iid")]: one(a, "string_value") for a in ev.get("debug_annotations", [])}
            if typ == "TYPE_SLICE_BEGIN":
                assert one(ev, "name_iid") in names, "name used before it is interned"
                open_.setdefault(uuid, []).append(ts)
                slices.setdefault(uuid, []).append((names[one(ev, "name_iid")], ann))
            elif typ == "TYPE_SLICE_END":
                assert open_.get(uuid), "slice end without a begin on track %d" % uuid
                open_[uuid].pop()
            elif typ == "TYPE_COUNTER":
                assert "counter" in tracks[uuid], "counter value on a slice track"
                counters[uuid] = counters.get(uuid, 0) + one(ev, "counter_value")
            else:
                raise AssertionError("unexpected event type %s" % typ)
    assert not any(open_.values()), "slices left open"
    # per vCPU thread: its tracks
    threads = {one(td["thread"][0], "tid"): u for u, td in tracks.items() if "thread" in td}
    lanes = {(one(td, "parent_uuid"), one(td, "name")): u for u, td in tracks.items() if "name" in td}
    for n, v in sorted(per.items()):
        t = threads.get(v["tid"])
        assert t, "no thread track for vCPU %d (tid %d)" % (n, v["tid"])
        guest, host = lanes[(t, "guest")], lanes[(t, "host")]
        counter = lanes.get((t, "VM exits/ms")) or lanes[(t, "VM exits/1000 instructions")]
        fn = [s for u in (guest, host) for s in slices.get(u, []) if "continued" not in s[1]
              and not s[0].startswith("VM exit: ")]
        exits = [s for s in slices.get(host, []) if s[0].startswith("VM exit: ")]
        assert len(fn) == v["calls"], "vCPU %d: %d function slices, the truth has %d calls" % (n, len(fn), v["calls"])
        assert len(exits) == v["exits"], "vCPU %d: %d VM exit slices, the truth has %d" % (n, len(exits), v["exits"])
        assert counters.get(counter) == v["exits"], "vCPU %d: the counter sums to %s, not %d" % (
            n, counters.get(counter), v["exits"])
        assert any(s[0] == v["function"] for s in slices.get(guest, [])), "vCPU %d: no guest slice %s" % (
            n, v["function"])
        # the truth is in queue order: per CPU its first exit need not be the first in time
        first = [s for s in exits if s[0] == v["exit"]]
        assert first, "vCPU %d: no slice %r on its host lane" % (n, v["exit"])
        assert first[0][1].get("handler") == v["exit"][len("VM exit: "):] and "reason" in first[0][1], first[0][1]
        print("vCPU %d: %d function slices, %d VM exits, first call %s, first %s" % (
            n, len(fn), len(exits), v["function"], v["exit"]))
    print("ok")


# ---------------------------------------------------------------------- DOM
class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.items, self.body, self.details, self.in_details, self.text = [], {}, {}, False, ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "li" and "data-lane" in a:
            self.items.append(a)
        elif tag == "body":
            self.body = a
        elif tag == "pre" and a.get("id") == "details":
            self.details, self.in_details = a, True

    def handle_endtag(self, tag):
        if tag == "pre":
            self.in_details = False

    def handle_data(self, data):
        if self.in_details:
            self.text += data


def dom(args):
    d = Dom()
    d.feed(open(args[0]).read())
    lane, name, kind = args[1:4]
    assert d.body.get("data-draws"), "the page drew nothing"
    assert d.body.get("data-found") == "yes", "#find did not find %r" % name
    hits = [i for i in d.items if i["data-lane"] == lane and i["data-name"] == name and i["data-kind"] == kind
            and i["data-how"] == "slice"]
    assert hits, "%r not drawn as a %s slice on %r" % (name, kind, lane)
    assert d.details.get("data-name") == name and d.details.get("data-kind") == kind, d.details
    assert d.text.startswith(name + "\n" + lane), "details panel: %r" % d.text[:200]
    print("ok", lane, name, kind)


def target(args):
    d = Dom()
    d.feed(open(args[0]).read())
    hits = [i for i in d.items if i["data-lane"] == args[1] and i["data-name"] == args[2]
            and i["data-how"] == "slice"]
    assert hits, "%r not drawn on %r" % (args[2], args[1])
    print(d.body["data-view"], "%s,%s" % (hits[0]["data-x"], hits[0]["data-y"]))


def clicked(args):
    d = Dom()
    d.feed(open(args[0]).read())
    assert "data-found" not in d.body, "the page was told what to find"
    assert d.details.get("data-name") == args[1] and d.details.get("data-kind") == args[2], \
        "details after the click: %r" % d.text[:200]
    print("ok", args[1])


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    try:
        {"expect": expect, "perfetto": perfetto, "dom": dom, "target": target, "clicked": clicked}[cmd](args)
    except AssertionError as e:
        print("FAIL:", e)
        sys.exit(1)
