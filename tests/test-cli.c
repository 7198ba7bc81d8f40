/* test-cli.c - the output layer: the JSON writer (layout, escaping, always
 * valid UTF-8, misuse refused), the table helper (alignment, growing
 * columns, notes), option values and JSON error objects. */
#include "config.h"

#include <string.h>

#include "src/cli/cli.h"
#include "src/cli/json.h"
#include "src/cli/progress.h"
#include "src/cli/table.h"

static char *json_of(void (*build)(VtJson *j))
{
	GString *s = g_string_new(NULL);
	VtJson *j = vt_json_new_string(s);

	build(j);
	vt_json_free(j);
	return g_string_free(s, FALSE);
}

static void build_nested(VtJson *j)
{
	vt_json_begin_object(j);
	vt_json_kv_string(j, "file", "a.data");
	vt_json_kv_uint(j, "queues", 2);
	vt_json_kv_int(j, "signed", -1410079562418);
	vt_json_kv_hex(j, "vmcs", 0x12340);
	vt_json_kv_bool(j, "ok", TRUE);
	vt_json_kv_null(j, "fix");
	vt_json_key(j, "ratio");
	vt_json_begin_array(j);
	vt_json_uint(j, 168);
	vt_json_uint(j, 2);
	vt_json_end_array(j);
	vt_json_key(j, "empty");
	vt_json_begin_array(j);
	vt_json_end_array(j);
	vt_json_key(j, "obj");
	vt_json_begin_object(j);
	vt_json_end_object(j);
	vt_json_kv_double(j, "mib", 1.25, 2);
	vt_json_kv_double(j, "nan", 0.0 / 0.0, 2);
	vt_json_end_object(j);
}

static void test_json_layout(void)
{
	g_autofree char *s = json_of(build_nested);

	g_assert_cmpstr(s, ==, "{\"file\": \"a.data\", \"queues\": 2, \"signed\": -1410079562418, \"vmcs\": \"0x12340\", "
			       "\"ok\": true, \"fix\": null, \"ratio\": [168, 2], \"empty\": [], \"obj\": {}, "
			       "\"mib\": 1.25, \"nan\": null}\n");
}

/* numbers at their limits, written without printf */
static void build_numbers(VtJson *j)
{
	vt_json_begin_array(j);
	vt_json_uint(j, 0);
	vt_json_uint(j, G_MAXUINT64);
	vt_json_int(j, 0);
	vt_json_int(j, G_MININT64);
	vt_json_int(j, G_MAXINT64);
	vt_json_hex(j, 0);
	vt_json_hex(j, G_MAXUINT64);
	vt_json_bool(j, FALSE);
	vt_json_end_array(j);
}

static void test_json_numbers(void)
{
	g_autofree char *s = json_of(build_numbers);

	g_assert_cmpstr(s, ==, "[0, 18446744073709551615, 0, -9223372036854775808, 9223372036854775807, \"0x0\", "
			       "\"0xffffffffffffffff\", false]\n");
}

static void test_json_escaping(void)
{
	GString *s = g_string_new(NULL);
	VtJson *j = vt_json_new_string(s);
	const char nul[] = { 'a', 0, 'b' };

	vt_json_begin_array(j);
	vt_json_string(j, "q\"b\\s\n\t\x01\x7f");
	vt_json_string(j, "CPU 0/KVM\xff");              /* invalid byte */
	vt_json_string(j, "\xc3\xa9t\xc3\xa9");          /* valid UTF-8 kept */
	vt_json_string(j, "trunc\xe2\x82");              /* truncated sequence */
	vt_json_string(j, "\xed\xa0\x80");               /* a surrogate is not UTF-8 */
	vt_json_string_len(j, nul, sizeof(nul));
	vt_json_string(j, NULL);
	vt_json_end_array(j);
	vt_json_free(j);
	g_assert_cmpstr(s->str, ==, "[\"q\\\"b\\\\s\\u000a\\u0009\\u0001\\u007f\", \"CPU 0/KVM\xef\xbf\xbd\", "
				    "\"\xc3\xa9t\xc3\xa9\", \"trunc\xef\xbf\xbd\xef\xbf\xbd\", "
				    "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\", \"a\\u0000b\", null]\n");
	g_assert_true(g_utf8_validate(s->str, -1, NULL));
	g_string_free(s, TRUE);
}

static void test_json_stream(void)
{
	GString *s = g_string_new(NULL);
	VtJson *j = vt_json_new_string(s);

	/* Top-level values are lines: a stream of records. */
	for (int i = 0; i < 3; i++) {
		vt_json_begin_object(j);
		vt_json_kv_int(j, "i", i);
		vt_json_end_object(j);
	}
	vt_json_free(j);
	g_assert_cmpstr(s->str, ==, "{\"i\": 0}\n{\"i\": 1}\n{\"i\": 2}\n");
	g_string_free(s, TRUE);
}

static void test_json_file(void)
{
	g_autofree char *path = NULL;
	g_autofree char *text = NULL;
	int fd = g_file_open_tmp("test-cli-XXXXXX", &path, NULL);
	FILE *f = fdopen(fd, "w");
	VtJson *j = vt_json_new(f);

	/* More than one internal buffer's worth. */
	vt_json_begin_array(j);
	for (int i = 0; i < 20000; i++)
		vt_json_string(j, "0123456789");
	vt_json_end_array(j);
	vt_json_free(j);
	fclose(f);
	g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
	g_assert_cmpuint(strlen(text), ==, 1 + 20000 * 12 + 19999 * 2 + 2);
	g_assert_true(g_str_has_suffix(text, "\"0123456789\"]\n"));
	unlink(path);
}

static void misuse_value_without_key(void)
{
	GString *s = g_string_new(NULL);
	VtJson *j = vt_json_new_string(s);

	vt_json_begin_object(j);
	vt_json_uint(j, 1);    /* no key: refused */
	vt_json_end_object(j);
	vt_json_free(j);
	g_string_free(s, TRUE);
}

static void test_json_misuse(void)
{
	if (g_test_subprocess()) {
		misuse_value_without_key();
		return;
	}
	g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
	g_test_trap_assert_failed();
	g_test_trap_assert_stderr("*CRITICAL*");
}

static char *table_text(VtTable *t, gboolean header)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	vt_table_print(t, f, header);
	fclose(f);
	return buf;
}

static void test_table(void)
{
	g_autoptr(VtTable) t = vt_table_new();
	g_autofree char *text = NULL, *expect = NULL;

	vt_table_add_column(t, "VMCS", 8, FALSE, 1);
	vt_table_add_column(t, "N", 4, TRUE, 1);
	vt_table_add_column(t, "STATUS", 0, FALSE, 2);
	vt_table_note(t, "lead line");
	vt_table_add_row(t);
	vt_table_cell(t, "0x%x", 0x12340);
	vt_table_cell(t, "%d", 15);
	vt_table_cell(t, "ok");
	vt_table_note(t, "  epoch 0");
	vt_table_add_row(t);
	vt_table_cell(t, "%s", "0x123456789");   /* wider than 8: the column grows */
	vt_table_cell(t, "%d", 7);
	vt_table_cell(t, "inconsistent");
	text = table_text(t, TRUE);
	expect = g_strdup("lead line\n"
			  "VMCS           N  STATUS\n"
			  "0x12340       15  ok\n"
			  "  epoch 0\n"
			  "0x123456789    7  inconsistent\n");
	g_assert_cmpstr(text, ==, expect);
}

static void test_table_utf8_width(void)
{
	g_autoptr(VtTable) t = vt_table_new();
	g_autofree char *text = NULL;

	vt_table_add_column(t, "A", 3, FALSE, 1);
	vt_table_add_column(t, "B", 0, FALSE, 1);
	vt_table_add_row(t);
	vt_table_cell(t, "\xc3\xa9");   /* one character, two bytes */
	vt_table_cell(t, "x");
	text = table_text(t, FALSE);
	g_assert_cmpstr(text, ==, "\xc3\xa9   x\n");
}

static void test_opt_values(void)
{
	guint64 v;
	g_autoptr(GError) err = NULL;

	g_assert_true(vt_parse_size("64M", &v) && v == 64ULL << 20);
	g_assert_true(vt_parse_size("4KiB", &v) && v == 4096);
	g_assert_false(vt_parse_size("-1", &v));
	g_assert_false(vt_parse_size("99999999999G", &v));
	g_assert_true(vt_parse_u64("0x10", &v) && v == 16);
	g_assert_false(vt_parse_u64(" 1", &v));
	g_assert_false(vt_parse_u64("", &v));
	g_assert_true(vt_opt_u64("--x", NULL, &v, &err));
	g_assert_false(vt_opt_size("--size", "12Q", &v, &err));
	g_assert_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE);
	g_assert_cmpstr(err->message, ==, "--size '12Q': expected a size in bytes, like 64M, 256K or 1G");
}

static void test_json_errors(void)
{
	char *av[] = { "correlate", "-n", "--format", "json", "x", NULL };

	if (g_test_subprocess()) {
		vt_cli_scan_json(5, av);
		vt_err("correlate", "x: cannot open: %s", "No such file or directory");
		vt_err("correlate", "second \xff");
		exit(vt_cli_finish(3));
	}
	g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
	g_test_trap_assert_failed();
	g_test_trap_assert_stderr("");
	g_test_trap_assert_stdout("{\"error\": \"vmtrace correlate: x: cannot open: No such file or directory\", "
				  "\"exit_status\": 3, \"messages\": [\"vmtrace correlate: x: cannot open: No such "
				  "file or directory\", \"vmtrace correlate: second \xef\xbf\xbd\"]}\n");
}

/* A progress line left open on stderr: the next message starts a line of
 * its own; a finished line, or none, adds no empty line. */
static void test_progress_line(void)
{
	if (g_test_subprocess()) {
		VtProgress p;

		vt_progress_init(&p, "script", TRUE, TRUE);
		vt_progress_show(&p, 512, 2048, FALSE);
		vt_warn("script", "a warning");
		vt_err("script", "an error");
		vt_progress_show(&p, 1024, 2048, FALSE);
		vt_progress_show(&p, 1024, 2048, TRUE);
		vt_err("script", "after the end");
		exit(0);
	}
	g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
	g_test_trap_assert_passed();
	g_test_trap_assert_stderr("\r[ vmtrace script:  25% of 2.0 KiB of trace, *s ]\n"
				  "vmtrace script: a warning\nvmtrace script: an error\n"
				  "\r[ vmtrace script:  50% of 2.0 KiB of trace, *s ]"
				  "\r[ vmtrace script: 100% of 2.0 KiB of trace, *s ]\n"
				  "vmtrace script: after the end\n");
}

static void test_json_error_never_ok(void)
{
	if (g_test_subprocess()) {
		vt_cli_set_json(TRUE);
		vt_err("synth", "cannot write");
		exit(vt_cli_finish(0));   /* an error was reported: not 0 */
	}
	g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
	g_test_trap_assert_failed();
	g_test_trap_assert_stdout("{\"error\": \"vmtrace synth: cannot write\", \"exit_status\": 1}\n");
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/json/layout", test_json_layout);
	g_test_add_func("/json/numbers", test_json_numbers);
	g_test_add_func("/json/escaping", test_json_escaping);
	g_test_add_func("/json/stream", test_json_stream);
	g_test_add_func("/json/file", test_json_file);
	g_test_add_func("/json/misuse", test_json_misuse);
	g_test_add_func("/json/errors", test_json_errors);
	g_test_add_func("/json/error-never-ok", test_json_error_never_ok);
	g_test_add_func("/table/align", test_table);
	g_test_add_func("/table/utf8-width", test_table_utf8_width);
	g_test_add_func("/cli/option-values", test_opt_values);
	g_test_add_func("/cli/progress-line", test_progress_line);
	return g_test_run();
}
