/* cli.c - helpers shared by the commands: messages, option values.
 * Linked into libvmtrace.a so tests and fuzzers can use them. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "src/cli/cli.h"

void vt_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "vmtrace %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

gboolean vt_parse_u64(const char *s, guint64 *out)
{
	char *end;
	int base = 10;

	if (!s || !*s || *s == '-' || *s == '+' || g_ascii_isspace(*s))
		return FALSE;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		base = 16;
	errno = 0;
	*out = g_ascii_strtoull(s, &end, base);
	return errno == 0 && end != s && *end == '\0';
}

gboolean vt_parse_size(const char *s, guint64 *out)
{
	char *end;
	guint64 v, mul = 1;

	if (!s || !g_ascii_isdigit(*s))
		return FALSE;
	errno = 0;
	v = g_ascii_strtoull(s, &end, 10);
	if (errno)
		return FALSE;
	switch (g_ascii_toupper(*end)) {
	case 'K': mul = 1ULL << 10; end++; break;
	case 'M': mul = 1ULL << 20; end++; break;
	case 'G': mul = 1ULL << 30; end++; break;
	case '\0': break;
	default: return FALSE;
	}
	if ((*end == 'i' || *end == 'I') && mul > 1)
		end++;
	if ((*end == 'b' || *end == 'B'))
		end++;
	if (*end || (v && mul > G_MAXUINT64 / v))
		return FALSE;
	*out = v * mul;
	return TRUE;
}

gboolean vt_opt_size(const char *opt, const char *val, guint64 *out, GError **error)
{
	if (!val || vt_parse_size(val, out))
		return TRUE;
	g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
		    "%s '%s': expected a size in bytes, like 64M, 256K or 1G", opt, val);
	return FALSE;
}

gboolean vt_opt_u64(const char *opt, const char *val, guint64 *out, GError **error)
{
	if (!val || vt_parse_u64(val, out))
		return TRUE;
	g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
		    "%s '%s': expected a number (decimal, or hex with 0x)", opt, val);
	return FALSE;
}

void vt_json_str(GString *out, const char *s)
{
	g_string_append_c(out, '"');
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			g_string_append_printf(out, "\\%c", c);
		else if (c < 0x20)
			g_string_append_printf(out, "\\u%04x", c);
		else
			g_string_append_c(out, c);
	}
	g_string_append_c(out, '"');
}

