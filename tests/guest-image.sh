#!/bin/sh
# guest-image.sh - a small Linux guest for tests: the Debian kernel package's
# kernel (uncompressed vmlinux: PVH entry, fast under TCG, no KASLR) and a
# busybox initramfs that starts sshd.
#
#   tests/guest-image.sh [--perf] OUTDIR AUTHORIZED_KEYS HOST_KEY
#   tests/guest-image.sh --vmlinux OUTDIR      (only OUTDIR/vmlinux)
#
# --perf also puts the host's perf (Debian's linux-perf: the real binary,
# not the /usr/bin/perf wrapper when there is one) and the libraries ldd
# lists for it into the initramfs as /usr/bin/perf; the bundle is cached
# like the kernel (keyed by the binary's size and mtime).
#
# writes OUTDIR/vmlinux and OUTDIR/initrd.gz.  The guest brings up eth0
# (e1000, QEMU user networking 10.0.2.15), runs sshd on port 22 with
# HOST_KEY (a private key file) and root's AUTHORIZED_KEYS, and prints
# "VMTRACE-GUEST-READY" on its console when sshd is up.  Boot it with e.g.
#   qemu-system-x86_64 -accel tcg -m 512 -nodefaults -no-user-config -display none \
#     -serial file:OUTDIR/console -no-reboot -kernel OUTDIR/vmlinux -initrd OUTDIR/initrd.gz \
#     -append "console=ttyS0 panic=-1 quiet clocksource=tsc tsc=reliable" \
#     -netdev user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:PORT-:22 -device e1000,netdev=n0
#
# The kernel .deb (apt-get download) and what is unpacked from it are cached
# in $VMTRACE_TEST_CACHE (default /var/cache/vmtrace-test if writable, else
# ~/.cache/vmtrace-test), so reruns and CI reuse them.
# Needs: apt-get, dpkg-deb, xz, cpio, gzip, busybox (static), /usr/sbin/sshd.
set -eu

# The sshd settings of the test guest and of the tests' host sshd:
# root by key only, no PAM, SFTP in-process.  (--sshd-config prints them.)
sshd_common() {
	cat <<'EOF'
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
Subsystem sftp internal-sftp
EOF
}
[ "${1:-}" = --sshd-config ] && { sshd_common; exit 0; }

kernel_only= with_perf= second=
[ "${1:-}" = --perf ] && { with_perf=1; shift; }
if [ "${1:-}" = --vmlinux ] && [ $# -eq 2 ]; then
	kernel_only=1 out=$2
elif [ "${1:-}" = --vmlinux2 ] && [ $# -eq 2 ]; then
	# a second kernel: Debian 12's newest 6.12 (cloud flavour: 34 MB),
	# OUTDIR/vmlinux only - another version's code and kallsyms layout
	kernel_only=1 second=1 out=$2
else
	[ $# -eq 3 ] || { echo "usage: $0 OUTDIR AUTHORIZED_KEYS HOST_KEY | --vmlinux OUTDIR | --vmlinux2 OUTDIR" >&2; exit 2; }
	out=$1 authkeys=$2 hostkey=$3
fi
# real_perf: the perf binary itself (Debian's /usr/bin/perf may be a shell
# wrapper running /usr/bin/perf_X.Y for the running kernel's X.Y)
real_perf() {
	p=${PERF:-$(command -v perf || true)}
	[ -n "$p" ] || return 1
	if [ "$(head -c 4 "$p" | od -An -c | tr -d ' ')" != "177ELF" ]; then
		p=$(ls /usr/bin/perf_[0-9]* 2>/dev/null | sort -V | tail -1)
		[ -n "$p" ] || return 1
	fi
	echo "$p"
}
for t in dpkg-deb xz cpio gzip ldd ${second:+zstd}; do
	command -v $t >/dev/null || { echo "$0: $t not found" >&2; exit 1; }
done
busybox=$(command -v busybox || true)
{ [ -n "$kernel_only" ] || { [ -n "$busybox" ] && [ -x /usr/sbin/sshd ]; }; } || { echo "$0: needs busybox-static and openssh-server" >&2; exit 1; }

if [ -z "${VMTRACE_TEST_CACHE:-}" ]; then
	if mkdir -p /var/cache/vmtrace-test 2>/dev/null && [ -w /var/cache/vmtrace-test ]; then
		VMTRACE_TEST_CACHE=/var/cache/vmtrace-test
	else
		VMTRACE_TEST_CACHE=${HOME:-/tmp}/.cache/vmtrace-test
	fi
fi
cache=$VMTRACE_TEST_CACHE
mkdir -p "$cache" "$out"

# --- kernel: vmlinux + e1000.ko from the Debian package (cached) -----------
# its name, kept in the cache until apt's lists change: apt-cache costs 1.5 s
# of CPU a call where apt keeps no binary cache (Debian's container images),
# and every test that needs the kernel asks
if [ -n "$second" ]; then
	kname=$cache/kpkg2.txt
	# shellcheck disable=SC2016
	ask='apt-cache pkgnames linux-image-6.12 | grep -- "-cloud-amd64-unsigned\$" | sort -V | tail -1'
else
	kname=$cache/kpkg.txt
	ask="apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print \$2; exit}'"
fi
if [ -s "$kname" ] && [ -z "$(find /var/lib/apt/lists -maxdepth 1 -newer "$kname" 2>/dev/null | head -1)" ]; then
	kpkg=$(cat "$kname")
else
	kpkg=$(sh -c "$ask" 2>/dev/null)
	[ -z "$kpkg" ] || { echo "$kpkg" >"$kname.$$" && mv -f "$kname.$$" "$kname"; }
fi
if [ -z "$kpkg" ]; then              # (no apt lists: a kernel cached before)
	if [ -n "$second" ]; then
		kpkg=$(cd "$cache" && ls -d kernel-linux-image-6.12* 2>/dev/null | sed 's/^kernel-//' | sort -V | tail -1)
	else
		kpkg=$(cd "$cache" && ls -d kernel-* 2>/dev/null | sed 's/^kernel-//' | grep -v -- -cloud- | tail -1)
	fi
fi
[ -n "$kpkg" ] || { echo "$0: cannot find the Debian kernel package${second:+ (6.12)} (apt-get update?)" >&2; exit 1; }
kdir=$cache/kernel-$kpkg
if [ ! -s "$kdir/vmlinux" ] || { [ -z "$second" ] && [ ! -s "$kdir/e1000.ko" ]; }; then
	work=$(mktemp -d "$cache/tmp.XXXXXX")
	(cd "$work" && apt-get download "$kpkg" >/dev/null 2>&1) || { rm -rf "$work"; echo "$0: apt-get download $kpkg failed" >&2; exit 1; }
	if [ -n "$second" ]; then
		(cd "$work" && dpkg-deb --fsys-tarfile "$kpkg"_*.deb | tar -x --wildcards './boot/vmlinuz-*')
	else
		(cd "$work" && dpkg-deb --fsys-tarfile "$kpkg"_*.deb | tar -x --wildcards './boot/vmlinuz-*' './lib/modules/*/e1000.ko*')
	fi
	vmlinuz=$(ls "$work"/boot/vmlinuz-*)
	# the compressed kernel inside: xz (6.1) or zstd (6.12)
	off=$(LC_ALL=C grep -abo "$(printf '\3757zXZ')" "$vmlinuz" | head -1 | cut -d: -f1)
	if [ -n "$off" ]; then
		tail -c +$((off + 1)) "$vmlinuz" | xz -dc > "$work/vmlinux" 2>/dev/null || true
	else
		off=$(LC_ALL=C grep -abo "$(printf '\050\265\057\375')" "$vmlinuz" | head -1 | cut -d: -f1)
		[ -z "$off" ] || tail -c +$((off + 1)) "$vmlinuz" | zstd -dcq > "$work/vmlinux" 2>/dev/null || true
	fi
	[ "$(head -c 4 "$work/vmlinux" | od -An -c | tr -d ' ')" = "177ELF" ] || { rm -rf "$work"; echo "$0: could not unpack vmlinux" >&2; exit 1; }
	if [ -z "$second" ]; then
		ko=$(find "$work/lib" -name 'e1000.ko*' | head -1)
		case $ko in
		*.xz) xz -dc "$ko" > "$work/e1000.ko" ;;
		*) cp "$ko" "$work/e1000.ko" ;;
		esac
	fi
	mkdir -p "$kdir"
	mv "$work/vmlinux" "$kdir/"
	[ -n "$second" ] || mv "$work/e1000.ko" "$kdir/"
	rm -rf "$work"
fi
cp "$kdir/vmlinux" "$out/vmlinux"
[ -z "$kernel_only" ] || exit 0

# --- initramfs: busybox, sshd and its libraries, e1000.ko, keys -------------
root=$(mktemp -d "${TMPDIR:-/tmp}/guest-initrd.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/sbin" "$root/usr/sbin" "$root/etc/ssh" "$root/root/.ssh" "$root/proc" "$root/sys" \
	"$root/dev" "$root/run/sshd" "$root/var/empty" "$root/tmp" "$root/lib/modules"
cp "$busybox" "$root/bin/busybox"
cp /usr/sbin/sshd "$root/usr/sbin/sshd"
for lib in $(ldd /usr/sbin/sshd | awk '/=>/ {print $3} /^\t\// {print $1}'); do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done
cp "$kdir/e1000.ko" "$root/lib/modules/e1000.ko"
if [ -n "$with_perf" ]; then
	perf=$(real_perf) || { echo "$0: --perf: no perf binary (apt-get install linux-perf)" >&2; exit 1; }
	pdir=$cache/perf-$(stat -L -c %s-%Y "$perf")
	if [ ! -x "$pdir/usr/bin/perf" ]; then
		work=$(mktemp -d "$cache/tmp.XXXXXX")
		mkdir -p "$work/usr/bin"
		cp -L "$perf" "$work/usr/bin/perf"
		for lib in $(ldd "$perf" | awk '/=>/ {print $3} /^\t\// {print $1}'); do
			mkdir -p "$work$(dirname "$lib")"
			cp -L "$lib" "$work$lib"
		done
		rm -rf "$pdir"
		mv "$work" "$pdir"
	fi
	cp -a "$pdir/." "$root/"
fi
cp "$authkeys" "$root/root/.ssh/authorized_keys"
cp "$hostkey" "$root/etc/ssh/ssh_host_key"
chmod 600 "$root/etc/ssh/ssh_host_key" "$root/root/.ssh/authorized_keys"
chmod 700 "$root/root" "$root/root/.ssh"
printf 'root:x:0:0:root:/root:/bin/sh\nsshd:x:100:65534::/run/sshd:/bin/false\n' > "$root/etc/passwd"
printf 'root:*:19000:0:99999:7:::\nsshd:*:19000:0:99999:7:::\n' > "$root/etc/shadow"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
{ printf 'Port 22\nHostKey /etc/ssh/ssh_host_key\n'; sshd_common; } > "$root/etc/ssh/sshd_config"
cat > "$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
/bin/busybox --install -s /sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
mount -t securityfs none /sys/kernel/security 2>/dev/null
insmod /lib/modules/e1000.ko
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
/usr/sbin/sshd -f /etc/ssh/sshd_config -E /tmp/sshd.log && echo VMTRACE-GUEST-READY
while :; do sleep 3600; done
EOF
chmod 755 "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out/initrd.gz"
