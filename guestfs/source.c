/* source.c - the source interface, and the build-id of /sys/kernel/notes. */
#include "config.h"

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

GBytes *vt_guest_source_read_file(VtGuestSource *src, const char *path, GError **error)
{
	return src->ops->read_file(src, path, error);
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

char *vt_guest_bytes_dup(GBytes *b)
{
	gsize len = 0;
	const char *p = b ? g_bytes_get_data(b, &len) : NULL;

	return g_strndup(len ? p : "", len);
}

/* ELF notes: namesz, descsz, type (4 bytes each), name and desc padded to 4. */
char *vt_guest_build_id_parse(const guint8 *notes, gsize len, GError **error)
{
	gsize off = 0;

	while (len - off >= 12) {
		guint32 namesz, descsz, type;
		gsize name_off, desc_off, next;

		memcpy(&namesz, notes + off, 4);
		memcpy(&descsz, notes + off + 4, 4);
		memcpy(&type, notes + off + 8, 4);
		name_off = off + 12;
		if (namesz > len || descsz > len)
			break;
		desc_off = name_off + ((namesz + 3u) & ~3u);
		next = desc_off + ((descsz + 3u) & ~3u);
		if (desc_off > len || next > len + 3 || desc_off + descsz > len)
			break;
		if (type == 3 /* NT_GNU_BUILD_ID */ && namesz == 4 && !memcmp(notes + name_off, "GNU", 4) && descsz &&
		    descsz <= 64) {
			GString *s = g_string_new(NULL);

			for (guint32 i = 0; i < descsz; i++)
				g_string_append_printf(s, "%02x", notes[desc_off + i]);
			return g_string_free(s, FALSE);
		}
		off = next;
	}
	g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA,
		    "no GNU build-id note in /sys/kernel/notes (%zu bytes)", len);
	return NULL;
}
