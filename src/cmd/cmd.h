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
#include "guestfs/guestfs.h"
#include "src/cli/progress.h"
#include "src/decode/decode.h"

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
/* vmtrace inject REC --guest-data GUEST -o OUT with the offsets discovered
 * in REC; the report on stderr (none when quiet); the exit status. */
int vt_cmd_inject_merge(const char *rec, const char *guest, const char *out, gboolean quiet);

/* The SSH options of guest fetch/check, shared with record --guest-ssh
 * (guest.c). */
typedef struct {
	char *ssh, *identity, *known_hosts;
	gboolean batch;
	int timeout;             /* seconds; VT_GUEST_SSH_TIMEOUT by default */
} VtCmdSsh;
#define VT_CMD_SSH_ENTRIES 5
/* Fill e[0..4] with --SSH_NAME, --identity, --known-hosts, --batch,
 * --timeout (with -s, -i, -t when shorts). */
void vt_cmd_ssh_entries(VtCmdSsh *a, GOptionEntry *e, const char *ssh_name, gboolean shorts);
/* --timeout in range? FALSE with a usage message in *err. */
gboolean vt_cmd_ssh_validate(const VtCmdSsh *a, GError **err);
/* Connect (a->ssh must be set); *rc: the exit status for the error. */
VtGuestSource *vt_cmd_ssh_open(const VtCmdSsh *a, const volatile sig_atomic_t *stop, int *rc, GError **err);
/* The exit status of a VT_GUEST_ERROR. */
int vt_cmd_guest_exit_code(const GError *err);
void vt_cmd_ssh_clear(VtCmdSsh *a);
int cmd_timeline(int argc, char **argv);
int cmd_report(int argc, char **argv);

/* record --source tcg (record-tcg.c): QEMU with vmtrace-tcg.so, then REC. */
typedef struct {
	const char *out;
	const char *kallsyms;        /* the guest's kallsyms/System.map, or NULL */
	gboolean kernel_only, json, quiet;
	guint64 skip;                /* start tracing after this many instructions */
	guint64 limit;               /* stop tracing after this many instructions (0: never) */
	char **qemu_argv;            /* NULL-terminated; NULL with domain */
	const char *domain, *uri;    /* --domain: a libvirt domain started with the plugin */
	const char *const *cmdline;
} VtRecordTcg;
int vt_record_tcg(const VtRecordTcg *a);

/* A check list (VtHostCheck of src/host/host.h), shared by check and guest
 * check (check.c): no check FAILed; print it as a table or JSON. */
gboolean vt_checks_ok(GPtrArray *checks);
void vt_checks_print(GPtrArray *checks, gboolean json, gboolean ok);

/* The kernel images of a decoding command (script, report, timeline;
 * images.c): VT_CMD_IMAGE_ENTRIES(im) are its options --guest,
 * --guestkallsyms, --guestvmlinux, --kcore, --kallsyms, --vmlinux. */
typedef struct {
	char *guest_dir, *guestkallsyms;   /* guest image: a snapshot dir, or perf's kallsyms path */
	char *guestvmlinux;                /* ... or a vmlinux with symbols */
	char *kcore, *kallsyms;            /* host image (default REC/kcore_dir) */
	char *vmlinux;                     /* ... or a vmlinux with symbols */
} VtCmdImages;

#define VT_CMD_IMAGE_ENTRIES(im) \
	{ "guest", 'g', 0, G_OPTION_ARG_FILENAME, &(im)->guest_dir, "Guest kernel: a `vmtrace guest fetch` snapshot directory (kcore + kallsyms)", "DIR" }, \
	{ "guestkallsyms", 0, 0, G_OPTION_ARG_FILENAME, &(im)->guestkallsyms, "Guest kernel as perf names it: FILE, with kcore next to it", "FILE" }, \
	{ "guestvmlinux", 0, 0, G_OPTION_ARG_FILENAME, &(im)->guestvmlinux, "Guest kernel as a vmlinux with symbols (moved to where the recording's guest kernel MMAP says)", "FILE" }, \
	{ "kcore", 0, 0, G_OPTION_ARG_FILENAME, &(im)->kcore, "Host kernel code (default: REC/kcore_dir/kcore); needs --kallsyms", "FILE" }, \
	{ "kallsyms", 0, 0, G_OPTION_ARG_FILENAME, &(im)->kallsyms, "Host kernel symbols (default: REC/kcore_dir/kallsyms)", "FILE" }, \
	{ "vmlinux", 0, 0, G_OPTION_ARG_FILENAME, &(im)->vmlinux, "Host kernel as a vmlinux with symbols, instead of kcore and kallsyms", "FILE" }

/* A usage error in the image options, or NULL. */
const char *vt_cmd_images_check(const VtCmdImages *im);
/* The host image (--kcore/--kallsyms or REC/kcore_dir) and the guest's
 * (--guest or --guestkallsyms; a snapshot others can write to is
 * refused), the guest's in a thread of its own meanwhile; the host's
 * error comes first.  *usage: an image was not given (a usage error). */
gboolean vt_cmd_images_open(const VtCmdImages *im, const char *rec, VtDecodeImage **host, VtDecodeImage **guest,
			    gboolean *usage, GError **error);
void vt_cmd_images_clear(VtCmdImages *im);
/* A warning per vmlinux image the recording did not place
 * (vt_decode_image_unplaced): call after opening the recording. */
void vt_cmd_images_warn(const char *cmd, const char *rec, const VtDecodeImage *host, const VtDecodeImage *guest);
/* The progress line of a decoding command (src/cli/progress.h): the share
 * of r's trace decoded, when due (final: now, the last line). */
void vt_cmd_progress(VtProgress *p, const VtDecodeResult *r, gboolean final);
/* The size of recording rec's data file (rec itself, or rec/data for a
 * directory): a progress line's total; 0 if it cannot be read. */
guint64 vt_cmd_data_size(const char *rec);
/* After option parsing: exactly one argument left, the recording (*rec,
 * newly allocated); else a usage error. */
gboolean vt_cmd_take_rec(int argc, char **argv, char **rec, GError **error);
/* --time START,END (perf time, seconds.nanoseconds, either may be empty)
 * into ns; NULL, or what is wrong with it. */
const char *vt_cmd_parse_time_range(const char *arg, guint64 *start, guint64 *end);

#endif
