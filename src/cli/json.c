/* json.c - the streaming JSON writer (see json.h). */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "src/cli/json.h"

typedef struct {
	gboolean object;   /* object or array */
	guint members;     /* values written at this level */
	gboolean key_done; /* object: a key is waiting for its value */
} Level;

struct VtJson {
	FILE *f;
	GString *s;
	GString *buf;      /* for FILE output: one fwrite per top-level chunk */
	GArray *stack;     /* Level */
};

static VtJson *json_new(FILE *f, GString *s)
{
	VtJson *j = g_new0(VtJson, 1);

	j->f = f;
	j->s = s;
	j->buf = f ? g_string_sized_new(4096) : NULL;
	j->stack = g_array_new(FALSE, FALSE, sizeof(Level));
	return j;
}

VtJson *vt_json_new(FILE *f)
{
	g_return_val_if_fail(f, NULL);
	return json_new(f, NULL);
}

VtJson *vt_json_new_string(GString *s)
{
	g_return_val_if_fail(s, NULL);
	return json_new(NULL, s);
}

static GString *out(VtJson *j)
{
	return j->f ? j->buf : j->s;
}

static void flush(VtJson *j, gboolean force)
{
	if (!j->f || (!force && j->buf->len < 65536))
		return;
	if (j->buf->len)
		fwrite(j->buf->str, 1, j->buf->len, j->f);
	g_string_truncate(j->buf, 0);
}

void vt_json_free(VtJson *j)
{
	if (!j)
		return;
	g_warn_if_fail(j->stack->len == 0);
	flush(j, TRUE);
	if (j->buf)
		g_string_free(j->buf, TRUE);
	g_array_free(j->stack, TRUE);
	g_free(j);
}

static Level *top(VtJson *j)
{
	return j->stack->len ? &g_array_index(j->stack, Level, j->stack->len - 1) : NULL;
}

/* Before a value: the separator, and check that a value may come here. */
static gboolean value_start(VtJson *j)
{
	Level *l = top(j);

	if (!l)
		return TRUE;
	if (l->object) {
		g_return_val_if_fail(l->key_done, FALSE);
		l->key_done = FALSE;
	} else if (l->members) {
		g_string_append(out(j), ", ");
	}
	l->members++;
	return TRUE;
}

/* After a complete value: a top-level value ends its line. */
static void value_end(VtJson *j)
{
	if (j->stack->len == 0) {
		g_string_append_c(out(j), '\n');
		flush(j, TRUE);
	} else {
		flush(j, FALSE);
	}
}

static void open_level(VtJson *j, gboolean object)
{
	Level l = { object, 0, FALSE };

	if (!value_start(j))
		return;
	g_string_append_c(out(j), object ? '{' : '[');
	g_array_append_val(j->stack, l);
}

static void close_level(VtJson *j, gboolean object)
{
	Level *l = top(j);

	g_return_if_fail(l && l->object == object && !l->key_done);
	g_array_set_size(j->stack, j->stack->len - 1);
	g_string_append_c(out(j), object ? '}' : ']');
	value_end(j);
}

void vt_json_begin_object(VtJson *j)
{
	open_level(j, TRUE);
}

void vt_json_end_object(VtJson *j)
{
	close_level(j, TRUE);
}

void vt_json_begin_array(VtJson *j)
{
	open_level(j, FALSE);
}

void vt_json_end_array(VtJson *j)
{
	close_level(j, FALSE);
}

void vt_json_key(VtJson *j, const char *key)
{
	Level *l = top(j);

	g_return_if_fail(l && l->object && !l->key_done);
	if (l->members)
		g_string_append(out(j), ", ");
	vt_json_quote(out(j), key, -1);
	g_string_append(out(j), ": ");
	l->key_done = TRUE;
}

/* Escape one valid UTF-8 run. */
static void quote_valid(GString *o, const char *s, gsize len)
{
	static const char hex[] = "0123456789abcdef";

	for (gsize i = 0; i < len; i++) {
		unsigned char c = s[i];

		switch (c) {
		case '"': g_string_append(o, "\\\""); break;
		case '\\': g_string_append(o, "\\\\"); break;
		default:
			if (c < 0x20 || c == 0x7f) {
				g_string_append(o, "\\u00");
				g_string_append_c(o, hex[c >> 4]);
				g_string_append_c(o, hex[c & 15]);
			} else {
				g_string_append_c(o, c);
			}
		}
	}
}

void vt_json_quote(GString *o, const char *s, gssize slen)
{
	gsize len = slen < 0 ? strlen(s) : (gsize)slen;
	const char *end;

	g_string_append_c(o, '"');
	/* Valid runs are copied (escaped); each invalid byte is U+FFFD.  NUL
	 * bytes inside a counted string are escaped like other controls. */
	while (len) {
		gsize run;

		g_utf8_validate_len(s, len, &end);
		run = (gsize)(end - s);
		quote_valid(o, s, run);
		s += run;
		len -= run;
		if (!len)
			break;
		if (*s == '\0') {
			g_string_append(o, "\\u0000");
		} else {
			g_string_append(o, "\xef\xbf\xbd");
		}
		s++;
		len--;
	}
	g_string_append_c(o, '"');
}

void vt_json_string_len(VtJson *j, const char *s, gsize len)
{
	if (!value_start(j))
		return;
	vt_json_quote(out(j), s, (gssize)len);
	value_end(j);
}

void vt_json_string(VtJson *j, const char *s)
{
	if (!s) {
		vt_json_null(j);
		return;
	}
	vt_json_string_len(j, s, strlen(s));
}

void vt_json_printf(VtJson *j, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *s = NULL;

	va_start(ap, fmt);
	s = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	vt_json_string(j, s);
}

static void raw(VtJson *j, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void raw(VtJson *j, const char *fmt, ...)
{
	va_list ap;

	if (!value_start(j))
		return;
	va_start(ap, fmt);
	g_string_append_vprintf(out(j), fmt, ap);
	va_end(ap);
	value_end(j);
}

/* A value's text as it is (numbers, literals: no printf - report writes
 * hundreds of thousands of them). */
static void raw_len(VtJson *j, const char *s, gsize len)
{
	if (!value_start(j))
		return;
	g_string_append_len(out(j), s, (gssize)len);
	value_end(j);
}

/* v's digits in base `base` (10, 16), ending at end: where they start */
static char *digits(char *end, guint64 v, guint base)
{
	do {
		*--end = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	return end;
}

void vt_json_uint(VtJson *j, guint64 v)
{
	char buf[24], *p = digits(buf + sizeof(buf), v, 10);

	raw_len(j, p, (gsize)(buf + sizeof(buf) - p));
}

void vt_json_int(VtJson *j, gint64 v)
{
	char buf[24], *p = digits(buf + sizeof(buf), v < 0 ? -(guint64)v : (guint64)v, 10);

	if (v < 0)
		*--p = '-';
	raw_len(j, p, (gsize)(buf + sizeof(buf) - p));
}

void vt_json_double(VtJson *j, double v, int decimals)
{
	if (!isfinite(v))
		raw(j, "null");
	else
		raw(j, "%.*f", decimals, v);
}

void vt_json_bool(VtJson *j, gboolean v)
{
	raw_len(j, v ? "true" : "false", v ? 4 : 5);
}

void vt_json_null(VtJson *j)
{
	raw_len(j, "null", 4);
}

void vt_json_hex(VtJson *j, guint64 v)
{
	char buf[24], *p = buf + sizeof(buf);

	*--p = '"';
	p = digits(p, v, 16);
	*--p = 'x';
	*--p = '0';
	*--p = '"';
	raw_len(j, p, (gsize)(buf + sizeof(buf) - p));
}

void vt_json_kv_string(VtJson *j, const char *key, const char *s)
{
	vt_json_key(j, key);
	vt_json_string(j, s);
}

void vt_json_kv_uint(VtJson *j, const char *key, guint64 v)
{
	vt_json_key(j, key);
	vt_json_uint(j, v);
}

void vt_json_kv_int(VtJson *j, const char *key, gint64 v)
{
	vt_json_key(j, key);
	vt_json_int(j, v);
}

void vt_json_kv_double(VtJson *j, const char *key, double v, int decimals)
{
	vt_json_key(j, key);
	vt_json_double(j, v, decimals);
}

void vt_json_kv_bool(VtJson *j, const char *key, gboolean v)
{
	vt_json_key(j, key);
	vt_json_bool(j, v);
}

void vt_json_kv_hex(VtJson *j, const char *key, guint64 v)
{
	vt_json_key(j, key);
	vt_json_hex(j, v);
}

void vt_json_kv_null(VtJson *j, const char *key)
{
	vt_json_key(j, key);
	vt_json_null(j);
}
