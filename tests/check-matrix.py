#!/usr/bin/env python3
"""Compare vmtrace's and perf's VM time correlation dry runs with the ground truth.

usage: check-matrix.py TRUTH.json VMTRACE_PERF_LINES PERF_OUTPUT
Exits 0 when: vmtrace's lines equal perf's `VMCS:` lines (same order), every
VMCS of the ground truth is reported, and each reported offset equals the
truth's offset modulo 2^56 (sign-extended from bit 55, as TSC packets hold
7 bytes)."""
import json, re, sys

truth = json.load(open(sys.argv[1]))
vt = [l.rstrip("\n") for l in open(sys.argv[2]) if l.strip()]
perf = [l.rstrip("\n") for l in open(sys.argv[3]) if l.startswith("VMCS:")]
errors = []
if vt != perf:
    errors.append("vmtrace and perf differ:\n  vmtrace: %r\n  perf:    %r" % (vt, perf))
found = {}
for l in vt:
    m = re.match(r"VMCS: (0x[0-9a-f]+|0)  TSC Offset (0x[0-9a-f]+|0)$", l)
    if not m:
        errors.append("malformed line %r" % l)
        continue
    found[int(m.group(1), 16)] = int(m.group(2), 16)
want = {}
for v in truth["vcpus"]:
    if v["guest_tsc_packets"] == 0:
        errors.append("vCPU %d never had a guest PSB+ (synth coverage)" % v["vcpu"])
    want[int(v["vmcs"], 16)] = int(v["tsc_offset56"], 16)
if set(found) != set(want):
    errors.append("VMCS set %s != truth %s" % (sorted(map(hex, found)), sorted(map(hex, want))))
for vmcs, off in want.items():
    if vmcs in found and found[vmcs] != off:
        errors.append("VMCS %#x: offset %#x != truth %#x" % (vmcs, found[vmcs], off))
    full = int(next(x["tsc_offset"] for x in truth["vcpus"] if int(x["vmcs"], 16) == vmcs), 16)
    if vmcs in found and (found[vmcs] - full) % (1 << 56):
        errors.append("VMCS %#x: offset %#x differs from the 64-bit truth %#x in the low 7 bytes" % (vmcs, found[vmcs], full))
for e in errors:
    print("  " + e.replace("\n", "\n  "))
sys.exit(1 if errors else 0)
