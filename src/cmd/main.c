/* main.c - vmtrace: the command table and its dispatch. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <intel-pt.h>

#include "src/cmd/cmd.h"
#include "src/fs/tempfile.h"

static const VtCmd commands[] = {
	{ "check", cmd_check, "is this host (and a libvirt domain) ready for host Intel PT tracing of guests?" },
	{ "correlate", cmd_correlate, "find each VMCS's TSC offset in a host Intel PT trace and correct guest TSC packets" },
	{ "guest", cmd_guest, "copy a guest's kallsyms, modules and kcore (perf's cache); check the guest" },
	{ "inject", cmd_inject, "merge a guest's own perf.data (its tasks, mmaps, switches) into a host recording" },
	{ "record", cmd_record, "trace a libvirt domain's vCPU threads with Intel PT into a perf.data directory" },
	{ "report", cmd_report, "where a guest's time goes: vCPUs, VM exits by handler, top functions, first calls, syscalls" },
	{ "script", cmd_script, "print the branches of a recording, host and guest code decoded (like perf script --itrace=be)" },
	{ "synth", cmd_synth, "write a synthetic host Intel PT perf.data of a KVM guest + ground truth" },
	{ "timeline", cmd_timeline, "draw a recording per vCPU (guest/host lanes, functions, VM exits): Perfetto trace or HTML page" },
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: vmtrace COMMAND [OPTIONS] [ARGS]\n\n"
		   "Trace KVM guests from the host with Intel Processor Trace.\n\nCommands:\n");
	vt_cmd_list(f, commands, G_N_ELEMENTS(commands));
	fprintf(f, "\n  vmtrace COMMAND --help    options of a command\n"
		   "  vmtrace --version         versions of vmtrace and libipt\n\n"
		   "Exit status: 0 ok, 1 failure, 2 usage error, 3 bad input file; correlate adds\n"
		   "4 (no time information), 5 (VMCS undetermined/inconsistent), 6 (no VMCS found),\n"
		   "7 (already corrected), 8 (a VMCS given with --offset is not in the trace),\n"
		   "15 (the file is held by another correction, or changed during it).\n"
		   "guest adds 9/10 (SSH host key unknown/changed: refused), 11 (authentication),\n"
		   "12 (cannot connect), 13 (guest symbols changed during the copy), 16 (the SSH\n"
		   "server stopped answering: --timeout).\n"
		   "record adds 14 (no Intel PT on this machine: see vmtrace check), 20 (--guest-ssh:\n"
		   "no perf in the guest), 21 (the guest's perf record failed).\n"
		   "script exits 3 when the trace has decode errors.\n"
		   "inject adds 17 (guest file unusable: ids, ID_INDEX, CPU -1), 18 (guest clock\n"
		   "not TSC-based: boot it with no-kvmclock), 19 (host recording lacks vCPU\n"
		   "COMMs, switches or TIME_CONV).\n"
		   "report adds 22 (decode errors: the report covers what decoded), 23 (no vCPU\n"
		   "thread in the recording).\n"
		   "timeline adds 24 (no vCPU thread in the recording).\n"
		   "See vmtrace(1).\n");
}

int main(int argc, char **argv)
{
	const char *cmd;
	int rc;

	if (argc < 2) {
		usage(stderr);
		return VT_EXIT_USAGE;
	}
	cmd = argv[1];
	if (vt_cmd_is_help(cmd)) {
		usage(stdout);
		return VT_EXIT_OK;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
		struct pt_version v = pt_library_version();

		printf("vmtrace %s (libipt %u.%u.%u)\n", PACKAGE_VERSION, v.major, v.minor, v.patch);
		return VT_EXIT_OK;
	}
	vt_tempfile_handle_signals();    /* no temporary outlives a signal or exit() */
	vt_cli_scan_json(argc - 1, argv + 1);
	rc = vt_cmd_dispatch(commands, G_N_ELEMENTS(commands), "vmtrace", argc - 1, argv + 1);
	if (rc >= 0)
		return vt_cli_finish(rc);
	fprintf(stderr, "vmtrace: unknown command '%s'\n\n", cmd);
	usage(stderr);
	return VT_EXIT_USAGE;
}
