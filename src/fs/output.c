/* output.c - creating and replacing outputs; whole-file I/O (see output.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "src/fs/output.h"
#include "src/fs/tempfile.h"

struct VtFsOutput {
	char *path;
	VtFsOutputFlags flags;
	VtTempfile *tmp;
};

static gboolean G_GNUC_PRINTF(4, 5) fail(GError **error, GFileError code, const char *path, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *what = NULL;

	va_start(ap, fmt);
	what = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_set_error(error, G_FILE_ERROR, code, "%s: %s", path, what);
	return FALSE;
}

static gboolean fail_errno(GError **error, const char *path, const char *what, int e)
{
	return fail(error, g_file_error_from_errno(e), path, "%s: %s", what, g_strerror(e));
}

static const char *kind(mode_t m)
{
	return S_ISLNK(m) ? "a symbolic link" : S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" :
	       S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" :
	       "a special file";
}

gboolean vt_fs_output_check(const char *path, VtFsOutputFlags flags, GError **error)
{
	struct stat st;

	vt_tempfile_remove_stale_of(path);    /* what killed runs left beside it */
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return TRUE;
		return fail_errno(error, path, "cannot inspect", errno);
	}
	if ((flags & VT_FS_OUTPUT_DIR) && (flags & VT_FS_OUTPUT_REPLACE))
		return TRUE;      /* the caller moves it away */
	if (!S_ISREG(st.st_mode) && !(S_ISDIR(st.st_mode) && (flags & VT_FS_OUTPUT_DIR)))
		return fail(error, G_FILE_ERROR_EXIST, path, "is %s; refusing to replace it", kind(st.st_mode));
	if (!(flags & VT_FS_OUTPUT_REPLACE) || (flags & VT_FS_OUTPUT_DIR))
		return fail(error, G_FILE_ERROR_EXIST, path, "already exists");
	return TRUE;
}

VtFsOutput *vt_fs_output_new(const char *path, VtFsOutputFlags flags, unsigned mode, GError **error)
{
	VtFsOutput *o;
	VtTempfile *t;

	if (!vt_fs_output_check(path, flags, error))
		return NULL;
	t = flags & VT_FS_OUTPUT_DIR ? vt_tempfile_new_dir(path, mode, error) : vt_tempfile_new(path, mode, error);
	if (!t)
		return NULL;
	o = g_new0(VtFsOutput, 1);
	o->path = g_strdup(path);
	o->flags = flags;
	o->tmp = t;
	return o;
}

int vt_fs_output_fd(const VtFsOutput *o)
{
	return vt_tempfile_fd(o->tmp);
}

const char *vt_fs_output_tmp(const VtFsOutput *o)
{
	return vt_tempfile_path(o->tmp);
}

const char *vt_fs_output_path(const VtFsOutput *o)
{
	return o->path;
}

gboolean vt_fs_output_commit(VtFsOutput *o, GError **error)
{
	gboolean dir = !!(o->flags & VT_FS_OUTPUT_DIR);
	gboolean replace = !dir && (o->flags & VT_FS_OUTPUT_REPLACE);

	/* a directory's own policy was the caller's; the rename never replaces */
	return vt_tempfile_close(o->tmp, error) && (dir || vt_fs_output_check(o->path, o->flags, error)) &&
	       vt_tempfile_rename(o->tmp, o->path, !replace, error);
}

void vt_fs_output_free(VtFsOutput *o)
{
	if (!o)
		return;
	vt_tempfile_free(o->tmp);
	g_free(o->path);
	g_free(o);
}

gboolean vt_fs_output_write_file(const char *path, VtFsOutputFlags flags, unsigned mode, const void *data,
				 gsize len, GError **error)
{
	g_autoptr(VtFsOutput) o = vt_fs_output_new(path, flags & ~VT_FS_OUTPUT_DIR, mode, error);

	return o && vt_fs_write_all(vt_fs_output_fd(o), data, len, 0, path, error) && vt_fs_output_commit(o, error);
}

/* ------------------------------------------------------------ whole-file I/O */

gboolean vt_fs_write_all(int fd, const void *buf, gsize len, gint64 off, const char *path, GError **error)
{
	const guint8 *p = buf;

	while (len) {
		ssize_t k = off < 0 ? write(fd, p, len) : pwrite(fd, p, len, (off_t)off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return fail_errno(error, path, "cannot write", k < 0 ? errno : ENOSPC);
		p += k;
		len -= (gsize)k;
		if (off >= 0)
			off += k;
	}
	return TRUE;
}

int vt_fs_open_regular(const char *path, int flags, GError **error)
{
	struct stat st;
	int fd;

	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		fail(error, G_FILE_ERROR_INVAL, path, "is %s, not a regular file", kind(st.st_mode));
		return -1;
	}
	fd = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		fail_errno(error, path, "cannot open", errno);
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {      /* replaced since the stat */
		close(fd);
		fail(error, G_FILE_ERROR_INVAL, path, "not a regular file");
		return -1;
	}
	if (!(flags & O_NONBLOCK))
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

char *vt_fs_read_all(const char *path, gsize max_bytes, gsize *len, GError **error)
{
	int fd = vt_fs_open_regular(path, O_RDONLY, error);
	GByteArray *b;
	guint8 chunk[65536];
	ssize_t k;

	if (fd < 0)
		return NULL;
	b = g_byte_array_new();
	while ((k = read(fd, chunk, sizeof(chunk))) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 || b->len + (gsize)k > max_bytes) {
			if (k < 0)
				fail_errno(error, path, "cannot read", errno);
			else
				fail(error, G_FILE_ERROR_FAILED, path, "larger than %" G_GSIZE_FORMAT " bytes", max_bytes);
			close(fd);
			g_byte_array_unref(b);
			return NULL;
		}
		g_byte_array_append(b, chunk, (guint)k);
	}
	close(fd);
	if (len)
		*len = b->len;
	g_byte_array_append(b, (const guint8 *)"", 1);
	return (char *)g_byte_array_free(b, FALSE);
}
