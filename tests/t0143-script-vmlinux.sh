#!/bin/sh
# vmtrace script --guestvmlinux FILE: the guest kernel from a vmlinux with
# symbols (not kcore and kallsyms), at its link address in the file and
# moved where the recording's guest kernel MMAP ("[guest.kernel.kallsyms]
# _text", pgoff: _text's address) says, as perf moves it; its symbols as
# perf reads a vmlinux's (sizes, of the symbols at one address the one
# perf keeps).  The file: tests/kernel-code.py --vmlinux, the Debian
# kernel whose code the synth recordings' guests run 0x2000000 and (-alt)
# 0x3400000 above it.  Per configuration, vmtrace = perf script
# --guestvmlinux = synth's ground truth: branches, call traces,
# instructions.  --vmlinux (host): its module code (the KVM stand-in) is no
# part of a vmlinux, so both decoders err there - at the same address -
# and both name its addresses after the module's MMAP record
# ("[kvm_intel]"); everything else vmtrace prints is what it prints from
# kcore_dir.
# Init code: perf maps a vmlinux's other sections that hold symbols as
# DSOs of their own ("[guest.kernel.kallsyms].init.text") and vmtrace names
# them so, but perf cannot read their code ("Failed to get instruction")
# where vmtrace decodes it - as the kcore that has it decodes it, in both.
# Usage errors; a vmlinux without symbols is refused; report takes it too.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_perf
need_python
make_code_dirs --alt --vmlinux
GV="--guestvmlinux $VMLINUX"

while read -r name opts; do
	[ -n "$name" ] || continue
	# the sanitizer suite: two rows (the same code paths; the time is
	# perf's and the comparisons')
	asan_skip "$name" thread-1vcpu-timeless cpu-2vcpu-2cpu-timed thread-2vcpu-timed-alt && continue
	f=$TMP/$name.data
	gc=$GUEST_CODE
	case $name in *-alt) GUEST_CODE=$GUEST_CODE2 ;; esac
	# shellcheck disable=SC2086
	code_recording "$name" 64K $opts
	st=$?
	GUEST_CODE=$gc
	[ $st = 0 ] || continue
	pc= nd= fields=comm,tid,cpu,time,ip,sym,symoff,dso,addr
	case $opts in *--per-cpu*) pc=--per-cpu nd=--no-depth ;; esac
	case $opts in *--timeless*) fields=comm,tid,cpu,ip,sym,symoff,dso,addr ;; esac
	# shellcheck disable=SC2086
	timeout 300 "$PERF" script -i "$f" $GV --itrace=be -F "$fields" >"$TMP/$name.perf" 2>"$TMP/$name.perf.err"
	check "$name: perf script --guestvmlinux exit 0" test $? -eq 0
	# shellcheck disable=SC2086
	"$VMTRACE" script "$f" $GV >"$TMP/$name.vt" 2>"$TMP/$name.vt.err"
	check "$name: vmtrace script --guestvmlinux exit 0" test $? -eq 0 || sed 's/^/#   /' "$TMP/$name.vt.err"
	check "$name: guest code decoded, with symbols" grep -q 'ffffffff8[0-9a-f]* [a-z_].*guest.kernel.kallsyms' "$TMP/$name.vt"
	check "$name: and code between symbols, the kernel's yet in none ($(grep -c 'unknown] (\[guest.kernel' "$TMP/$name.vt") lines)" \
		grep -q 'ffffffff8[0-9a-f]* \[unknown\] (\[guest.kernel.kallsyms\])' "$TMP/$name.vt"
	# shellcheck disable=SC2086
	"$PYTHON3" "$top_srcdir/tests/script-compare.py" --time "$TMP/$name.perf" "$TMP/$name.vt" "$TMP/$name.branches" $pc \
		>"$TMP/$name.cmp" 2>&1
	ck_rc=$?
	check "$name --itrace=b: vmtrace = perf = ground truth ($(head -1 "$TMP/$name.cmp"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$TMP/$name.cmp"
	# shellcheck disable=SC2086
	timeout 300 "$PERF" script -i "$f" $GV --call-trace >"$TMP/$name.call.perf" 2>/dev/null
	# shellcheck disable=SC2086
	"$VMTRACE" script "$f" $GV --call-trace >"$TMP/$name.call.vt" 2>/dev/null
	# shellcheck disable=SC2086
	"$PYTHON3" "$top_srcdir/tests/script-compare.py" --time --calls=call $nd "$TMP/$name.call.perf" "$TMP/$name.call.vt" \
		"$TMP/$name.branches" $pc >"$TMP/$name.call.cmp" 2>&1
	ck_rc=$?
	check "$name --call-trace: vmtrace = perf = ground truth ($(head -1 "$TMP/$name.call.cmp"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$TMP/$name.call.cmp"
done <<'CONFIGS'
thread-1vcpu-timeless   --vcpus 1 --timeless
thread-2vcpu-timed      --vcpus 2 --psb-period 1 --seed 5
cpu-2vcpu-2cpu-timed    --vcpus 2 --per-cpu --cpus 2 --psb-period 0
thread-2vcpu-timed-alt  --vcpus 2 --psb-period 1 --seed 9
thread-2vm-cyc          --vcpus 2 --vms 2 --cyc --psb-period 0
CONFIGS

# instructions (one recording; the sanitizer build leaves it out)
r=$TMP/thread-2vcpu-timed
if ! asan_build; then
	# shellcheck disable=SC2086
	timeout 300 "$PERF" script -i "$r.data" $GV --insn-trace >"$r.insn.perf" 2>/dev/null
	# shellcheck disable=SC2086
	"$VMTRACE" script "$r.data" $GV --insn-trace >"$r.insn.vt" 2>/dev/null
	"$PYTHON3" "$top_srcdir/tests/script-compare.py" --insns "$r.insn.perf" "$r.insn.vt" "$r.branches" \
		>"$r.insn.cmp" 2>&1
	ck_rc=$?
	check "--insn-trace: vmtrace = perf = ground truth ($(head -1 "$r.insn.cmp"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$r.insn.cmp"
fi

# the same file as --guestkallsyms decodes it: the same lines, but where
# several symbols share an address (perf keeps another of them from a
# vmlinux than from kallsyms) - and perf changes the same lines the same way
"$VMTRACE" script "$r.data" --guestkallsyms "$GUEST_CODE/kallsyms" >"$r.ks.vt" 2>/dev/null
"$PERF" script -i "$r.data" --guestkallsyms "$GUEST_CODE/kallsyms" --itrace=be \
	-F comm,tid,cpu,time,ip,sym,symoff,dso,addr >"$r.ks.perf" 2>/dev/null
diff "$r.ks.vt" "$TMP/thread-2vcpu-timed.vt" | grep '^[<>]' | sed 's/^\(.\).*: */\1 /' | sort >"$r.vt.changed"
diff "$r.ks.perf" "$TMP/thread-2vcpu-timed.perf" | grep '^[<>]' | sed 's/^\(.\).*: */\1 /' | sort >"$r.perf.changed"
check "kallsyms -> vmlinux: $(grep -c '^<' "$r.vt.changed") lines changed, as perf's" \
	sh -c "[ -s '$r.vt.changed' ] && cmp -s '$r.vt.changed' '$r.perf.changed'" ||
	diff "$r.perf.changed" "$r.vt.changed" | head -10 | sed 's/^/#   /'
check "where they change, two symbols share the address" sh -c "
	grep '^<' '$r.vt.changed' | grep -q __static_call_text_end &&
	grep '^>' '$r.vt.changed' | grep -q __x86_indirect_thunk_array"

# --vmlinux: the host kernel from a vmlinux too (moved by its MMAP, _text
# 0xe00000 above); KVM's stand-in is a module, in no vmlinux: both decoders
# err in its code (each resumes where it does: vmtrace at the next PSB)
"$VMTRACE" script "$r.data" --vmlinux "$VMLINUX" $GV >"$r.host.vt" 2>"$r.host.err"
check "--vmlinux: exit 3, decode errors" sh -c "[ $? = 3 ] && grep -q 'decode errors' '$r.host.err'"
"$PERF" script -i "$r.data" --vmlinux "$VMLINUX" $GV --itrace=be -F comm,tid,cpu,time,ip,sym,symoff,dso,addr \
	>"$r.host.perf" 2>/dev/null
in_module() {
	sed -n 's/.*instruction trace error.* ip 0x\([0-9a-f]*\) .*/\1/p' "$1" | sort -u |
		awk '{ if ($1 !~ /^ffffffffc0a00[0-9a-f][0-9a-f][0-9a-f]$/) bad++; n++ } END { exit !(n > 0 && !bad) }'
}
if in_module "$r.host.vt" && in_module "$r.host.perf"; then
	ok "--vmlinux: errors only in the module's code (the KVM stand-in), perf's too"
else
	fail "--vmlinux: errors only in the module's code: $(grep -m1 'trace error' "$r.host.vt")"
fi
# the module's code is no part of the vmlinux, but perf maps it from its
# MMAP record (/lib/modules/vmtrace-synth/kvm_intel.ko) and names it
# "[kvm_intel]"; vmtrace names it so (until session 26: "[unknown]"), in
# text and in --json's "dso"
modline='=> *ffffffffc0a00[0-9a-f]* \[unknown\] (\[kvm_intel\])'
check "--vmlinux: module addresses name perf's DSO [kvm_intel] ($(grep -c "$modline" "$r.host.vt") lines; perf $(grep -c "$modline" "$r.host.perf"))" \
	sh -c "grep -q '$modline' '$r.host.vt' && grep -q '$modline' '$r.host.perf' &&
	       ! grep -q 'ffffffffc0a00[0-9a-f]* \[unknown\] (\[unknown\])' '$r.host.vt'"
check "--vmlinux --json: \"dso\": \"[kvm_intel]\" on module addresses" sh -c "
	'$VMTRACE' script '$r.data' --vmlinux '$VMLINUX' $GV --json 2>/dev/null |
	grep -q '\"ip\": \"0xffffffffc0a00[0-9a-f]*\", \"guest\": false, \"dso\": \"\[kvm_intel\]\"'"
# every branch it decodes is one the kcore_dir decode has (addresses: the
# symbols' names may differ where two share an address, as above)
"$VMTRACE" script "$r.data" --vmlinux "$VMLINUX" $GV -F comm,tid,time,ip,addr 2>/dev/null |
	grep -v 'instruction trace error' | sort >"$r.host.lines"
"$VMTRACE" script "$r.data" $GV -F comm,tid,time,ip,addr 2>/dev/null | sort >"$r.all.lines"
check "--vmlinux: every other line is one the kcore_dir decode prints ($(wc -l <"$r.host.lines") lines)" \
	sh -c "[ \$(wc -l <'$r.host.lines') -gt 1000 ] && [ -z \"\$(comm -23 '$r.host.lines' '$r.all.lines' | head -1)\" ]"
check "--vmlinux: host lines with symbols" grep -q 'ffffffff8[0-9a-f]* [a-z_].*(\[kernel.kallsyms\])' "$r.host.vt"

# init code (synth walks it in GUEST_INIT, the kernel's second executable
# PT_LOAD as well): vmtrace --guestvmlinux decodes it all, = the truth and
# = its kcore decode; perf reads init code from neither the vmlinux nor
# the kcore ("Failed to get instruction"), so the truth is the check here
i=$TMP/init
"$VMTRACE" synth -o "$i.data" --size 128K --host-code "$HOST_CODE" --guest-code "$GUEST_INIT" --vcpus 2 --timeless \
	--branches "$i.branches" 2>/dev/null
F=comm,tid,cpu,ip,sym,symoff,dso,addr
# shellcheck disable=SC2086
"$VMTRACE" script "$i.data" $GV -F $F >"$i.vt" 2>"$i.vt.err"
check "init code: vmtrace --guestvmlinux exit 0 (no decode error)" test $? -eq 0
check "init code: named [guest.kernel.kallsyms].init.text ($(grep -c 'kallsyms].init.text' "$i.vt") lines)" \
	grep -q '[0-9a-f] [a-z_].*+0x[0-9a-f]* (\[guest.kernel.kallsyms\].init.text)' "$i.vt"
"$PYTHON3" "$top_srcdir/tests/script-compare.py" "$i.vt" "$i.vt" "$i.branches" >"$i.cmp" 2>&1
ck_rc=$?
check "init code: vmtrace --guestvmlinux = ground truth ($(head -1 "$i.cmp"))" test $ck_rc -eq 0 ||
	sed 's/^/#   /' "$i.cmp"
"$VMTRACE" script "$i.data" $GV --call-trace >"$i.call" 2>/dev/null
"$PYTHON3" "$top_srcdir/tests/script-compare.py" --calls=call "$i.call" "$i.call" "$i.branches" >"$i.call.cmp" 2>&1
echo $? >"$i.call.rc"
check "init code: --call-trace = ground truth ($(head -1 "$i.call.cmp")), its DSO named" sh -c "
	[ \$(cat '$i.call.rc') = 0 ] && grep -q '(\[guest.kernel.kallsyms\].init.text *)' '$i.call'" ||
	sed 's/^/#   /' "$i.call.cmp"
"$VMTRACE" script "$i.data" --guestkallsyms "$GUEST_INIT/kallsyms" -F tid,ip,addr >"$i.ks.flow" 2>/dev/null
"$VMTRACE" script "$i.data" $GV -F tid,ip,addr >"$i.vt.flow" 2>/dev/null
check "init code: its branches are the kcore decode's ($(wc -l <"$i.vt.flow"))" \
	sh -c "[ \$(wc -l <'$i.vt.flow') -gt 1000 ] && cmp -s '$i.vt.flow' '$i.ks.flow'"
# perf from the kcore that has the init code fails there too
timeout 300 "$PERF" script -i "$i.data" --guestkallsyms "$GUEST_INIT/kallsyms" --itrace=be -F $F >"$i.ks.perf" 2>/dev/null
check "init code: perf cannot read it from the kcore either ($(grep -c 'Failed to get instruction' "$i.ks.perf") errors)" \
	sh -c "grep 'instruction trace error' '$i.ks.perf' | sed 's/.* ip 0x\([0-9a-f]*\) .*/\1/' |
		awk 'BEGIN { n = 0 } { n++; if (\$1 < \"ffffffff85079000\" || \$1 >= \"ffffffff86a00000\") bad++ } END { exit !(n && !bad) }'"
# perf from the vmlinux: where it fails, and what it prints
timeout 300 "$PERF" script -i "$i.data" $GV --itrace=be -F $F >"$i.perf" 2>/dev/null
"$PYTHON3" - "$i.perf" "$i.vt" >"$i.perf.cmp" 2>&1 <<'PY'
import re, sys
vt = set(open(sys.argv[2]))
errors, lines, named = 0, 0, 0
for line in open(sys.argv[1]):
    if 'instruction trace error' in line:
        ip = int(re.search(r" ip 0x([0-9a-f]+) ", line).group(1), 16)
        # perf cannot read the code of the init PT_LOAD's sections
        assert 'Failed to get instruction' in line and 0xffffffff85079000 <= ip < 0xffffffff86a00000, line
        errors += 1
        continue
    assert line in vt, line          # where it decodes it prints vmtrace's lines
    lines += 1
    named += 'kallsyms].init.text' in line
assert errors > 0 and named > 0, (errors, named)
print(errors, "perf errors, all 'Failed to get instruction' in init code;", lines, "lines,", named, "naming init.text, all vmtrace's")
PY
ck_rc=$?
check "perf --guestvmlinux: $(tail -1 "$i.perf.cmp")" test $ck_rc -eq 0 || sed 's/^/#   /' "$i.perf.cmp"

# a kernel MMAP record without an address (pgoff 0: kptr_restrict hid it)
# moves nothing, in perf as here: a vmlinux linked where the guest ran
# decodes as is, a warning says it was not placed; a vmlinux linked
# elsewhere cannot be right then (decode errors), and the warning says why
"$PYTHON3" - "$r.data/data" "$TMP/nopgoff.data" <<'PY'
import os, struct, sys
d = bytearray(open(sys.argv[1], 'rb').read())
name = b'[guest.kernel.kallsyms]_text\0'
at = d.find(name)
assert at > 0
struct.pack_into('<Q', d, at - 8, 0)          # MMAP: ... addr, len, pgoff, filename
os.makedirs(sys.argv[2], exist_ok=True)
open(sys.argv[2] + '/data', 'wb').write(d)
PY
cp -r "$r.data/kcore_dir" "$TMP/nopgoff.data/"
"$VMTRACE" script "$TMP/nopgoff.data" --guestvmlinux "$VMLINUX_GUEST" -F tid,ip,addr >"$TMP/np.vt" 2>"$TMP/np.err"
check "pgoff 0: a vmlinux linked where the guest ran decodes as is (exit 0)" test $? -eq 0
"$VMTRACE" script "$r.data" --guestkallsyms "$GUEST_CODE/kallsyms" -F tid,ip,addr >"$TMP/np.ks" 2>/dev/null
check "... its branches the kcore decode's ($(wc -l <"$TMP/np.vt"))" cmp -s "$TMP/np.vt" "$TMP/np.ks"
timeout 300 "$PERF" script -i "$TMP/nopgoff.data" --guestvmlinux "$VMLINUX_GUEST" --itrace=be -F tid,ip,addr >"$TMP/np.perf" 2>/dev/null
check "... as perf's (no error either)" sh -c "! grep -q 'trace error' '$TMP/np.perf' && [ \$(wc -l <'$TMP/np.perf') -eq \$(wc -l <'$TMP/np.vt') ]"
check "... and a warning that the recording did not place it" \
	grep -q 'no guest kernel MMAP record with _text.s address.*: the guest vmlinux is taken at its link addresses' "$TMP/np.err"
"$VMTRACE" script "$TMP/nopgoff.data" $GV >/dev/null 2>"$TMP/np2.err"
check "pgoff 0, a vmlinux linked elsewhere: decode errors (exit 3), the warning says why" \
	sh -c "[ $? = 3 ] && grep -q 'taken at its link addresses' '$TMP/np2.err'"
"$VMTRACE" script "$r.data" $GV >/dev/null 2>"$TMP/placed.err"
check "placed by the MMAP record: no warning" sh -c "! grep -q 'link addresses' '$TMP/placed.err'"
# the recording's build ids (HEADER_BUILD_ID, as perf record writes them)
# against the vmlinux's: the same - decoded as without it (also written
# before perf had a size field: 20 bytes, zero-padded); another - refused,
# naming both (perf refuses the file too: it names no guest code then); a
# vmlinux without a build id - refused; other machines' entries (pid) and
# the host's (with the host's kcore) - not looked at; the host's with
# --vmlinux - checked the same way
bid=$(readelf -n "$VMLINUX" 2>/dev/null | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p' | head -1)
check "the vmlinux has a GNU build id ($bid)" test -n "$bid"
other=00112233445566778899aabbccddeeff00112233
# bid_rec NAME ARGS...: $TMP/bid-NAME.data, r.data with a build id entry (perf-edit.py build-id ARGS)
bid_rec() {
	br=$TMP/bid-$1.data
	shift
	mkdir -p "$br" && cp -r "$r.data/kcore_dir" "$br/" &&
		"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$r.data/data" "$br/data" build-id "$@"
}
bid_rec same 4 0 "$bid" "[guest.kernel.kallsyms]"
bid_rec nosize 4 0 "$bid" "[guest.kernel.kallsyms]" nosize
bid_rec other 4 0 "$other" "[guest.kernel.kallsyms]"
bid_rec otherpid 4 7 "$other" "[kernel.kallsyms]"
bid_rec host 1 -1 "$other" "[kernel.kallsyms]"
for w in same nosize other otherpid host; do
	"$VMTRACE" script "$TMP/bid-$w.data" $GV >"$TMP/bid-$w.vt" 2>"$TMP/bid-$w.err"
	echo $? >"$TMP/bid-$w.rc"
done
for w in same nosize otherpid host; do
	check "build id ($w): decoded as without it" \
		sh -c "[ \$(cat '$TMP/bid-$w.rc') = 0 ] && cmp -s '$TMP/bid-$w.vt' '$TMP/thread-2vcpu-timed.vt'"
done
check "build id: another - refused (exit 3), naming both, no output" sh -c "
	[ \$(cat '$TMP/bid-other.rc') = 3 ] && [ ! -s '$TMP/bid-other.vt' ] &&
	grep -q 'is not the kernel that ran: its build id is $bid, the recording.s \[guest.kernel.kallsyms\] $other' '$TMP/bid-other.err'"
for w in same other; do
	timeout 300 "$PERF" script -i "$TMP/bid-$w.data" $GV --itrace=be -F tid,ip,sym,symoff,dso,addr 2>/dev/null |
		grep -c '[a-z_]+0x[0-9a-f]* (\[guest.kernel.kallsyms\])' >"$TMP/bid-$w.named"
done
check "build id: perf refuses that vmlinux too (lines naming guest code: $(cat "$TMP/bid-other.named"); with the right id $(cat "$TMP/bid-same.named"))" \
	sh -c "[ \$(cat '$TMP/bid-other.named') -lt 100 ] && [ \$(cat '$TMP/bid-same.named') -gt 10000 ]"
"$VMTRACE" script "$TMP/bid-host.data" --vmlinux "$VMLINUX" $GV >/dev/null 2>"$TMP/bid-hostv.err"
check "build id: the host's, with --vmlinux - refused (exit 3), naming it" sh -c "[ $? = 3 ] &&
	grep -q 'the host vmlinux .* is not the kernel that ran: its build id is $bid, the recording.s \[kernel.kallsyms\] $other' '$TMP/bid-hostv.err'"
"$PYTHON3" - "$VMLINUX" "$TMP/nobid.vmlinux" <<'PY'
import sys
d = bytearray(open(sys.argv[1], 'rb').read())
pat = b'\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00'   # namesz 4, descsz 20, NT_GNU_BUILD_ID
at, n = 0, 0
while (at := d.find(pat, at)) >= 0:              # (the .notes section, and copies of it the kernel keeps)
    d[at + 8] = 0x99                             # another note type: no build id
    at, n = at + 1, n + 1
assert n > 0
open(sys.argv[2], 'wb').write(d)
PY
"$VMTRACE" script "$TMP/bid-same.data" --guestvmlinux "$TMP/nobid.vmlinux" >/dev/null 2>"$TMP/nobid.err"
check "build id: a vmlinux without one, where the recording has one - refused (exit 3)" sh -c "[ $? = 3 ] &&
	grep -q 'is not the kernel that ran: it has no build id, the recording.s \[guest.kernel.kallsyms\] $bid' '$TMP/nobid.err'"
"$VMTRACE" script "$r.data" --guestvmlinux "$TMP/nobid.vmlinux" >/dev/null 2>&1
check "... and taken where the recording has none (exit 0)" test $? -eq 0
rm -f "$TMP/nobid.vmlinux"
# timeline takes it too
"$VMTRACE" timeline "$r.data" $GV -o "$TMP/t.html" >/dev/null 2>"$TMP/t.err"
check "timeline --guestvmlinux: exit 0, the page written" sh -c "[ $? = 0 ] && [ -s '$TMP/t.html' ]" ||
	sed 's/^/#   /' "$TMP/t.err"

# usage
script_refused() {
	"$VMTRACE" script "$r.data" "$@" >/dev/null 2>"$TMP/e"
	echo $?
}
# shellcheck disable=SC2086
rc=$(script_refused --guest "$GUEST_CODE" $GV)
check "--guestvmlinux with --guest: usage error (exit 2)" \
	sh -c "[ $rc = 2 ] && grep -q -- '--guestvmlinux excludes --guest and --guestkallsyms' '$TMP/e'"
# shellcheck disable=SC2086
rc=$(script_refused --vmlinux "$VMLINUX" --kcore "$HOST_CODE/kcore" --kallsyms "$HOST_CODE/kallsyms" $GV)
check "--vmlinux with --kcore: usage error (exit 2)" sh -c "[ $rc = 2 ] && grep -q -- '--vmlinux excludes --kcore' '$TMP/e'"
if command -v objcopy >/dev/null; then
	objcopy --strip-all "$VMLINUX" "$TMP/stripped" 2>/dev/null
	rc=$(script_refused --guestvmlinux "$TMP/stripped")
	check "a vmlinux without symbols: refused (exit 3), says what to give instead" \
		sh -c "[ $rc = 3 ] && grep -q 'no symbols (a stripped vmlinux?)' '$TMP/e'"
fi
rc=$(script_refused --guestvmlinux "$TMP/missing")
check "a missing vmlinux: refused, named" sh -c "[ $rc != 0 ] && grep -q '$TMP/missing' '$TMP/e'"
mkdir -p "$TMP/adir"
rc=$(script_refused --guestvmlinux "$TMP/adir")
check "a directory: refused (exit 3), said so" sh -c "[ $rc = 3 ] && grep -q 'kernel image $TMP/adir: it is a directory' '$TMP/e'"
echo "not an ELF file" >"$TMP/text"
rc=$(script_refused --guestvmlinux "$TMP/text")
check "not an ELF file: refused (exit 3)" sh -c "[ $rc = 3 ] && grep -q 'not a little-endian ELF64 file' '$TMP/e'"

# report reads the same image: each vCPU's guest and host instructions and
# branches as from kallsyms (names may differ; "unresolved" counts the
# calls into code between the vmlinux's symbols, named in no function)
"$VMTRACE" report "$r.data" $GV --json >"$r.rep.v" 2>/dev/null
check "report --guestvmlinux: exit 0" test $? -eq 0
"$VMTRACE" report "$r.data" --guestkallsyms "$GUEST_CODE/kallsyms" --json >"$r.rep.k" 2>/dev/null
"$PYTHON3" - "$r.rep.v" "$r.rep.k" >"$r.rep.cmp" 2>&1 <<'PY'
import json, sys
v, k = (json.load(open(f)) for f in sys.argv[1:3])
def counts(j):
    return ([(c['vcpu'], c['guest_insns'], c['host_insns'], c['exits']) for c in j['vcpus']],
            [(h['vcpu'], h['branches'], h['errors']) for h in j['health']['vcpus']])
print(counts(v))
sys.exit(counts(v) != counts(k) or sum(c['guest_insns'] for c in v['vcpus']) == 0)
PY
check "report: per vCPU the same instructions, exits, branches as from kallsyms" test $? -eq 0 ||
	sed 's/^/#   /' "$r.rep.cmp"
finish
