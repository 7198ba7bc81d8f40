#!/bin/sh
# vmtrace guest check/fetch --root on prepared guest trees: every check
# condition (kvm-clock, other clocksources, kptr_restrict, all-zero
# kallsyms, lockdown, BPF JIT, no kcore), and the kcore trimming on a
# synthetic /proc/kcore (bytes compared, nothing half-written on errors).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/guest-lib.sh"
need_python

T=$TMP/guest
"$PYTHON3" "$top_srcdir/tests/fake-kernel-tree.py" "$T"
bid=101112131415161718191a1b1c1d1e1f20212223
cs=$T/sys/devices/system/clocksource/clocksource0/current_clocksource
gcheck() { "$VMTRACE" guest check --root "$T" "$@" >"$TMP/out" 2>&1; }

mkdir -p "$T/usr/bin"
printf '\177ELF' >"$T/usr/bin/perf"
gcheck
check "a good guest: exit 0" test $? -eq 0
check "a good guest: every check OK" sh -c "! grep -q '^WARN\\|^FAIL' '$TMP/out' && test \$(grep -c '^OK' '$TMP/out') -eq 8"
check "a good guest: perf found (its version needs --ssh)" grep -q '^OK   perf .*perf at /usr/bin/perf' "$TMP/out"
rm "$T/usr/bin/perf"
gcheck --json
check "no perf in the guest: exit 0, WARN perf with the fix linux-perf" "$PYTHON3" -c "
import json
j = json.load(open('$TMP/out'))
c = [x for x in j['checks'] if x['name'] == 'perf'][0]
assert c['status'] == 'WARN' and 'no perf' in c['what'] and 'linux-perf' in c['fix'] and j['ok'] is True, c
"
printf '\177ELF' >"$T/usr/bin/perf"
check "a good guest: build-id and release" grep -q "kernel 6.1.0-test-amd64, build-id $bid" "$TMP/out"
check "a good guest: _stext and the module/BPF area from kallsyms" \
	grep -q "_stext 0xffffffff81000000, module/BPF area 0xffffffffc0002000-0xffffffffc0005100" "$TMP/out"

# a 21-byte notes file (namesz 4, descsz 5, no padding, not GNU): the
# parser read past its end (ASan: heap-buffer-overflow)
cp "$T/sys/kernel/notes" "$TMP/notes.good"
printf '\004\000\000\000\005\000\000\000\001\000\000\000Xen\000\001\002\003\004\005' > "$T/sys/kernel/notes"
gcheck
check "21-byte notes without a build-id: WARN build_id, no crash" sh -c "test $? -le 1 && grep -q '^WARN build_id .*no GNU build-id' '$TMP/out'"
cp "$TMP/notes.good" "$T/sys/kernel/notes"

echo kvm-clock > "$cs"
gcheck --json
check "kvm-clock: exit 1" test $? -eq 1
check "kvm-clock: FAIL with the fix no-kvmclock (JSON)" "$PYTHON3" -c "
import json
j = json.load(open('$TMP/out'))
c = [x for x in j['checks'] if x['name'] == 'clocksource'][0]
assert c['status'] == 'FAIL' and 'no-kvmclock' in c['fix'] and 'kvm-clock' in c['what'] and j['ok'] is False, c
"
echo hpet > "$cs"
gcheck
check "hpet: exit 0 (a warning)" test $? -eq 0
check "hpet: WARN, fix clocksource=tsc" sh -c "grep -q '^WARN clocksource .*clocksource hpet' '$TMP/out' && grep -q 'fix: boot the guest with clocksource=tsc' '$TMP/out'"
echo tsc > "$cs"

echo 2 > "$T/proc/sys/kernel/kptr_restrict"
gcheck
check "kptr_restrict=2: FAIL with sysctl fix" sh -c "grep -q '^FAIL kptr_restrict' '$TMP/out' && grep -q 'fix: sysctl -w kernel.kptr_restrict=1' '$TMP/out'"
echo 0 > "$T/proc/sys/kernel/kptr_restrict"

cp "$T/proc/kallsyms" "$TMP/kallsyms.good"
sed 's/^[0-9a-f]*/0000000000000000/' "$TMP/kallsyms.good" > "$T/proc/kallsyms"
gcheck
check "all-zero kallsyms: FAIL, exit 1" sh -c "test $? -eq 1 && grep -q '^FAIL kallsyms .*all 8 kallsyms addresses are 0' '$TMP/out'"
"$VMTRACE" guest fetch --root "$T" -o "$TMP/zc" >/dev/null 2>"$TMP/err"
check "all-zero kallsyms: fetch refuses" sh -c "test $? -ne 0 && grep -q 'every kallsyms address is 0' '$TMP/err' && test -z \"\$(ls -A '$TMP/zc/[kernel.kcore]/$bid' 2>/dev/null)\""
cp "$TMP/kallsyms.good" "$T/proc/kallsyms"

: > "$T/proc/kallsyms"       # what sshfs without -o direct_io shows
"$VMTRACE" guest fetch --root "$T" -o "$TMP/zc" >/dev/null 2>"$TMP/err"
check "empty kallsyms: exit 3, hints at sshfs -o direct_io" sh -c "test $? -eq 3 && grep -q 'kallsyms is empty.*-o direct_io' '$TMP/err'"
cp "$TMP/kallsyms.good" "$T/proc/kallsyms"

echo 'none integrity [confidentiality]' > "$T/sys/kernel/security/lockdown"
gcheck
check "lockdown=confidentiality: FAIL" grep -q '^FAIL lockdown .*confidentiality' "$TMP/out"
echo '[none] integrity confidentiality' > "$T/sys/kernel/security/lockdown"

echo 0 > "$T/proc/sys/net/core/bpf_jit_kallsyms"
gcheck
check "bpf_jit_kallsyms=0: WARN with the sysctl" sh -c "grep -q '^WARN bpf_jit' '$TMP/out' && grep -q 'fix: sysctl -w net.core.bpf_jit_kallsyms=1' '$TMP/out'"
echo 1 > "$T/proc/sys/net/core/bpf_jit_kallsyms"

# --- --root that is no guest root: one clear line each, exit 1
mkdir -p "$TMP/unmounted"; : >"$TMP/plainfile"
"$VMTRACE" guest fetch --root "$TMP/nonexistent" -o "$TMP/c0" 2>"$TMP/err"
check "--root missing: exit 1, says why" sh -c "test $? -eq 1 && grep -q 'nonexistent: No such file or directory' '$TMP/err'"
"$VMTRACE" guest check --root "$TMP/plainfile" 2>"$TMP/err"
check "--root a file: exit 1, not a directory" sh -c "test $? -eq 1 && grep -q 'plainfile: Not a directory' '$TMP/err'"
"$VMTRACE" guest fetch --root "$TMP/unmounted" -o "$TMP/c0" 2>"$TMP/err"
check "--root an empty directory (sshfs not mounted): exit 1, how to mount" \
	sh -c "test $? -eq 1 && grep -q 'no proc/kallsyms.*sshfs -o direct_io' '$TMP/err' && test ! -e '$TMP/c0'"
"$VMTRACE" guest fetch --bogus 2>"$TMP/err"
check "unknown option: exit 2, said once" sh -c "test $? -eq 2 && test \$(wc -l <'$TMP/err') -eq 1"
# under --json every error is one JSON object on stdout, with the exit status
"$VMTRACE" guest fetch --root "$T" --json --bogus >"$TMP/out" 2>"$TMP/err"
rc=$?
check "unknown option under --json: exit 2, nothing on stderr" sh -c "test $rc -eq 2 && test ! -s '$TMP/err'"
check "... the error as a JSON object on stdout, with the exit status" json_check "$TMP/out" \
	"j == {'error': 'vmtrace guest fetch: Unknown option --bogus (see vmtrace guest fetch --help)', 'exit_status': 2}"
"$VMTRACE" guest fetch --root "$TMP/nonexistent" -o "$TMP/c0" --json >"$TMP/out" 2>"$TMP/err"
rc=$?
check "--root missing under --json: exit 1, nothing on stderr" sh -c "test $rc -eq 1 && test ! -s '$TMP/err'"
check "... the error as JSON, naming the root, with exit_status 1" json_check "$TMP/out" \
	"set(j) == {'error', 'exit_status'} and j['exit_status'] == 1 and 'nonexistent: No such file or directory' in j['error']"

# --- fetch: the trimmed kcore --------------------------------------------
C=$TMP/cache
"$VMTRACE" guest fetch --root "$T" -o "$C" --json >"$TMP/json" 2>"$TMP/err"
check "fetch --root: exit 0" test $? -eq 0
snap=$("$PYTHON3" -c "import json; print(json.load(open('$TMP/json'))['dir'])")
check "fetch --root: kallsyms, modules, kcore in the snapshot (0600)" \
	test "$(stat -c '%n %a' "$snap"/* | sed 's|.*/||')" = "kallsyms 600
kcore 600
modules 600"
check "fetch: JSON ranges are the entry trampoline, kernel text and the module/BPF area" "$PYTHON3" -c "
import json
j = json.load(open('$TMP/json'))
r = [(x['start'], x['end'], x['what']) for x in j['ranges']]
assert r == [('0xfffffe0000009000', '0xfffffe000000a000', 'entry trampoline'), ('0xffffffff81000000', '0xffffffff81230000', 'kernel text'), ('0xffffffffc0002000', '0xffffffffc0006000', 'modules/BPF')], r
assert j['kcore_bytes'] == 0x230000 + 0x4000, j['kcore_bytes']
"
check "trimmed kcore: an ELF core that libelf reads, with only the needed bytes" "$PYTHON3" - "$T/proc/kcore" "$snap/kcore" <<'EOF'
import struct, sys
def loads(path):
    d = open(path, 'rb').read()
    assert d[:4] == b'\x7fELF' and d[4] == 2 and struct.unpack('<HH', d[16:20]) == (4, 62), path
    phoff, = struct.unpack('<Q', d[32:40]); phnum, = struct.unpack('<H', d[56:58])
    out = []
    for i in range(phnum):
        t, fl, off, va, pa, fs, ms, al = struct.unpack('<IIQQQQQQ', d[phoff + 56 * i:phoff + 56 * (i + 1)])
        if t == 1:
            out.append((va, off, fs))
    return d, out
src, ss = loads(sys.argv[1])
dst, ds = loads(sys.argv[2])
assert [(va, fs) for va, _, fs in ds] == [(0xffffffff81000000, 0x230000), (0xffffffffc0002000, 0x4000)], ds
def at(d, segs, va, n):
    for s, off, fs in segs:
        if s <= va < s + fs:
            return d[off + va - s:off + va - s + n]
for va, _, fs in ds:
    assert at(dst, ds, va, fs) == at(src, ss, va, fs), hex(va)
EOF
check "libelf validates the trimmed kcore; bytes at do_syscall_64 match" \
		test "$("$TEST_GUESTFS" --peek "$snap/kcore" 0xffffffff81001000 64)" = \
		"$(od -An -tx1 -v -j $((0x10000 + 0x1000)) -N 64 "$T/proc/kcore" | tr -d ' \n')"
check "the direct map is not copied" test "$(stat -c %s "$snap/kcore")" -lt $((0x300000))

# a cache directory whose name is not UTF-8 (a byte 0xff): the JSON stays
# valid UTF-8 with U+FFFD for the byte; the files are where -o says
C8="$TMP/$(printf 'c\377')"
"$VMTRACE" guest fetch --root "$T" -o "$C8" --json >"$TMP/json8" 2>"$TMP/err"
check "fetch -o CACHE with a byte 0xff: exit 0" test $? -eq 0
check "fetch -o CACHE with a byte 0xff: JSON in strict UTF-8, the paths with U+FFFD" json_check "$TMP/json8" \
	"j['dir'].startswith('$TMP/c\\ufffd/[kernel.kcore]/$bid/') and j['kallsyms'] == j['dir'] + '/kallsyms' and j['modules'] == j['dir'] + '/modules' and j['kcore'] == j['dir'] + '/kcore'"
check "... and the snapshot is under CACHE's real name (with the byte)" sh -c "test -s \"\$(ls -d '$C8/[kernel.kcore]/$bid'/*)/kcore\""
rm -rf "$C8"

"$VMTRACE" guest fetch --root "$T" -o "$C" >/dev/null 2>"$TMP/err"
check "identical guest: the snapshot is reused" grep -qF "same snapshot found in $snap" "$TMP/err"
"$VMTRACE" guest fetch --root "$T" -o "$C" --no-kcore --json >"$TMP/json2" 2>/dev/null
check "reused with --no-kcore: JSON still names the snapshot's kcore" "$PYTHON3" -c "
import json; j = json.load(open('$TMP/json2')); assert j['reused'] and j['kcore'] == '$snap/kcore', j"

# a kcore whose module segment lies past the end of the file: no snapshot, nothing half-written
echo "mod_b 8192 0 - Live 0xffffffffc0010000" >> "$T/proc/modules"
truncate -s $((0x500000 + 0x8000)) "$T/proc/kcore"
"$VMTRACE" guest fetch --root "$T" -o "$C" >/dev/null 2>"$TMP/err"
rc=$?
check "short kcore: exit 3 (bad input), says where" sh -c "test $rc -eq 3 && grep -q 'short read' '$TMP/err'"
check "short kcore: only the earlier snapshot, no temporary directory" test "$(ls -A "$C/[kernel.kcore]/$bid")" = "$(basename "$snap")"

# a kcore whose text segment claims 2 GiB from 0xffffffff81000000 (past 2^64):
# refused at once (it looped, allocating, until memory ran out)
cp "$T/proc/kcore" "$TMP/kcore.good"
"$PYTHON3" -c "import struct,sys; f=open(sys.argv[1],'r+b'); f.seek(64+56+32); f.write(struct.pack('<QQ',1<<31,1<<31))" "$T/proc/kcore"
# (memory capped where it can be: ASan reserves terabytes of address space)
(grep -q __asan_init "$VMTRACE" || ulimit -v 2000000; exec timeout 60 "$VMTRACE" guest fetch --root "$T" -o "$C" >/dev/null 2>"$TMP/err")
rc=$?
check "wrapping kcore segment: exit 3, says so" sh -c "test $rc -eq 3 && grep -q 'wraps around: not a kcore' '$TMP/err'"
check "wrapping kcore segment: no snapshot added" test "$(ls -A "$C/[kernel.kcore]/$bid")" = "$(basename "$snap")"
"$VMTRACE" guest check --root "$T" >"$TMP/out" 2>&1
check "wrapping kcore segment: check says FAIL kcore" grep -q '^FAIL kcore .*wraps around' "$TMP/out"
cp "$TMP/kcore.good" "$T/proc/kcore"

# (a kallsyms that changes at every read: t0073, over SSH)

# --- --root is the guest's root: links resolve beneath it, only regular
# files, each read bounded; errors never show the bytes read
mv "$T/proc/kallsyms" "$TMP/kallsyms.file"
echo "SECRET-$$-host-only" > "$TMP/secret"
ln -s "$TMP/secret" "$T/proc/kallsyms"
"$VMTRACE" guest fetch --root "$T" -o "$TMP/cs" --no-kcore >/dev/null 2>"$TMP/err"
rc=$?
check "kallsyms -> a host file: the guest's path instead (none: no proc/kallsyms, exit 1)" \
	sh -c "test $rc -eq 1 && grep -q 'has no proc/kallsyms' '$TMP/err'"
check "... and the host file's contents never appear" sh -c "! grep -q SECRET '$TMP/err'"
rm "$T/proc/kallsyms"; ln -s "../../../../../../../../..$TMP/secret" "$T/proc/kallsyms"
"$VMTRACE" guest check --root "$T" >"$TMP/out" 2>&1
check "kallsyms -> ../../..: clamped at the root (no proc/kallsyms), no host bytes" \
	sh -c "grep -q 'has no proc/kallsyms' '$TMP/out' && ! grep -q SECRET '$TMP/out'"
mkdir -p "$T/boot"; cp "$TMP/kallsyms.file" "$T/boot/ks"
rm "$T/proc/kallsyms"; ln -s /boot/ks "$T/proc/kallsyms"
"$VMTRACE" guest fetch --root "$T" -o "$TMP/cs" --no-kcore >"$TMP/out" 2>"$TMP/err"
check "kallsyms -> /boot/ks: the guest's own absolute link works" \
	sh -c "test $? -eq 0 && cmp -s \"\$(cat '$TMP/out')\" '$TMP/kallsyms.file'"
rm "$T/proc/kallsyms"; ln -s /dev/zero "$T/proc/kallsyms"
timeout 60 "$VMTRACE" guest fetch --root "$T" -o "$TMP/cs" --no-kcore >/dev/null 2>"$TMP/err"
check "kallsyms -> /dev/zero: the guest's /dev/zero (none here), exit 1 at once" \
	sh -c "test $? -eq 1 && grep -q 'has no proc/kallsyms' '$TMP/err'"
rm "$T/proc/kallsyms"
if mkdir -p "$T/dev" && mknod "$T/dev/zero" c 1 5 2>/dev/null; then
	ln -s /dev/zero "$T/proc/kallsyms"
	timeout 60 "$VMTRACE" guest fetch --root "$T" -o "$TMP/cs" --no-kcore >/dev/null 2>"$TMP/err"
	check "kallsyms -> a device: refused at once, exit 3" sh -c "test $? -eq 3 && grep -q 'not a regular file (a device)' '$TMP/err'"
	rm "$T/proc/kallsyms" "$T/dev/zero"
fi
mkfifo "$T/proc/kallsyms"
timeout 60 "$VMTRACE" guest fetch --root "$T" -o "$TMP/cs" --no-kcore >/dev/null 2>"$TMP/err"
check "kallsyms a FIFO (no writer): refused at once, exit 3" sh -c "test $? -eq 3 && grep -q 'not a regular file (a FIFO)' '$TMP/err'"
rm "$T/proc/kallsyms"
truncate -s 200M "$T/proc/kallsyms"
(grep -q __asan_init "$VMTRACE" || ulimit -v 1000000; exec timeout 60 "$VMTRACE" guest fetch --root "$T" -o "$TMP/cs" --no-kcore >/dev/null 2>"$TMP/err")
check "a 200 MiB kallsyms: refused beyond 128 MiB, exit 3" sh -c "test $? -eq 3 && grep -q 'kallsyms is larger than 128 MiB' '$TMP/err'"
rm "$T/proc/kallsyms"; mv "$TMP/kallsyms.file" "$T/proc/kallsyms"
cp "$T/sys/kernel/notes" "$TMP/notes.good"
head -c 1048576 /dev/zero >> "$T/sys/kernel/notes"
gcheck
check "a 1 MiB notes file: WARN build_id, larger than 64 KiB" grep -q '^WARN build_id .*notes is larger than 64 KiB' "$TMP/out"
cp "$TMP/notes.good" "$T/sys/kernel/notes"
printf '6.1.0\033]0;evil\007\n' > "$T/proc/sys/kernel/osrelease"
"$VMTRACE" guest fetch --root "$T" -o "$TMP/cs" --no-kcore >/dev/null 2>"$TMP/err"
check "osrelease with control characters: exit 3, not echoed" \
	sh -c "test $? -eq 3 && grep -q 'osrelease is not a kernel release' '$TMP/err' && ! grep -q evil '$TMP/err'"
echo 6.1.0-test-amd64 > "$T/proc/sys/kernel/osrelease"
printf 'ffffffff81000000 T _stext\nSECRET line\n' > "$TMP/bad"; cp "$T/proc/kallsyms" "$TMP/kallsyms.good"; cp "$TMP/bad" "$T/proc/kallsyms"
"$VMTRACE" guest fetch --root "$T" -o "$TMP/cs" --no-kcore >/dev/null 2>"$TMP/err"
check "a malformed kallsyms line: exit 3, its number, not its bytes" \
	sh -c "test $? -eq 3 && grep -q 'kallsyms line 2 is malformed' '$TMP/err' && ! grep -q SECRET '$TMP/err'"
cp "$TMP/kallsyms.good" "$T/proc/kallsyms"

rm "$T/proc/kcore"
gcheck
check "no /proc/kcore: FAIL with the --no-kcore fix" sh -c "grep -q '^FAIL kcore' '$TMP/out' && grep -q 'fix: .*--no-kcore' '$TMP/out'"
"$VMTRACE" guest fetch --root "$T" -o "$C" --no-kcore >"$TMP/out" 2>&1
check "no /proc/kcore: fetch --no-kcore works" test $? -eq 0
"$VMTRACE" guest check --root "$TMP/nonexistent" >/dev/null 2>&1
check "--root of a missing directory: exit 1" test $? -eq 1
finish
