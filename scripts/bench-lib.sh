# Sourced by the benchmarks that decode real kernel code (bench-script.sh,
# bench-report.sh): needs $top, $TRIM_KCORE and $dir.
# bench_code_dirs: $dir/host-code and $dir/guest-code from the Debian
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
