#!/bin/sh
# vmtrace timeline: options, refusals and exit statuses; outputs are
# created only when complete (no temporary left behind), 0600, never over
# an existing file without --force; a recording without vCPU threads
# (its COMM records removed) exits 24 and writes nothing; a timeless
# recording counts instructions (analyze's clock, as report).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs
code_recording rec 64K --vcpus 2 --psb-period 1 --seed 5 || { finish; }
R=$TMP/rec.data G="--guest $GUEST_CODE"

tl() { "$VMTRACE" timeline "$@" >"$TMP/out" 2>&1; echo $? >"$TMP/rc"; }
rc_is() { test "$(cat "$TMP/rc")" = "$1"; }
says() { grep -q -- "$1" "$TMP/out"; }

# shellcheck disable=SC2086
tl "$R" $G
check "no -o: usage error (2)" rc_is 2
check "no -o: says so" says "-o OUT is required"
# shellcheck disable=SC2086
tl "$R" $G -o "$TMP/x.txt"
check "-o x.txt: usage error naming the extensions" sh -c "rc_is() { test \"\$(cat '$TMP/rc')\" = 2; }; rc_is 2 && grep -q 'perfetto-trace or .html' '$TMP/out'"
# shellcheck disable=SC2086
tl "$R" $G -o "$TMP/x.txt" --format svg
check "--format svg: usage error (2)" rc_is 2
# shellcheck disable=SC2086
tl "$R" $G -o "$TMP/x.txt" --format html
check "--format html: any name (0)" rc_is 0
check "--format html: it is a page" grep -q '^<!DOCTYPE html>' "$TMP/x.txt"
# shellcheck disable=SC2086
tl "$R" $G -o "$TMP/y.html" --max-slices 0
check "--max-slices 0: usage error (2)" rc_is 2
tl "$R" -o "$TMP/y.html"
check "no guest image: usage error (2)" rc_is 2
check "no guest image: names the option" says "give --guest DIR"
# shellcheck disable=SC2086
tl "$TMP/missing.data" $G -o "$TMP/y.html"
check "a recording that does not exist: 2 or 3, one line" sh -c "grep -q '^[23]$' '$TMP/rc' && test \$(wc -l <'$TMP/out') -eq 1"
# shellcheck disable=SC2086
tl "$R" $G -o "$TMP/t.perfetto-trace" extra
check "an extra argument: usage error (2)" rc_is 2

# outputs
# shellcheck disable=SC2086
tl "$R" $G -o "$TMP/a.perfetto-trace"
check "perfetto: exit 0" rc_is 0
check "perfetto: 0600" test "$(stat -c %a "$TMP/a.perfetto-trace")" = 600
check "perfetto: no temporary left" sh -c "! ls -a '$TMP' | grep -q vmtrace-tmp"
cp "$TMP/a.perfetto-trace" "$TMP/a.copy"
# shellcheck disable=SC2086
tl "$R" $G -o "$TMP/a.perfetto-trace"
check "an existing output: failure (1) suggesting --force" sh -c "test \$(cat '$TMP/rc') = 1 && grep -q -- --force '$TMP/out'"
check "an existing output: untouched" cmp -s "$TMP/a.perfetto-trace" "$TMP/a.copy"
# shellcheck disable=SC2086
tl "$R" $G -o "$TMP/a.perfetto-trace" --force
check "--force: replaced (0), the same bytes (deterministic)" sh -c "test \$(cat '$TMP/rc') = 0 && cmp -s '$TMP/a.perfetto-trace' '$TMP/a.copy'"
ln -s "$TMP/a.copy" "$TMP/link.html"
# shellcheck disable=SC2086
tl "$R" $G -o "$TMP/link.html" --force
check "--force never writes through a symbolic link (1)" rc_is 1
check "--force: the link's target untouched" cmp -s "$TMP/a.perfetto-trace" "$TMP/a.copy"

# no vCPU thread: exit 24, nothing written
mkdir "$TMP/nocomm.data"
cp -r "$R/kcore_dir" "$TMP/nocomm.data/"
"$PYTHON3" "$top_srcdir/tests/perf-edit.py" "$R/data" "$TMP/nocomm.data/data" drop 3
# shellcheck disable=SC2086
tl "$TMP/nocomm.data" $G -o "$TMP/nocomm.html"
check "no COMM records (no vCPU thread): exit 24" rc_is 24
check "no vCPU thread: says so" says 'no vCPU thread ("CPU n/KVM")'
check "no vCPU thread: nothing written" test ! -e "$TMP/nocomm.html"

# timeless: the page counts instructions (analyze's clock, as report)
code_recording tl 32K --vcpus 1 --timeless || { finish; }
# shellcheck disable=SC2086
tl "$TMP/tl.data" $G -o "$TMP/tl.html"
check "timeless: exit 0" rc_is 0
check "timeless: the page's unit is instructions" grep -q '"unit": "instructions"' "$TMP/tl.html"
check "timeless: vmtrace timeline --help says timeless recordings count instructions" \
	sh -c "'$VMTRACE' timeline --help | grep -q 'count instructions'"
finish
