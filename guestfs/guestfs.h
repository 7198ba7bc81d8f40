/* guestfs.h - the guest sideband: read a guest's /proc and /sys files over
 * SSH (libssh) or below a directory (an sshfs mount, a copied tree), cut
 * /proc/kcore down to what decoding needs and store everything in perf's
 * [kernel.kcore] cache layout.  No printing, no exiting: errors are GErrors
 * in VT_GUEST_ERROR. */
#ifndef VT_GUESTFS_H
#define VT_GUESTFS_H

#include <glib.h>
#include <signal.h>
#include <stdint.h>

#include "src/fs/tempfile.h"

G_BEGIN_DECLS

#define VT_GUEST_ERROR (vt_guest_error_quark())
GQuark vt_guest_error_quark(void);

typedef enum {
	VT_GUEST_ERROR_FAILED,          /* I/O or protocol error */
	VT_GUEST_ERROR_CONNECT,         /* cannot reach the SSH server */
	VT_GUEST_ERROR_HOSTKEY_UNKNOWN, /* server key not in known_hosts */
	VT_GUEST_ERROR_HOSTKEY_CHANGED, /* server key differs from known_hosts */
	VT_GUEST_ERROR_AUTH,            /* authentication failed / key unusable */
	VT_GUEST_ERROR_NOT_FOUND,       /* no such file in the guest */
	VT_GUEST_ERROR_PERMISSION,      /* permission denied in the guest */
	VT_GUEST_ERROR_BAD_DATA,        /* malformed kcore / kallsyms / notes */
	VT_GUEST_ERROR_CHANGED,         /* kallsyms or modules changed during the copy */
	VT_GUEST_ERROR_INTERRUPTED,     /* a stop request (signal) */
	VT_GUEST_ERROR_TIMEOUT,         /* the SSH server stopped answering (after the connection) */
	VT_GUEST_ERROR_NO_PERF,         /* no perf in the guest */
	VT_GUEST_ERROR_PERF_FAILED,     /* perf record in the guest failed */
} VtGuestErrorCode;

/* --- a source of guest files: SSH or a directory ---------------------- */
typedef struct VtGuestSource VtGuestSource;

typedef struct {
	char *user;          /* NULL: the local user name */
	char *host;
	guint port;          /* 0: 22 */
	char *identity;      /* private key file; NULL: libssh's defaults (~/.ssh/id_*) */
	char *known_hosts;   /* NULL: ~/.ssh/known_hosts */
	gboolean batch;      /* never prompt (no passphrase prompts) */
	guint timeout_s;     /* the longest wait for the server, every wait (connect, key
			      * exchange, auth, channel, SFTP, each read); 0: VT_GUEST_SSH_TIMEOUT */
	const volatile sig_atomic_t *stop;   /* a signal handler's flag (may be NULL): once
					      * non-zero, any wait ends within VT_GUEST_SSH_SLICE_MS */
} VtGuestSshOptions;

#define VT_GUEST_SSH_TIMEOUT 30       /* seconds */
#define VT_GUEST_SSH_SLICE_MS 100     /* how often a wait looks at the clock and the stop flag */

/* Parse "[USER@]HOST[:PORT]" (HOST may be "[v6addr]") into opts. */
gboolean vt_guest_ssh_parse_target(const char *target, VtGuestSshOptions *opts, GError **error);
void vt_guest_ssh_options_clear(VtGuestSshOptions *opts);

/* Connect, verify the host key against known_hosts (refusing unknown or
 * changed keys; the error message carries the SHA256 fingerprint and how to
 * accept it) and authenticate with a public key.  No wait for the server
 * lasts longer than opts->timeout_s: a silent server fails with
 * VT_GUEST_ERROR_CONNECT while connecting, VT_GUEST_ERROR_TIMEOUT later;
 * *opts->stop ends any wait with VT_GUEST_ERROR_INTERRUPTED.  The source
 * is unusable after either (its connection is shut down). */
VtGuestSource *vt_guest_source_ssh_open(const VtGuestSshOptions *opts, GError **error);
/* Files below DIR (DIR/proc/kallsyms, ...). */
VtGuestSource *vt_guest_source_root_open(const char *dir, GError **error);
void vt_guest_source_close(VtGuestSource *src);
/* "ssh root@host:port" or the directory. */
const char *vt_guest_source_describe(const VtGuestSource *src);

/* The most bytes read_file takes of each guest file (more: the file is
 * not what it should be, VT_GUEST_ERROR_BAD_DATA). */
#define VT_GUEST_KALLSYMS_MAX (128u << 20) /* /proc/kallsyms (a distro kernel's: about 10 MiB) */
#define VT_GUEST_MODULES_MAX (16u << 20)   /* /proc/modules */
#define VT_GUEST_NOTES_MAX (64u << 10)     /* /sys/kernel/notes (a few hundred bytes) */
#define VT_GUEST_LINE_MAX (16u << 10)      /* one-line sysctl and sysfs files */

/* Read a whole file (read to EOF: /proc files report size 0), at most max
 * bytes.  A directory source reads only regular files, resolved beneath
 * its directory. */
GBytes *vt_guest_source_read_file(VtGuestSource *src, const char *path, gsize max, GError **error);
/* Read exactly len bytes at offset (short only at EOF: *got tells). */
gboolean vt_guest_source_pread(VtGuestSource *src, const char *path, guint64 offset, void *buf, gsize len,
			       gsize *got, GError **error);
/* The numeric uid the source reads as (-1 if it cannot tell). */
gint64 vt_guest_source_uid(VtGuestSource *src);
/* Run a command vmtrace wrote (never user text) in the guest: its stdout
 * (at most max bytes) and exit status.  Only over SSH: a directory source
 * fails with VT_GUEST_ERROR_FAILED; so does an account that cannot run
 * commands. */
gboolean vt_guest_source_run(VtGuestSource *src, const char *command, gsize max, GBytes **out, int *status,
			     GError **error);
gboolean vt_guest_source_can_run(const VtGuestSource *src);

/* A command that runs in the guest while the host does something else
 * (SSH only): its stdin stays open until vt_guest_command_finish. */
typedef struct VtGuestCommand VtGuestCommand;
VtGuestCommand *vt_guest_command_start(VtGuestSource *src, const char *command, GError **error);
/* Read its stdout until a line that starts with prefix: the rest of that
 * line (printable, stripped) in *rest.  The command ending first, or
 * printing more than 64 KiB, fails with its exit status in *status (-1:
 * none) and the first line of its stderr in the message. */
gboolean vt_guest_command_wait_line(VtGuestCommand *c, const char *prefix, char **rest, int *status, GError **error);
/* Close its stdin, read to the end: its exit status (and its stderr's first
 * line in *err_line, when there is one). */
gboolean vt_guest_command_finish(VtGuestCommand *c, int *status, char **err_line, GError **error);
void vt_guest_command_free(VtGuestCommand *c);

/* Source implementations fill this in. */
typedef struct {
	GBytes *(*read_file)(VtGuestSource *src, const char *path, gsize max, GError **error);
	gboolean (*pread)(VtGuestSource *src, const char *path, guint64 offset, void *buf, gsize len, gsize *got,
			  GError **error);
	gint64 (*uid)(VtGuestSource *src);
	void (*close)(VtGuestSource *src);
	gboolean (*run)(VtGuestSource *src, const char *command, gsize max, GBytes **out, int *status,
			GError **error);   /* NULL: cannot run commands */
} VtGuestSourceOps;

struct VtGuestSource {
	const VtGuestSourceOps *ops;
	char *description;
};

/* A NUL-terminated copy of b ("" when empty, never NULL). */
char *vt_guest_bytes_dup(GBytes *b);
/* b stripped, if it is one line of printable ASCII (a sysctl value, a
 * kernel release); NULL otherwise: guest bytes are never echoed raw. */
char *vt_guest_bytes_text(GBytes *b);

/* --- what the guest files say ---------------------------------------- */
/* Build-id (lower-case hex) from the contents of /sys/kernel/notes. */
char *vt_guest_build_id_parse(const guint8 *notes, gsize len, GError **error);

typedef struct {
	guint64 start, end;   /* [start, end) guest virtual addresses */
	const char *what;     /* "kernel text", "modules/BPF", "entry trampoline" */
} VtGuestRange;

typedef struct {
	guint64 stext, etext;        /* 0 if missing */
	guint64 mod_start, mod_end;  /* 0 if no module/BPF symbols */
	guint64 entry_start, entry_end; /* __entry_text_start/_end: the PTI-mapped entry code */
	GArray *trampolines;         /* guint64 addresses of PTI entry trampolines */
	guint nsyms;
	gboolean all_zero;           /* every address is 0 (kptr_restrict) */
} VtGuestKallsyms;

gboolean vt_guest_kallsyms_parse(GBytes *kallsyms, GBytes *modules, VtGuestKallsyms *ks, GError **error);
void vt_guest_kallsyms_clear(VtGuestKallsyms *ks);
/* The ranges decoding needs (page aligned, sorted, merged). */
GArray *vt_guest_kallsyms_ranges(const VtGuestKallsyms *ks);

/* --- kcore ---------------------------------------------------------- */
typedef struct {
	guint64 vaddr, offset, size;  /* a PT_LOAD of the source kcore */
} VtGuestKcoreSeg;

/* Read the ELF header and program headers of SRC's path (by ranges). */
GArray *vt_guest_kcore_segments(VtGuestSource *src, const char *path, GError **error);
/* The most a trimmed kcore copies: x86-64's kernel text (1 GiB) plus its
 * module area (1.5 GiB at most) - more means a lie in kallsyms or kcore. */
#define VT_GUEST_KCORE_MAX (2560ULL << 20)
/* Copy the parts of `ranges` that kcore maps into a new ELF64 core file
 * (ET_CORE, EM_X86_64) at out_path (mode 0600), one PT_LOAD per piece.
 * *copied: bytes of memory copied.  When *stop becomes non-zero (a signal
 * handler's flag; stop may be NULL) it fails with VT_GUEST_ERROR_INTERRUPTED. */
gboolean vt_guest_kcore_copy(VtGuestSource *src, const char *path, const GArray *ranges, const char *out_path,
			     const volatile sig_atomic_t *stop, guint64 *copied, GError **error);

/* --- cache: CACHE/[kernel.kcore]/<build-id>/<YYYYmmddHHMMSShh>/ -------- */
typedef struct {
	char *dir;        /* the snapshot directory */
	gboolean reused;  /* an identical earlier snapshot */
	gboolean has_kcore;
} VtGuestSnapshot;

/* An existing snapshot below cache/[kernel.kcore]/build_id with identical
 * kallsyms and modules (and an ELF kcore if need_kcore); the temporaries of
 * killed runs there are removed first (see vt_guest_cache_tmpdir).  NULL if
 * none, or NULL and error if the cache cannot be trusted: CACHE, [kernel.kcore],
 * the build-id directory and every snapshot and its files must belong to
 * the user or root and be writable by no one else, and below CACHE none
 * may be a symbolic link (vt_fs_check_trusted).  vt_guest_cache_tmpdir
 * checks the same. */
char *vt_guest_cache_find(const char *cache, const char *build_id, GBytes *kallsyms, GBytes *modules,
			  gboolean need_kcore, GError **error);
/* A new temporary directory (mode 0700) next to the snapshots,
 * .snapshot.vmtrace-tmp.PID.XXXXXX (src/fs/tempfile.h: registered, so
 * removed at exit and on signals; vt_tempfile_free removes it; the
 * temporaries of runs whose process is gone are removed first). */
VtTempfile *vt_guest_cache_tmpdir(const char *cache, const char *build_id, GError **error);
/* Write a file (mode 0600) into a directory, fsync'ed. */
gboolean vt_guest_cache_write(const char *dir, const char *name, GBytes *data, GError **error);
/* Rename the temporary directory to a fresh timestamp directory (never
 * over an existing one); returns it. */
char *vt_guest_cache_commit(VtTempfile *tmpdir, GError **error);

/* --- fetch: everything above, in order ------------------------------- */
typedef struct {
	const char *cache;   /* the cache directory (perf's ~/.debug) */
	gboolean kcore;      /* also copy the trimmed kcore */
	guint retries;       /* start again this often when kallsyms/modules changed meanwhile */
	const volatile sig_atomic_t *stop;   /* see vt_guest_kcore_copy (may be NULL) */
} VtGuestFetchOptions;

typedef struct {
	char *build_id, *osrelease;
	char *dir;           /* the snapshot directory */
	char *kallsyms;      /* dir/kallsyms: perf's --guestkallsyms */
	gboolean reused;     /* an identical earlier snapshot */
	gboolean has_kcore;
	guint nsyms;
	GArray *ranges;      /* VtGuestRange: what the kcore holds */
	guint64 kcore_bytes; /* bytes of guest memory copied (0 if reused) */
} VtGuestFetchResult;

gboolean vt_guest_fetch(VtGuestSource *src, const VtGuestFetchOptions *opts, VtGuestFetchResult *res,
			GError **error);
/* /proc/kallsyms and /proc/modules (empty on a kernel without modules). */
gboolean vt_guest_read_symbols(VtGuestSource *src, GBytes **kallsyms, GBytes **modules, GError **error);
/* Read them again: VT_GUEST_ERROR_CHANGED if they differ from what was
 * read before a copy (modules or BPF programs came or went meanwhile). */
gboolean vt_guest_symbols_unchanged(VtGuestSource *src, GBytes *kallsyms, GBytes *modules, GError **error);
void vt_guest_fetch_result_clear(VtGuestFetchResult *res);

/* --- perf record in the guest (perf.c) ----------------------------------- */
typedef struct VtGuestPerf VtGuestPerf;
/* The largest guest perf.data copied back. */
#define VT_GUEST_PERF_MAX (1ULL << 30)
/* Start `perf record -a --sample-identifier --switch-events -e EVENTS` in
 * the guest (EVENTS: NULL for "dummy", sideband only; letters, digits and
 * ",:/=._-" only) into a new directory below the guest's /tmp; returns once
 * perf records (its workload runs).  No perf: VT_GUEST_ERROR_NO_PERF; perf
 * fails: VT_GUEST_ERROR_PERF_FAILED with perf's last line. */
VtGuestPerf *vt_guest_perf_start(VtGuestSource *src, const char *events, GError **error);
/* Stop it (its workload reads stdin: end of input ends it, and perf
 * writes a complete file - also when the SSH connection dies), copy the
 * file to dir/name (mode 0600) and remove it in the guest.  *bytes: its size. */
gboolean vt_guest_perf_stop(VtGuestPerf *p, const char *dir, const char *name, guint64 *bytes, GError **error);
/* Unstopped: the connection's end stops it; its guest directory is removed
 * when the connection still works. */
void vt_guest_perf_free(VtGuestPerf *p);
/* Only letters, digits and ",:/=._-": safe in a guest shell command. */
gboolean vt_guest_perf_events_ok(const char *events);

/* --- check: OK/WARN/FAIL list (VtHostCheck of src/host/host.h) ----------- */
void vt_guest_readiness(VtGuestSource *src, GPtrArray *checks);

G_END_DECLS

#endif
