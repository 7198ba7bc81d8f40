/* inroot.c - open beneath a root, bounded reads of regular files (see
 * inroot.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(SYS_openat2) && defined(__has_include)
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define HAVE_OPENAT2 1
#endif
#endif

#include "src/fs/inroot.h"

G_DEFINE_QUARK(vt-fs-error-quark, vt_fs_error)

/* Never block on a FIFO's open, never make a terminal ours. */
#define READ_FLAGS (O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
#define MAX_LINKS 40

static void errno_error(GError **error, int err, const char *what, const char *path)
{
	g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(err), "%s%s%s: %s", what, *what ? " " : "", path,
		    g_strerror(err));
}

static const char *kind(mode_t mode)
{
	return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO"
	       : S_ISCHR(mode) || S_ISBLK(mode) ? "a device" : "a socket";
}

/* fd if it is a regular file; otherwise closes it and fails. */
static int regular_or_close(int fd, const char *path, GError **error)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		errno_error(error, errno, "cannot stat", path);
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		g_set_error(error, VT_FS_ERROR, VT_FS_ERROR_NOT_REGULAR, "%s is not a regular file (%s)", path,
			    kind(st.st_mode));
		close(fd);
		return -1;
	}
	return fd;
}

/* --- the user-space walk ------------------------------------------------- */
typedef struct {
	int root;
	GArray *dirs;       /* fds of the directories below root, outermost first */
	char *rest;         /* what is left to resolve (owned) */
	int links;
} Walk;

static int walk_cur(const Walk *w)
{
	return w->dirs->len ? g_array_index(w->dirs, int, w->dirs->len - 1) : w->root;
}

static void walk_up(Walk *w, gboolean to_root)
{
	while (w->dirs->len) {
		close(g_array_index(w->dirs, int, w->dirs->len - 1));
		g_array_set_size(w->dirs, w->dirs->len - 1);
		if (!to_root)
			break;
	}
}

/* Take the next component of w->rest into comp (NUL-terminated in place);
 * *last: nothing follows it. */
static char *walk_next(Walk *w, char **cursor, gboolean *last)
{
	char *p = *cursor, *comp;

	while (*p == '/')
		p++;
	if (!*p)
		return NULL;
	comp = p;
	while (*p && *p != '/')
		p++;
	if (*p)
		*p++ = '\0';
	while (*p == '/')
		p++;
	*cursor = p;
	*last = !*p;
	return comp;
}

/* comp (in the current directory) is a symbolic link: continue with its
 * target followed by what remains; an absolute target starts at the root.
 * FALSE (errno set) if comp is no link or there are too many. */
static gboolean walk_link(Walk *w, const char *comp, const char *remaining)
{
	char target[PATH_MAX];
	ssize_t n = readlinkat(walk_cur(w), comp, target, sizeof(target));
	char *rest;

	if (n < 0)
		return FALSE;
	if ((gsize)n >= sizeof(target) || ++w->links > MAX_LINKS) {
		errno = (gsize)n >= sizeof(target) ? ENAMETOOLONG : ELOOP;
		return FALSE;
	}
	target[n] = '\0';
	if (target[0] == '/')
		walk_up(w, TRUE);
	rest = g_strconcat(target, "/", remaining, NULL);
	g_free(w->rest);
	w->rest = rest;
	return TRUE;
}

/* One step of the walk: -1 with errno on failure, -2 to go on, else the fd. */
static int walk_step(Walk *w, char **cursor)
{
	gboolean last = FALSE;
	char *comp = walk_next(w, cursor, &last);
	int fd, err;

	if (!comp || (last && (!strcmp(comp, ".") || !strcmp(comp, "..")))) {
		if (comp && !strcmp(comp, ".."))
			walk_up(w, FALSE);
		return openat(walk_cur(w), ".", READ_FLAGS | O_DIRECTORY);   /* not regular: refused later */
	}
	if (!strcmp(comp, ".") || !strcmp(comp, "..")) {
		if (!strcmp(comp, ".."))
			walk_up(w, FALSE);     /* ".." of the root is the root */
		return -2;
	}
	fd = openat(walk_cur(w), comp, last ? READ_FLAGS | O_NOFOLLOW : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !last) {
		g_array_append_val(w->dirs, fd);
		return -2;
	}
	if (fd >= 0)
		return fd;
	err = errno;
	if ((err == ELOOP || err == ENOTDIR) && walk_link(w, comp, *cursor)) {
		*cursor = w->rest;
		return -2;
	}
	errno = errno == EINVAL ? err : errno;     /* EINVAL: not a link after all */
	return -1;
}

int vt_fs_open_in_root_walk(int rootfd, const char *path, GError **error)
{
	Walk w = { rootfd, g_array_new(FALSE, FALSE, sizeof(int)), g_strdup(path), 0 };
	char *cursor = w.rest;
	int fd;

	while ((fd = walk_step(&w, &cursor)) == -2)
		;
	if (fd < 0)
		errno_error(error, errno, "cannot open", path);
	walk_up(&w, TRUE);
	g_array_free(w.dirs, TRUE);
	g_free(w.rest);
	return fd < 0 ? -1 : regular_or_close(fd, path, error);
}

int vt_fs_open_in_root(int rootfd, const char *path, GError **error)
{
#ifdef HAVE_OPENAT2
	struct open_how how = { .flags = READ_FLAGS, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };

	for (int tries = 0; tries < 3; tries++) {
		int fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));

		if (fd >= 0)
			return regular_or_close(fd, path, error);
		if (errno == ENOSYS)
			break;
		if (errno != EAGAIN && errno != EINTR) {      /* EAGAIN: a rename raced the lookup */
			errno_error(error, errno, "cannot open", path);
			return -1;
		}
	}
#endif
	return vt_fs_open_in_root_walk(rootfd, path, error);
}

/* --- bounded reads ------------------------------------------------------- */
char *vt_fs_format_size(guint64 n)
{
	if (n && !(n & ((1u << 20) - 1)))
		return g_strdup_printf("%" G_GUINT64_FORMAT " MiB", n >> 20);
	if (n && !(n & 1023))
		return g_strdup_printf("%" G_GUINT64_FORMAT " KiB", n >> 10);
	return g_strdup_printf("%" G_GUINT64_FORMAT " bytes", n);
}

GBytes *vt_fs_read_bounded(int fd, gsize max, const char *name, GError **error)
{
	GByteArray *buf = g_byte_array_new();
	guint8 chunk[16384];

	for (;;) {
		ssize_t k = read(fd, chunk, sizeof(chunk));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			errno_error(error, errno, "cannot read", name);
			break;
		}
		if (k == 0)
			return g_byte_array_free_to_bytes(buf);
		if ((gsize)k > max - buf->len) {
			g_autofree char *lim = vt_fs_format_size(max);

			g_set_error(error, VT_FS_ERROR, VT_FS_ERROR_TOO_BIG, "%s is larger than %s", name, lim);
			break;
		}
		g_byte_array_append(buf, chunk, (guint)k);
	}
	g_byte_array_free(buf, TRUE);
	return NULL;
}

GBytes *vt_fs_read_regular(const char *path, gsize max, GError **error)
{
	int fd = open(path, READ_FLAGS);
	GBytes *b;

	if (fd < 0) {
		errno_error(error, errno, "cannot open", path);
		return NULL;
	}
	if (regular_or_close(fd, path, error) < 0)
		return NULL;
	b = vt_fs_read_bounded(fd, max, path, error);
	close(fd);
	return b;
}

gboolean vt_fs_regular_or_absent(const char *path, gboolean missing_ok, GError **error)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		if (errno == ENOENT && missing_ok)
			return TRUE;
		errno_error(error, errno, "", path);
		return FALSE;
	}
	if (S_ISREG(st.st_mode))
		return TRUE;
	g_set_error(error, VT_FS_ERROR, VT_FS_ERROR_NOT_REGULAR, "%s is not a regular file (%s)", path,
		    kind(st.st_mode));
	return FALSE;
}
