#!/usr/bin/env python3
"""tcg-handmade.py VARIANT [-plugin PLUGIN,out=DIR]: a stand-in for QEMU
under `vmtrace record --source tcg -- python3 tcg-handmade.py VARIANT`:
writes into the plugin's out=DIR a hand-made plugin directory (code,
meta, vcpu0.pt) where an interrupt hits right after perf 6.1 lost sync.

Kernel code at K (first bytes: a jmp far outside the image; the guest
then patched it into a 5-byte NOP, a TEXT_POKE perf ignores):
  K      jmp K+5-0x10000000   (patched at T2: nopl 0x0(%rax,%rax,1))
  K+5    jmp *%rax            -> TIP K+0x10
  K+0x10 nop
  K+0x11 jne K+0x15           <- X: the interrupt comes before it runs
  H=K+0x20 nop; nop           the handler; tracing stops at H+1
Packets: PSB+ (T1), TIP.PGE K, PSB+ (T2, FUP K: the poke's), TIP K+0x10,
FUP X + TIP H (the interrupt), FUP H+1 + TIP.PGD.  VARIANT full: the
interrupt's FUP carries the full 8-byte IP, as vmtrace-tcg.so writes it
(IP compression is optional: Intel SDM vol. 3C, IP compression);
compressed: the 2-byte form against the last IP (K+0x10)."""
import os
import struct
import sys

T0 = 0x10000000
K = 0xffffffff81000000
X, H = K + 0x11, K + 0x20
T1, T2 = T0 + 1000, T0 + 2000
CTC_N, CTC_D, CBR = 88, 2, 10            # tcg-format.h


def psb(tsc, fup):
    ctc = tsc * CTC_D // CTC_N
    fc = tsc - ctc * CTC_N // CTC_D
    b = b"\x02\x82" * 8 + b"\x19" + tsc.to_bytes(7, "little")
    b += bytes([2, 0x73, ctc & 0xff, (ctc >> 8) & 0xff, 0, fc & 0xff, (fc >> 8) & 1])
    b += bytes([2, 0x03, CBR, 0, 2, 0x43, 1, 0, 0, 0, 0, 0, 0x99, 0x01])
    if fup:
        b += full(0x1d, fup)
    return b + b"\x02\x23"


def full(op, ip):
    return bytes([op | 6 << 5]) + struct.pack("<Q", ip)


def code(vaddr, data, tsc):
    return struct.pack("<QIIQ", vaddr, len(data), 0, tsc) + data


def main():
    variant = sys.argv[1]
    out = [a for a in sys.argv if ",out=" in a][0].split(",out=")[1].split(",")[0]
    os.makedirs(out, exist_ok=True)
    old = b"\xe9" + struct.pack("<i", -0x10000000)         # jmp far away
    body = old + b"\xff\xe0" + b"\xcc" * 9 + b"\x90" + b"\x75\x02" + b"\x90\x90" + b"\xcc" * 11 + b"\x90\x90\xc3"
    assert len(body) == 0x23
    with open(os.path.join(out, "code"), "wb") as f:
        f.write(code(K, body, T0) + code(K, b"\x0f\x1f\x44\x00\x00", T2))
    pt = psb(T1, 0) + full(0x11, K) + psb(T2, K) + full(0x0d, K + 0x10)
    if variant == "full":
        pt += full(0x1d, X)
    else:
        pt += bytes([0x1d | 1 << 5]) + struct.pack("<H", X & 0xffff)
    pt += full(0x0d, H) + full(0x1d, H + 1) + b"\x01"
    with open(os.path.join(out, "vcpu0.pt"), "wb") as f:
        f.write(pt)
    with open(os.path.join(out, "meta"), "w") as f:
        f.write("format 1\napi 1\nvcpus 1\nfilter all\nmttcg 0\nstarted 2100\nbefore 1000\n"
                "vcpu 0 tid 123 bytes %d packets 16 retired 4 async 1 faults 0 rep 0 unresolved 0 "
                "filtered 0 final 0 inflight 0\n" % len(pt))


main()
