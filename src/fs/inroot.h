/* inroot.h - files of untrusted trees: open beneath a root directory
 * (symbolic links and ".." never leave it) and bounded reads of regular
 * files only (a FIFO, device or socket is refused without blocking).
 * May call: glib and libc only.  No printing, no exiting.  Errors never
 * quote file contents. */
#ifndef VT_FS_INROOT_H
#define VT_FS_INROOT_H

#include <glib.h>

G_BEGIN_DECLS

/* Errors of this module; errno failures are G_FILE_ERROR. */
#define VT_FS_ERROR (vt_fs_error_quark())
GQuark vt_fs_error_quark(void);

typedef enum {
	VT_FS_ERROR_NOT_REGULAR, /* a directory, FIFO, device or socket */
	VT_FS_ERROR_TOO_BIG,     /* more bytes than the caller allows */
} VtFsErrorCode;

/* Open path for reading beneath the directory open at rootfd, as if rootfd
 * were "/": absolute symbolic links and ".." resolve inside it
 * (openat2 RESOLVE_IN_ROOT; vt_fs_open_in_root_walk on kernels without
 * openat2).  Only a regular file: anything else fails with
 * VT_FS_ERROR_NOT_REGULAR (opened O_NONBLOCK: a FIFO never blocks).
 * Returns the fd (O_CLOEXEC) or -1. */
int vt_fs_open_in_root(int rootfd, const char *path, GError **error);
/* The same, resolved component by component in user space (openat with
 * O_NOFOLLOW, symbolic links read and resolved against rootfd, at most 40). */
int vt_fs_open_in_root_walk(int rootfd, const char *path, GError **error);

/* Read the file open at fd to EOF (never trusting its size: /proc files
 * report 0) in small reads; more than max bytes fail with
 * VT_FS_ERROR_TOO_BIG.  name is for the messages. */
GBytes *vt_fs_read_bounded(int fd, gsize max, const char *name, GError **error);
/* Open path (following symbolic links: the user named it) if it is a
 * regular file, without blocking on a FIFO, and read at most max bytes. */
GBytes *vt_fs_read_regular(const char *path, gsize max, GError **error);
/* "128 MiB", "64 KiB" or "100 bytes": a limit in messages (plain ASCII). */
char *vt_fs_format_size(guint64 n);
/* TRUE if path is a regular file, or absent and missing_ok; never opens it. */
gboolean vt_fs_regular_or_absent(const char *path, gboolean missing_ok, GError **error);

G_END_DECLS

#endif
