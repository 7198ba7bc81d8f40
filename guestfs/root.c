/* root.c - guest files below a directory: an sshfs mount (-o direct_io)
 * or a copied tree. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guestfs/guestfs.h"

typedef struct {
	VtGuestSource base;
	char *dir;
} RootSource;

static void set_errno_error(GError **error, int err, const char *what, const char *path)
{
	g_set_error(error, VT_GUEST_ERROR,
		    err == ENOENT ? VT_GUEST_ERROR_NOT_FOUND
		    : err == EACCES || err == EPERM ? VT_GUEST_ERROR_PERMISSION : VT_GUEST_ERROR_FAILED,
		    "%s %s: %s", what, path, g_strerror(err));
}

static int root_open(RootSource *r, const char *path, GError **error)
{
	g_autofree char *full = g_build_filename(r->dir, path, NULL);
	int fd = open(full, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		set_errno_error(error, errno, "cannot open", full);
	return fd;
}

/* read() to EOF: /proc files report size 0, so never trust st_size.
 * Small reads: through sshfs a large read becomes several SFTP requests
 * at different offsets, and every out-of-order read of a seq_file such as
 * /proc/kallsyms regenerates it from the start (64 KiB reads took 3 min
 * for a guest's kallsyms, 16 KiB reads 1.7 s). */
static GBytes *root_read_file(VtGuestSource *src, const char *path, GError **error)
{
	RootSource *r = (RootSource *)src;
	int fd = root_open(r, path, error);
	GByteArray *buf;
	guint8 chunk[16384];

	if (fd < 0)
		return NULL;
	buf = g_byte_array_new();
	for (;;) {
		ssize_t k = read(fd, chunk, sizeof(chunk));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			set_errno_error(error, errno, "cannot read", path);
			g_byte_array_free(buf, TRUE);
			close(fd);
			return NULL;
		}
		if (k == 0)
			break;
		g_byte_array_append(buf, chunk, (guint)k);
	}
	close(fd);
	return g_byte_array_free_to_bytes(buf);
}

static gboolean root_pread(VtGuestSource *src, const char *path, guint64 offset, void *buf, gsize len, gsize *got,
			   GError **error)
{
	RootSource *r = (RootSource *)src;
	int fd = root_open(r, path, error);
	gsize done = 0;

	if (fd < 0)
		return FALSE;
	while (done < len) {
		ssize_t k = pread(fd, (guint8 *)buf + done, len - done, (off_t)(offset + done));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			set_errno_error(error, errno, "cannot read", path);
			close(fd);
			return FALSE;
		}
		if (k == 0)
			break;
		done += (gsize)k;
	}
	close(fd);
	*got = done;
	return TRUE;
}

/* Through a mount the reading user is the mount's remote login, which the
 * tree cannot tell. */
static gint64 root_uid(VtGuestSource *src)
{
	return -1;
}

static void root_close(VtGuestSource *src)
{
	RootSource *r = (RootSource *)src;

	g_free(r->dir);
	g_free(r);
}

static const VtGuestSourceOps root_ops = { root_read_file, root_pread, root_uid, root_close };

VtGuestSource *vt_guest_source_root_open(const char *dir, GError **error)
{
	struct stat st;
	RootSource *r;

	int e = stat(dir, &st) < 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR : 0;

	if (e) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_NOT_FOUND, "%s: %s", dir, g_strerror(e));
		return NULL;
	}
	{
		/* an unmounted sshfs mount point is an empty directory */
		g_autofree char *ks = g_build_filename(dir, "proc", "kallsyms", NULL);

		if (access(ks, F_OK) < 0) {
			g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_NOT_FOUND,
				    "%s has no proc/kallsyms: not a Linux root (is the guest mounted there? "
				    "sshfs -o direct_io root@GUEST:/ %s)", dir, dir);
			return NULL;
		}
	}
	r = g_new0(RootSource, 1);
	r->base.ops = &root_ops;
	r->base.description = g_strdup(dir);
	r->dir = g_strdup(dir);
	return &r->base;
}
