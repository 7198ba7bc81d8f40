#!/bin/sh
# vmtrace report sees through retpolines and return thunks: on synth walks
# of the Debian kernel's own code (built with retpolines: an indirect call
# is `call __x86_indirect_thunk_REG`, whose RET - or an ITS thunk's `jmp
# *%REG` - goes to the real callee; returns may be `jmp
# __x86_return_thunk`) the truth has such calls, and the report names the
# real callees: every function's calls, self and inclusive time and
# instructions and the first calls equal tests/report-truth.py's (which
# takes the callee of a call into thunk code from the branch that leaves
# it), no __x86_indirect_*thunk* is a function or a first call, and every
# callee the truth reaches through a thunk is a function of the report
# with at least that many calls.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs

while read -r name size opts; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086
	code_recording "$name" "$size" $opts || continue
	report_truth "$name"
	"$PYTHON3" - "$TMP/$name.branches" "$HOST_CODE/kallsyms" "$GUEST_CODE/kallsyms" "$TMP/$name.report" \
		"$top_srcdir/tests/report-truth.py" >"$TMP/$name.thunks" 2>&1 <<'PY'
import collections, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("rt", sys.argv[5])
rt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rt)
syms = {False: rt.load_symbols(sys.argv[2]), True: rt.load_symbols(sys.argv[3])}
thunks = {False: rt.load_thunks(sys.argv[2]), True: rt.load_thunks(sys.argv[3])}
rep = json.load(open(sys.argv[4]))
# the truth's calls into indirect thunks, each to the function where the
# thread leaves thunk code next (per thread and machine)
via = collections.Counter()
open_call = {}
n = 0
for line in open(sys.argv[1]):
    if line.startswith('#'):
        continue
    q, tid, kind, frm, to, where, vcpu, insns, ret = line.split()[:9]
    g, frm, to = where == 'guest', int(frm, 16), int(to, 16)
    if kind not in ('call', 'return', 'jump'):
        continue
    key = (q, tid, g)
    ft, tt = rt.in_ranges(thunks[g], frm), rt.in_ranges(thunks[g], to)
    if kind == 'call' and not ft and tt:
        open_call[key] = int(ret, 16)
    elif ft and not tt and open_call.get(key) is not None:
        if open_call.pop(key) != to:            # not back to the call: the callee
            via[(g, rt.symbol(syms[g], to)[1])] += 1
            n += 1
bad = []
calls = {(f['guest'], int(f['func'], 16)): f['calls'] for f in rep['functions'] if f['vcpu'] is None}
for (g, func), k in via.items():
    if calls.get((g, func), 0) < k:
        bad.append('%s %s: %d calls through thunks, report %d' % ('guest' if g else 'host',
                   rt.symbol(syms[g], func)[0], k, calls.get((g, func), 0)))
named = [f['sym'] for f in rep['functions'] if (f['sym'] or '').startswith('__x86_indirect_')]
first = [f['sym'] for f in rep['first_calls'] if (f['sym'] or '').startswith('__x86_indirect_')]
print('%d calls through thunks to %d functions; thunks as functions %d, as first calls %d; %d short' % (
    n, len(via), len(named), len(first), len(bad)))
print('\n'.join(bad[:10] + sorted(set(named))[:5] + sorted(set(first))[:5]))
sys.exit(0 if n and via and not named and not first and not bad else 1)
PY
	ck_rc=$?
	check "$name: the real callees of calls through thunks ($(head -1 "$TMP/$name.thunks"))" test $ck_rc -eq 0 ||
		sed 's/^/#   /' "$TMP/$name.thunks"
done <<'CONFIGS'
walk-timed      128K --vcpus 2 --seed 11
walk-timeless   128K --vcpus 1 --timeless --seed 12
CONFIGS
finish
