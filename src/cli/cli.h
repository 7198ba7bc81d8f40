/* cli.h - what every command shares: exit codes, messages, option values.
 *
 * Owns: the exit status table (documented in vmtrace(1)), "vmtrace CMD:"
 * messages, parsing of number/size option values.  May call: glib only.
 * Lower layers (perf, pt, vmcorr, guestfs, host, record, synth) never use
 * this module: they return GErrors and the commands report them. */
#ifndef VT_CLI_H
#define VT_CLI_H

#include <glib.h>

G_BEGIN_DECLS

/* Exit codes shared by all commands (documented in vmtrace(1)). */
enum {
	VT_EXIT_OK = 0,
	VT_EXIT_FAILURE = 1,      /* I/O or internal error */
	VT_EXIT_USAGE = 2,        /* bad command line */
	VT_EXIT_BAD_INPUT = 3,    /* unreadable or malformed input file */
	VT_EXIT_NO_TIME = 4,      /* correlate: trace has no time information */
	VT_EXIT_UNRESOLVED = 5,   /* correlate: some VMCS undetermined/inconsistent */
	VT_EXIT_NO_GUEST = 6,     /* correlate: no VMCS (no guest) in the trace */
	VT_EXIT_NOTHING = 7,      /* correlate: already corrected, nothing to do */
	VT_EXIT_UNKNOWN_VMCS = 8, /* correlate: a VMCS given with --offset is not in the trace */
	VT_EXIT_HOSTKEY_UNKNOWN = 9,  /* guest: SSH host key not in known_hosts (refused) */
	VT_EXIT_HOSTKEY_CHANGED = 10, /* guest: SSH host key differs from known_hosts (refused) */
	VT_EXIT_AUTH = 11,            /* guest: SSH authentication failed / key file unusable */
	VT_EXIT_CONNECT = 12,         /* guest: cannot connect to the SSH server */
	VT_EXIT_GUEST_CHANGED = 13,   /* guest: kallsyms/modules changed during the copy */
	VT_EXIT_NO_PT = 14,           /* record: this machine cannot trace (no Intel PT) */
	VT_EXIT_BUSY = 15,            /* correlate: another run holds the file, or it changed during the run */
	VT_EXIT_TIMEOUT = 16,         /* guest: the SSH server stopped answering (--timeout) */
	VT_EXIT_GUEST_DATA = 17,      /* inject: the guest file cannot be injected (ids, ID_INDEX, CPUs) */
	VT_EXIT_GUEST_CLOCK = 18,     /* inject: the guest's perf clock is not TSC-based (kvm-clock) */
	VT_EXIT_HOST_SIDEBAND = 19,   /* inject: the host recording lacks vCPU COMMs, switches or TIME_CONV */
	VT_EXIT_GUEST_NO_PERF = 20,   /* record --guest-ssh: no perf in the guest */
	VT_EXIT_GUEST_PERF = 21,      /* record --guest-ssh: perf record in the guest failed */
	VT_EXIT_REPORT_ERRORS = 22,   /* report: decode errors (the report covers what decoded) */
	VT_EXIT_REPORT_NO_VCPU = 23,  /* report: no vCPU thread in the recording (or not --vcpu's) */
	VT_EXIT_NO_VCPU = 24,         /* timeline: no vCPU thread ("CPU n/KVM") in the recording */
	VT_EXIT_TCG_DOMAIN = 25,      /* record --source tcg --domain: its QEMU does not load the plugin (the XML to add is printed) */
	VT_EXIT_TCG_QEMU = 26,        /* record --source tcg: QEMU did not run the plugin to its end */
	VT_EXIT_TCG_NOTHING = 27,     /* record --source tcg: no kernel code ran: nothing traced */
	VT_EXIT_OFFSET_CHANGE = 28,   /* inject: a vCPU's offset changed and a guest record fits no epoch, or two */
};

/* Print "vmtrace <cmd>: <message>" on stderr - or, under --json, keep it
 * for vt_cli_finish, which prints every error as one JSON object on stdout
 * ({"error": "vmtrace cmd: ...", "exit_status": N[, "messages": [...]]}). */
void vt_err(const char *cmd, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/* Parse a command's options: "Usage: vmtrace CMD PARAM", the summary above
 * the options, the description (exit status, examples) below them. */
gboolean vt_cli_parse(const char *param, const char *summary, const char *description, const GOptionEntry *entries,
		      int *argc, char ***argv, GError **error);
/* "vmtrace <cmd>: <message>" on stderr, also under --json: a warning or a
 * note that is not the command's failure. */
void vt_warn(const char *cmd, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/* A line without its end is open on stderr (a progress line): the next
 * vt_err/vt_warn ends it first. */
void vt_cli_line_open(gboolean open);
/* Ends a line left open on stderr, if one is (a progress line of a phase
 * that stopped short, when the command goes on). */
void vt_cli_line_end(void);
/* JSON errors on or off; a command sets it from its parsed --json. */
void vt_cli_set_json(gboolean on);
gboolean vt_cli_json(void);
/* Before parsing: turn JSON errors on when argv asks for JSON (--json, -j,
 * --format=json), so option errors are JSON too. */
void vt_cli_scan_json(int argc, char **argv);
/* Flush stdout; if what a command printed could not be written (a full
 * disk, a closed pipe), say so and turn a 0 status into 1. */
int vt_cli_close_stdout(const char *cmd, int rc);
/* After the command: print the kept errors as JSON; returns the exit
 * status (a command that reported an error never exits 0). */
int vt_cli_finish(int rc);
/* Parse sizes like 512M, 4K, 1G, 123 (bytes). */
gboolean vt_parse_size(const char *s, guint64 *out);
/* Parse an unsigned 64-bit number (0x.. hex or decimal), the whole string. */
gboolean vt_parse_u64(const char *s, guint64 *out);
/* An option given as a string (NULL when absent): TRUE when absent or
 * parsed into *out; otherwise FALSE with a usage error "OPT 'VAL': ...". */
gboolean vt_opt_size(const char *opt, const char *val, guint64 *out, GError **error);
gboolean vt_opt_u64(const char *opt, const char *val, guint64 *out, GError **error);

G_END_DECLS

#endif
