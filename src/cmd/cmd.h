/* cmd.h - the vmtrace commands (bpftool style: one file per command in
 * src/cmd/, dispatched from main.c through tables of VtCmd).
 *
 * A command parses its options, validates them, calls the libraries and
 * reports; everything reusable lives in a library module (src/<module>/,
 * vmcorr/, guestfs/) and everything commands share in src/cli/. */
#ifndef VT_CMD_H
#define VT_CMD_H

#include <glib.h>
#include <stdio.h>

#include "src/cli/cli.h"

typedef int (*VtCmdFn)(int argc, char **argv);

/* One entry of a dispatch table: "vmtrace NAME ..." or "vmtrace guest NAME". */
typedef struct {
	const char *name;
	VtCmdFn fn;
	const char *summary;
} VtCmd;

/* Run the entry of cmds named argv[0] (argc >= 1), with argv[0] as its
 * first argument and g_prgname "PREFIX NAME"; -1 when no entry has that name. */
int vt_cmd_dispatch(const VtCmd *cmds, gsize n, const char *prefix, int argc, char **argv);

/* "  NAME  summary" lines of a table. */
void vt_cmd_list(FILE *f, const VtCmd *cmds, gsize n);
/* --help, -h or help. */
gboolean vt_cmd_is_help(const char *arg);

int cmd_synth(int argc, char **argv);
int cmd_correlate(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_guest(int argc, char **argv);
int cmd_script(int argc, char **argv);
int cmd_inject(int argc, char **argv);

/* record --source tcg (record-tcg.c): QEMU with vmtrace-tcg.so, then REC. */
typedef struct {
	const char *out;
	const char *kallsyms;        /* the guest's kallsyms/System.map, or NULL */
	gboolean kernel_only, json, quiet;
	guint64 skip;                /* start tracing after this many instructions */
	guint64 limit;               /* stop tracing after this many instructions (0: never) */
	char **qemu_argv;            /* NULL-terminated */
	const char *const *cmdline;
} VtRecordTcg;
int vt_record_tcg(const VtRecordTcg *a);

/* A check list (VtHostCheck of src/host/host.h), shared by check and guest
 * check (check.c): no check FAILed; print it as a table or JSON. */
gboolean vt_checks_ok(GPtrArray *checks);
void vt_checks_print(GPtrArray *checks, gboolean json, gboolean ok);

#endif
