#!/usr/bin/env python3
"""kernel-code.py - real x86-64 kernel code for the decoding tests.

    tests/kernel-code.py VMLINUX SLIDE OUTDIR [--kvm-stub | --init]
    tests/kernel-code.py --vmlinux VMLINUX OUT [SLIDE]

Debian ships a stripped vmlinux and a stub System.map, so the symbols come
from the kernel's own kallsyms tables inside .rodata (the ones /proc/kallsyms
reads): the token table is found by its run of one-character digit tokens,
its index right after it, then num_syms, names, markers and the
base-relative offsets around them - before the token table (6.1, with
kallsyms_seqs_of_names) or the offsets and base after its index (6.12:
num_syms, names, markers, token table and index, offsets, base, seqs).
Writes, for the kernel relocated by SLIDE (a
KASLR-like shift, e.g. 0x2000000):

  OUTDIR/kallsyms   what /proc/kallsyms of that kernel shows (text symbols
                    and the section markers, TAB before [module] names)
  OUTDIR/modules    /proc/modules (empty, or the stand-in below)
  OUTDIR/full.core  an ELF64 core of the kernel's first PT_LOAD (text and
                    rodata) at its relocated address - tests/trim-kcore cuts
                    it down the way `vmtrace guest fetch` cuts /proc/kcore

--vmlinux writes OUT: VMLINUX with symbols, as a debug build's vmlinux
has them (Debian's keeps its section headers but no .symtab): a .symtab
and .strtab added at its end, of the text symbols kept below (FUNC: local
for t, weak for W/w, global for T; the markers _text, _stext, ... NOTYPE
labels), each in the section that holds it (.text, .init.text, ...), a
size up to the next symbol's address or its section's end - but every
seventh function of 32 bytes or more ends halfway (code without a symbol,
as padding or a symbol-less stretch of a real vmlinux) and every eleventh
has none (asm's: perf ends it at the next symbol).  At its link address
(the file `perf --guestvmlinux` takes for a running kernel, which a tool
moves by the kernel MMAP record), or linked SLIDE bytes higher.

--init puts the kernel's other executable PT_LOAD in the core too (.init.text
and the rest the boot runs or patches from): synth then walks init code as
well, which a vmlinux's symbols put in a section of its own (perf names its
DSO "[guest.kernel.kallsyms].init.text").

--kvm-stub adds a 4 KiB module "kvm_intel" at 0xffffffffc0a00000 standing in
for KVM's VM-entry code (the Debian kernel has KVM as modules, not in
vmlinux), after Linux 6.1's __vmx_vcpu_run, with the run loop (6.1's
vcpu_run, vcpu_enter_guest) folded into one function: vmx_vcpu_run:
`call *%rax` (the exit handler, a real kernel function), `call
__vmx_vcpu_run`, `jmp vmx_vcpu_run`; __vmx_vcpu_run: `vmresume`;
vmx_vmexit (the VMCS's host RIP, a label inside __vmx_vcpu_run as in
vmenter.S): `ret` - back to __vmx_vcpu_run's caller, as the real one
returns after a VM exit (a decoder's call stack - perf's --call-trace
indentation - then drops the guest's frames at every exit, as it does
on real recordings).  Only symbols of type T/t/W/w/A and the markers are
kept for the text; relocated code is exact because x86-64 direct
branches are relative.
"""
import struct
import sys

KVM_BASE = 0xffffffffc0a00000
KVM_CODE = bytes([0xff, 0xd0,                    # 0x00 vmx_vcpu_run: call *%rax
                  0xe8, 0x03, 0x00, 0x00, 0x00,  # 0x02 call __vmx_vcpu_run
                  0xeb, 0xf7,                    # 0x07 jmp vmx_vcpu_run
                  0xcc,                          # 0x09 int3
                  0x0f, 0x01, 0xc3,              # 0x0a __vmx_vcpu_run: vmresume
                  0x0f, 0x0b,                    # 0x0d ud2
                  0xc3])                         # 0x0f vmx_vmexit: ret
KVM_SYMS = ((0x00, 'vmx_vcpu_run'), (0x0a, '__vmx_vcpu_run'), (0x0f, 'vmx_vmexit'))


def a8(x):
    return (x + 7) & ~7


def find_tokens(d):
    digits = b''.join(bytes([c]) + b'\0' for c in b'0123456789')
    start = 0
    while True:
        p = d.find(digits, start)
        if p < 0:
            raise SystemExit("kernel-code.py: no kallsyms token table in the image")
        start = p + 1
        q = p
        for _ in range(0x30):            # back to token 0
            if d[q - 1] != 0:
                break
            q = d.rfind(b'\0', 0, q - 1) + 1
        else:
            t = q
            e = t
            for _ in range(256):
                e = d.index(b'\0', e) + 1
            idx_at = a8(e)
            idx = struct.unpack_from('<256H', d, idx_at)
            if idx[0] == 0 and idx[0x30] == p - t:
                return t, [d[t + i:d.index(b'\0', t + i)] for i in idx]


def markers_fit(d, ms, n):
    """Are the ceil(n / 256) u32 at ms kallsyms_markers (0, rising)?"""
    m = (n + 255) // 256
    if ms < 0:
        return None
    mk = struct.unpack_from('<%dI' % m, d, ms)
    if mk[0] != 0 or any(mk[i] >= mk[i + 1] for i in range(m - 1)):
        return None
    return mk


def token_index_end(d, t):
    """The end of the token index (256 u16, 8-aligned after the table)."""
    e = t
    for _ in range(256):
        e = d.index(b'\0', e) + 1
    return a8(e) + 512


def find_tables(d, t):
    """6.1: markers, seqs_of_names (3 bytes per symbol) and the token
    table are adjacent: try every symbol count until the markers fit.
    Returns the symbol count, where the names and the offsets start, and
    where the base is."""
    for n in range(1000, 1000000):
        seqs = t - a8(3 * n)
        ms = seqs - a8(4 * ((n + 255) // 256))
        mk = markers_fit(d, ms, n)
        if not mk:
            continue
        for nn in (n, n + 1):            # num_syms (u64) precedes names
            p = d.rfind(nn.to_bytes(8, 'little'), max(0, ms - 8 * mk[-1] - 4096), ms)
            if p > 0 and p % 8 == 0 and ms - (p + 8) >= mk[-1]:
                return nn, p + 8, p - 8 - a8(4 * nn), p - 8
    return None


def find_tables_612(d, t, idx_end):
    """6.12: the offsets (4 bytes a symbol) right after the token index,
    then the base (u64, 8-aligned, a kernel address); the markers right
    before the token table; num_syms (u32) before the names (8-aligned)."""
    at = idx_end
    while True:
        at = d.find(b'\xff\xff\xff\xff', at, idx_end + 4 * 1000000 + 8)
        if at < 0:
            return None
        base_at, at = at - 4, at + 1
        n = (base_at - idx_end) // 4
        if base_at % 8 or n < 1000 or d[base_at] or d[base_at + 1] & 0xf:
            continue                     # (a base is page-aligned)
        for nn in (n, n - 1):            # (the base's alignment after the offsets)
            ms = t - a8(4 * ((nn + 255) // 256))   # (both 8-aligned)
            mk = markers_fit(d, ms, nn)
            p = mk and d.rfind(nn.to_bytes(4, 'little'), max(0, ms - 8 * mk[-1] - 4096), ms - mk[-1])
            if p and p > 0 and p % 4 == 0:
                return nn, a8(p + 4), idx_end, base_at


def symbols(d):
    t, tokens = find_tokens(d)
    found = find_tables_612(d, t, token_index_end(d, t)) or find_tables(d, t)
    if not found:
        raise SystemExit("kernel-code.py: kallsyms tables not found")
    n, names, offs_at, base_at = found
    base = struct.unpack_from('<Q', d, base_at)[0]
    offs = struct.unpack_from('<%di' % n, d, offs_at)
    out = []
    p = names
    for i in range(n):
        ln = d[p]
        p += 1
        if ln & 0x80:
            ln = (ln & 0x7f) | (d[p] << 7)
            p += 1
        s = b''.join(tokens[c] for c in d[p:p + ln]).decode('ascii', 'replace')
        p += ln
        o = offs[i]
        addr = o if o >= 0 else base - 1 - o
        out.append((addr, s[0], s[1:]))
    return out


def exec_segments(d):
    e_phoff, = struct.unpack_from('<Q', d, 32)
    e_phnum, = struct.unpack_from('<H', d, 56)
    out = []
    for i in range(e_phnum):
        p_type, p_flags, p_off, p_vaddr, _, p_filesz = struct.unpack_from('<IIQQQQ', d, e_phoff + 56 * i)
        if p_type == 1 and p_flags & 1 and p_vaddr >= 0xffffffff80000000:
            out.append((p_vaddr, d[p_off:p_off + p_filesz]))
    if not out:
        raise SystemExit("kernel-code.py: no executable PT_LOAD")
    return out


def text_segment(d):
    return exec_segments(d)[0]


def write_core(path, segs):
    off = 64 + 56 * len(segs)
    off = (off + 4095) & ~4095
    hdr = bytearray(b'\x7fELF\x02\x01\x01' + b'\0' * 9)
    hdr += struct.pack('<HHIQQQIHHHHHH', 4, 62, 1, 0, 64, 0, 0, 64, 56, len(segs), 0, 0, 0)
    body = []
    for vaddr, data in segs:
        hdr += struct.pack('<IIQQQQQQ', 1, 7, off, vaddr, 0, len(data), len(data), 4096)
        body.append((off, data))
        off = (off + len(data) + 4095) & ~4095
    with open(path, 'wb') as f:
        f.write(hdr)
        for o, data in body:
            f.seek(o)
            f.write(data)


MARKERS = ('_text', '_stext', '_etext', '_sinittext', '_einittext')


def write_vmlinux(path, d, syms, slide=0):
    """The vmlinux d (Debian's: section headers, no .symtab) with a .symtab
    and .strtab of syms ((addr, type, name), sorted; kallsyms types) added
    at its end, each symbol in the allocated section that holds it; linked
    slide bytes higher (its kernel PT_LOADs, sections and symbols)."""
    d = bytearray(d)
    e_phoff, = struct.unpack_from('<Q', d, 32)
    e_phnum, = struct.unpack_from('<H', d, 56)
    for k in range(e_phnum):
        at = e_phoff + 56 * k
        if struct.unpack_from('<Q', d, at + 16)[0] >= 0xffffffff80000000:
            struct.pack_into('<Q', d, at + 16, struct.unpack_from('<Q', d, at + 16)[0] + slide)
    e_shoff, = struct.unpack_from('<Q', d, 40)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from('<HHH', d, 58)
    shdrs = [list(struct.unpack_from('<IIQQQQIIQQ', d, e_shoff + i * 64)) for i in range(e_shnum)]
    for h in shdrs:
        if h[3] >= 0xffffffff80000000:
            h[3] += slide
    syms = [(a + slide, t, n) for a, t, n in syms]
    old = shdrs[e_shstrndx]
    shstr = bytearray(d[old[4]:old[4] + old[5]])
    secs = [(i, h[3], h[3] + h[5]) for i, h in enumerate(shdrs)
            if h[2] & 2 and h[3] >= 0xffffffff80000000 and h[5]]          # SHF_ALLOC
    strtab = bytearray(b'\0')
    local, glob = [], []                 # (weak 'w' symbols: global, as ELF wants locals first)
    for i, (addr, typ, name) in enumerate(syms):
        sec = [j for j, lo, hi in secs if lo <= addr < hi]
        if not sec:
            continue
        size = 0
        if typ in 'TtWw' and name not in MARKERS:
            nxt = [a for a, _, _ in syms[i + 1:i + 8] if a > addr]
            end = min(([nxt[0]] if nxt else []) + [hi for j, lo, hi in secs if j == sec[0]])
            size = end - addr
            if i % 7 == 3 and size >= 32:
                size //= 2               # a gap after it: no symbol there (perf: [unknown])
            elif i % 11 == 5:
                size = 0                 # unsized (asm): up to the next symbol, as perf fixes it
        (local if typ == 't' else glob).append((addr, typ, name, size, sec[0]))
    symtab = bytearray(24)
    for addr, typ, name, size, sec in local + glob:
        bind = 0 if typ == 't' else 2 if typ in 'Ww' else 1          # LOCAL, WEAK, GLOBAL
        kind = 0 if name in MARKERS else 2                            # NOTYPE labels, FUNC
        symtab += struct.pack('<IBBHQQ', len(strtab), bind << 4 | kind, 0, sec, addr, size)
        strtab += name.encode() + b'\0'
    sym_name = len(shstr)
    shstr += b'.symtab\0'
    str_name = len(shstr)
    shstr += b'.strtab\0'
    out = bytearray(d)
    def put(data, align=8):
        while len(out) % align:
            out.append(0)
        at = len(out)
        out.extend(data)
        return at
    sym_off = put(symtab)
    str_off = put(strtab)
    shs_off = put(shstr)
    shdrs[e_shstrndx][4], shdrs[e_shstrndx][5] = shs_off, len(shstr)
    shdrs.append([sym_name, 2, 0, 0, sym_off, len(symtab), e_shnum + 1, 1 + len(local), 8, 24])
    shdrs.append([str_name, 3, 0, 0, str_off, len(strtab), 0, 0, 1, 0])
    sh_off = put(b''.join(struct.pack('<IIQQQQIIQQ', *h) for h in shdrs))
    struct.pack_into('<Q', out, 40, sh_off)
    struct.pack_into('<H', out, 60, len(shdrs))
    with open(path, 'wb') as f:
        f.write(out)


def main():
    if len(sys.argv) in (4, 5) and sys.argv[1] == '--vmlinux':
        d = open(sys.argv[2], 'rb').read()
        kept = sorted((a, t, n) for a, t, n in symbols(d)
                      if a >= 0xffffffff80000000 and (t in 'TtWwA' or n in ('_text', '_stext', '_etext')))
        write_vmlinux(sys.argv[3], d, kept, int(sys.argv[4], 0) if len(sys.argv) == 5 else 0)
        return
    if len(sys.argv) not in (4, 5) or (len(sys.argv) == 5 and sys.argv[4] not in ('--kvm-stub', '--init')):
        raise SystemExit(__doc__)
    d = open(sys.argv[1], 'rb').read()
    slide = int(sys.argv[2], 0)
    out = sys.argv[3]
    stub = len(sys.argv) == 5 and sys.argv[4] == '--kvm-stub'
    init = len(sys.argv) == 5 and sys.argv[4] == '--init'
    lines = []
    for addr, typ, name in symbols(d):
        if addr < 0xffffffff80000000:
            continue                     # per-CPU offsets
        if typ in 'TtWwA' or name in ('_text', '_stext', '_etext', '_sinittext', '_einittext'):
            lines.append('%016x %s %s\n' % (addr + slide, typ, name))
    segs = [(v + slide, t) for v, t in (exec_segments(d) if init else [text_segment(d)])]
    mods = ''
    if stub:
        lines.extend('%016x t %s\t[kvm_intel]\n' % (KVM_BASE + off, name) for off, name in KVM_SYMS)
        segs.append((KVM_BASE, KVM_CODE + b'\xcc' * (4096 - len(KVM_CODE))))
        mods = 'kvm_intel 4096 0 - Live 0x%x\n' % KVM_BASE
    with open(out + '/kallsyms', 'w') as f:
        f.writelines(lines)
    with open(out + '/modules', 'w') as f:
        f.write(mods)
    write_core(out + '/full.core', segs)


if __name__ == '__main__':
    main()
