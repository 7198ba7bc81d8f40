/* tempfile.c - registered temporaries, removed on failure, at exit and on
 * signals; stale ones of dead processes removed by the next run (see
 * tempfile.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "src/fs/tempfile.h"

#define TAG ".vmtrace-tmp."
#define BASE_MAX 100            /* of the target's name kept in the temporary's */
#define TREE_DEPTH_MAX 32

/* The registry: a list the signal handler may walk at any moment.  Nodes
 * are published complete (path first, then the list head) and never
 * freed or changed afterwards, only deactivated. */
typedef struct Entry Entry;
struct Entry {
	Entry *next;
	char *path;
	pid_t owner;
	gboolean is_dir;
	atomic_int active;
};

static _Atomic(Entry *) registry;

struct VtTempfile {
	Entry *e;
	int fd;
	gboolean closed;
};

static const int cleanup_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE };

/* ------------------------------------------------------------ removal */

/* One directory level, open at fd: unlink everything, recursing into
 * directories; passes repeat until one removes nothing (entries removed
 * while reading may shift the rest). */
static void clear_dir(int fd, int depth)
{
	char buf[2048];
	gboolean again = TRUE;

	while (again) {
		long n;

		again = FALSE;
		lseek(fd, 0, SEEK_SET);
		while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
			for (long off = 0; off < n;) {
				/* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name */
				unsigned short reclen;
				const char *name = buf + off + 19;

				memcpy(&reclen, buf + off + 16, sizeof(reclen));
				off += reclen;
				if (!strcmp(name, ".") || !strcmp(name, ".."))
					continue;
				if (unlinkat(fd, name, 0) == 0) {
					again = TRUE;
				} else if (errno == EISDIR && depth < TREE_DEPTH_MAX) {
					int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

					if (sub >= 0) {
						clear_dir(sub, depth + 1);
						close(sub);
					}
					if (unlinkat(fd, name, AT_REMOVEDIR) == 0)
						again = TRUE;
				}
			}
		}
	}
}

void vt_tempfile_remove_tree(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		unlink(path);     /* not a directory (or a link to one) */
		return;
	}
	clear_dir(fd, 0);
	close(fd);
	rmdir(path);
}

static void remove_entry(const Entry *e)
{
	if (e->is_dir)
		vt_tempfile_remove_tree(e->path);
	else
		unlink(e->path);
}

/* Every active temporary of this process (not of a forked child's parent). */
static void remove_all(void)
{
	pid_t me = getpid();

	for (Entry *e = atomic_load(&registry); e; e = e->next)
		if (atomic_load(&e->active) && e->owner == me)
			remove_entry(e);
}

static void on_signal(int sig)
{
	int saved = errno;

	remove_all();
	errno = saved;
	raise(sig);       /* SA_RESETHAND: the default action, once we return */
}

void vt_tempfile_handle_signals(void)
{
	static gsize done;
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESETHAND };

	if (!g_once_init_enter(&done))
		return;
	sigemptyset(&sa.sa_mask);
	for (guint i = 0; i < G_N_ELEMENTS(cleanup_signals); i++)
		sigaddset(&sa.sa_mask, cleanup_signals[i]);
	for (guint i = 0; i < G_N_ELEMENTS(cleanup_signals); i++) {
		struct sigaction old;

		if (sigaction(cleanup_signals[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(cleanup_signals[i], &sa, NULL);
	}
	atexit(remove_all);
	g_once_init_leave(&done, 1);
}

/* ------------------------------------------------------------ registry */

static Entry *entry_add(char *path, gboolean is_dir)
{
	Entry *e = g_new0(Entry, 1);

	e->path = path;
	e->owner = getpid();
	e->is_dir = is_dir;
	atomic_init(&e->active, 1);
	e->next = atomic_load(&registry);
	while (!atomic_compare_exchange_weak(&registry, &e->next, e))
		;
	return e;
}

static void block_signals(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	for (guint i = 0; i < G_N_ELEMENTS(cleanup_signals); i++)
		sigaddset(&set, cleanup_signals[i]);
	pthread_sigmask(SIG_BLOCK, &set, old);
}

/* "DIR/.BASE.vmtrace-tmp.PID." for target */
static char *name_prefix(const char *target)
{
	g_autofree char *dir = g_path_get_dirname(target);
	g_autofree char *base = g_path_get_basename(target);

	if (strlen(base) > BASE_MAX)
		base[BASE_MAX] = '\0';
	return g_strdup_printf("%s/.%s" TAG "%ld.", dir, base, (long)getpid());
}

static void random_suffix(char *p)
{
	static const char set[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

	for (int i = 0; i < 6; i++)
		p[i] = set[g_random_int_range(0, sizeof(set) - 1)];
}

/* Create and register, with the cleanup signals blocked so that no signal
 * finds the file created but not registered. */
static VtTempfile *create(const char *target, gboolean dir, unsigned mode, GError **error)
{
	g_autofree char *prefix = name_prefix(target);
	g_autofree char *dirname = g_path_get_dirname(target);
	char *path = g_strconcat(prefix, "XXXXXX", NULL);
	VtTempfile *t = g_new0(VtTempfile, 1);
	sigset_t old;
	int e = EEXIST;

	vt_tempfile_remove_stale(dirname);
	t->fd = -1;
	block_signals(&old);
	for (int tries = 0; tries < 100 && e == EEXIST; tries++) {
		random_suffix(path + strlen(prefix));
		if (dir)
			e = mkdir(path, mode) == 0 ? 0 : errno;
		else if ((t->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)) >= 0)
			e = 0;
		else
			e = errno;
	}
	if (!e)
		t->e = entry_add(path, dir);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e), "%s: cannot create a temporary %s beside it: %s",
			    target, dir ? "directory" : "file", g_strerror(e));
		g_free(path);
		g_free(t);
		return NULL;
	}
	return t;
}

VtTempfile *vt_tempfile_new(const char *target, unsigned mode, GError **error)
{
	return create(target, FALSE, mode, error);
}

VtTempfile *vt_tempfile_new_dir(const char *target, unsigned mode, GError **error)
{
	return create(target, TRUE, mode, error);
}

int vt_tempfile_fd(const VtTempfile *t)
{
	return t->fd;
}

const char *vt_tempfile_path(const VtTempfile *t)
{
	return t->e->path;
}

static gboolean io_fail(GError **error, const char *path, const char *what, int e)
{
	g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e), "%s: %s: %s", path, what, g_strerror(e));
	return FALSE;
}

static gboolean fsync_path(const char *path, GError **error)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return io_fail(error, path, "cannot open directory", errno);
	if (fsync(fd) < 0 && errno != EINVAL) {
		int e = errno;

		close(fd);
		return io_fail(error, path, "fsync failed", e);
	}
	close(fd);
	return TRUE;
}

gboolean vt_tempfile_close(VtTempfile *t, GError **error)
{
	int fd = t->fd;

	if (t->closed)
		return TRUE;
	t->closed = TRUE;
	if (t->e->is_dir)
		return fsync_path(t->e->path, error);
	t->fd = -1;
	if (fsync(fd) < 0) {
		int e = errno;

		close(fd);
		return io_fail(error, t->e->path, "fsync failed", e);
	}
	if (close(fd) < 0)
		return io_fail(error, t->e->path, "close failed", errno);
	return TRUE;
}

static int rename_noreplace(const char *from, const char *to)
{
	struct stat st;

	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	/* a file system without RENAME_NOREPLACE: check, then rename */
	if (lstat(to, &st) == 0 || errno != ENOENT) {
		errno = EEXIST;
		return -1;
	}
	return rename(from, to);
}

gboolean vt_tempfile_rename(VtTempfile *t, const char *target, gboolean no_replace, GError **error)
{
	g_autofree char *dir = g_path_get_dirname(target);

	if (!vt_tempfile_close(t, error))
		return FALSE;
	if ((no_replace || t->e->is_dir ? rename_noreplace(t->e->path, target) : rename(t->e->path, target)) < 0) {
		int e = errno;

		if (e == EEXIST || e == ENOTEMPTY) {
			g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST, "%s: already exists", target);
			return FALSE;
		}
		return io_fail(error, target, "cannot rename the temporary file into place", e);
	}
	atomic_store(&t->e->active, 0);
	return fsync_path(dir, error);
}

void vt_tempfile_free(VtTempfile *t)
{
	if (!t)
		return;
	if (t->fd >= 0)
		close(t->fd);
	if (atomic_load(&t->e->active)) {
		remove_entry(t->e);
		atomic_store(&t->e->active, 0);
	}
	g_free(t);      /* the entry stays: a signal handler may be reading it */
}

/* ------------------------------------------------------------ stale ones */

/* When process pid started (seconds since the epoch), or 0 if unknown. */
static gint64 process_start(long pid)
{
	g_autofree char *stat = NULL, *sys = NULL;
	g_autofree char *path = g_strdup_printf("/proc/%ld/stat", pid);
	const char *p, *bt;
	long ticks = sysconf(_SC_CLK_TCK);
	guint64 start;

	if (!g_file_get_contents(path, &stat, NULL, NULL) || !(p = strrchr(stat, ')')) ||
	    !g_file_get_contents("/proc/stat", &sys, NULL, NULL) || !(bt = strstr(sys, "\nbtime ")) || ticks <= 0)
		return 0;
	/* field 22, starttime; p is at the end of field 2 */
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return 0;
	start = g_ascii_strtoull(p + 1, NULL, 10);
	return g_ascii_strtoll(bt + 7, NULL, 10) + (gint64)(start / (guint64)ticks);
}

/* Is the process that wrote a temporary last modified at mtime alive? */
static gboolean owner_alive(long pid, gint64 mtime)
{
	gint64 start;

	if (pid <= 0 || (kill((pid_t)pid, 0) < 0 && errno == ESRCH))
		return FALSE;
	start = process_start(pid);
	return !start || start <= mtime + 1;    /* else a reused PID */
}

/* The PID in ".BASE.vmtrace-tmp.PID.XXXXXX", or -1 if name is not one. */
static long temp_pid(const char *name)
{
	const char *tag = g_strrstr(name, TAG);
	char *end;
	long pid;

	if (name[0] != '.' || !tag || tag == name)
		return -1;
	pid = strtol(tag + strlen(TAG), &end, 10);
	if (end == tag + strlen(TAG) || *end != '.' || strlen(end + 1) != 6)
		return -1;
	return pid;
}

static guint remove_stale(const char *dir, const char *prefix)
{
	GDir *d = g_dir_open(dir, 0, NULL);
	const char *name;
	guint n = 0;

	while (d && (name = g_dir_read_name(d))) {
		g_autofree char *p = NULL;
		long pid = temp_pid(name);
		struct stat st;

		if (pid < 0 || (prefix && !g_str_has_prefix(name, prefix)))
			continue;
		p = g_build_filename(dir, name, NULL);
		if (lstat(p, &st) < 0 || st.st_uid != geteuid() || owner_alive(pid, st.st_mtime))
			continue;
		if (S_ISDIR(st.st_mode))
			vt_tempfile_remove_tree(p);
		else
			unlink(p);
		n += lstat(p, &st) < 0;
	}
	if (d)
		g_dir_close(d);
	return n;
}

guint vt_tempfile_remove_stale(const char *dir)
{
	return remove_stale(dir, NULL);
}

guint vt_tempfile_remove_stale_of(const char *target)
{
	g_autofree char *dir = g_path_get_dirname(target);
	g_autofree char *base = g_path_get_basename(target);
	g_autofree char *prefix = NULL;

	if (strlen(base) > BASE_MAX)
		base[BASE_MAX] = '\0';
	prefix = g_strconcat(".", base, TAG, NULL);
	return remove_stale(dir, prefix);
}
