/* textbuf.c - one large output buffer, numbers and padding without printf
 * (see textbuf.h). */
#include "config.h"

#include "src/cli/textbuf.h"

VtTextBuf *vt_textbuf_new(FILE *f, gsize cap)
{
	VtTextBuf *t = g_new0(VtTextBuf, 1);

	t->cap = MAX(cap, (gsize)VT_TEXTBUF_PIECE);
	t->buf = g_malloc(t->cap);
	t->f = f;
	return t;
}

void vt_textbuf_free(VtTextBuf *t)
{
	if (!t)
		return;
	vt_textbuf_flush(t);
	g_free(t->buf);
	g_free(t);
}

static void write_out(VtTextBuf *t)
{
	if (t->len && !t->failed && fwrite(t->buf, 1, t->len, t->f) != t->len)
		t->failed = TRUE;
	t->flushed += t->len;
	t->len = 0;
}

gboolean vt_textbuf_flush(VtTextBuf *t)
{
	write_out(t);
	if (!t->failed && fflush(t->f) != 0)
		t->failed = TRUE;
	return !t->failed;
}

gboolean vt_textbuf_failed(const VtTextBuf *t)
{
	return t->failed;
}

void vt_textbuf_make_room(VtTextBuf *t, gsize n)
{
	g_return_if_fail(n <= t->cap);
	if (t->cap - t->len < n)
		write_out(t);
}

void vt_textbuf_mem_long(VtTextBuf *t, const void *p, gsize n)
{
	const char *c = p;

	while (n) {
		gsize k = MIN(n, (gsize)VT_TEXTBUF_PIECE);

		memcpy(vt_textbuf_room(t, k), c, k);
		t->len += k;
		c += k;
		n -= k;
	}
}

void vt_textbuf_pad(VtTextBuf *t, gsize n)
{
	while (n) {
		gsize k = MIN(n, (gsize)VT_TEXTBUF_PIECE);

		memset(vt_textbuf_room(t, k), ' ', k);
		t->len += k;
		n -= k;
	}
}

void vt_textbuf_right(VtTextBuf *t, const char *s, gsize n, int width)
{
	if (width > 0 && (gsize)width > n)
		vt_textbuf_pad(t, (gsize)width - n);
	vt_textbuf_mem(t, s, n);
}

void vt_textbuf_left(VtTextBuf *t, const char *s, gsize n, int width)
{
	vt_textbuf_mem(t, s, n);
	if (width > 0 && (gsize)width > n)
		vt_textbuf_pad(t, (gsize)width - n);
}

gsize vt_textbuf_format_hex(char *buf, guint64 v)
{
	int digits = v ? (64 - __builtin_clzll(v) + 3) / 4 : 1;

	for (int i = digits - 1; i >= 0; i--) {
		buf[i] = "0123456789abcdef"[v & 15];
		v >>= 4;
	}
	return (gsize)digits;
}

void vt_textbuf_hex(VtTextBuf *t, guint64 v, int width)
{
	char buf[24];
	gsize n = vt_textbuf_format_hex(buf, v);

	vt_textbuf_right(t, buf, n, width);
}

void vt_textbuf_int(VtTextBuf *t, gint64 v, int width, char pad)
{
	char buf[24];
	guint64 u = v < 0 ? -(guint64)v : (guint64)v;
	int n = 0, sign = v < 0, fill = width - sign;

	do {
		buf[sizeof(buf) - 1 - n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	fill -= n;
	if (pad != '0' && fill > 0)
		vt_textbuf_pad(t, (gsize)fill);
	if (sign)
		vt_textbuf_c(t, '-');
	for (; pad == '0' && fill > 0; fill--)
		vt_textbuf_c(t, '0');
	vt_textbuf_mem(t, buf + sizeof(buf) - n, (gsize)n);
}
