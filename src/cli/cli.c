/* cli.c - helpers shared by the commands: messages, option values.
 * Linked into libvmtrace.a so tests and fuzzers can use them. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "src/cli/cli.h"
#include "src/cli/json.h"

/* Under --json errors are kept and printed as one JSON object at the end. */
static gboolean json_errors;
static GPtrArray *error_messages;

void vt_cli_set_json(gboolean on)
{
	json_errors = on;
}

gboolean vt_cli_json(void)
{
	return json_errors;
}

void vt_cli_scan_json(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-j") || !strcmp(argv[i], "--format=json") ||
		    (!strcmp(argv[i], "--format") && i + 1 < argc && !strcmp(argv[i + 1], "json")))
			json_errors = TRUE;
}

/* A progress line (progress.c) is open on stderr: a message starts a line
 * of its own after it. */
static gint line_open;

void vt_cli_line_open(gboolean open)
{
	g_atomic_int_set(&line_open, open);
}

static void line_close(void)
{
	if (g_atomic_int_compare_and_exchange(&line_open, TRUE, FALSE))
		fputc('\n', stderr);
}

void vt_cli_line_end(void)
{
	line_close();
}

void vt_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *msg = NULL;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	if (json_errors) {
		if (!error_messages)
			error_messages = g_ptr_array_new_with_free_func(g_free);
		g_ptr_array_add(error_messages, g_strdup_printf("vmtrace %s: %s", cmd, msg));
		return;
	}
	line_close();
	fprintf(stderr, "vmtrace %s: %s\n", cmd, msg);
}

gboolean vt_cli_parse(const char *param, const char *summary, const char *description, const GOptionEntry *entries,
		      int *argc, char ***argv, GError **error)
{
	GOptionContext *ctx = g_option_context_new(param);
	gboolean ok;

	g_option_context_set_summary(ctx, summary);
	g_option_context_set_description(ctx, description);
	g_option_context_add_main_entries(ctx, entries, NULL);
	ok = g_option_context_parse(ctx, argc, argv, error);
	g_option_context_free(ctx);
	return ok;
}

void vt_warn(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *msg = NULL;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	line_close();
	fprintf(stderr, "vmtrace %s: %s\n", cmd, msg);
}

int vt_cli_close_stdout(const char *cmd, int rc)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return rc;
	json_errors = FALSE;   /* stdout is what failed: say it on stderr */
	vt_err(cmd, "cannot write standard output: %s", g_strerror(errno ? errno : EIO));
	return rc == VT_EXIT_OK ? VT_EXIT_FAILURE : rc;
}

int vt_cli_finish(int rc)
{
	g_autoptr(VtJson) j = NULL;

	if (!error_messages || !error_messages->len) {
		g_clear_pointer(&error_messages, g_ptr_array_unref);
		return rc;
	}
	if (rc == VT_EXIT_OK)
		rc = VT_EXIT_FAILURE;   /* an error was reported: never claim success */
	j = vt_json_new(stdout);
	vt_json_begin_object(j);
	vt_json_kv_string(j, "error", g_ptr_array_index(error_messages, 0));
	vt_json_kv_int(j, "exit_status", rc);
	if (error_messages->len > 1) {
		vt_json_key(j, "messages");
		vt_json_begin_array(j);
		for (guint i = 0; i < error_messages->len; i++)
			vt_json_string(j, g_ptr_array_index(error_messages, i));
		vt_json_end_array(j);
	}
	vt_json_end_object(j);
	g_clear_pointer(&error_messages, g_ptr_array_unref);
	return rc;
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
