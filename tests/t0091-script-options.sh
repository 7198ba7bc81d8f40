#!/bin/sh
# vmtrace script: corrupt AUX data gives perf-style error lines, decoding
# resumes at the next PSB, the exit status is 3, never a crash or a hang;
# a missing kernel image says which command gets it; filters and JSON.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

f=$TMP/rec.data
"$VMTRACE" synth -o "$f" --vcpus 2 --timeless --size 128K --psb-period 0 --host-code "$HOST_CODE" \
	--guest-code "$GUEST_CODE" 2>/dev/null || { fail "synth"; finish; }
G="--guestkallsyms $GUEST_CODE/kallsyms"

# --- corrupt AUX bytes ---------------------------------------------------
# AUX payload of every AUXTRACE record: overwrite 48 bytes at 1/3 and 2/3
corrupt() {
	"$PYTHON3" - "$1" "$2" <<'PY'
import random, struct, sys
path, mode = sys.argv[1], sys.argv[2]
d = bytearray(open(path, 'rb').read())
off, size = struct.unpack_from('<QQ', d, 40)
pos, rng = off, random.Random(7)
while pos < off + size:
    typ, misc, sz = struct.unpack_from('<IHH', d, pos)
    if typ == 71:                       # AUXTRACE: the payload follows
        n = struct.unpack_from('<Q', d, pos + 8)[0]
        p = pos + sz
        if mode == 'all':
            d[p:p + n] = bytes(rng.randrange(256) for _ in range(n))
        else:
            for at in (n // 3, 2 * n // 3):
                d[p + at:p + at + 48] = bytes(rng.randrange(256) for _ in range(48))
        pos = p + n
    else:
        pos += sz
open(path, 'wb').write(d)
PY
}
cp -r "$f" "$TMP/bad.data" && corrupt "$TMP/bad.data/data" some
# shellcheck disable=SC2086
timeout 120 "$VMTRACE" script "$TMP/bad.data" $G >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
check "corrupt AUX: exit 3 (bad input), not a crash or timeout (got $rc)" test $rc -eq 3
check "corrupt AUX: perf-style error lines" grep -q '^ instruction trace error type 1 time 0 cpu -1 pid [0-9]* tid [0-9]* ip 0x[0-9a-f]* code [0-9]*: ' "$TMP/bad.out"
check "corrupt AUX: the error count is reported" grep -q 'decode errors (decoding resumed at the next PSB' "$TMP/bad.err"
# decoding went on: branches after the last error line of each thread
check "corrupt AUX: branches decoded after the errors" sh -c \
	"tail -n +\$(grep -n 'instruction trace error' '$TMP/bad.out' | tail -1 | cut -d: -f1) '$TMP/bad.out' | grep -q ' => '"
cp -r "$f" "$TMP/noise.data" && corrupt "$TMP/noise.data/data" all
# shellcheck disable=SC2086
timeout 120 "$VMTRACE" script "$TMP/noise.data" $G >"$TMP/noise.out" 2>&1
rc=$?
check "random AUX bytes: exit 3 or 0, no crash or hang (got $rc)" test $rc -eq 3 -o $rc -eq 0

# --- images -------------------------------------------------------------
"$VMTRACE" script "$f" >"$TMP/out" 2>&1
check "no guest image: usage error" test $? -eq 2
check "no guest image: names vmtrace guest fetch" grep -q 'vmtrace guest fetch' "$TMP/out"
"$VMTRACE" synth -o "$TMP/plain.data" --size 64K 2>/dev/null
# shellcheck disable=SC2086
"$VMTRACE" script "$TMP/plain.data" $G >"$TMP/out" 2>&1
check "no kcore_dir: usage error naming vmtrace record --kcore" sh -c "test $? -eq 2 && grep -q 'vmtrace record --kcore' '$TMP/out'"
"$VMTRACE" script "$f" --guest "$TMP" >"$TMP/out" 2>&1
check "guest dir without kcore: usage error naming the file and vmtrace guest fetch" sh -c \
	"test $? -eq 2 && grep -q '$TMP/kcore is missing.*vmtrace guest fetch' '$TMP/out'"
mkdir -p "$TMP/badguest" && printf 'not an ELF file' >"$TMP/badguest/kcore" && cp "$GUEST_CODE/kallsyms" "$TMP/badguest/"
"$VMTRACE" script "$f" --guest "$TMP/badguest" >"$TMP/out" 2>&1
check "malformed guest kcore: exit 3 naming it" sh -c "test $? -eq 3 && grep -q 'guest kernel image $TMP/badguest/kcore: not a little-endian ELF64' '$TMP/out'"
# both images malformed (they load at once, the guest's in a thread): one
# line, the host's error, as when they loaded one after the other
"$VMTRACE" script "$f" --kcore "$TMP/badguest/kcore" --kallsyms "$HOST_CODE/kallsyms" --guest "$TMP/badguest" \
	>"$TMP/out" 2>&1
check "malformed host and guest kcores: exit 3, one line naming the host's" sh -c "test $? -eq 3 &&
	test \$(wc -l <'$TMP/out') -eq 1 && grep -q 'host kernel image $TMP/badguest/kcore: not a little-endian ELF64' '$TMP/out'"
# a guest snapshot others can write to, or another user's, is refused
cp -r "$GUEST_CODE" "$TMP/g2" && chmod 0755 "$TMP/g2"
chmod o+w "$TMP/g2"
"$VMTRACE" script "$f" --guest "$TMP/g2" >"$TMP/out" 2>&1
check "--guest DIR writable by everyone: exit 3, refused with the fix" sh -c \
	"test $? -eq 3 && grep -qF 'refusing the guest snapshot: $TMP/g2 is writable by everyone' '$TMP/out' && grep -q 'chmod go-w' '$TMP/out'"
chmod o-w "$TMP/g2"
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
	chown nobody "$TMP/g2/kcore"
	"$VMTRACE" script "$f" --guestkallsyms "$TMP/g2/kallsyms" >"$TMP/out" 2>&1
	check "--guestkallsyms FILE whose kcore is another user's: exit 3, refused" sh -c \
		"test $? -eq 3 && grep -qF 'refusing the guest snapshot: $TMP/g2/kcore belongs to uid $(id -u nobody)' '$TMP/out'"
	chown root "$TMP/g2/kcore"
fi
mv "$TMP/g2/kcore" "$TMP/g2-kcore" && ln -s "$TMP/g2-kcore" "$TMP/g2/kcore"
"$VMTRACE" script "$f" --guest "$TMP/g2" >"$TMP/out" 2>&1
check "--guest DIR whose kcore is a symbolic link: exit 3, refused" sh -c \
	"test $? -eq 3 && grep -qF 'refusing the guest snapshot: $TMP/g2/kcore is a symbolic link' '$TMP/out'"
"$VMTRACE" script "$f" --host-only --guest-only $G >"$TMP/out" 2>&1
check "--host-only with --guest-only: usage error" test $? -eq 2

# --- filters and JSON ----------------------------------------------------
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G >"$TMP/all.out"
check "all: exit 0" test $? -eq 0
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --guest-only >"$TMP/guest.out"
check "--guest-only: only guest lines" sh -c "test -s '$TMP/guest.out' && ! grep -v '^ *:[0-9]* ' '$TMP/guest.out'"
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --host-only >"$TMP/host.out"
check "--host-only: no guest line" sh -c "test -s '$TMP/host.out' && ! grep -q 'guest.kernel' '$TMP/host.out'"
check "--guest-only + --host-only lines = all lines" test \
	"$(($(wc -l <"$TMP/guest.out") + $(wc -l <"$TMP/host.out")))" -eq "$(wc -l <"$TMP/all.out")"
tid1=$(grep -m1 -o 'CPU 1/KVM *[0-9]*' "$TMP/all.out" | awk '{print $3}')
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --vcpu 1 >"$TMP/vcpu.out"
check "--vcpu 1: only vCPU 1's thread ($tid1)" sh -c "test -s '$TMP/vcpu.out' && ! awk '\$0 !~ / $tid1 \\[/' '$TMP/vcpu.out' | grep -q ."
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --tid "$tid1" >"$TMP/tid.out"
check "--tid prints what --vcpu prints" cmp -s "$TMP/tid.out" "$TMP/vcpu.out"
# shellcheck disable=SC2086
"$VMTRACE" script "$f" $G --json >"$TMP/json.out"
"$PYTHON3" - "$TMP/json.out" "$TMP/all.out" >"$TMP/json.check" 2>&1 <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
lines = sum(1 for _ in open(sys.argv[2]))
kinds = {e['kind'] for e in ev}
split = sum(1 for e in ev if e['kind'] in ('vmentry', 'vmexit'))
assert {'call', 'return', 'jump', 'vmentry', 'vmexit'} <= kinds, kinds
assert len(ev) + split == lines, (len(ev), split, lines)   # VM entries/exits are two text lines
assert all('vcpu' in e and e['vcpu'] in (0, 1) for e in ev), 'vcpu'
assert any(e['from']['guest'] for e in ev) and any(not e['from']['guest'] for e in ev)
assert all('vmcs' in e for e in ev if e['kind'] == 'vmentry')
print('ok', len(ev))
PY
check "--json: one object per branch, kinds, vcpu, vmcs, guest marks ($(tail -1 "$TMP/json.check"))" grep -q '^ok' "$TMP/json.check"
finish
