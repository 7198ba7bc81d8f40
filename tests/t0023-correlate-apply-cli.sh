#!/bin/sh
# Applying the correction: --in-place equals -o, corrected files are refused
# (--force overrides), explicit offsets and perf's grammar, strict validation
# with distinct exit codes, and nothing written on any error.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python

rc() { "$@" >"$TMP/out" 2>"$TMP/err"; echo $?; }
sum() { sha256sum "$1" | cut -d' ' -f1; }

"$VMTRACE" synth -o "$TMP/orig.data" --vcpus 3 --size 1M --offset 0xffffff0000001234 2>/dev/null
orig=$(sum "$TMP/orig.data")
cp "$TMP/orig.data" "$TMP/a.data"

check "-o: exit 0" test "$(rc "$VMTRACE" correlate "$TMP/a.data" -o "$TMP/a.corr")" = 0
check "-o: input untouched" test "$(sum "$TMP/a.data")" = "$orig"
check "-o: says how many packets" grep -q "corrected [0-9]* guest TSC packets of 3 VMCS" "$TMP/out"
check "-o: output is 0600 (may hold kernel data)" test "$(stat -c %a "$TMP/a.corr")" = 600
cp "$TMP/orig.data" "$TMP/b.data"
check "--in-place: exit 0" test "$(rc "$VMTRACE" correlate --in-place "$TMP/b.data")" = 0
size=$(stat -c %s "$TMP/orig.data")
# the files differ only in the marker's timestamp, after the original bytes
check "--in-place result == -o result" cmp -s -n "$size" "$TMP/a.corr" "$TMP/b.data"
check "--in-place and -o add only the marker" test "$(stat -c %s "$TMP/b.data")" = "$(stat -c %s "$TMP/a.corr")"
corrected=$(sum "$TMP/b.data")
check "--in-place leaves no journal" test ! -e "$TMP/b.data.vmtrace-journal"
cp "$TMP/orig.data" "$TMP/w.data"
"$VMTRACE" correlate --in-place --json "$TMP/w.data" >"$TMP/w.json"
check "--in-place writes only the changed bytes, marker and journal (< 64 KiB of a 1 MiB file)" "$PYTHON3" -c '
import json, sys
d = json.load(open(sys.argv[1]))
w = d["process_bytes_written"]
assert 0 < w < 65536 and w >= 7 * d["tsc_packets_corrected"], d' "$TMP/w.json"
check "one-step correction decodes once (discovery translations reused)" grep -q '"decode_passes": 1' "$TMP/w.json"
check "correcting again is refused: exit 7" test "$(rc "$VMTRACE" correlate --in-place "$TMP/b.data")" = 7
check "refusal explains and names --force" grep -q "already corrected by vmtrace.*--force" "$TMP/err"
check "refused file is unchanged" test "$(sum "$TMP/b.data")" = "$corrected"
check "-o of a corrected file is refused too: exit 7" test "$(rc "$VMTRACE" correlate "$TMP/b.data" -o "$TMP/c.data")" = 7
check "... and writes nothing" test ! -e "$TMP/c.data"
check "--force corrects again (explicit offset)" test "$(rc "$VMTRACE" correlate --force --offset 0x10 "$TMP/b.data" -o "$TMP/c.data")" = 0
check "dry run on a corrected file: no offsets left, exit 0" test "$(rc "$VMTRACE" correlate --dry-run "$TMP/a.corr")" = 0
check "dry run on a corrected file: every VMCS no-offset" test "$(grep -c 'no-offset$' "$TMP/out")" = 3

# explicit offsets: the VMCS of the trace and its offset
vmcs=$("$VMTRACE" correlate --dry-run --json "$TMP/orig.data" | "$PYTHON3" -c 'import json,sys; print(",".join(v["vmcs"] for v in json.load(sys.stdin)["vmcs"]))')
check "--offset OFF:VMCS,... gives the one-step result" sh -c '"$VMTRACE" correlate --offset 0xffffff0000001234:'"$vmcs"' "$TMP/orig.data" -o "$TMP/d.data" >/dev/null && cmp -s -n $(stat -c %s "$TMP/orig.data") "$TMP/d.data" "$TMP/a.corr"'
check "--vm-time-correlation=OFF (perf grammar, default offset) gives it too" sh -c '"$VMTRACE" correlate --vm-time-correlation=0xffffff0000001234 "$TMP/orig.data" -o "$TMP/e.data" >/dev/null && cmp -s -n $(stat -c %s "$TMP/orig.data") "$TMP/e.data" "$TMP/a.corr"'
check "--vm-time-correlation=dry-run == --dry-run" sh -c '"$VMTRACE" correlate --vm-time-correlation=dry-run "$TMP/orig.data" >"$TMP/p1"; "$VMTRACE" correlate --dry-run "$TMP/orig.data" >"$TMP/p2"; cmp -s "$TMP/p1" "$TMP/p2"'

# bad offset strings: exit 2, nothing written
for bad in "zz" "dry-run zz" "0x1,0x2" "0x10:" "0x10:0" "0x10:zz" "0x10:0x12340,,0x1" "-5" "0x" "0x10:0x10000000000" "0x10 dry-run" "0x10:0x12340:0x1"; do
	check "--vm-time-correlation='$bad': exit 2" test "$(rc timeout 10 "$VMTRACE" correlate --vm-time-correlation="$bad" "$TMP/orig.data" -o "$TMP/bad.data")" = 2
	check "  ... one clear line naming the token" sh -c "[ \$(wc -l <'$TMP/err') = 1 ] && grep -q 'correlate: ' '$TMP/err'"
done
check "--offset zz: exit 2" test "$(rc "$VMTRACE" correlate --offset zz --in-place "$TMP/orig.data")" = 2
check "bad offsets wrote nothing" sh -c "test ! -e '$TMP/bad.data' && test \"\$(sha256sum <'$TMP/orig.data' | cut -d' ' -f1)\" = $orig"
check "VMCS not in the trace: exit 8" test "$(rc "$VMTRACE" correlate --offset 0x10:0x99999 --in-place "$TMP/orig.data")" = 8
check "  ... message names the VMCS" grep -q "0x99999.*does not occur" "$TMP/err"
check "  ... file unchanged, no journal" sh -c "test \"\$(sha256sum <'$TMP/orig.data' | cut -d' ' -f1)\" = $orig && test ! -e '$TMP/orig.data.vmtrace-journal'"
"$VMTRACE" synth -o "$TMP/timeless.data" --timeless --size 64K 2>/dev/null
cp "$TMP/timeless.data" "$TMP/timeless.copy"
check "no time information: exit 4" test "$(rc "$VMTRACE" correlate --in-place "$TMP/timeless.data")" = 4
check "  ... nothing written" cmp -s "$TMP/timeless.data" "$TMP/timeless.copy"
check "neither -o nor --in-place: exit 2" test "$(rc "$VMTRACE" correlate "$TMP/orig.data")" = 2
check "-o naming the input: exit 2" test "$(rc "$VMTRACE" correlate "$TMP/orig.data" -o "$TMP/orig.data")" = 2
check "--dry-run with -o: exit 2" test "$(rc "$VMTRACE" correlate --dry-run "$TMP/orig.data" -o "$TMP/x")" = 2

# directory input
"$VMTRACE" synth -o "$TMP/dir" --dir --size 256K 2>/dev/null
mkdir -p "$TMP/dir/kcore_dir" && echo kallsyms >"$TMP/dir/kcore_dir/kallsyms"
dsize=$(stat -c %s "$TMP/dir/data")
check "directory -o: exit 0" test "$(rc "$VMTRACE" correlate "$TMP/dir" -o "$TMP/dir.corr")" = 0
check "directory -o: data corrected, other files copied" sh -c "test -s '$TMP/dir.corr/data' && cmp -s '$TMP/dir/kcore_dir/kallsyms' '$TMP/dir.corr/kcore_dir/kallsyms'"
mkdir -p "$TMP/busy"
check "directory -o to an existing directory: refused (exit 1)" test "$(rc "$VMTRACE" correlate "$TMP/dir" -o "$TMP/busy")" = 1
check "  ... says it exists, leaves it empty and no temporary behind" sh -c "grep -q 'already exists' '$TMP/err' && [ -z \"\$(ls -A '$TMP/busy')\" ] && ! ls -a '$TMP' | grep -q '^\.busy\.'"
# an unreadable file in the input makes the copy fail half way (run as an
# unprivileged user when we are root, who could read it anyway)
as_user=""
[ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && as_user="setpriv --reuid=65534 --regid=65534 --clear-groups"
chmod 0000 "$TMP/dir/kcore_dir/kallsyms"; chmod a+rwx "$TMP"; chmod -R a+rX "$TMP/dir"; chmod 0000 "$TMP/dir/kcore_dir/kallsyms"
if [ -n "$as_user" ] || [ "$(id -u)" != 0 ]; then
	check "directory -o with an unreadable file: fails (exit 1)" test "$(rc $as_user "$VMTRACE" correlate "$TMP/dir" -o "$TMP/half")" = 1
	check "  ... names the file" grep -q "kallsyms" "$TMP/err"
	check "  ... leaves no partial output" sh -c "[ ! -e '$TMP/half' ] && ! ls -a '$TMP' | grep -q '^\.half\.'"
fi
chmod 0644 "$TMP/dir/kcore_dir/kallsyms"; chmod 0755 "$TMP/dir/kcore_dir"
check "directory --in-place: exit 0" test "$(rc "$VMTRACE" correlate --in-place "$TMP/dir")" = 0
check "directory: both ways agree" cmp -s -n "$dsize" "$TMP/dir/data" "$TMP/dir.corr/data"
finish
