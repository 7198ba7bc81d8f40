/* output.h - the one way vmtrace creates and replaces its outputs, and
 * reads and writes whole files.  May call: glib and libc only.  No
 * printing, no exiting; errors are G_FILE_ERROR with messages that start
 * with the path concerned.
 *
 * An output OUT is built in a registered temporary beside it (see
 * tempfile.h: exclusive creation, removed on failure, at exit and on
 * SIGINT/TERM/HUP) and renamed onto OUT only when complete and fsync'ed,
 * so OUT is either its old self or the new one, whole.  What may stand at
 * OUT is checked when the output is started and again just before the
 * rename: nothing, or with VT_FS_OUTPUT_REPLACE a regular file.  A
 * symbolic link, directory, FIFO, device or socket is never replaced (nor
 * written through).
 */
#ifndef VT_FS_OUTPUT_H
#define VT_FS_OUTPUT_H

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
	VT_FS_OUTPUT_NEW = 0,           /* OUT must not exist (G_FILE_ERROR_EXIST) */
	VT_FS_OUTPUT_REPLACE = 1 << 0,  /* a file: an existing regular file OUT is replaced;
					 * a directory: OUT may exist when starting - the
					 * caller moves it away before the commit */
	VT_FS_OUTPUT_DIR = 1 << 1,      /* build a directory; it never replaces anything */
} VtFsOutputFlags;

typedef struct VtFsOutput VtFsOutput;

/* May an output with these flags be created at path now?  Also removes
 * the stale temporaries of path (vt_tempfile_remove_stale_of): a command
 * that checks its output first cleans up after killed runs even when it
 * fails before writing. */
gboolean vt_fs_output_check(const char *path, VtFsOutputFlags flags, GError **error);
/* Start an output: check, then create the temporary (mode & ~umask: 0600
 * for traces and kernel memory, 0666 for text others may read). */
VtFsOutput *vt_fs_output_new(const char *path, VtFsOutputFlags flags, unsigned mode, GError **error);
/* The temporary file, open read-write (-1 for a directory). */
int vt_fs_output_fd(const VtFsOutput *o);
/* The temporary's path (a directory: where to build its contents). */
const char *vt_fs_output_tmp(const VtFsOutput *o);
const char *vt_fs_output_path(const VtFsOutput *o);
/* fsync, close, check OUT again, rename onto it, fsync its directory. */
gboolean vt_fs_output_commit(VtFsOutput *o, GError **error);
/* Remove the temporary unless committed; free. */
void vt_fs_output_free(VtFsOutput *o);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtFsOutput, vt_fs_output_free)

/* A whole file at once, by the same rules. */
gboolean vt_fs_output_write_file(const char *path, VtFsOutputFlags flags, unsigned mode, const void *data,
				 gsize len, GError **error);

/* Write all len bytes to fd at off (off < 0: at the file position),
 * retrying short writes and EINTR; path names the file in errors. */
gboolean vt_fs_write_all(int fd, const void *buf, gsize len, gint64 off, const char *path, GError **error);
/* Open path only if it is a regular file (following symbolic links): a
 * FIFO, device or socket is refused before it is opened, and opening never
 * blocks.  flags as open(2) (O_CLOEXEC is added); -1 and error on failure. */
int vt_fs_open_regular(const char *path, int flags, GError **error);
/* A regular file's contents (NUL-terminated; *len without the NUL), at
 * most max_bytes of them: a larger file is an error, not a truncation. */
char *vt_fs_read_all(const char *path, gsize max_bytes, gsize *len, GError **error);

G_END_DECLS

#endif
