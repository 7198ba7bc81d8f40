#!/bin/sh
# correlate against other processes and a full disk: one correction holds
# the file (a second run, --recover and -o are refused and name its PID);
# a file replaced or written during a correction receives nothing; a
# journal is replayed only onto the file it was written for; a full disk
# fails before the first byte changes; a journal that is a directory is
# reported, not looped on.
# VMTRACE_TEST_PAUSE_BEFORE_WRITE_MS (test hook) holds a correction
# between discovery and writing; VMTRACE_TEST_APPLY_DELAY_US slows writing.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
export SOURCE_DATE_EPOCH=1700000000

"$VMTRACE" synth -o "$TMP/orig.data" --size 2M --vcpus 2 2>/dev/null
"$VMTRACE" synth -o "$TMP/other.data" --size 2M --vcpus 2 --seed 7 2>/dev/null
"$VMTRACE" correlate "$TMP/orig.data" -o "$TMP/ref.data" >/dev/null 2>&1 || fail "reference correction"
sum() { sha256sum <"$1" | cut -d' ' -f1; }
orig=$(sum "$TMP/orig.data") other=$(sum "$TMP/other.data") ref=$(sum "$TMP/ref.data")
check "the two recordings differ, and correcting changes one" test "$orig" != "$other" -a "$orig" != "$ref"

# wait until PID holds a lock on FILE (its discovery is done within a second)
held() { i=0; while [ $i -lt 50 ] && ! grep -q "FLOCK .* $1 " /proc/locks; do sleep 0.1; i=$((i + 1)); done; }

# --- one lock: a second correction, --recover and -o wait their turn
cp "$TMP/orig.data" "$TMP/t.data"
VMTRACE_TEST_PAUSE_BEFORE_WRITE_MS=3000 "$VMTRACE" correlate --in-place "$TMP/t.data" >"$TMP/first.out" 2>&1 &
pid=$!
held $pid
"$VMTRACE" correlate --in-place "$TMP/t.data" >"$TMP/out" 2>&1
check "a second --in-place run: exit 15, names the PID of the first" \
	sh -c "test $? -eq 15 && grep -q 'in use by PID $pid' '$TMP/out'"
check "...and does not tell the user to --recover the live run's journal" sh -c "! grep -q -- --recover '$TMP/out'"
"$VMTRACE" correlate --recover "$TMP/t.data" >"$TMP/out" 2>&1
check "--recover during the run: exit 15, names the PID" sh -c "test $? -eq 15 && grep -q 'PID $pid' '$TMP/out'"
"$VMTRACE" correlate "$TMP/t.data" -o "$TMP/copy.data" >"$TMP/out" 2>&1
check "-o of a file being corrected in place: exit 15, no output" sh -c "test $? -eq 15 && test ! -e '$TMP/copy.data'"
"$VMTRACE" correlate --dry-run "$TMP/t.data" >/dev/null 2>&1
check "a dry run still reads it" test $? -eq 0
wait $pid
check "the first run completes: exactly the corrected file" sh -c "test $? -eq 0 && test \"\$(sha256sum <'$TMP/t.data' | cut -d' ' -f1)\" = $ref"

# --- a file replaced (or written) between discovery and writing gets nothing
for mode in in-place out; do
	rm -f "$TMP/t.data" "$TMP/keep.data" "$TMP/o.data"
	cp "$TMP/orig.data" "$TMP/t.data"
	ln "$TMP/t.data" "$TMP/keep.data"          # the original inode, to look at afterwards
	if [ $mode = in-place ]; then set -- --in-place; else set -- -o "$TMP/o.data"; fi
	VMTRACE_TEST_PAUSE_BEFORE_WRITE_MS=1500 "$VMTRACE" correlate "$@" "$TMP/t.data" >"$TMP/out" 2>&1 &
	pid=$!
	held $pid
	cp "$TMP/other.data" "$TMP/new.data" && mv "$TMP/new.data" "$TMP/t.data"
	wait $pid
	rc=$?
	check "$mode: the file replaced during the run: exit 15, says it changed" \
		sh -c "test $rc -eq 15 && grep -q 'changed while it was being corrected' '$TMP/out'"
	check "$mode: the replacement is untouched, the original too" \
		sh -c "test \"\$(sha256sum <'$TMP/t.data' | cut -d' ' -f1)\" = $other && test \"\$(sha256sum <'$TMP/keep.data' | cut -d' ' -f1)\" = $orig"
	check "$mode: no output, no journal" sh -c "test ! -e '$TMP/o.data' -a ! -e '$TMP/t.data.vmtrace-journal'"
done
cp "$TMP/orig.data" "$TMP/t.data"
VMTRACE_TEST_PAUSE_BEFORE_WRITE_MS=1500 "$VMTRACE" correlate --in-place "$TMP/t.data" >"$TMP/out" 2>&1 &
pid=$!
held $pid
printf 'X' | dd of="$TMP/t.data" bs=1 seek=200 conv=notrunc 2>/dev/null
wait $pid
check "a byte written by another program during the run: exit 15, no journal" \
	sh -c "test $? -eq 15 && test ! -e '$TMP/t.data.vmtrace-journal'"

# --- --recover replays a journal only onto the file it was written for
cp "$TMP/orig.data" "$TMP/t.data"
VMTRACE_TEST_APPLY_DELAY_US=20000 "$VMTRACE" correlate --in-place "$TMP/t.data" >/dev/null 2>&1 &
pid=$!
i=0; while [ $i -lt 100 ] && [ ! -e "$TMP/t.data.vmtrace-journal" ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.2
kill -KILL $pid; wait $pid 2>/dev/null
check "killed while writing: a journal is left" test -e "$TMP/t.data.vmtrace-journal"
mv "$TMP/t.data" "$TMP/half.data"
cp "$TMP/other.data" "$TMP/t.data"
"$VMTRACE" correlate --recover "$TMP/t.data" >"$TMP/out" 2>&1
rc=$?
check "--recover onto another recording under the name: refused (exit 1), says why" \
	sh -c "test $rc -eq 1 && grep -q 'written for another file' '$TMP/out'"
[ $rc -eq 1 ] || sed 's/^/# /' "$TMP/out"
check "...that recording is untouched and the journal kept" \
	sh -c "test \"\$(sha256sum <'$TMP/t.data' | cut -d' ' -f1)\" = $other && test -e '$TMP/t.data.vmtrace-journal'"
cp "$TMP/half.data" "$TMP/t.data"
"$VMTRACE" correlate --recover "$TMP/t.data" >"$TMP/out" 2>&1
check "a copy of the interrupted file (another inode) is refused too" test $? -eq 1
mv "$TMP/half.data" "$TMP/t.data"
"$VMTRACE" correlate --recover "$TMP/t.data" >"$TMP/out" 2>&1
check "the interrupted file itself: completed, exactly the corrected file" \
	sh -c "test $? -eq 0 && test \"\$(sha256sum <'$TMP/t.data' | cut -d' ' -f1)\" = $ref && test ! -e '$TMP/t.data.vmtrace-journal'"

# --- a journal that is a directory: said, not looped on
cp "$TMP/orig.data" "$TMP/t.data"
mkdir "$TMP/t.data.vmtrace-journal"
"$VMTRACE" correlate --in-place "$TMP/t.data" >"$TMP/out1" 2>&1
rc1=$?
"$VMTRACE" correlate --recover "$TMP/t.data" >"$TMP/out2" 2>&1
rc2=$?
check "a directory as journal: --in-place refuses (run --recover), --recover says it is not a journal" \
	sh -c "test $rc1 -eq 1 && test $rc2 -eq 1 && grep -q 'not a journal' '$TMP/out2'"
check "...and the file is untouched" sh -c "test \"\$(sha256sum <'$TMP/t.data' | cut -d' ' -f1)\" = $orig"
rmdir "$TMP/t.data.vmtrace-journal"

# --- a full disk: refused before the first byte changes (a tmpfs of our own)
if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
	echo "# SKIP the full-disk checks: need root and unshare -m"
	finish
fi
# pad the file so that its last page has 1 byte free: the marker needs a new page
cp "$TMP/orig.data" "$TMP/p.data"
size=$(stat -c %s "$TMP/p.data")
truncate -s $(( (size / 4096 + 1) * 4096 - 1 )) "$TMP/p.data"
"$VMTRACE" correlate "$TMP/p.data" -o "$TMP/pref.data" >"$TMP/pref.out" 2>&1 || fail "the padded file corrects"
cat >"$TMP/full.sh" <<'EOF'
set -e
T=$1 VMTRACE=$2 extra=$3
mount -t tmpfs -o size=8m none "$T/mnt"
cp "$T/p.data" "$T/mnt/p.data"
S=$(stat -c %s "$T/p.data")
n=$(sed -n 's/.*corrected \([0-9]*\) guest TSC packet.*/\1/p' "$T/pref.out")
ml=$(( $(stat -c %s "$T/pref.data") - S ))
J=$(( 48 + 24 * n + 8 + ml + 32 ))
avail=$(df -B1 --output=avail "$T/mnt" | tail -1)
fill=$(( avail - (J + 4095) / 4096 * 4096 - extra * 4096 ))
fallocate -l $fill "$T/mnt/filler"
set +e
"$VMTRACE" correlate --in-place "$T/mnt/p.data" >"$T/full.out" 2>&1
echo $? >"$T/full.rc"
cp "$T/mnt/p.data" "$T/full.data"
ls -A "$T/mnt" >"$T/full.ls"
umount "$T/mnt"
EOF
mkdir -p "$TMP/mnt"
unshare -m sh "$TMP/full.sh" "$TMP" "$VMTRACE" 0
rc=$(cat "$TMP/full.rc")
check "disk full (room for the journal, not for the marker): exit 1, says no space" \
	sh -c "test $rc -eq 1 && grep -q 'No space left' '$TMP/full.out'"
[ "$rc" -eq 1 ] || sed 's/^/# /' "$TMP/full.out"
check "...the file is unchanged and there is no journal to recover" \
	sh -c "cmp -s '$TMP/full.data' '$TMP/p.data' && ! grep -q vmtrace-journal '$TMP/full.ls'"
unshare -m sh "$TMP/full.sh" "$TMP" "$VMTRACE" 1
check "one page more: the same correction succeeds, exactly" \
	sh -c "test \$(cat '$TMP/full.rc') -eq 0 && cmp -s '$TMP/full.data' '$TMP/pref.data'"
finish
