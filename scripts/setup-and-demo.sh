#!/bin/bash
# Set up vmtrace on Debian 12 (installs missing packages with apt), build it,
# and run the main job on the bundled example: find every vCPU's TSC offset
# in a synthetic 4-vCPU host Intel PT recording.
#   scripts/setup-and-demo.sh            setup + build + demo
#   scripts/setup-and-demo.sh --no-demo  setup + build only
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS="build-essential autoconf automake libtool pkg-config libipt-dev libzydis-dev libvirt-dev libelf-dev
      libssh-dev libglib2.0-dev linux-perf python3 clang time qemu-system-x86 valgrind strace
      libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients libvirt-daemon-system
      openssh-server openssh-client sshfs fuse3 busybox-static cpio xz-utils zstd
      libprotobuf-c-dev protobuf-c-compiler protobuf-compiler chromium"
missing=$(for p in $PKGS; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
done)
if [ -n "$missing" ]; then
	echo "== installing:" $missing
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
[ -x configure ] || { echo "== autoreconf"; autoreconf -fi >/dev/null; }
[ -f Makefile ] || { echo "== configure"; ./configure -q --enable-werror; }
echo "== make"
make -s -j"$(nproc)" >/dev/null
[ "${1:-}" = --no-demo ] && exit 0
echo "== vmtrace correlate --dry-run examples/kvm-4vcpu.data"
./vmtrace correlate --dry-run examples/kvm-4vcpu.data
