#!/bin/sh
# tests/fake-guest.sh STATE - an sshd ForceCommand that plays a guest for
# vmtrace's SSH source: "exec cat /PATH" prints STATE/tree/PATH.  What it
# does besides is STATE/mode (read at every command):
#   normal          just that (SFTP and other commands fail)
#   sleep           every command sleeps, as "ForceCommand sleep" (a hung guest)
#   stall-kallsyms  /proc/kallsyms: 100 bytes, then nothing
#   changing        /proc/kallsyms gains a BPF symbol at every read
#   stall-sftp      SFTP sleeps (whole files still come through cat)
# Sleepers write their pid to STATE/pids (the test kills them).
st=$1
mode=$(cat "$st/mode")
stall() { echo $$ >> "$st/pids"; exec sleep 120; }
[ "$mode" = sleep ] && stall
case $SSH_ORIGINAL_COMMAND in
"exec cat /proc/kallsyms")
	case $mode in
	stall-kallsyms) head -c 100 "$st/tree/proc/kallsyms"; stall ;;
	changing)
		n=$(($(cat "$st/count" 2>/dev/null || echo 0) + 1))
		echo $n > "$st/count"
		cat "$st/tree/proc/kallsyms"
		echo "ffffffffc0009000 t bpf_prog_$n [bpf]"
		exit 0 ;;
	esac
	exec cat "$st/tree/proc/kallsyms" ;;
"exec cat /"*)
	exec cat "$st/tree/${SSH_ORIGINAL_COMMAND#exec cat /}" ;;
*sftp*)
	[ "$mode" = stall-sftp ] && stall ;;
esac
exit 1
