# tests/guest-lib.sh - helpers of the guest sideband tests (sourced after
# lib.sh): throwaway SSH keys, an sshd on 127.0.0.1, cleanup of everything
# started.
TEST_GUESTFS=$(dirname "$VMTRACE")/tests/test-guestfs   # libelf core checker (tests/test-guestfs.c)
GUEST_PIDS=
GUEST_PIDFILES=
GUEST_MOUNTS=
guest_cleanup() {
	for m in $GUEST_MOUNTS; do fusermount3 -u "$m" 2>/dev/null || fusermount -u "$m" 2>/dev/null; done
	for f in $GUEST_PIDFILES; do GUEST_PIDS="$GUEST_PIDS $(cat "$f" 2>/dev/null)"; done
	for p in $GUEST_PIDS; do kill "$p" 2>/dev/null; done
	for p in $GUEST_PIDS; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap guest_cleanup EXIT
trap 'exit 1' INT TERM

need_ssh() {
	need_python
	[ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null || skip "needs openssh-server (apt-get install openssh-server)"
}

# A TCP port nobody listens on (the kernel picks it).
free_port() {
	"$PYTHON3" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ssh_keys DIR: DIR/host_ed25519 (server), DIR/id_ed25519 (client).
ssh_keys() {
	mkdir -p "$1"
	ssh-keygen -q -t ed25519 -N '' -C vmtrace-test-host -f "$1/host_ed25519"
	ssh-keygen -q -t ed25519 -N '' -C vmtrace-test-client -f "$1/id_ed25519"
}

# known_hosts_for DIR PORT > FILE: the line for the server key.
known_hosts_for() {
	echo "[127.0.0.1]:$2 $(cut -d' ' -f1,2 "$1/host_ed25519.pub")"
}

# wait_port PORT SECONDS: until something accepts on 127.0.0.1:PORT.
wait_port() {
	"$PYTHON3" - "$1" "$2" <<'EOF'
import socket, sys, time
end = time.time() + float(sys.argv[2])
while time.time() < end:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit(1)
EOF
}

# start_sshd DIR PORT [CONFIG-LINE]: sshd on 127.0.0.1:PORT with DIR's keys
# (the current user may log in with DIR/id_ed25519).
start_sshd() {
	cp "$1/id_ed25519.pub" "$1/authorized_keys"
	{
		printf 'ListenAddress 127.0.0.1\nPort %s\nHostKey %s\nPidFile %s\n' "$2" "$1/host_ed25519" "$1/sshd.pid"
		printf 'AuthorizedKeysFile %s\nStrictModes no\n' "$1/authorized_keys"
		# bash run by sshd reads ~/.bashrc (Debian builds it so) unless
		# SHLVL says it is not the first shell: a user's .bashrc (pyenv
		# init here: 0.7 s) would delay every command of a fetch
		# (SetEnv: OpenSSH 7.8 and later; sshd -t says whether this one
		# has it)
		! /usr/sbin/sshd -t -f /dev/null -o SetEnv=SHLVL=1 -h "$1/host_ed25519" 2>/dev/null ||
			printf 'SetEnv SHLVL=1\n'
		[ -z "${3:-}" ] || printf '%s\n' "$3"
		"$top_srcdir/tests/guest-image.sh" --sshd-config
	} > "$1/sshd_config"
	[ "$(id -u)" -ne 0 ] || mkdir -p /run/sshd
	/usr/sbin/sshd -f "$1/sshd_config" -E "$1/sshd.log" || return 1
	for _ in $(seq 50); do [ -s "$1/sshd.pid" ] && break; sleep 0.1; done
	GUEST_PIDS="$GUEST_PIDS $(cat "$1/sshd.pid")"
	wait_port "$2" 10
}

# start_fake_guest DIR PORT TREE: sshd on 127.0.0.1:PORT whose every command
# is tests/fake-guest.sh serving TREE as the guest's files; its behaviour is
# DIR/state/mode (see there), "normal" to start with.
start_fake_guest() {
	mkdir -p "$1/state"
	ln -sfn "$3" "$1/state/tree"
	echo normal > "$1/state/mode"
	GUEST_PIDFILES="$GUEST_PIDFILES $1/state/pids"
	start_sshd "$1" "$2" "ForceCommand /bin/sh $top_srcdir/tests/fake-guest.sh $1/state"
}

# boot_guest SMP TICKS APPEND: boot $TMP/img (tests/guest-image.sh) under TCG
# with SMP vCPUs and the kernel command line APPEND (after console=ttyS0
# panic=-1 quiet), its sshd forwarded to 127.0.0.1:$port; wait TICKS x 0.2 s
# for it; then $K/known_hosts holds its host key.  Sets port and qemu (also
# added to GUEST_PIDS).  $BOOT_PRELOAD, when set, is QEMU's LD_PRELOAD.
# Non-zero when the guest did not come up.
boot_guest() {
	bg_smp=$1 bg_ticks=$2
	shift 2
	port=$(free_port)
	rm -f "$TMP/console"
	LD_PRELOAD=${BOOT_PRELOAD:-} qemu-system-x86_64 -name vmtrace-test,debug-threads=on -accel tcg -m 512 \
		-smp "$bg_smp" -nodefaults -no-user-config -display none -serial "file:$TMP/console" -no-reboot \
		-kernel "$TMP/img/vmlinux" -initrd "$TMP/img/initrd.gz" -append "console=ttyS0 panic=-1 quiet $*" \
		-netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" -device e1000,netdev=n0 \
		>"$TMP/qemu.log" 2>&1 &
	qemu=$!
	GUEST_PIDS="$GUEST_PIDS $qemu"
	for _ in $(seq "$bg_ticks"); do
		grep -q VMTRACE-GUEST-READY "$TMP/console" 2>/dev/null && break
		kill -0 $qemu 2>/dev/null || break
		sleep 0.2
	done
	grep -q VMTRACE-GUEST-READY "$TMP/console" 2>/dev/null && wait_port "$port" 10 || return 1
	known_hosts_for "$K" "$port" >"$K/known_hosts"
}
