#!/bin/sh
# Our block walker (src/decode/walk.c) against libipt's block decoder
# itself: vmtrace script with VMTRACE_DECODER=walk and =blk prints the same
# bytes for --itrace=bep, --call-ret-trace and --insn-trace (cmp; the first
# differing lines shown on failure) on a matrix of recordings of real
# kernel code: per thread and per CPU, timed and timeless, CYC and MTC
# period 0, 1-8 vCPUs, 2 VMs, the guest kernel at another address, VM exits
# handled in user space (TIP.PGD/TIP.PGE: disable and enable events),
# overflows (OVF; the walker under VMTRACE_OVF_BRANCH=0: libipt cannot
# say where a branch decided before an OVF went), lost AUX data,
# changing core:bus ratios, small
# windows (seams, warm-up), corrupt AUX data (t0099's: errors and resync),
# guest user code of two processes at one address (t0083's setup: the code
# hook), and - with QEMU - a TCG recording from the reset vector (16- and
# 32-bit code, text pokes; t0128's).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
need_python
make_code_dirs --alt

# same NAME REC SCRIPT-OPTS...: both decoders, three modes, the same output
# (the sanitizer suite: one mode per recording, in turn - each mode's
# printing runs under the sanitizers on a third of the recordings; the
# outputs' equality is the normal build's to check on all)
same_turn=0
same() {
	s_name=$1 s_rec=$2
	shift 2
	s_modes="--itrace=bep --call-ret-trace --insn-trace"
	if asan_build; then
		case $((same_turn % 3)) in
		0) s_modes=--itrace=bep ;;
		1) s_modes=--call-ret-trace ;;
		*) s_modes=--insn-trace ;;
		esac
		same_turn=$((same_turn + 1))
	fi
	for s_mode in $s_modes; do
		VMTRACE_DECODER=blk "$VMTRACE" script "$s_rec" "$@" $s_mode >"$TMP/blk" 2>"$TMP/blk.err"
		s_rb=$?
		# (libipt's block decoder cannot say where a branch whose trace
		# came before an OVF went: the walker prints it - as perf, t0142 -
		# but not here; nor the time before an event it read after a
		# branch that the event does not decide: the walker's is perf's,
		# t0090, but here the time after it)
		VMTRACE_EVENT_TIME=0 VMTRACE_OVF_BRANCH=0 VMTRACE_DECODER=walk "$VMTRACE" script "$s_rec" "$@" $s_mode >"$TMP/walk" 2>"$TMP/walk.err"
		s_rw=$?
		check "$s_name $s_mode: walker = libipt ($(wc -l <"$TMP/blk") lines, exit $s_rw = $s_rb)" \
			sh -c "cmp -s '$TMP/blk' '$TMP/walk' && cmp -s '$TMP/blk.err' '$TMP/walk.err' && test $s_rb -eq $s_rw" ||
			{ diff "$TMP/blk" "$TMP/walk" | head -8; diff "$TMP/blk.err" "$TMP/walk.err" | head -4; } |
			sed 's/^/#   /'
	done
}

while read -r name size opts; do
	[ -n "$name" ] || continue
	# the sanitizer suite: 8 of the 17 rows (per thread and per CPU, timed
	# and timeless, CYC, MTC 0, user exits, OVF, lost data, CBR - every
	# path of the walker; the other rows multiply them)
	asan_skip "$name" thread-4vcpu-timed cpu-1vcpu-timed thread-8vcpu-timed thread-1vcpu-cyc-mtc0 \
		thread-4vcpu-timeless-cyc-alt cpu-8vcpu-4cpu-timed tnt-dense exit-heavy thread-2vcpu-ovf && continue
	gc=$GUEST_CODE
	case $name in *-alt) gc=$GUEST_CODE2 ;; esac
	# shellcheck disable=SC2086
	row_recording "$name" "$size" "$gc" $opts || continue
	same "$name" "$TMP/$name.data" --guestkallsyms "$gc/kallsyms"
	rm -rf "$TMP/$name.data"
done <<'CONFIGS'
thread-1vcpu-timeless   96K  --vcpus 1 --timeless
thread-4vcpu-timed      96K  --vcpus 4 --psb-period 1
cpu-4vcpu-2cpu-timed    96K  --vcpus 4 --per-cpu --cpus 2 --psb-period 0
cpu-1vcpu-timed         64K  --vcpus 1 --per-cpu --cpus 1
thread-2vm-cyc          96K  --vcpus 2 --vms 2 --cyc --psb-period 0
cpu-2vcpu-mtc0          96K  --vcpus 2 --per-cpu --cpus 2 --mtc-period 0 --psb-period 0 --seed 3
thread-8vcpu-timed      256K --vcpus 8 --psb-period 1
thread-1vcpu-cyc-mtc0   64K  --vcpus 1 --cyc --mtc-period 0
thread-4vcpu-timeless-cyc-alt 96K --vcpus 4 --timeless --cyc
cpu-8vcpu-4cpu-timed    256K --vcpus 8 --per-cpu --cpus 4 --psb-period 0
thread-2vcpu-user-exits 96K  --vcpus 2 --user-exit-percent 50 --seed 9
tnt-dense               128K --vcpus 2 --host-steps 2000
exit-heavy              128K --vcpus 4 --host-steps 6
thread-2vcpu-ovf        96K  --vcpus 2 --ovf-every 50 --timeless --seed 21
cpu-2vcpu-ovf           96K  --vcpus 2 --ovf-every 7 --per-cpu --cpus 2 --seed 21
thread-2vcpu-aux-lost   96K  --vcpus 2 --aux-truncated-every 3 --seed 21
thread-2vcpu-cbr        96K  --vcpus 2 --cbr-vary --cyc --seed 21
CONFIGS

same_in_windows

# corrupt AUX data: decode errors, resynchronisation
code_recording err 256K --vcpus 2 --seed 4 && "$PYTHON3" "$top_srcdir/tests/aux-corrupt.py" "$TMP/err.data/data" &&
	same "corrupt AUX" "$TMP/err.data" --guestkallsyms "$GUEST_CODE/kallsyms"

# a wrong guest image (the guest kernel at another address): decode errors,
# resynchronisation - and they must really happen (without an image at all
# script refuses with exit 2 and both decoders print nothing)
if code_recording wrong 96K --vcpus 2 --seed 5; then
	same "guest walked with a wrong image" "$TMP/wrong.data" --guestkallsyms "$GUEST_CODE2/kallsyms"
	VMTRACE_DECODER=walk "$VMTRACE" script "$TMP/wrong.data" --guestkallsyms "$GUEST_CODE2/kallsyms" \
		--itrace=be >"$TMP/walk" 2>/dev/null
	w_rc=$?
	check "...the wrong image gives decode errors and branches (exit $w_rc = 3, $(grep -c 'instruction trace error' \
		"$TMP/walk") error lines of $(wc -l <"$TMP/walk"))" \
		sh -c "test $w_rc -eq 3 && grep -q 'instruction trace error' '$TMP/walk' &&
		       test \$(grep -vc 'instruction trace error' '$TMP/walk') -gt 100"
fi

# guest user code of two processes at one address (t0083's recording)
user_code() {
	# (subshells: their skip or exit would end the whole test)
	(need_user_standin "$TMP/g0.data") >/dev/null 2>&1 && guest_user_progs 2>/dev/null || return 0
	guest_user_synth || { fail "guest user: synth"; return 0; }
	guest_user_maps || return 0
	guest_user_fork_sideband "$TMP/sb"
	(guest_data_dir g "$TMP/sb") >/dev/null && guest_user_inject ||
		{ fail "guest user: the injected recording"; return 0; }
	u_home=$HOME HOME=$TMP/empty
	same "guest user code (2 processes)" "$TMP/i.data" --guestmount "$TMP/gm"
	HOME=$u_home
}
user_code

# a TCG recording from the reset vector: 16/32/64-bit code, text pokes
tcg() {
	command -v qemu-system-x86_64 >/dev/null && [ -n "${VMTRACE_TCG_PLUGIN:-}" ] || return 0
	# an ASan/UBSan plugin cannot load into QEMU (not built with ASan:
	# "undefined symbol: __asan_..."), so the sanitizer suite skips the row
	if asan_build; then echo "# SKIP the TCG row: the sanitizer build's plugin cannot load into QEMU"; return 0; fi
	"$top_srcdir/tests/guest-image.sh" --vmlinux "$TMP/img" 2>/dev/null || return 0
	timeout 600 "$VMTRACE" record --source tcg --tcg-limit 1500000 -o "$TMP/rec" \
		-- qemu-system-x86_64 -accel tcg -m 256 -smp 1 -nodefaults -no-user-config -display none \
		-serial "file:$TMP/console" -no-reboot -kernel "$TMP/img/vmlinux" \
		-append "console=ttyS0 panic=-1 quiet" >/dev/null 2>&1 || { fail "tcg: record"; return 0; }
	same "TCG boot (16/32/64-bit)" "$TMP/rec" --guest "$TMP/rec/guest"
}
tcg
finish
