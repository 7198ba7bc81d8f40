/* tempfile.h - temporary files and directories that do not outlive their
 * purpose (git's tempfile.c model).  May call: glib and libc only.  No
 * printing, no exiting.
 *
 * A temporary for TARGET is created in TARGET's directory as
 * ".BASE.vmtrace-tmp.PID.XXXXXX": exclusively (O_CREAT|O_EXCL|O_NOFOLLOW,
 * or mkdir), so it never opens an existing file and never follows a
 * symbolic link planted under its name.  While it exists it is registered:
 * vt_tempfile_free removes it, and so do exit() and - once
 * vt_tempfile_handle_signals has been called - SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT and SIGPIPE (the handler only unlinks, async-signal-safely,
 * then the signal takes its default action).
 *
 * What no handler can clean (SIGKILL, a crash, power loss) is recognised
 * by the next run: creating a temporary first removes the stale ones in
 * that directory - names of this pattern, owned by this user, whose PID is
 * gone or was reused by a process started after the temporary was last
 * written.  (PIDs are those of this PID namespace.)
 *
 * Most code wants the whole "write a temporary, then rename it over the
 * output" job: src/fs/output.h.
 */
#ifndef VT_FS_TEMPFILE_H
#define VT_FS_TEMPFILE_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct VtTempfile VtTempfile;

/* A temporary file for `target`, open read-write (mode & ~umask; 0600 for
 * anything holding kernel memory or traces), or NULL and error (G_FILE_ERROR,
 * message "TARGET: ..."). */
VtTempfile *vt_tempfile_new(const char *target, unsigned mode, GError **error);
/* A temporary directory for `target` (mode & ~umask); removed with its
 * contents. */
VtTempfile *vt_tempfile_new_dir(const char *target, unsigned mode, GError **error);
/* The open file (-1 for a directory, or once closed). */
int vt_tempfile_fd(const VtTempfile *t);
const char *vt_tempfile_path(const VtTempfile *t);
/* fsync and close the file (a directory: fsync it). */
gboolean vt_tempfile_close(VtTempfile *t, GError **error);
/* Rename (closing it first) onto `target`, then fsync target's directory.
 * no_replace: fail with G_FILE_ERROR_EXIST if target exists (always so for
 * a directory).  Afterwards the temporary is no longer registered. */
gboolean vt_tempfile_rename(VtTempfile *t, const char *target, gboolean no_replace, GError **error);
/* Remove the temporary unless renamed; free. */
void vt_tempfile_free(VtTempfile *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtTempfile, vt_tempfile_free)

/* Remove the stale temporaries in dir (see above); how many were removed. */
guint vt_tempfile_remove_stale(const char *dir);
/* Remove the stale temporaries of one target (its name is part of theirs). */
guint vt_tempfile_remove_stale_of(const char *target);

/* Remove a directory tree without following symbolic links (openat with
 * O_NOFOLLOW, unlinkat); async-signal-safe. */
void vt_tempfile_remove_tree(const char *path);

/* For the command layer: remove every registered temporary on SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT and SIGPIPE (signals that are ignored stay
 * ignored) and at exit.  A command that catches one of them itself keeps
 * the cleanup by restoring the previous action (sigaction's oldact) once it
 * has seen the signal, so a second one still removes the temporaries. */
void vt_tempfile_handle_signals(void);

G_END_DECLS

#endif
