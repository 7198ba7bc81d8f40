#!/bin/bash
# Benchmark (not a test): the slowdown of a guest boot under QEMU TCG with
# vmtrace's plugin (`vmtrace record --source tcg`, kernel and user space)
# against the same boot without it, and the MB/s of trace written.
# The guest: the test kernel (tests/guest-image.sh --vmlinux) with a static
# busybox initramfs whose /init runs a few user commands and powers off, so
# both runs end at the same point.  Each run RUNS times (default 1, --runs),
# the median wall time is printed with the load average.  Goal (issue #15):
# at most 10x slower than TCG without the plugin.
#   scripts/bench-tcg.sh [--runs N] [--dir DIR] [--keep]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
VMTRACE=${VMTRACE:-$top/vmtrace}
PLUGIN=${VMTRACE_TCG_PLUGIN:-$top/vmtrace-tcg.so}
runs=1 dir='' keep=''
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	*) echo "usage: $0 [--runs N] [--dir DIR] [--keep]" >&2; exit 2 ;;
	esac
done
command -v qemu-system-x86_64 >/dev/null || { echo "bench-tcg: no qemu-system-x86_64" >&2; exit 1; }
bb=$(command -v busybox) || { echo "bench-tcg: no busybox (busybox-static)" >&2; exit 1; }
[ -n "$dir" ] || { dir=$(mktemp -d "${TMPDIR:-/tmp}/vmtrace-bench-tcg.XXXXXX"); [ -n "$keep" ] || trap 'rm -rf "$dir"' EXIT; }
mkdir -p "$dir"
sh "$top/tests/guest-image.sh" --vmlinux "$dir/img" >"$dir/image.log" 2>&1 ||
	{ echo "bench-tcg: no guest kernel: $(tail -1 "$dir/image.log")" >&2; exit 1; }
rm -rf "$dir/root" && mkdir -p "$dir/root/bin" "$dir/root/proc" "$dir/root/dev"
cp "$bb" "$dir/root/bin/busybox"
cat >"$dir/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox ls -l /proc >/dev/null
/bin/busybox sha256sum /bin/busybox
/bin/busybox poweroff -f
INIT
chmod 755 "$dir/root/init"
(cd "$dir/root" && find . | cpio -o -H newc 2>/dev/null) >"$dir/initrd.cpio"
qemu=(qemu-system-x86_64 -accel tcg -m 256 -smp 1 -nodefaults -no-user-config -display none -no-reboot
	-serial "file:$dir/console" -kernel "$dir/img/vmlinux" -initrd "$dir/initrd.cpio"
	-append "console=ttyS0 panic=-1 quiet norandmaps")
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
: >"$dir/plain.t"; : >"$dir/tcg.t"
for _ in $(seq "$runs"); do
	t0=$(now); "${qemu[@]}"; t1=$(now)
	echo "$t1 - $t0" | bc >>"$dir/plain.t"
	grep -q 'Power down' "$dir/console" || { echo "bench-tcg: the plain boot did not power off" >&2; exit 1; }
	rm -rf "$dir/rec"
	t0=$(now); "$VMTRACE" record --source tcg -o "$dir/rec" --json -- "${qemu[@]}" >"$dir/rec.json" 2>"$dir/rec.err"; t1=$(now)
	echo "$t1 - $t0" | bc >>"$dir/tcg.t"
done
plain=$(median <"$dir/plain.t") tcg=$(median <"$dir/tcg.t")
python3 - "$dir/rec.json" "$plain" "$tcg" "$runs" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
plain, tcg, runs, load = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
qemu = j['seconds']
mb = j['aux_bytes'] / 1e6
print(f"TCG boot to poweroff, {j['started'] / 1e9:.2f} G instructions ({j['instructions'] / 1e9:.2f} G traced, "
      f"kernel and user), median of {runs}, load {load}")
print(f"  without the plugin      {plain:7.1f} s")
print(f"  with it (QEMU run)      {qemu:7.1f} s   {qemu / plain:5.1f}x   {mb:7.1f} MB of trace, {mb / qemu:5.2f} MB/s")
print(f"  with it (+ conversion)  {tcg:7.1f} s   {tcg / plain:5.1f}x   perf.data {j['file_bytes'] / 1e6:.1f} MB")
print(f"  goal <= 10x: {'met' if qemu / plain <= 10 else 'MISSED'}")
PY
