#!/bin/bash
# Run the whole vmtrace test suite (builds first if needed) and print
#   N passed, N failed[, N skipped]
# counting every individual check of every test program and script.
#   scripts/run-tests.sh                 normal build in the source tree
#   scripts/run-tests.sh --sanitizers    separate ASan+UBSan build in build-asan/
#       (of build-asan/src, the source as distributed: make distdir; the
#       tree's own build stays, so the plain run needs no rebuild after it):
#       every unit test and shell test except those whose point is a real
#       component's run time or a memory bound, which the sanitizers only
#       slow down or inflate (HEAVY below: valgrind, booted TCG guests,
#       512 MiB and perf-leak recordings); their code paths under the
#       sanitizers are covered by the lighter tests of the same commands
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD
# The slowest tests first (from a run of the suite, slowest first): make
# check starts the tests in their order, nproc + 1 at a time, and a long
# one started among the last runs alone at the end (once t0121, then 10
# minutes, started after three quarters of the suite).  The rest keep
# their order.  One test more than CPUs: some wait on QEMU, sshd or
# sleeps (nproc at a time kept the CPUs 79% busy: the plain suite took
# 11m00s here, 9m51s with one more, all passing).
SLOW='t0142 t0076 t0145 t0090 t0104 t0105 t0024 t0143 t0116 t0075 t0072 t0093 t0049 t0110 t0022 t0092
	t0121 t0102 t0097 t0127 t0060 t0128 t0130 t0115 t0098 t0118 t0122 t0010 t0080 t0103 t0109 t0107'
# slow_first TEST...: the TESTs, those of SLOW first
slow_first() {
	for s in $SLOW; do printf '%s\n' "$@" | grep "^tests/$s-"; done
	printf '%s\n' "$@" | grep -Ev "^tests/($(echo $SLOW | tr ' ' '|'))-"
}
if [ "${1:-}" = --sanitizers ]; then
	scripts/setup-and-demo.sh --no-demo >/dev/null || exit 1
	# the source as distributed (timestamps kept: the build stays incremental)
	mkdir -p build-asan/build && make -s distdir distdir="$top/build-asan/src" >/dev/null || exit 1
	cd build-asan/build || exit 1
	[ -f Makefile ] || ../src/configure -q --enable-sanitizers --enable-werror CC=clang || exit 1
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
	HEAVY='t0060|t0072|t0075|t0076|t0092|t0096|t0097|t0098|t0113|t0115|t0120|t0121|t0122|t0127|t0128'
	set -- TESTS="$(slow_first $(cd "$top" && { ls tests/test-*.c | sed 's/\.c$//'; ls tests/t[0-9]*.sh; } |
		grep -Ev "^tests/($HEAVY)-") | tr '\n' ' ')"
else
	scripts/setup-and-demo.sh --no-demo || exit 1
	# the Makefile's TESTS, reordered
	set -- TESTS="$(slow_first $(printf 'print-tests:\n\t@echo $(TESTS)\n' |
		make -s --no-print-directory -f Makefile -f - print-tests) | tr '\n' ' ')"
fi
rm -f tests/*.trs tests/*.log     # results of earlier runs (of tests since removed, too) are not counted
make -s -j"$(($(nproc) + 1))" check "$@" >make-check.log 2>&1
status=$?
if [ $status -ne 0 ] && ! ls tests/*.trs >/dev/null 2>&1; then
	echo "make check failed before running tests:"; grep -E "error|Error" make-check.log | head -20
fi
# fail_context LOG: each failed check with the diagnostics around it (the
# lines that are not results: up to 4 before it and 8 after), and sanitizer
# reports; 40 lines at most
fail_context() {
	awk '/^(not )?ok / { if (after) after = 0 }
	     /^not ok / { for (i = 0; i < nb; i++) print "  " buf[i]; nb = 0; print "  " $0; after = 8; next }
	     /^ok / { nb = 0; next }
	     after > 0 { print "  " $0; after--; next }
	     /ERROR|Assertion|Sanitizer|runtime error/ { print "  " $0; next }
	     { if (nb == 4) { for (i = 1; i < 4; i++) buf[i - 1] = buf[i]; nb = 3 } buf[nb++] = $0 }' "$1" | head -40
}
passed=0; failed=0; skipped=0
for trs in tests/*.trs; do
	log=${trs%.trs}.log
	res=$(sed -n 's/^:test-result: //p' "$trs" | head -1)
	p=$(grep -c '^ok ' "$log"); f=$(grep -c '^not ok ' "$log")
	case $res in
	PASS) passed=$((passed + p)); failed=$((failed + f)); [ "$p" = 0 ] && passed=$((passed + 1)) ;;
	SKIP) skipped=$((skipped + 1)); echo "SKIP: ${trs%.trs}: $(grep -m1 '^SKIP' "$log")" ;;
	*) passed=$((passed + p)); failed=$((failed + (f > 0 ? f : 1)))
	   echo "FAIL: ${trs%.trs}"; fail_context "$log" ;;
	esac
done
# the slowest tests: from each log's creation to its result (where the
# file system keeps creation times)
for trs in tests/*.trs; do
	b=$(stat -c %W "${trs%.trs}.log" 2>/dev/null) e=$(stat -c %Y "$trs")
	[ "${b:-0}" -gt 0 ] 2>/dev/null && echo "$((e - b)) ${trs%.trs}"
done | sort -rn | head -10 | awk '{s = s (NR > 1 ? ", " : "slowest: ") $2 " " $1 " s"} END {if (NR) print s}'
# the CPU time the tests' processes used (tests/lib.sh's finish prints it):
# the suite's cost apart from waiting, which the wall times above include
for trs in tests/*.trs; do
	sed -n 's/^# cpu of children (user sys): //p' "${trs%.trs}.log" |
		awk -v t="${trs%.trs}" '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] }
			printf "%d %s\n", s, t }'
done | sort -rn | awk '{ s += $1; if (NR <= 10) l = l (NR > 1 ? ", " : "") $2 " " $1 " s" }
	END { if (NR) printf "CPU: %d s in %d tests; most: %s\n", s, NR, l }'
[ -n "$(ls tests/*.trs 2>/dev/null)" ] || { echo "no test results (make check failed to build?)"; failed=$((failed + 1)); }
[ $status -ne 0 ] && [ $failed -eq 0 ] && failed=1
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
