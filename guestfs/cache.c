/* cache.c - perf's kcore cache layout:
 *   CACHE/[kernel.kcore]/<build-id>/<YYYYmmddHHMMSShh>/{kcore,kallsyms,modules}
 * Snapshots are built in a temporary directory next to them
 * (src/fs/tempfile.h: removed on failure, exit and signals, and by the next
 * run if its process died) and renamed into place, so an interrupted fetch
 * leaves no half-written snapshot. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "guestfs/guestfs.h"
#include "src/fs/fs.h"
#include "src/fs/output.h"
#include "src/fs/tempfile.h"

static char *build_id_dir(const char *cache, const char *build_id)
{
	return g_build_filename(cache, "[kernel.kcore]", build_id, NULL);
}

/* A path of the cache trusted as far as it exists: CACHE itself (it may
 * be a link: the user chose it), then real directories only. */
static gboolean trusted_upto(const char *path, gboolean follow, GError **error)
{
	GError *e = NULL;

	if (vt_fs_check_trusted(path, follow, &e))
		return TRUE;
	if (g_error_matches(e, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
		g_error_free(e);
		return TRUE;
	}
	g_propagate_prefixed_error(error, e, "refusing the guest cache: ");
	return FALSE;
}

/* CACHE, CACHE/[kernel.kcore], CACHE/[kernel.kcore]/BUILD-ID: each one
 * that exists is the user's (or root's), writable by no one else, and
 * below CACHE not a symbolic link - or the snapshots in it could be
 * anyone's, and a link would make us write where someone else chose. */
static gboolean cache_trusted(const char *cache, const char *build_id, GError **error)
{
	g_autofree char *kc = g_build_filename(cache, "[kernel.kcore]", NULL);
	g_autofree char *bdir = build_id_dir(cache, build_id);

	return trusted_upto(cache, TRUE, error) && trusted_upto(kc, FALSE, error) && trusted_upto(bdir, FALSE, error);
}

/* A snapshot directory and its files: the same rules. */
static gboolean snapshot_trusted(const char *snap, GError **error)
{
	static const char *const names[] = { "kallsyms", "modules", "kcore" };

	if (!trusted_upto(snap, FALSE, error))
		return FALSE;
	for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
		g_autofree char *f = g_build_filename(snap, names[i], NULL);

		if (!trusted_upto(f, FALSE, error))
			return FALSE;
	}
	return TRUE;
}

/* Starts like an ELF file (a kcore of ours). */
static gboolean is_elf(const char *path)
{
	char magic[4];
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	gboolean ok = fd >= 0 && read(fd, magic, 4) == 4 && !memcmp(magic, "\177ELF", 4);

	if (fd >= 0)
		close(fd);
	return ok;
}

static gboolean same_file(const char *path, GBytes *want)
{
	g_autofree char *data = NULL;
	gsize len = 0;

	return g_file_get_contents(path, &data, &len, NULL) && len == g_bytes_get_size(want) &&
	       (!len || !memcmp(data, g_bytes_get_data(want, NULL), len));   /* empty GBytes: NULL data */
}

char *vt_guest_cache_find(const char *cache, const char *build_id, GBytes *kallsyms, GBytes *modules,
			  gboolean need_kcore, GError **error)
{
	g_autofree char *bdir = build_id_dir(cache, build_id);
	GDir *d;
	const char *name;
	char *found = NULL;

	if (!cache_trusted(cache, build_id, error))
		return NULL;
	if (!(d = g_dir_open(bdir, 0, NULL)))
		return NULL;
	vt_tempfile_remove_stale(bdir);      /* what killed runs left */
	while ((name = g_dir_read_name(d))) {     /* all of them: any untrusted one refuses */
		g_autofree char *snap = g_build_filename(bdir, name, NULL);
		g_autofree char *ks = g_build_filename(snap, "kallsyms", NULL);
		g_autofree char *mods = g_build_filename(snap, "modules", NULL);
		g_autofree char *kcore = g_build_filename(snap, "kcore", NULL);

		if (name[0] == '.' || strlen(name) != 16)     /* temporaries */
			continue;
		if (!snapshot_trusted(snap, error)) {
			g_clear_pointer(&found, g_free);
			break;
		}
		if (found)
			continue;
		/* a kcore that is not ELF (cut short, or not ours): not reused */
		if ((g_file_test(kcore, G_FILE_TEST_EXISTS) ? is_elf(kcore) : !need_kcore) && same_file(ks, kallsyms) &&
		    same_file(mods, modules))
			found = g_steal_pointer(&snap);
	}
	g_dir_close(d);
	return found;
}

VtTempfile *vt_guest_cache_tmpdir(const char *cache, const char *build_id, GError **error)
{
	g_autofree char *bdir = build_id_dir(cache, build_id);
	g_autofree char *target = g_build_filename(bdir, "snapshot", NULL);
	VtTempfile *t;

	if (!cache_trusted(cache, build_id, error))
		return NULL;
	if (g_mkdir_with_parents(bdir, 0755) < 0) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "cannot create %s: %s", bdir,
			    g_strerror(errno));
		return NULL;
	}
	if (!cache_trusted(cache, build_id, error))     /* what mkdir made (umask) */
		return NULL;
	/* .snapshot.vmtrace-tmp.PID.XXXXXX; those of dead runs go first */
	t = vt_tempfile_new_dir(target, 0700, error);
	if (!t)
		g_prefix_error(error, "cannot create a temporary snapshot: ");
	return t;
}

gboolean vt_guest_cache_write(const char *dir, const char *name, GBytes *data, GError **error)
{
	g_autofree char *path = g_build_filename(dir, name, NULL);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int err = 0;

	if (fd < 0) {
		err = errno;
	} else if (!vt_fs_write_all(fd, g_bytes_get_data(data, NULL), g_bytes_get_size(data), 0, path, error)) {
		close(fd);
		return FALSE;
	}
	if (!err && fsync(fd) < 0)
		err = errno;
	if (fd >= 0 && close(fd) < 0 && !err)
		err = errno;
	if (err)
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "cannot write %s: %s", path, g_strerror(err));
	return !err;
}

/* perf's timestamp: local time with centiseconds, YYYYmmddHHMMSShh. */
static char *timestamp(void)
{
	struct timeval tv;
	struct tm tm;
	char buf[32];

	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	strftime(buf, sizeof(buf), "%Y%m%d%H%M%S", &tm);
	return g_strdup_printf("%s%02u", buf, (unsigned)(tv.tv_usec / 10000));
}

char *vt_guest_cache_commit(VtTempfile *tmpdir, GError **error)
{
	g_autofree char *parent = g_path_get_dirname(vt_tempfile_path(tmpdir));

	for (int tries = 0; tries < 200; tries++) {
		g_autofree char *ts = timestamp();
		char *dest = g_build_filename(parent, ts, NULL);
		GError *e = NULL;

		if (vt_tempfile_rename(tmpdir, dest, TRUE, &e))
			return dest;
		g_free(dest);
		if (!g_error_matches(e, G_FILE_ERROR, G_FILE_ERROR_EXIST)) {
			g_propagate_error(error, e);
			return NULL;
		}
		g_error_free(e);
		g_usleep(10000);     /* same centisecond as an earlier snapshot */
	}
	g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "cannot find a free snapshot name in %s", parent);
	return NULL;
}
