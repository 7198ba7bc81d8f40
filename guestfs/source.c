/* source.c - the source interface, and the build-id of /sys/kernel/notes. */
#include "config.h"

#include <elf.h>
#include <string.h>

#include "guestfs/guestfs.h"

G_DEFINE_QUARK(vt-guest-error-quark, vt_guest_error)

void vt_guest_source_close(VtGuestSource *src)
{
	if (!src)
		return;
	g_free(src->description);
	src->ops->close(src);
}

const char *vt_guest_source_describe(const VtGuestSource *src)
{
	return src->description;
}

GBytes *vt_guest_source_read_file(VtGuestSource *src, const char *path, gsize max, GError **error)
{
	return src->ops->read_file(src, path, max, error);
}

gboolean vt_guest_source_pread(VtGuestSource *src, const char *path, guint64 offset, void *buf, gsize len,
			       gsize *got, GError **error)
{
	return src->ops->pread(src, path, offset, buf, len, got, error);
}

gint64 vt_guest_source_uid(VtGuestSource *src)
{
	return src->ops->uid(src);
}

gboolean vt_guest_source_run(VtGuestSource *src, const char *command, gsize max, GBytes **out, int *status,
			     GError **error)
{
	if (!src->ops->run) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "%s cannot run commands in the guest (SSH can)",
			    vt_guest_source_describe(src));
		return FALSE;
	}
	return src->ops->run(src, command, max, out, status, error);
}

gboolean vt_guest_source_can_run(const VtGuestSource *src)
{
	return src->ops->run != NULL;
}

char *vt_guest_bytes_dup(GBytes *b)
{
	gsize len = 0;
	const char *p = b ? g_bytes_get_data(b, &len) : NULL;

	return g_strndup(len ? p : "", len);
}

char *vt_guest_bytes_text(GBytes *b)
{
	char *s = g_strstrip(vt_guest_bytes_dup(b));

	for (const char *p = s; *p; p++) {
		if (*p < 0x20 || *p > 0x7e) {
			g_free(s);
			return NULL;
		}
	}
	return s;
}

/* 4-byte alignment of note names and descriptors, in 64 bits (no wrap). */
static gsize note_pad(guint32 n)
{
	return ((gsize)n + 3) & ~(gsize)3;
}

static char *hex(const guint8 *p, gsize n)
{
	GString *s = g_string_sized_new(2 * n);

	for (gsize i = 0; i < n; i++)
		g_string_append_printf(s, "%02x", p[i]);
	return g_string_free(s, FALSE);
}

/* ELF notes: an Elf64_Nhdr, the name and the descriptor, each padded to 4
 * bytes (the last descriptor's padding may be missing).  Every size comes
 * from the guest: each step is checked against what is left. */
char *vt_guest_build_id_parse(const guint8 *notes, gsize len, GError **error)
{
	gsize off = 0;

	while (len - off >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr nh;
		gsize left;

		memcpy(&nh, notes + off, sizeof(nh));
		off += sizeof(nh);
		left = len - off;
		if (note_pad(nh.n_namesz) > left || nh.n_descsz > left - note_pad(nh.n_namesz)) {
			g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA,
				    "/sys/kernel/notes: the note at offset %zu is truncated (%zu bytes)",
				    off - sizeof(nh), len);
			return NULL;
		}
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == sizeof(ELF_NOTE_GNU) &&
		    !memcmp(notes + off, ELF_NOTE_GNU, sizeof(ELF_NOTE_GNU)) && nh.n_descsz && nh.n_descsz <= 64)
			return hex(notes + off + note_pad(nh.n_namesz), nh.n_descsz);
		off += note_pad(nh.n_namesz);
		off += MIN(note_pad(nh.n_descsz), len - off);
	}
	g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA,
		    "no GNU build-id note in /sys/kernel/notes (%zu bytes)", len);
	return NULL;
}
