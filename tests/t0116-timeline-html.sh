#!/bin/sh
# vmtrace timeline -o OUT.html in a real browser: headless Chromium loads
# the page of a synth recording of real kernel code (file://, no network),
# and the DOM records what the page drew: every vCPU's guest, host and
# VM-exit lanes, slices; #find=NAME&lane=LANE zooms to a slice and shows
# its details, so the vCPU's first guest call (ground truth) must be drawn
# as a function slice on its guest lane and its first VM exit, named after
# the first host function called, as an exit slice on its host lane; a
# click (#view=START,END&click=X,Y) where the page drew them shows their
# details.  No console message (errors and exceptions are logged there)
# may appear.  A page limited to 50 slices (--max-slices) draws the
# summary bins under the kept slices.  The screenshots are kept beside the test log:
# tests/t0116-timeline-html*.png in the build directory.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
[ -n "${CHROMIUM:-}" ] || skip "chromium not installed (apt-get install chromium)"
make_code_dirs
ART=$(dirname "$VMTRACE")/tests

# browse PAGE#FRAGMENT NAME: dump the DOM to $TMP/NAME.dom (console in NAME.log)
browse() {
	timeout 120 "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --user-data-dir="$TMP/chrome" \
		--enable-logging=stderr --v=0 --virtual-time-budget=5000 --window-size=1400,900 \
		--dump-dom "file://$1" >"$TMP/$2.dom" 2>"$TMP/$2.log"
}
shot() {
	timeout 120 "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --user-data-dir="$TMP/chrome" \
		--hide-scrollbars --virtual-time-budget=5000 --window-size=1400,"$3" --screenshot="$2" "file://$1" \
		>/dev/null 2>&1
}
no_console() { ! grep -h 'CONSOLE' "$@"; }

code_recording rec 64K --vcpus 2 --psb-period 1 --seed 5 || { finish; }
page=$TMP/rec.html
"$VMTRACE" timeline "$TMP/rec.data" --guest "$GUEST_CODE" -o "$page" 2>"$TMP/rec.err"
ck_rc=$?
check "vmtrace timeline -o rec.html: exit 0 ($(tail -1 "$TMP/rec.err"))" test $ck_rc -eq 0
check "the page loads nothing from elsewhere (no src=, href=, http)" \
	sh -c "! grep -q -E 'src=|href=|https?://' '$page'"
"$PYTHON3" "$top_srcdir/tests/timeline-check.py" expect "$TMP/rec.branches" "$HOST_CODE/kallsyms" \
	"$GUEST_CODE/kallsyms" >"$TMP/expect"

# the sanitizer suite: vmtrace's pages only (the browser's work is the
# same in both suites, and takes the time)
if asan_build; then
	"$VMTRACE" timeline "$TMP/rec.data" --guest "$GUEST_CODE" --max-slices 50 -o "$TMP/small.html" 2>/dev/null
	check "--max-slices 50: exit 0, a page" sh -c "[ $? = 0 ] && [ -s '$TMP/small.html' ]"
	finish
fi
browse "$page" full
check "whole trace: chromium exit 0" test $? -eq 0
lanes=$(sed -n 's/.*<body[^>]* data-lanes="\([^"]*\)".*/\1/p' "$TMP/full.dom" | sed 's/&quot;/"/g')
check "whole trace: every lane drawn ($lanes)" test "$lanes" = \
	'["vCPU 0 guest","vCPU 0 host","vCPU 0 VM exits","vCPU 1 guest","vCPU 1 host","vCPU 1 VM exits"]'
drawn=$(sed -n 's/.*<body[^>]* data-slices-drawn="\([0-9]*\)".*/\1/p' "$TMP/full.dom")
check "whole trace: slices drawn ($drawn)" test "${drawn:-0}" -gt 100
check "whole trace: VM exits drawn on the host lanes" grep -q 'data-lane="vCPU 1 host" data-name="VM exit: [^"]*" data-kind="exit"' "$TMP/full.dom"
shot "$page" "$ART/t0116-timeline-html.png" 900
check "screenshot kept: $ART/t0116-timeline-html.png" test -s "$ART/t0116-timeline-html.png"

for v in 0 1; do
	fn=$(sed -n "s/^$v function //p" "$TMP/expect") ex=$(sed -n "s/^$v exit //p" "$TMP/expect")
	browse "$page#find=$fn&lane=vCPU $v guest" "fn$v"
	"$PYTHON3" "$top_srcdir/tests/timeline-check.py" dom "$TMP/fn$v.dom" "vCPU $v guest" "$fn" function \
		>"$TMP/fn$v.check" 2>&1
	check "vCPU $v: its first guest call $fn drawn, details shown ($(tail -1 "$TMP/fn$v.check"))" \
		grep -q '^ok' "$TMP/fn$v.check"
	browse "$page#find=$ex&lane=vCPU $v host" "ex$v"
	"$PYTHON3" "$top_srcdir/tests/timeline-check.py" dom "$TMP/ex$v.dom" "vCPU $v host" "$ex" exit \
		>"$TMP/ex$v.check" 2>&1
	check "vCPU $v: its first VM exit '$ex' drawn, details shown ($(tail -1 "$TMP/ex$v.check"))" \
		grep -q '^ok' "$TMP/ex$v.check"
done
check "details of a VM exit: reason, guest IP, handler" grep -q 'reason=.*guest_ip=0x.*handler=' "$TMP/ex0.dom"

# a click on a drawn slice shows its details: where #find drew vCPU 1's
# first call and first exit, the same view is loaded and clicked there
for what in fn ex; do
	case $what in fn) lane="vCPU 1 guest" name=$fn kind=function ;; ex) lane="vCPU 1 host" name=$ex kind=exit ;; esac
	set -- $("$PYTHON3" "$top_srcdir/tests/timeline-check.py" target "$TMP/${what}1.dom" "$lane" "$name")
	browse "$page#view=$1&click=$2" "click-$what"
	"$PYTHON3" "$top_srcdir/tests/timeline-check.py" clicked "$TMP/click-$what.dom" "$name" "$kind" \
		>"$TMP/click-$what.check" 2>&1
	check "a click at $2 on $lane shows '$name' ($(tail -1 "$TMP/click-$what.check"))" \
		grep -q '^ok' "$TMP/click-$what.check"
done
shot "$page#find=$ex&lane=vCPU 1 host" "$ART/t0116-timeline-html-exit.png" 900

# large recordings: only the longest slices are kept, the rest is summary
small=$TMP/small.html
"$VMTRACE" timeline "$TMP/rec.data" --guest "$GUEST_CODE" --max-slices 50 -o "$small" 2>/dev/null
check "--max-slices 50: exit 0" test $? -eq 0
check "--max-slices 50: the page is smaller ($(stat -c %s "$small") < $(stat -c %s "$page") bytes)" \
	test "$(stat -c %s "$small")" -lt "$(stat -c %s "$page")"
browse "$small" summary
check "--max-slices 50: summary bins drawn" grep -q 'data-how="bin"' "$TMP/summary.dom"
check "--max-slices 50: and kept slices drawn over them" grep -q 'data-how="slice"' "$TMP/summary.dom"
# VM exits are kept apart from functions: the 50 longest of each (before,
# one heap of 50 held guest functions only: no exit could be found)
"$PYTHON3" - "$small" >"$TMP/kinds" <<'PY'
import json, re, sys
page = open(sys.argv[1]).read()
m = re.search(r'<script type="application/json"[^>]*>(.*?)</script>', page, re.S)
data = json.loads(m.group(1))
kinds = [s[5] for s in data["slices"]]
print(kinds.count(0), kinds.count(1))
PY
read -r nfn nex <"$TMP/kinds"
check "--max-slices 50: 50 functions ($nfn) and 50 VM exits ($nex) kept" test "$nfn" -eq 50 -a "$nex" -eq 50
check "--max-slices 50: lanes as before" grep -q 'data-lanes="\[&quot;vCPU 0 guest&quot;' "$TMP/summary.dom"
check "no console message (error, exception) in any page load" no_console "$TMP"/*.log
finish
