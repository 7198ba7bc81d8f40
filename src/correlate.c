/* correlate.c - `vmtrace correlate`: find each VMCS's TSC offset. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "vmcorr/vmcorr.h"
#include "vmtrace.h"

static int exit_code_for(const GError *e)
{
	if (e->domain == VMCORR_ERROR && e->code == VMCORR_ERROR_NO_TIME)
		return VT_EXIT_NO_TIME;
	if (e->domain == VT_PERF_ERROR && e->code == VT_PERF_ERROR_IO)
		return VT_EXIT_BAD_INPUT;
	return VT_EXIT_BAD_INPUT;
}

static char *vcpu_str(const VmcorrVmcs *m)
{
	if (m->vcpu >= 0)
		return g_strdup_printf("%d (tid %u)", m->vcpu, m->tid);
	if (m->tid)
		return g_strdup_printf("? (tid %u)", m->tid);
	return g_strdup("?");
}

static void print_table(const char *path, const VmcorrResult *r)
{
	printf("%s: %u %s AUX queue%s, %.1f MiB, TSC:CTC %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT
	       ", MTC period %u, %" G_GUINT64_FORMAT " TSC packets (%" G_GUINT64_FORMAT " guest)\n",
	       path, r->nqueues, r->per_cpu ? "per-CPU" : "per-thread", r->nqueues == 1 ? "" : "s",
	       r->aux_bytes / 1048576.0, r->tsc_ctc_n, r->tsc_ctc_d, r->mtc_period, r->n_tsc, r->n_guest_tsc);
	printf("%-14s %-16s %-20s %10s %8s  %s\n", "VMCS", "VCPU", "TSC-OFFSET", "GUEST-TSC", "SPREAD", "STATUS");
	for (guint i = 0; i < r->vmcs->len; i++) {
		const VmcorrVmcs *m = &g_array_index(r->vmcs, VmcorrVmcs, i);
		g_autofree char *v = vcpu_str(m);
		g_autofree char *off = m->offset ? g_strdup_printf("%#018" G_GINT64_MODIFIER "x", m->offset)
						 : g_strdup("unknown");

		printf("%#-14" G_GINT64_MODIFIER "x %-16s %-20s %10" G_GUINT64_FORMAT " %8" G_GINT64_FORMAT "  %s\n",
		       m->vmcs, v, off, m->n_guest_tsc, m->spread, vmcorr_status_name(m->status));
	}
	if (!r->vmcs->len)
		printf("(no VMCS found: the trace shows no guest activity)\n");
}

static void print_json(const char *path, const VmcorrResult *r)
{
	GString *s = g_string_new("{\"file\": ");

	vt_json_str(s, path);
	g_string_append_printf(s, ", \"queues\": %u, \"mode\": \"%s\", \"aux_bytes\": %" G_GUINT64_FORMAT
			       ", \"tsc_ctc_ratio\": [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "], \"mtc_period\": %u"
			       ", \"tsc_packets\": %" G_GUINT64_FORMAT ", \"guest_tsc_packets\": %" G_GUINT64_FORMAT
			       ", \"host_tsc_packets\": %" G_GUINT64_FORMAT ", \"bad_packets\": %" G_GUINT64_FORMAT
			       ", \"tolerance\": %" G_GUINT64_FORMAT ", \"vmcs\": [",
			       r->nqueues, r->per_cpu ? "per-cpu" : "per-thread", r->aux_bytes, r->tsc_ctc_n, r->tsc_ctc_d,
			       r->mtc_period, r->n_tsc, r->n_guest_tsc, r->n_host_tsc, r->n_bad_packets, r->tolerance);
	for (guint i = 0; i < r->vmcs->len; i++) {
		const VmcorrVmcs *m = &g_array_index(r->vmcs, VmcorrVmcs, i);

		g_string_append_printf(s, "%s{\"vmcs\": \"%#" G_GINT64_MODIFIER "x\", ", i ? ", " : "", m->vmcs);
		if (m->vcpu >= 0)
			g_string_append_printf(s, "\"vcpu\": %d, ", m->vcpu);
		else
			g_string_append(s, "\"vcpu\": null, ");
		if (m->tid)
			g_string_append_printf(s, "\"pid\": %u, \"tid\": %u, ", m->pid, m->tid);
		if (m->offset)
			g_string_append_printf(s, "\"tsc_offset\": \"%#" G_GINT64_MODIFIER "x\", \"tsc_offset_signed\": %"
					       G_GINT64_FORMAT ", ", m->offset, (gint64)m->offset);
		else
			g_string_append(s, "\"tsc_offset\": null, ");
		g_string_append_printf(s, "\"reliable\": %s, \"guest_tsc_packets\": %" G_GUINT64_FORMAT
				       ", \"estimates\": %" G_GUINT64_FORMAT ", \"spread\": %" G_GINT64_FORMAT
				       ", \"status\": \"%s\"}",
				       m->reliable ? "true" : "false", m->n_guest_tsc, m->n_est, m->spread,
				       vmcorr_status_name(m->status));
	}
	g_string_append(s, "], \"perf_lines\": [");
	for (guint i = 0; i < r->perf_lines->len; i++) {
		if (i)
			g_string_append(s, ", ");
		vt_json_str(s, r->perf_lines->pdata[i]);
	}
	g_string_append(s, "], \"perf_errors\": [");
	for (guint i = 0; i < r->perf_errors->len; i++) {
		if (i)
			g_string_append(s, ", ");
		vt_json_str(s, r->perf_errors->pdata[i]);
	}
	g_string_append(s, "]}\n");
	fputs(s->str, stdout);
	g_string_free(s, TRUE);
}

int cmd_correlate(int argc, char **argv)
{
	gboolean dry_run = FALSE, json = FALSE, verbose = FALSE;
	char *format = NULL;
	gint jobs = 0;
	char *tolerance = NULL;
	GError *err = NULL;
	VmcorrOptions opt;
	VmcorrResult *r = NULL;
	int rc = VT_EXIT_USAGE;
	GOptionEntry entries[] = {
		{ "dry-run", 'n', 0, G_OPTION_ARG_NONE, &dry_run, "Only find and report the offsets; change nothing", NULL },
		{ "format", 'f', 0, G_OPTION_ARG_STRING, &format, "Output: table (default), perf (perf inject's lines), json", "FMT" },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &json, "Same as --format=json", NULL },
		{ "jobs", 'J', 0, G_OPTION_ARG_INT, &jobs, "Decode N AUX queues in parallel (default: number of CPUs)", "N" },
		{ "tolerance", 0, 0, G_OPTION_ARG_STRING, &tolerance, "Largest spread (TSC ticks) of a VMCS's estimates still called consistent (default: 2 CTC ticks)", "TICKS" },
		{ "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, "Also print the ERROR lines perf would print, on stderr", NULL },
		G_OPTION_ENTRY_NULL
	};
	GOptionContext *ctx = g_option_context_new("--dry-run FILE - find each VMCS's TSC offset");
	const char *path;

	g_option_context_set_summary(ctx,
		"Reads a host Intel PT recording of KVM guests (perf.data file or directory)\n"
		"and finds, for every VMCS (one per vCPU), the VMX TSC offset that the guest's\n"
		"TSC packets carry: each guest TSC packet is compared with the host time that\n"
		"the MTC/TMA packets (driven by the crystal clock, which VMX does not offset)\n"
		"predict.  The decisions follow perf's `perf inject --vm-time-correlation`,\n"
		"so --format=perf prints exactly perf's lines.\n\n"
		"TSC packets have 7 bytes: offsets are reported as the 56-bit difference\n"
		"sign-extended to 64 bits, as perf does; the top byte of the real VMX\n"
		"TSC_OFFSET cannot be seen in the trace and does not matter for correction.");
	g_option_context_set_description(ctx,
		"Output columns: VMCS (VMCS packet payload), VCPU (from the QEMU thread\n"
		"name \"CPU n/KVM\"), TSC-OFFSET, GUEST-TSC (guest TSC packets), SPREAD\n"
		"(max-min of the per-packet estimates, TSC ticks), STATUS (ok, undetermined,\n"
		"inconsistent).\n\n"
		"Exit status: 0 every VMCS has a consistent offset; 2 usage error; 3 bad input\n"
		"file; 4 no time information (recorded with tsc=0 or mtc=0: decode it timeless,\n"
		"per thread, instead); 5 some VMCS undetermined or inconsistent; 6 no VMCS found.\n\n"
		"Examples:\n"
		"  vmtrace correlate --dry-run perf.data.kvm\n"
		"  vmtrace correlate --dry-run --format=perf perf.data.kvm\n"
		"  vmtrace correlate --dry-run --json perf.data.kvm | jq '.vmcs[].tsc_offset'\n");
	g_option_context_add_main_entries(ctx, entries, NULL);
	if (!g_option_context_parse(ctx, &argc, &argv, &err))
		goto usage_err;
	if (argc != 2) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    argc < 2 ? "missing FILE" : "only one FILE is accepted");
		goto usage_err;
	}
	path = argv[1];
	if (json) {
		g_free(format);
		format = g_strdup("json");
	}
	if (format && strcmp(format, "table") && strcmp(format, "perf") && strcmp(format, "json")) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "--format '%s': expected table, perf or json", format);
		goto usage_err;
	}
	if (jobs < 0 || jobs > 1024) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--jobs must be 1..1024");
		goto usage_err;
	}
	vmcorr_options_init(&opt);
	opt.jobs = jobs;
	if (tolerance && !vt_parse_u64(tolerance, &opt.tolerance)) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--tolerance '%s': expected a number", tolerance);
		goto usage_err;
	}
	if (!dry_run) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "rewriting the trace is not implemented yet; use --dry-run to find the offsets");
		goto usage_err;
	}

	r = vmcorr_dry_run(path, &opt, &err);
	if (!r) {
		vt_err("correlate", "%s", err->message);
		rc = exit_code_for(err);
		goto done;
	}
	if (verbose)
		for (guint i = 0; i < r->perf_errors->len; i++)
			fprintf(stderr, "%s\n", (char *)r->perf_errors->pdata[i]);
	if (format && !strcmp(format, "perf")) {
		for (guint i = 0; i < r->perf_lines->len; i++)
			printf("%s\n", (char *)r->perf_lines->pdata[i]);
	} else if (format && !strcmp(format, "json")) {
		print_json(path, r);
	} else {
		print_table(path, r);
	}
	rc = VT_EXIT_OK;
	if (!r->vmcs->len)
		rc = VT_EXIT_NO_GUEST;
	for (guint i = 0; i < r->vmcs->len; i++)
		if (g_array_index(r->vmcs, VmcorrVmcs, i).status != VMCORR_OK)
			rc = VT_EXIT_UNRESOLVED;
	if (r->n_bad_packets) {
		/* decoding went on after resynchronising, but the input is damaged */
		vt_err("correlate", "%s: %" G_GUINT64_FORMAT " bad Intel PT packet%s (first at file offset %#"
		       G_GINT64_MODIFIER "x): the AUX data is corrupt", path, r->n_bad_packets,
		       r->n_bad_packets == 1 ? "" : "s", r->first_bad_offset);
		rc = VT_EXIT_BAD_INPUT;
	} else if (rc == VT_EXIT_UNRESOLVED && (!format || strcmp(format, "json"))) {
		vt_err("correlate", "%s: some VMCS have no consistent TSC offset (see STATUS)", path);
	} else if (rc == VT_EXIT_NO_GUEST && (!format || strcmp(format, "json"))) {
		vt_err("correlate", "%s: no VMCS packets: the trace shows no guest (was the QEMU process traced with intel_pt//k?)", path);
	}
	goto done;
usage_err:
	vt_err("correlate", "%s (see vmtrace correlate --help)", err->message);
	rc = VT_EXIT_USAGE;
done:
	if (fflush(stdout) != 0 && rc == VT_EXIT_OK)
		rc = VT_EXIT_FAILURE;
	vmcorr_result_free(r);
	g_clear_error(&err);
	g_option_context_free(ctx);
	g_free(format);
	g_free(tolerance);
	return rc;
}
