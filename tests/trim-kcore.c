/* trim-kcore.c - test helper: DIR/full.core (written by tests/kernel-code.py)
 * -> DIR/kcore, cut down to the kernel text and module ranges of
 * DIR/kallsyms and DIR/modules by guestfs's trimmed-kcore writer, exactly
 * as `vmtrace guest fetch` cuts a guest's /proc/kcore.  DIR/full.core is
 * removed.  Usage: trim-kcore DIR */
#include "config.h"

#include <stdio.h>
#include <glib/gstdio.h>

#include <fcntl.h>
#include <unistd.h>

#include "guestfs/guestfs.h"

/* A VtGuestSource over plain files of one directory. */
typedef struct {
	VtGuestSource base;
	char *dir;
} DirSource;

static gboolean dir_pread(VtGuestSource *src, const char *path, guint64 offset, void *buf, gsize len, gsize *got,
			  GError **error)
{
	g_autofree char *full = g_build_filename(((DirSource *)src)->dir, path, NULL);
	int fd = open(full, O_RDONLY | O_CLOEXEC);
	ssize_t k = fd < 0 ? -1 : pread(fd, buf, len, (off_t)offset);

	if (fd >= 0)
		close(fd);
	if (k < 0) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "cannot read %s", full);
		return FALSE;
	}
	*got = (gsize)k;
	return TRUE;
}

static void dir_close(VtGuestSource *src)
{
	g_free(((DirSource *)src)->dir);
	g_free(src);
}

static const VtGuestSourceOps dir_ops = { NULL, dir_pread, NULL, dir_close, NULL };

int main(int argc, char **argv)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *ks_path = NULL, *mod_path = NULL, *out = NULL;
	g_autoptr(GBytes) ks = NULL, mods = NULL;
	VtGuestKallsyms k;
	VtGuestSource *src;
	GArray *ranges;
	guint64 copied = 0;
	gboolean ok;

	if (argc != 2) {
		fprintf(stderr, "usage: trim-kcore DIR\n");
		return 2;
	}
	ks_path = g_build_filename(argv[1], "kallsyms", NULL);
	mod_path = g_build_filename(argv[1], "modules", NULL);
	out = g_build_filename(argv[1], "kcore", NULL);
	{
		char *t = NULL, *m = NULL;
		gsize tl, ml;

		if (!g_file_get_contents(ks_path, &t, &tl, &err) || !g_file_get_contents(mod_path, &m, &ml, &err)) {
			fprintf(stderr, "trim-kcore: %s\n", err->message);
			return 1;
		}
		ks = g_bytes_new_take(t, tl);
		mods = g_bytes_new_take(m, ml);
	}
	if (!vt_guest_kallsyms_parse(ks, mods, &k, &err)) {
		fprintf(stderr, "trim-kcore: %s\n", err->message);
		return 1;
	}
	ranges = vt_guest_kallsyms_ranges(&k);
	{
		DirSource *d = g_new0(DirSource, 1);

		d->base.ops = &dir_ops;
		d->base.description = NULL;
		d->dir = g_strdup(argv[1]);
		src = &d->base;
	}
	g_unlink(out);
	ok = src && vt_guest_kcore_copy(src, "full.core", ranges, out, NULL, &copied, &err);
	if (src)
		vt_guest_source_close(src);
	g_array_free(ranges, TRUE);
	vt_guest_kallsyms_clear(&k);
	if (!ok) {
		fprintf(stderr, "trim-kcore: %s\n", err->message);
		return 1;
	}
	g_autofree char *full = g_build_filename(argv[1], "full.core", NULL);
	g_unlink(full);
	return 0;
}
