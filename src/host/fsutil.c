/* fsutil.c - small file-system helpers shared by the commands. */
#include "config.h"

#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>

#include "host/fsutil.h"

void vt_fs_remove_tree(const char *path)
{
	GDir *d = g_dir_open(path, 0, NULL);
	const char *name;

	while (d && (name = g_dir_read_name(d))) {
		g_autofree char *p = g_build_filename(path, name, NULL);

		if (g_file_test(p, G_FILE_TEST_IS_DIR) && !g_file_test(p, G_FILE_TEST_IS_SYMLINK))
			vt_fs_remove_tree(p);
		else
			unlink(p);
	}
	if (d)
		g_dir_close(d);
	rmdir(path);
}

gboolean vt_fs_chown_tree(const char *path, uid_t uid, gid_t gid, GError **error)
{
	GDir *d;
	const char *name;

	if (lchown(path, uid, gid) < 0) {
		int e = errno;

		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e), "%s: cannot change owner: %s", path,
			    g_strerror(e));
		return FALSE;
	}
	if (!g_file_test(path, G_FILE_TEST_IS_DIR) || g_file_test(path, G_FILE_TEST_IS_SYMLINK))
		return TRUE;
	d = g_dir_open(path, 0, error);
	if (!d)
		return FALSE;
	while ((name = g_dir_read_name(d))) {
		g_autofree char *p = g_build_filename(path, name, NULL);

		if (!vt_fs_chown_tree(p, uid, gid, error)) {
			g_dir_close(d);
			return FALSE;
		}
	}
	g_dir_close(d);
	return TRUE;
}

gboolean vt_fs_sudo_owner(uid_t *uid, gid_t *gid)
{
	const char *u = g_getenv("SUDO_UID"), *g = g_getenv("SUDO_GID");
	char *end;
	guint64 x;

	if (getuid() != 0 || !u || !g)
		return FALSE;
	x = g_ascii_strtoull(u, &end, 10);
	if (*end || end == u || x == 0 || x > G_MAXUINT32)
		return FALSE;
	*uid = (uid_t)x;
	x = g_ascii_strtoull(g, &end, 10);
	if (*end || end == g || x > G_MAXUINT32)
		return FALSE;
	*gid = (gid_t)x;
	return TRUE;
}
