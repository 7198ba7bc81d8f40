#!/bin/sh
# vmtrace script with a wrong kernel image (issue #12's "wrong or missing
# image"; missing ones: t0091): the guest kernel at another load address
# than the one the trace ran (make_code_dirs --alt's GUEST_CODE2), and a
# host image that is not the host's (the recording's kcore_dir replaced by
# that guest kernel).  Every VM entry (or every host walk) goes to code the
# image does not have: error lines, decoding resumed (branches after the
# first error), exit 3, no crash and no hang (120 s limit); each thread's
# error perf script prints with the same image, vmtrace prints too, at the
# same ip and tid (the address that cannot be read; tests/first-errors.py),
# the first one first and as perf names it ("code 5: Failed to get
# instruction").  perf prints fewer: once a DSO's code could not be
# read it marks the DSO (dso__data_status_seen) and, from its third failed
# walk on, resumes without an error line (intel_pt_walk_next_insn returns
# -ENOENT, then -ENOLINK: no error) - perf 2-4 errors here (2 per image),
# vmtrace 8-32 (one per failed walk).
# Timed (corrected) and timeless, per thread.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_perf
need_python
make_code_dirs --alt

# first_errors FILE: the first error line's tid, ip, code and message; in a
# timed recording those of every error line of its microsecond, sorted:
# errors of two threads at one time are merged in another order by perf
# (the queue it is decoding goes on through a tie - its heap - where
# vmtrace takes the lower queue first: recording.c next_queue), and perf's
# error time can be 1 ns later
first_errors() {
	grep 'trace error' "$1" | sed 's/.* time \([0-9.]*\) .* tid \([-0-9]*\) ip \([0-9a-fx]*\) \(.*\)/\1 \2 \3 \4/' |
		awk 'NR == 1 {t = substr($1, 1, index($1, ".") ? index($1, ".") + 6 : 0)}
		     NR == 1 || (t != "" && substr($1, 1, length(t)) == t) {$1 = ""; print}' | sort | tr '\n' ';'
}

# wrong NAME REC GUESTDIR: REC decoded with GUESTDIR's guest image by
# vmtrace and perf
wrong() {
	timeout 120 "$VMTRACE" script "$2" --guestkallsyms "$3/kallsyms" --itrace=be >"$TMP/$1.vt" 2>"$TMP/$1.err"
	rc=$?
	check "$1: exit 3, no crash or hang (got $rc)" test $rc -eq 3
	check "$1: the error count on stderr" grep -q 'decode errors (decoding resumed at the next PSB' "$TMP/$1.err"
	after=$(awk '/trace error/ {e = 1; next} e && / => / {n++} END {print n + 0}' "$TMP/$1.vt")
	check "$1: decoding resumes: $after branches after the first error" test "$after" -gt 0
	timeout 300 "$PERF" script -i "$2" --guestkallsyms "$3/kallsyms" --itrace=e >"$TMP/$1.perf" 2>/dev/null
	"$PYTHON3" "$top_srcdir/tests/first-errors.py" "$TMP/$1.vt" "$TMP/$1.perf" >"$TMP/$1.cmp"
	read -r nerr _ notid _ _ nperf pfound _ <"$TMP/$1.cmp"
	check "$1: error lines ($nerr; perf $nperf), each with its thread" test "$nerr" -gt 0 -a "$notid" -eq 0
	check "$1: every error perf prints, vmtrace prints (ip, tid: $pfound of $nperf)" \
		test "$pfound" -eq "$nperf" -a "$nperf" -gt 0
	vfirst=$(first_errors "$TMP/$1.vt") pfirst=$(first_errors "$TMP/$1.perf")
	check "$1: the first errors are perf's (tid, ip, code: $vfirst; perf $pfirst)" test -n "$vfirst" -a "$vfirst" = "$pfirst"
}

for rec in timed timeless; do
	opts="--psb-period 1"
	[ $rec = timeless ] && opts=--timeless
	# shellcheck disable=SC2086
	code_recording $rec 128K --vcpus 2 $opts || continue
	wrong "$rec-wrong-guest" "$TMP/$rec.data" "$GUEST_CODE2"
	if ! cp -r "$TMP/$rec.data" "$TMP/$rec-host.data" ||
		! cp "$GUEST_CODE2/kcore" "$GUEST_CODE2/kallsyms" "$GUEST_CODE2/modules" "$TMP/$rec-host.data/kcore_dir/"; then
		fail "$rec: replace kcore_dir"
		continue
	fi
	wrong "$rec-wrong-host" "$TMP/$rec-host.data" "$GUEST_CODE"
done
finish
