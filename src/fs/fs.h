/* fs.h - file-system helpers shared by every module: trees, recordings,
 * ownership.  May call: glib and libc only.  No printing, no exiting. */
#ifndef VT_FS_H
#define VT_FS_H

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* Remove a directory tree (symlinks are removed, not followed). */
void vt_fs_remove_tree(const char *path);
/* lchown every entry of a tree (the output of a command run under sudo). */
gboolean vt_fs_chown_tree(const char *path, uid_t uid, gid_t gid, GError **error);
/* TRUE if path is absent or a recording: a perf.data file (PERFILE2) or a
 * directory holding only data, data.N, vmtrace-kvm.ini and kcore_dir/
 * {kcore,kallsyms,modules} - what perf record and vmtrace record write.
 * Symbolic links are not recordings.  FALSE says why in error. */
gboolean vt_fs_is_recording(const char *path, GError **error);
/* Remove a recording (as vt_fs_is_recording defines it) without following
 * symbolic links; refuses, leaving the rest, at any other entry. */
gboolean vt_fs_remove_recording(const char *path, GError **error);
/* TRUE if path is dir or below it, comparing canonical paths (symbolic
 * links resolved; a path that does not exist yet is resolved through its
 * parent directory). */
gboolean vt_fs_path_inside(const char *path, const char *dir);
/* Under sudo (real uid 0 with SUDO_UID/SUDO_GID set): the invoking user. */
gboolean vt_fs_sudo_owner(uid_t *uid, gid_t *gid);
/* May what is at path be trusted as this user's own (a cache or snapshot
 * directory, a file in one)?  Owned by the effective user, root or - under
 * sudo - the invoking user, and writable by no one else (no group or other
 * write bit).  follow: path may be a symbolic link (its target is checked;
 * the user named it); otherwise a link is refused.  FALSE with a message
 * that says how to fix it (G_FILE_ERROR; G_FILE_ERROR_NOENT if absent). */
gboolean vt_fs_check_trusted(const char *path, gboolean follow, GError **error);

/* Copy the open regular file `in` (size bytes, from offset 0) to `out`
 * (copy_file_range, else read/write); an input that turns out shorter is
 * an error naming `path` (the output). */
gboolean vt_fs_copy_fd(int in, int out, guint64 size, const char *path, GError **error);
/* Entries a tree copy leaves out: TRUE for `name` at `depth` (0: top). */
typedef gboolean (*VtFsCopySkip)(const char *name, guint depth);
/* Copy the tree `from` into `to` (created 0700 if missing): directories
 * (0700), and regular files created private (0600: recordings hold kernel
 * memory) and exclusively (never through a link); symbolic links are left
 * out; a FIFO, socket or device
 * is an error and never opened (it could block).  skip may be NULL. */
gboolean vt_fs_copy_tree(const char *from, const char *to, VtFsCopySkip skip, GError **error);

G_END_DECLS

#endif
