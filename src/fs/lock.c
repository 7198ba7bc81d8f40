/* lock.c - flock(2) on an open file, and who holds it (see lock.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "src/fs/lock.h"
#include "src/fs/output.h"

G_DEFINE_QUARK(vt-fs-lock-error-quark, vt_fs_lock_error)

/* /proc/locks: "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" - the
 * device as %02x:%02x, then the inode.  Lines of waiters start "1: ->". */
int vt_fs_lock_holder(int fd)
{
	struct stat st;
	g_autofree char *text = NULL;
	g_autofree char *want = NULL;
	g_auto(GStrv) lines = NULL;

	if (fstat(fd, &st) < 0 || !g_file_get_contents("/proc/locks", &text, NULL, NULL))
		return 0;
	want = g_strdup_printf("%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev), (unsigned long long)st.st_ino);
	lines = g_strsplit(text, "\n", -1);
	for (char **l = lines; *l; l++) {
		char kind[16], id[64];
		int pid;

		if (sscanf(*l, "%*d: %15s %*s %*s %d %63s", kind, &pid, id) == 3 && !g_strcmp0(kind, "FLOCK") &&
		    !g_strcmp0(id, want) && pid > 0 && pid != getpid())
			return pid;
	}
	return 0;
}

int vt_fs_lock_open(const char *path, int flags, gboolean exclusive, GError **error)
{
	int fd = vt_fs_open_regular(path, flags, error);
	int pid;

	if (fd < 0)
		return -1;
	while (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK) {
			g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: cannot lock: %s", path,
				    g_strerror(errno));
		} else if ((pid = vt_fs_lock_holder(fd)) > 0) {
			g_set_error(error, VT_FS_LOCK_ERROR, VT_FS_LOCK_ERROR_BUSY, "%s: in use by PID %d", path, pid);
		} else {
			g_set_error(error, VT_FS_LOCK_ERROR, VT_FS_LOCK_ERROR_BUSY, "%s: in use by another process",
				    path);
		}
		close(fd);
		return -1;
	}
	return fd;
}
