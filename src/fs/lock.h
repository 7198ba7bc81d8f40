/* lock.h - one lock per file: an advisory flock(2) held on an open
 * descriptor, exclusive for a writer, shared for readers.  Every command
 * that changes a file in place (or reads one it must not see change) takes
 * it, so two runs never interleave their writes.  May call: glib, libc. */
#ifndef VT_FS_LOCK_H
#define VT_FS_LOCK_H

#include <glib.h>

G_BEGIN_DECLS

#define VT_FS_LOCK_ERROR (vt_fs_lock_error_quark())
GQuark vt_fs_lock_error_quark(void);

typedef enum {
	VT_FS_LOCK_ERROR_BUSY,   /* another process holds a conflicting lock */
} VtFsLockErrorCode;

/* Open the regular file `path` (flags: O_RDONLY or O_RDWR; never blocks on
 * a FIFO) and lock it - exclusively or shared - without waiting.  Returns
 * the descriptor (the lock lives until it is closed), or -1: an open error
 * (G_FILE_ERROR), or VT_FS_LOCK_ERROR_BUSY naming the holder's PID when the
 * kernel reports it ("PATH: in use by PID N"). */
int vt_fs_lock_open(const char *path, int flags, gboolean exclusive, GError **error);
/* The PID holding a flock on the file open at fd (from /proc/locks), or 0
 * when it cannot be told. */
int vt_fs_lock_holder(int fd);

G_END_DECLS

#endif
