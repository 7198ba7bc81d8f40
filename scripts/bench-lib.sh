# Sourced by the benchmarks (bench.sh, bench-script.sh, bench-report.sh).
# bench_code_dirs (needs $top, $TRIM_KCORE and $dir): $dir/host-code and $dir/guest-code from the Debian
# kernel's vmlinux (made once per --dir and kernel-code.py: a --dir kept from before a change of it -
# session 33's KVM stub - gets new ones, and loses the synth recordings made from the old);
# sets G, the guest image option.
bench_code_dirs() {
	local stamp
	stamp=$(cksum <"$top/tests/kernel-code.py")
	if [ -f "$dir/guest-code/kcore" ] && [ "$(cat "$dir/code.stamp" 2>/dev/null)" != "$stamp" ]; then
		echo "tests/kernel-code.py changed since $dir's code directories were made: making them and the recordings anew" >&2
		rm -rf "$dir/host-code" "$dir/guest-code"
		for f in "$dir"/*-*.data; do   # (tcg-boot's is a real boot's: kept)
			[ "$f" = "$dir/tcg-boot.data" ] || rm -rf "$f"
		done
	fi
	if [ ! -f "$dir/guest-code/kcore" ]; then
		sh "$top/tests/guest-image.sh" --vmlinux "$dir/kernel" >"$dir/kernel.log" 2>&1 ||
			{ echo "no Debian kernel package: $(tail -1 "$dir/kernel.log")" >&2; exit 1; }
		mkdir -p "$dir/host-code" "$dir/guest-code"
		python3 "$top/tests/kernel-code.py" "$dir/kernel/vmlinux" 0xe00000 "$dir/host-code" --kvm-stub
		python3 "$top/tests/kernel-code.py" "$dir/kernel/vmlinux" 0x2000000 "$dir/guest-code"
		"$TRIM_KCORE" "$dir/host-code" && "$TRIM_KCORE" "$dir/guest-code"
		echo "$stamp" >"$dir/code.stamp"
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

# PIPE_FLOOR_PY: python3 -c "$PIPE_FLOOR_PY" OUT FILE: FILE's bytes from the page cache into a pipe (1 MiB, as
# vmtrace sets it) by splice(2), read by `wc -l` - the text moved and counted with no producer work at all, the
# least any tool's run through the bench's pipe can take; writes "seconds cpu_seconds" (wc's and the splicing's)
# to OUT.
PIPE_FLOOR_PY='
import fcntl, os, resource, sys, time
fd = os.open(sys.argv[2], os.O_RDONLY)
size = os.fstat(fd).st_size
r, w = os.pipe()
try:
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
except OSError:
    pass
me = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
pid = os.posix_spawnp("wc", ["wc", "-l"], os.environ, file_actions=[
    (os.POSIX_SPAWN_DUP2, r, 0), (os.POSIX_SPAWN_CLOSE, r), (os.POSIX_SPAWN_CLOSE, w),
    (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)])
os.close(r)
off = 0
while off < size:
    n = os.splice(fd, w, size - off, offset_src=off)
    if n <= 0:
        break
    off += n
os.close(w)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t
me2 = resource.getrusage(resource.RUSAGE_SELF)
cpu = ru.ru_utime + ru.ru_stime + (me2.ru_utime - me.ru_utime) + (me2.ru_stime - me.ru_stime)
with open(sys.argv[1], "w") as f:
    f.write("%.4f %.6f\n" % (wall, cpu))
sys.exit(os.waitstatus_to_exitcode(status))'
