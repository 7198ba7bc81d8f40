/* fs.c - file-system helpers (see fs.h). */
#include "config.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "src/fs/fs.h"
#include "src/fs/output.h"

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

/* realpath, or for a path that does not exist its parent's realpath + its name */
static char *canonical(const char *path)
{
	char *r = realpath(path, NULL);
	g_autofree char *parent = NULL, *base = NULL, *rp = NULL;

	if (r || errno != ENOENT)
		return r;
	parent = g_path_get_dirname(path);
	base = g_path_get_basename(path);
	rp = realpath(parent, NULL);
	return rp ? g_build_filename(rp, base, NULL) : NULL;
}

gboolean vt_fs_path_inside(const char *path, const char *dir)
{
	g_autofree char *p = canonical(path), *d = canonical(dir);
	gsize n = d ? strlen(d) : 0;

	if (!p || !d)
		return FALSE;
	return !strcmp(p, d) || (g_str_has_prefix(p, d) && (p[n] == '/' || !strcmp(d, "/")));
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

static gboolean owner_trusted(uid_t uid)
{
	uid_t su;
	gid_t sg;

	return uid == geteuid() || uid == 0 || (vt_fs_sudo_owner(&su, &sg) && uid == su);
}

gboolean vt_fs_check_trusted(const char *path, gboolean follow, GError **error)
{
	struct stat st;
	g_autofree char *q = g_shell_quote(path);    /* the printed commands must be safe to paste */

	if ((follow ? stat(path, &st) : lstat(path, &st)) < 0) {
		int e = errno;

		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e), "%s: %s", path, g_strerror(e));
		return FALSE;
	}
	if (S_ISLNK(st.st_mode)) {
		g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_PERM,
			    "%s is a symbolic link: vmtrace follows none below the cache directory "
			    "(someone could point it anywhere) - remove it: rm %s", path, q);
		return FALSE;
	}
	if (!owner_trusted(st.st_uid)) {
		g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_PERM,
			    "%s belongs to uid %u, not to you or root: another user could have put anything there - "
			    "remove it (rm -r %s), or if it is yours: chown -R %u %s", path, (unsigned)st.st_uid, q,
			    (unsigned)geteuid(), q);
		return FALSE;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_PERM,
			    "%s is writable by %s (mode %04o): another user could put anything there - "
			    "chmod go-w %s", path, st.st_mode & S_IWOTH ? "everyone" : "its group",
			    (unsigned)(st.st_mode & 07777), q);
		return FALSE;
	}
	return TRUE;
}

/* A name a recording directory may hold at depth 0 (its top) or 1 (in
 * kcore_dir), with the file type it must have. */
static gboolean recording_entry(int depth, const char *name, mode_t mode)
{
	if (depth == 1)
		return S_ISREG(mode) && (!strcmp(name, "kcore") || !strcmp(name, "kallsyms") ||
					 !strcmp(name, "modules"));
	if (!strcmp(name, "kcore_dir"))
		return S_ISDIR(mode);
	return S_ISREG(mode) && (!strcmp(name, "data") || g_str_has_prefix(name, "data.") ||
				 !strcmp(name, "vmtrace-kvm.ini"));
}

/* Walk the recording directory open at dfd (which this closes): check
 * every entry, and with remove, unlink it.  Never follows a link. */
static gboolean recording_walk(int dfd, const char *path, int depth, gboolean remove, GError **error)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	gboolean ok = TRUE;

	if (!d) {
		int err = errno;

		close(dfd);
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(err), "%s: %s", path, g_strerror(err));
		return FALSE;
	}
	while (ok && (e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !recording_entry(depth, e->d_name, st.st_mode)) {
			g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
				    "%s/%s is not part of one", path, e->d_name);
			ok = FALSE;
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			g_autofree char *sp = g_build_filename(path, e->d_name, NULL);

			ok = sub >= 0 && recording_walk(sub, sp, depth + 1, remove, error);
			if (sub < 0)
				g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: %s", sp,
					    g_strerror(errno));
			if (ok && remove && unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) < 0) {
				g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot remove %s: %s",
					    sp, g_strerror(errno));
				ok = FALSE;
			}
		} else if (remove && unlinkat(dirfd(d), e->d_name, 0) < 0) {
			g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot remove %s/%s: %s",
				    path, e->d_name, g_strerror(errno));
			ok = FALSE;
		}
	}
	closedir(d);
	return ok;
}

/* 1: a recording, 0: absent, -1: something else (error set). */
static int recording_check(const char *path, gboolean remove, GError **error)
{
	struct stat st;
	int fd;

	if (lstat(path, &st) < 0)
		return 0;
	if (S_ISREG(st.st_mode)) {
		char magic[8] = { 0 };

		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || read(fd, magic, sizeof(magic)) != (ssize_t)sizeof(magic) ||
		    memcmp(magic, "PERFILE2", 8)) {
			if (fd >= 0)
				close(fd);
			g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST, "%s: not a perf.data file", path);
			return -1;
		}
		close(fd);
		if (remove && unlink(path) < 0) {
			g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot remove %s: %s", path,
				    g_strerror(errno));
			return -1;
		}
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST, "%s: neither a file nor a directory", path);
		return -1;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: %s", path, g_strerror(errno));
		return -1;
	}
	if (!recording_walk(fd, path, 0, remove, error))
		return -1;
	if (remove && rmdir(path) < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot remove %s: %s", path,
			    g_strerror(errno));
		return -1;
	}
	return 1;
}

gboolean vt_fs_is_recording(const char *path, GError **error)
{
	return recording_check(path, FALSE, error) >= 0;
}

gboolean vt_fs_remove_recording(const char *path, GError **error)
{
	/* check the whole tree first, so a refusal leaves it intact */
	return recording_check(path, FALSE, error) >= 0 && recording_check(path, TRUE, error) >= 0;
}

static gboolean copy_error(GError **error, const char *path, const char *what, int e)
{
	g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e), "%s: %s: %s", path, what, g_strerror(e));
	return FALSE;
}

/* read/write, where copy_file_range cannot (across file systems, old kernels) */
static gboolean copy_rw(int in, int out, guint64 done, guint64 size, const char *path, GError **error)
{
	g_autofree char *buf = g_malloc(1 << 20);

	while (done < size) {
		ssize_t r = pread(in, buf, MIN(1 << 20, size - done), done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (!vt_fs_write_all(out, buf, r, done, path, error))
			return FALSE;
		done += r;
	}
	if (done != size) {
		g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_IO, "%s: input shrank while copying", path);
		return FALSE;
	}
	return TRUE;
}

gboolean vt_fs_copy_fd(int in, int out, guint64 size, const char *path, GError **error)
{
	guint64 done = 0;

	while (done < size) {
		loff_t ip = done, op = done;
		ssize_t n = copy_file_range(in, &ip, out, &op, size - done, 0);

		if (n > 0) {
			done += n;
			continue;
		}
		if (n == 0)
			break;
		if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP && errno != EINTR)
			return copy_error(error, path, "copy", errno);
		if (errno != EINTR)
			return copy_rw(in, out, done, size, path, error);
	}
	return copy_rw(in, out, done, size, path, error);
}

/* A regular file into a new private file (0600: recordings hold kernel
 * memory), created exclusively, no link followed. */
static gboolean copy_file(const char *src, const char *dst, GError **error)
{
	int in = vt_fs_open_regular(src, O_RDONLY, error), out;
	struct stat st;
	gboolean ok;

	if (in < 0)
		return FALSE;
	if (fstat(in, &st) < 0) {
		ok = copy_error(error, src, "stat", errno);
		close(in);
		return ok;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	ok = out >= 0 ? vt_fs_copy_fd(in, out, st.st_size, dst, error) : copy_error(error, dst, "create", errno);
	if (out >= 0 && close(out) < 0 && ok)
		ok = copy_error(error, dst, "close", errno);
	close(in);
	return ok;
}

static gboolean copy_tree_at(const char *from, const char *to, VtFsCopySkip skip, guint depth, GError **error)
{
	g_autoptr(GDir) d = g_dir_open(from, 0, error);
	const char *name;
	gboolean ok = TRUE;

	if (!d)
		return FALSE;
	if (mkdir(to, 0700) < 0 && errno != EEXIST)
		return copy_error(error, to, "mkdir", errno);
	while (ok && (name = g_dir_read_name(d))) {
		g_autofree char *src = g_build_filename(from, name, NULL);
		g_autofree char *dst = g_build_filename(to, name, NULL);
		struct stat st;

		if (skip && skip(name, depth))
			continue;
		if (lstat(src, &st) < 0)
			ok = copy_error(error, src, "stat", errno);
		else if (S_ISDIR(st.st_mode))
			ok = copy_tree_at(src, dst, skip, depth + 1, error);
		else if (!S_ISLNK(st.st_mode))
			ok = copy_file(src, dst, error);    /* refuses a FIFO or device unopened */
	}
	return ok;
}

gboolean vt_fs_copy_tree(const char *from, const char *to, VtFsCopySkip skip, GError **error)
{
	return copy_tree_at(from, to, skip, 0, error);
}
