#!/bin/sh
# The test helpers themselves (tests/lib.sh): test_cmp passes on equal
# files, fails with a unified diff otherwise; check returns 1 when its
# command fails (`check ... || show-why` shows why) and counts the failure;
# no test's check reads $? after a command substitution in its description
# (bash, unlike dash, sets $? to the substitution's status there).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

printf 'a\nb\nc\n' >"$TMP/expect"
printf 'a\nb\nc\n' >"$TMP/same"
printf 'a\nB\nc\n' >"$TMP/other"
test_cmp "$TMP/expect" "$TMP/same" >"$TMP/diff"
check "test_cmp: equal files pass" test $? -eq 0
check "test_cmp: ... silently" test ! -s "$TMP/diff"
test_cmp "$TMP/expect" "$TMP/other" >"$TMP/diff"
check "test_cmp: different files fail" test $? -eq 1
check "test_cmp: the failure shows a unified diff, expected '-', actual '+'" \
	sh -c 'grep -qx "# -b" "$TMP/diff" && grep -qx "# +B" "$TMP/diff" && grep -q "^# @@" "$TMP/diff"'
test_cmp "$TMP/expect" "$TMP/missing" >"$TMP/diff"
check "test_cmp: a missing file fails" test $? -ne 0
check "test_cmp: ... and is named" grep -q missing "$TMP/diff"
# check in a subshell: its failure counted there, not here
(n=0 fails=0
 check "a failing command" false >/dev/null || echo "why: shown"
 check "a passing command" true >/dev/null || echo "why: wrongly shown"
 echo "counted $n, $fails failed") >"$TMP/check.out"
check "check: a failure returns 1 (why shown), a pass 0; both counted" \
	sh -c "test \"\$(cat '$TMP/check.out')\" = \"\$(printf 'why: shown\\ncounted 2, 1 failed')\""
# every check statement (continuation lines joined) whose description runs
# a command and whose arguments read $?
# shellcheck disable=SC2016
awk '
	function flush() { if (st != "" && desc ~ /\$\(/ && st ~ /(^|[^\\])\$\?/) print FILENAME ":" at ": " first; st = "" }
	/^[ \t]*check "/ { flush(); at = FNR; first = $0; st = $0; d = $0; sub(/^[ \t]*check "/, "", d)
		desc = substr(d, 1, index(d, "\" ") ? index(d, "\" ") : length(d)); cont = /\\$/; next }
	cont { st = st "\n" $0; cont = /\\$/; if (!cont) flush(); next }
	{ flush() }
	END { flush() }' "$top_srcdir"/tests/*.sh >"$TMP/status-after-subst"
check "no check reads \$? after a command substitution in its description" test ! -s "$TMP/status-after-subst" ||
	sed 's/^/#   /' "$TMP/status-after-subst"
finish
