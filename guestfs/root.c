/* root.c - guest files below a directory: an sshfs mount (-o direct_io)
 * or a copied tree.  Paths resolve beneath it (src/fs/inroot.h): its
 * symbolic links are the guest's, never the host's files. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "guestfs/guestfs.h"
#include "src/fs/inroot.h"

typedef struct {
	VtGuestSource base;
	int dirfd;        /* the root every guest path resolves beneath */
} RootSource;

/* An error of src/fs as a guest error (same message). */
static void guest_error(GError **error, GError *err)
{
	VtGuestErrorCode code = VT_GUEST_ERROR_FAILED;

	if (g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_NOENT) ||
	    g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_NOTDIR))
		code = VT_GUEST_ERROR_NOT_FOUND;
	else if (g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_ACCES) ||
		 g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_PERM))
		code = VT_GUEST_ERROR_PERMISSION;
	else if (err->domain == VT_FS_ERROR)
		code = VT_GUEST_ERROR_BAD_DATA;      /* not a regular file, too big */
	g_set_error_literal(error, VT_GUEST_ERROR, code, err->message);
	g_error_free(err);
}

/* Guest paths resolve beneath the root (a symbolic link to /etc/shadow
 * means the guest's); only regular files are read. */
static int root_open(RootSource *r, const char *path, GError **error)
{
	GError *err = NULL;
	int fd = vt_fs_open_in_root(r->dirfd, path, &err);

	if (fd < 0)
		guest_error(error, err);
	return fd;
}

/* Read to EOF: /proc files report size 0, so never trust st_size.
 * Small reads (vt_fs_read_bounded): through sshfs a large read becomes
 * several SFTP requests at different offsets, and every out-of-order read
 * of a seq_file such as /proc/kallsyms regenerates it from the start
 * (64 KiB reads took 3 min for a guest's kallsyms, 16 KiB reads 1.7 s). */
static GBytes *root_read_file(VtGuestSource *src, const char *path, gsize max, GError **error)
{
	RootSource *r = (RootSource *)src;
	int fd = root_open(r, path, error);
	GError *err = NULL;
	GBytes *b;

	if (fd < 0)
		return NULL;
	b = vt_fs_read_bounded(fd, max, path, &err);
	close(fd);
	if (!b)
		guest_error(error, err);
	return b;
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
			guest_error(error, g_error_new(G_FILE_ERROR, g_file_error_from_errno(errno), "cannot read %s: %s",
						       path, g_strerror(errno)));
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

	close(r->dirfd);
	g_free(r);
}

static const VtGuestSourceOps root_ops = { root_read_file, root_pread, root_uid, root_close, NULL };

VtGuestSource *vt_guest_source_root_open(const char *dir, GError **error)
{
	RootSource *r;
	GError *err = NULL;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;

	if (dfd < 0) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_NOT_FOUND, "%s: %s", dir, g_strerror(errno));
		return NULL;
	}
	/* an unmounted sshfs mount point is an empty directory */
	fd = vt_fs_open_in_root(dfd, "/proc/kallsyms", &err);
	if (fd < 0 && g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_NOT_FOUND,
			    "%s has no proc/kallsyms: not a Linux root (is the guest mounted there? "
			    "sshfs -o direct_io root@GUEST:/ %s)", dir, dir);
		g_error_free(err);
		close(dfd);
		return NULL;
	}
	g_clear_error(&err);     /* other errors: when it is read */
	if (fd >= 0)
		close(fd);
	r = g_new0(RootSource, 1);
	r->base.ops = &root_ops;
	r->base.description = g_strdup(dir);
	r->dirfd = dfd;
	return &r->base;
}
