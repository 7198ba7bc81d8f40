/* main.c - vmtrace command dispatcher. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <intel-pt.h>

#include "vmtrace.h"

static const struct {
	const char *name;
	vt_cmd_fn fn;
	const char *summary;
} commands[] = {
	{ "check", cmd_check, "is this host (and a libvirt domain) ready for host Intel PT tracing of guests?" },
	{ "correlate", cmd_correlate, "find each VMCS's TSC offset in a host Intel PT trace and correct guest TSC packets" },
	{ "guest", cmd_guest, "copy a guest's kallsyms, modules and kcore (perf's cache); check the guest" },
	{ "record", cmd_record, "trace a libvirt domain's vCPU threads with Intel PT into a perf.data directory" },
	{ "synth", cmd_synth, "write a synthetic host Intel PT perf.data of a KVM guest + ground truth" },
};

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

static void usage(FILE *f)
{
	fprintf(f, "Usage: vmtrace COMMAND [OPTIONS] [ARGS]\n\n"
		   "Trace KVM guests from the host with Intel Processor Trace.\n\nCommands:\n");
	for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n  vmtrace COMMAND --help    options of a command\n"
		   "  vmtrace --version         versions of vmtrace and libipt\n\n"
		   "Exit status: 0 ok, 1 failure, 2 usage error, 3 bad input file; correlate adds\n"
		   "4 (no time information), 5 (VMCS undetermined/inconsistent), 6 (no VMCS found),\n"
		   "7 (already corrected), 8 (a VMCS given with --offset is not in the trace).\n"
		   "guest adds 9/10 (SSH host key unknown/changed: refused), 11 (authentication),\n"
		   "12 (cannot connect), 13 (guest symbols changed during the copy).\n"
		   "record adds 14 (no Intel PT on this machine: see vmtrace check).\n"
		   "See vmtrace(1).\n");
}

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2) {
		usage(stderr);
		return VT_EXIT_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		usage(stdout);
		return VT_EXIT_OK;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
		struct pt_version v = pt_library_version();

		printf("vmtrace %s (libipt %u.%u.%u)\n", PACKAGE_VERSION, v.major, v.minor, v.patch);
		return VT_EXIT_OK;
	}
	for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
		if (!strcmp(cmd, commands[i].name)) {
			g_autofree char *prg = g_strdup_printf("vmtrace %s", cmd);

			g_set_prgname(prg);      /* "Usage: vmtrace correlate ..." */
			return commands[i].fn(argc - 1, argv + 1);
		}
	fprintf(stderr, "vmtrace: unknown command '%s'\n\n", cmd);
	usage(stderr);
	return VT_EXIT_USAGE;
}
