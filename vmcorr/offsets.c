/* offsets.c - parse TSC offsets given on the command line.
 *
 * perf's grammar (--vm-time-correlation): [dry-run] [<off>[:<vmcs>[,<vmcs>]...]]...
 * Tokens are separated by spaces; numbers are C literals (0x hex, 0 octal,
 * decimal) as strtoull(..., 0) reads them.  A bare <off> is the default for
 * every VMCS not listed (and for "no VMCS seen"); the last one wins.  perf
 * loops forever on a token it cannot read; here any bad token is an error
 * that names it.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "vmcorr/vmcorr.h"

static gboolean parse_number(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !*s || !g_ascii_isdigit(*s))
		return FALSE;    /* no sign, no space: strtoull would accept them */
	errno = 0;
	*out = g_ascii_strtoull(s, &end, s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 :
					 s[0] == '0' && s[1] ? 8 : 10);
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && end == s + 2)
		return FALSE;
	return errno == 0 && *end == '\0';
}

static void set_offset(VmcorrOptions *opt, uint64_t vmcs, uint64_t off)
{
	if (!opt->offsets)
		opt->offsets = g_array_new(FALSE, FALSE, sizeof(VmcorrOffset));
	for (guint i = 0; i < opt->offsets->len; i++) {
		VmcorrOffset *o = &g_array_index(opt->offsets, VmcorrOffset, i);

		if (o->vmcs == vmcs) {
			o->offset = off;      /* perf: the later one wins */
			return;
		}
	}
	g_array_append_val(opt->offsets, ((VmcorrOffset){ vmcs, off }));
}

/* The VMCS list after the ':' of token `tok` into a new array (uint64_t),
 * or NULL with an error. */
static GArray *parse_vmcs_list(const char *tok, const char *list, GError **error)
{
	g_auto(GStrv) v = g_strsplit(list, ",", -1);
	g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	uint64_t vmcs;

	if (!v[0]) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_OFFSET,
			    "'%s': ':' must be followed by one or more VMCS, separated by ','", tok);
		return NULL;
	}
	for (guint i = 0; v[i]; i++) {
		if (!parse_number(v[i], &vmcs)) {
			g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_OFFSET,
				    "'%s': '%s' is not a VMCS (a number such as 0x12340, as `vmtrace "
				    "correlate --dry-run` prints it)", tok, v[i]);
			return NULL;
		}
		if (!vmcs || vmcs >= VMCORR_NO_VMCS) {
			g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_OFFSET,
				    "'%s': VMCS %s is out of range (1..0xfffffffffe: the 40-bit VMCS packet "
				    "payload)", tok, v[i]);
			return NULL;
		}
		g_array_append_val(out, vmcs);
	}
	return g_steal_pointer(&out);
}

/* One token: OFF or OFF:VMCS[,VMCS...]; nothing is set when it is refused. */
gboolean vmcorr_parse_offset_token(const char *tok, VmcorrOptions *opt, GError **error)
{
	g_auto(GStrv) parts = g_strsplit(tok, ":", 2);
	g_autoptr(GArray) vmcs = NULL;
	uint64_t off;

	if (!*tok) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_OFFSET,
			    "'': empty; expected OFF[:VMCS[,VMCS...]], e.g. 0xfffffe3c8291b532:0x12340");
		return FALSE;
	}
	if (!parse_number(parts[0], &off)) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_OFFSET,
			    "'%s': '%s' is not a TSC offset (a number such as 0xfffffe3c8291b532)", tok, parts[0]);
		return FALSE;
	}
	if (!parts[1]) {
		opt->have_default = TRUE;
		opt->default_offset = off;
		return TRUE;
	}
	vmcs = parse_vmcs_list(tok, parts[1], error);
	if (!vmcs)
		return FALSE;
	for (guint i = 0; i < vmcs->len; i++)
		set_offset(opt, g_array_index(vmcs, uint64_t, i), off);
	return TRUE;
}

gboolean vmcorr_parse_perf_arg(const char *arg, gboolean *dry_run, VmcorrOptions *opt, GError **error)
{
	g_auto(GStrv) toks = g_strsplit_set(arg, " \t", -1);
	guint i = 0;

	*dry_run = FALSE;
	while (toks[i] && !*toks[i])
		i++;
	if (toks[i] && !strcmp(toks[i], "dry-run")) {
		*dry_run = TRUE;
		i++;
	}
	for (; toks[i]; i++) {
		if (!*toks[i])
			continue;
		if (!strcmp(toks[i], "dry-run")) {
			g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_OFFSET,
				    "'dry-run' must come first in '%s'", arg);
			return FALSE;
		}
		if (!vmcorr_parse_offset_token(toks[i], opt, error))
			return FALSE;
	}
	return TRUE;
}

/* RATIO[/FRAC][:VMCS[,VMCS...]]; nothing is set when it is refused. */
gboolean vmcorr_parse_scale_token(const char *tok, VmcorrOptions *opt, GError **error)
{
	g_auto(GStrv) parts = g_strsplit(tok, ":", 2);
	g_auto(GStrv) rf = NULL;
	g_autoptr(GArray) vmcs = NULL;
	uint64_t ratio, frac = 48;

	if (!*tok) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_OFFSET,
			    "'': empty; expected RATIO[/FRAC_BITS][:VMCS[,VMCS...]], e.g. 0x1400000000000/48 for 1.25");
		return FALSE;
	}
	rf = g_strsplit(parts[0], "/", 2);
	if (!parse_number(rf[0], &ratio) || !ratio || (rf[1] && (!parse_number(rf[1], &frac) || frac > 63))) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_OFFSET,
			    "'%s': expected RATIO[/FRAC_BITS] with a non-zero ratio and at most 63 fraction bits "
			    "(e.g. 0x1400000000000/48 for 1.25, KVM's tsc-scaling-ratio)", tok);
		return FALSE;
	}
	if (parts[1] && !(vmcs = parse_vmcs_list(tok, parts[1], error)))
		return FALSE;
	if (!opt->scales)
		opt->scales = g_array_new(FALSE, FALSE, sizeof(VmcorrScale));
	if (!vmcs) {
		g_array_append_val(opt->scales, ((VmcorrScale){ 0, ratio, (guint)frac }));
		return TRUE;
	}
	for (guint i = 0; i < vmcs->len; i++)
		g_array_append_val(opt->scales, ((VmcorrScale){ g_array_index(vmcs, uint64_t, i), ratio, (guint)frac }));
	return TRUE;
}
