#!/usr/bin/env python3
"""fake-kernel-tree.py DIR: a prepared kernel tree for the tests - /proc and
/sys files of a Linux 6.1 machine (osrelease, kptr_restrict, BPF JIT,
lockdown, clocksource, build-id notes, kallsyms, modules) and a synthetic
/proc/kcore: an ELF core with a PT_NOTE, kernel text (4 MiB at
0xffffffff81000000), the module area (1 MiB at 0xffffffffc0000000) and a
direct-map segment (1 MiB) that decoding does not need."""
import os, struct, sys, random
t = sys.argv[1]
def put(path, data, mode='w'):
    p = os.path.join(t, path.lstrip('/'))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, mode) as f:
        f.write(data)
put('/proc/sys/kernel/osrelease', '6.1.0-test-amd64\n')
put('/proc/sys/kernel/kptr_restrict', '0\n')
put('/proc/sys/net/core/bpf_jit_enable', '1\n')
put('/proc/sys/net/core/bpf_jit_kallsyms', '1\n')
put('/sys/kernel/security/lockdown', '[none] integrity confidentiality\n')
put('/sys/devices/system/clocksource/clocksource0/current_clocksource', 'tsc\n')
put('/sys/devices/system/clocksource/clocksource0/available_clocksource', 'tsc hpet acpi_pm \n')
bid = bytes(range(0x10, 0x24))
put('/sys/kernel/notes', struct.pack('<III', 4, 20, 3) + b'GNU\0' + bid, 'wb')
put('/proc/kallsyms', ''.join([
    'ffffffff81000000 T _stext\n', 'ffffffff81000000 T startup_64\n', 'ffffffff81001000 T do_syscall_64\n',
    'ffffffff81230000 T _etext\n', 'ffffffff82000000 D some_data\n',
    'fffffe0000009000 T __entry_SYSCALL_64_trampoline\n',     # not mapped by this kcore: skipped
    'ffffffffc0002000 t mod_a_init\t[mod_a]\n', 'ffffffffc0004100 t bpf_prog_0123456789abcdef_x\t[bpf]\n']))
put('/proc/modules', 'mod_a 8192 0 - Live 0xffffffffc0002000\n')
# /proc/kcore: PT_NOTE, kernel text (4 MiB), modules (1 MiB), direct map (1 MiB)
rnd = random.Random(7)
segs = [(0xffffffff81000000, 0x400000, 0x10000), (0xffffffffc0000000, 0x100000, 0x500000),
        (0xffff888000000000, 0x100000, 0x700000)]
eh = b'\x7fELF' + bytes([2, 1, 1]) + bytes(9) + struct.pack('<HHIQQQIHHHHHH', 4, 62, 1, 0, 64, 0, 0, 64, 56,
                                                                1 + len(segs), 0, 0, 0)
ph = struct.pack('<IIQQQQQQ', 4, 0, 0x1000, 0, 0, 0, 0, 4)
for va, size, off in segs:
    ph += struct.pack('<IIQQQQQQ', 1, 7, off, va, 0, size, size, 4096)
p = os.path.join(t, 'proc/kcore')
with open(p, 'wb') as f:
    f.write(eh + ph)
    for va, size, off in segs:
        f.seek(off)
        f.write(bytes(rnd.getrandbits(8) for _ in range(size)) if size <= 0x100000 else os.urandom(size))
