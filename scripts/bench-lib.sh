# Sourced by the benchmarks (bench.sh, bench-script.sh, bench-report.sh).
# bench_code_dirs (needs $top, $TRIM_KCORE and $dir): $dir/host-code and $dir/guest-code from the Debian
# kernel's vmlinux (made once per --dir); sets G, the guest image option.
bench_code_dirs() {
	if [ ! -f "$dir/guest-code/kcore" ]; then
		sh "$top/tests/guest-image.sh" --vmlinux "$dir/kernel" >"$dir/kernel.log" 2>&1 ||
			{ echo "no Debian kernel package: $(tail -1 "$dir/kernel.log")" >&2; exit 1; }
		mkdir -p "$dir/host-code" "$dir/guest-code"
		python3 "$top/tests/kernel-code.py" "$dir/kernel/vmlinux" 0xe00000 "$dir/host-code" --kvm-stub
		python3 "$top/tests/kernel-code.py" "$dir/kernel/vmlinux" 0x2000000 "$dir/guest-code"
		"$TRIM_KCORE" "$dir/host-code" && "$TRIM_KCORE" "$dir/guest-code"
	fi
	G="--guestkallsyms $dir/guest-code/kallsyms"
}

# RUSAGE_PY: python3 -c "$RUSAGE_PY" OUT CMD...: run CMD, write "seconds maxrss_kb user_s sys_s minflt" of it
# (and only it: wait4) to OUT; CMD's exit status.  posix_spawn, not fork:
# a forked python's copy-on-write faults before exec counted as CMD's
# (vmtrace --version: 380 faults and 9.5 ms instead of 145 and 2.9 ms,
# ~6 ms of every ~60 ms dry run; perf's runs are 10x longer).  Peak RSS
# (ru_maxrss) still counts the launcher's at exec, python's ~13 MiB, so
# it is an upper bound (vmtrace --version: 13 MiB here, 3 MiB in
# /usr/bin/time)
RUSAGE_PY='
import os, sys, time
t = time.perf_counter()
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, ru = os.wait4(pid, 0)
w = time.perf_counter() - t
with open(sys.argv[1], "w") as f:
    f.write("%.4f %d %.6f %.6f %d\n" % (w, ru.ru_maxrss, ru.ru_utime, ru.ru_stime, ru.ru_minflt))
sys.exit(os.waitstatus_to_exitcode(status))'
