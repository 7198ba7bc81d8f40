#!/bin/sh
# vmtrace script maps the code once: on a trace of synth's walks over the
# whole kernel (host and guest), the kcores are opened once each at load,
# never while decoding.  libipt's image section cache (64 KiB sections, a
# 32 MiB limit) re-mapped sections all the time on such traces - open,
# fstat, mmap, close and a block cache for each, munmap of both - 18,300
# opens of the kcores on 512 KiB of AUX; the code is now read through
# libipt's read-memory callback from the kcore mapped at load.  And the
# batches of branches the decoding threads hand to the reader (256 KiB
# each) are reused, not freed: glibc unmapped each one (85 munmap calls on
# this walk, 34 then - those of the start and the end).  Each queue's
# thread prints its own lines since (its printer's tables and text
# buffers, made once, unmapped at the end), the tables are 2 MiB-aligned
# mappings (their ends trimmed) and text chunks are held until written,
# so the count varies with timing (106-115 on 128 KiB, 109-126 on 512
# KiB, session 14) - but not with the trace's length, which a munmap per
# batch would add (~50 per 128 KiB): the 4x longer walk may have at most
# 48 more than the short one.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/code-lib.sh"
command -v strace >/dev/null || skip "strace not installed (apt-get install strace)"
need_python
make_code_dirs

code_recording walk 128K --vcpus 4 --host-steps 6 --seed 41 --psb-period 1 || finish
code_recording walk4 512K --vcpus 4 --host-steps 6 --seed 41 --psb-period 1 || finish
# under ASan: LeakSanitizer cannot run under ptrace, and ASan's allocator
# maps and unmaps memory of its own (the munmap bound is for glibc's)
asan_build && { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"; export ASAN_OPTIONS; }
strace -f -qq -e trace=openat,mmap,munmap -o "$TMP/st" "$VMTRACE" script "$TMP/walk.data" \
	--guestkallsyms "$GUEST_CODE/kallsyms" --itrace=b >"$TMP/out" 2>"$TMP/err"
rc=$?
check "script decodes the walk (exit $rc)" test $rc -eq 0 -a -s "$TMP/out"
opens=$(grep -c 'openat(.*kcore"' "$TMP/st")
check "the kcores opened at most twice each: $opens opens" test "$opens" -le 4
unmaps=$(grep -c 'munmap(' "$TMP/st")
strace -f -qq -e trace=munmap -o "$TMP/st4" "$VMTRACE" script "$TMP/walk4.data" \
	--guestkallsyms "$GUEST_CODE/kallsyms" --itrace=b >/dev/null 2>&1
unmaps4=$(grep -c 'munmap(' "$TMP/st4")
asan_build || check "no munmap per batch: $unmaps munmap calls on 128 KiB, $unmaps4 on 512 KiB (<= $unmaps + 48)" \
	test "$unmaps4" -le $((unmaps + 48))
finish
