/* correlate.c - `vmtrace correlate`: find each VMCS's TSC offset. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <sys/stat.h>

#include "vmcorr/vmcorr.h"
#include "vmcorr/session.h"
#include "src/fs/fs.h"
#include "src/fs/output.h"
#include "src/cmd/cmd.h"

/* Exit code for an error while reading the input. */
static int exit_code_for(const GError *e)
{
	if (e->domain == VMCORR_ERROR && e->code == VMCORR_ERROR_NO_TIME)
		return VT_EXIT_NO_TIME;
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

/* KVM's own view of the vCPU behind VMCS m, from the recording's metadata. */
static const VmcorrKvmVcpu *kvm_vcpu(const VmcorrKvmMeta *meta, const VmcorrVmcs *m)
{
	return meta ? vmcorr_kvm_meta_vcpu(meta, m->tid) : NULL;
}

static gboolean kvm_agrees(const VmcorrKvmVcpu *k, const VmcorrVmcs *m)
{
	return k && k->have_start && m->offset &&
	       (((uint64_t)k->tsc_offset_start - m->offset) & VMCORR_SEVEN_BYTES) == 0;
}

static void print_table(const char *path, const VmcorrResult *r, const VmcorrKvmMeta *meta)
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
				       : g_strdup(m->status == VMCORR_ZERO ? "0" : "unknown");

		printf("%#-14" G_GINT64_MODIFIER "x %-16s %-20s %10" G_GUINT64_FORMAT " %8" G_GINT64_FORMAT "  %s\n",
		       m->vmcs, v, off, m->n_guest_tsc, m->spread, vmcorr_status_name(m->status));
		if (m->epochs && m->epochs->len > 1)
			for (guint k = 0; k < m->epochs->len; k++) {
				const VmcorrEpoch *e = &g_array_index(m->epochs, VmcorrEpoch, k);

				printf("  epoch %u: offset %#018" G_GINT64_MODIFIER "x from host TSC %#" G_GINT64_MODIFIER
				       "x to %#" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT " estimates, spread %"
				       G_GINT64_FORMAT "\n", k + 1, e->offset, e->t_first, e->t_last, e->n, e->spread);
			}
	}
	if (!r->vmcs->len)
		printf("(no VMCS found: the trace shows no guest activity)\n");
	if (meta) {
		printf("KVM metadata %s:\n", meta->path);
		for (guint i = 0; i < r->vmcs->len; i++) {
			const VmcorrVmcs *m = &g_array_index(r->vmcs, VmcorrVmcs, i);
			const VmcorrKvmVcpu *k = kvm_vcpu(meta, m);

			if (!k || !k->have_start)
				continue;
			printf("  VMCS %#" G_GINT64_MODIFIER "x = vCPU %d: KVM tsc-offset %" G_GINT64_FORMAT " (%#"
			       G_GINT64_MODIFIER "x)%s - %s\n", m->vmcs, k->vcpu, k->tsc_offset_start,
			       (uint64_t)k->tsc_offset_start,
			       k->have_end && k->tsc_offset_end != k->tsc_offset_start ? ", changed by the end" : "",
			       kvm_agrees(k, m) ? "agrees with the trace" : "DIFFERS from the trace");
		}
	}
}

static void print_json(const char *path, const VmcorrResult *r, const VmcorrKvmMeta *meta)
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
		if (kvm_vcpu(meta, m) && kvm_vcpu(meta, m)->have_start)
			g_string_append_printf(s, "\"kvm_tsc_offset\": \"%#" G_GINT64_MODIFIER "x\", \"kvm_agrees\": %s, ",
					       (uint64_t)kvm_vcpu(meta, m)->tsc_offset_start,
					       kvm_agrees(kvm_vcpu(meta, m), m) ? "true" : "false");
		g_string_append(s, "\"epochs\": [");
		for (guint k = 0; m->epochs && k < m->epochs->len; k++) {
			const VmcorrEpoch *e = &g_array_index(m->epochs, VmcorrEpoch, k);

			g_string_append_printf(s, "%s{\"tsc_offset\": \"%#" G_GINT64_MODIFIER "x\", \"first_tsc\": \"%#"
					       G_GINT64_MODIFIER "x\", \"last_tsc\": \"%#" G_GINT64_MODIFIER
					       "x\", \"estimates\": %" G_GUINT64_FORMAT ", \"spread\": %" G_GINT64_FORMAT "}",
					       k ? ", " : "", e->offset, e->t_first, e->t_last, e->n, e->spread);
		}
		g_string_append(s, "], ");
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

/* Bytes this process has written so far (write syscalls), -1 if unknown. */
static gint64 process_bytes_written(void)
{
	g_autofree char *io = NULL;
	const char *w;

	if (!g_file_get_contents("/proc/self/io", &io, NULL, NULL) || !(w = strstr(io, "wchar:")))
		return -1;
	return g_ascii_strtoll(w + 6, NULL, 10);
}

static void print_apply_json(const char *path, const char *out, const VmcorrResult *r, const GArray *offs, int passes)
{
	GString *s = g_string_new("{\"file\": ");

	vt_json_str(s, path);
	g_string_append(s, ", \"output\": ");
	vt_json_str(s, out ? out : path);
	g_string_append_printf(s, ", \"in_place\": %s, \"tsc_packets_corrected\": %u, \"offsets\": [",
			       out ? "false" : "true", r->patches->len);
	for (guint i = 0; offs && i < offs->len; i++) {
		const VmcorrOffset *o = &g_array_index(offs, VmcorrOffset, i);

		g_string_append_printf(s, "%s{\"vmcs\": \"%#" G_GINT64_MODIFIER "x\", \"tsc_offset\": \"%#"
				       G_GINT64_MODIFIER "x\"}", i ? ", " : "", o->vmcs, o->offset);
	}
	g_string_append_printf(s, "], \"decode_passes\": %d, \"process_bytes_written\": %" G_GINT64_FORMAT "}\n",
			       passes, process_bytes_written());
	fputs(s->str, stdout);
	g_string_free(s, TRUE);
}

/* Offsets to apply, from a discovery run: every VMCS must be resolved. */
static int offsets_from_discovery(const char *path, const VmcorrResult *r, VmcorrOptions *apply)
{
	guint zero = 0;

	if (!r->vmcs->len) {
		vt_err("correlate", "%s: no VMCS packets: the trace shows no guest; nothing to correct", path);
		return VT_EXIT_NO_GUEST;
	}
	apply->offsets = g_array_new(FALSE, FALSE, sizeof(VmcorrOffset));
	apply->epochs = NULL;
	for (guint i = 0; i < r->vmcs->len; i++) {
		const VmcorrVmcs *m = &g_array_index(r->vmcs, VmcorrVmcs, i);
		VmcorrOffset o = { m->vmcs, m->offset };

		if (m->status == VMCORR_ZERO) {
			zero++;
			continue;
		}
		if (m->status == VMCORR_CHANGES) {
			/* each epoch's offset is a candidate (perf cannot do this) */
			if (!apply->epochs)
				apply->epochs = g_array_new(FALSE, FALSE, sizeof(VmcorrOffset));
			for (guint k = 0; k < m->epochs->len; k++) {
				VmcorrOffset e = { m->vmcs, g_array_index(m->epochs, VmcorrEpoch, k).offset };

				g_array_append_val(apply->epochs, e);
			}
			continue;
		}
		if (m->status != VMCORR_OK) {
			vt_err("correlate", "%s: VMCS %#" G_GINT64_MODIFIER "x has no consistent TSC offset (%s); "
			       "see --dry-run, and give it with --offset OFF:%#" G_GINT64_MODIFIER "x",
			       path, m->vmcs, vmcorr_status_name(m->status), m->vmcs);
			return VT_EXIT_UNRESOLVED;
		}
		g_array_append_val(apply->offsets, o);
	}
	if (zero == r->vmcs->len && !apply->epochs) {
		vt_err("correlate", "%s: guest TSC packets already show host time (corrected before?); nothing to do",
		       path);
		return VT_EXIT_NOTHING;
	}
	return VT_EXIT_OK;
}

static void append_error(GError **error, const char *text)
{
	char *m = g_strconcat((*error)->message, text, NULL);

	g_free((*error)->message);
	(*error)->message = m;
}

/* -o OUT: not the input, not inside it (nor it inside OUT), and something
 * an output may be created at (src/fs/output.h): nothing - or with --force,
 * for a file input, a regular file.  Returns VT_EXIT_OK, or the exit code
 * with error set. */
static int check_output(const char *path, const char *out, gboolean force, GError **error)
{
	gboolean dir = g_file_test(path, G_FILE_TEST_IS_DIR);
	struct stat a, b;

	if (stat(path, &a) == 0 && stat(out, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "-o names the input itself; use --in-place to correct it in place");
		return VT_EXIT_USAGE;
	}
	if (dir && vt_fs_path_inside(out, path)) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "-o %s is inside the input directory %s; choose an OUT outside it", out, path);
		return VT_EXIT_USAGE;
	}
	if (vt_fs_path_inside(path, out)) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "the input %s is inside the output %s; choose an OUT elsewhere", path, out);
		return VT_EXIT_USAGE;
	}
	if (vt_fs_output_check(out, dir ? VT_FS_OUTPUT_DIR : force ? VT_FS_OUTPUT_REPLACE : VT_FS_OUTPUT_NEW, error))
		return VT_EXIT_OK;
	if (dir && g_error_matches(*error, G_FILE_ERROR, G_FILE_ERROR_EXIST))
		append_error(error, " (a corrected perf.data directory is written as a new directory)");
	else if (!dir && lstat(out, &b) == 0 && S_ISREG(b.st_mode))
		append_error(error, " (-o writes a new file; --force replaces it)");
	return VT_EXIT_FAILURE;
}

static int do_apply(const char *path, const char *out, gboolean force, gboolean json, VmcorrOptions *opt)
{
	g_autofree char *marker = NULL;
	VmcorrSession *s = NULL;
	VmcorrResult *disc = NULL, *r = NULL;
	VmcorrOptions apply = *opt;
	GError *err = NULL;
	int rc = VT_EXIT_OK, passes = 1;

	if (vmcorr_journal_pending(path)) {
		vt_err("correlate", "%s: an interrupted in-place correction left a journal; run `vmtrace correlate "
		       "--recover %s` first", path, path);
		return VT_EXIT_FAILURE;
	}
	marker = vmcorr_marker_read(path, NULL);
	if (marker && !force) {
		vt_err("correlate", "%s: already corrected by vmtrace (%s); correcting again would subtract the "
		       "offsets twice - use --force to do it anyway", path, marker);
		return VT_EXIT_NOTHING;
	}
	s = vmcorr_session_open(path, VT_PERF_OPEN_RDONLY, &err);
	if (!s)
		goto fail;
	if (!opt->offsets && !opt->have_default) {
		/* one step: discover, then apply what was found */
		VmcorrOptions dopt = *opt;

		dopt.collect_patches = TRUE;
		disc = vmcorr_run_session(s, &dopt, &err);
		if (!disc)
			goto fail;
		rc = offsets_from_discovery(path, disc, &apply);
		if (rc != VT_EXIT_OK)
			goto done;
		if (!g_getenv("VMTRACE_TWO_PASS") && vmcorr_patches_reusable(disc, &apply)) {
			/* discovery already translated every guest TSC with its final offset */
			r = disc;
			disc = NULL;
		}
	}
	apply.collect_patches = TRUE;
	if (!r) {
		passes += disc != NULL;
		r = vmcorr_run_session(s, &apply, &err);
	}
	if (!r)
		goto fail;
	if (r->unknown_vmcs->len) {
		vt_err("correlate", "%s: VMCS %#" G_GINT64_MODIFIER "x was given an offset but does not occur in "
		       "the trace (see vmtrace correlate --dry-run); nothing written", path,
		       g_array_index(r->unknown_vmcs, uint64_t, 0));
		rc = VT_EXIT_UNKNOWN_VMCS;
		goto done;
	}
	if (r->n_bad_packets) {
		vt_err("correlate", "%s: %" G_GUINT64_FORMAT " bad Intel PT packets (first at file offset %#"
		       G_GINT64_MODIFIER "x); nothing written", path, r->n_bad_packets, r->first_bad_offset);
		rc = VT_EXIT_BAD_INPUT;
		goto done;
	}
	vmcorr_session_free(s);
	s = NULL;
	{
		/* the marker lists every offset used, epochs included */
		GArray *all = g_array_new(FALSE, FALSE, sizeof(VmcorrOffset));
		gboolean ok;

		if (apply.offsets)
			g_array_append_vals(all, apply.offsets->data, apply.offsets->len);
		if (apply.epochs)
			g_array_append_vals(all, apply.epochs->data, apply.epochs->len);
		ok = vmcorr_apply_patches(path, out, force, r, all, &err);
		g_array_free(all, TRUE);
		if (!ok) {
			/* writing the output failed: not the input's fault */
			vt_err("correlate", "%s", err->message);
			rc = VT_EXIT_FAILURE;
			goto done;
		}
	}
	if (json) {
		print_apply_json(path, out, r, apply.offsets, passes);
	} else {
		printf("%s: corrected %u guest TSC packet%s of %u VMCS to host time", out ? out : path,
		       r->patches->len, r->patches->len == 1 ? "" : "s", apply.offsets ? apply.offsets->len : 0);
		if (apply.have_default)
			printf(" (default offset %#" G_GINT64_MODIFIER "x)", apply.default_offset);
		printf("\n");
		for (guint i = 0; apply.offsets && i < apply.offsets->len; i++) {
			const VmcorrOffset *o = &g_array_index(apply.offsets, VmcorrOffset, i);

			printf("  VMCS %#" G_GINT64_MODIFIER "x  TSC offset %#" G_GINT64_MODIFIER "x\n", o->vmcs,
			       o->offset);
		}
		for (guint i = 0; apply.epochs && i < apply.epochs->len; i++) {
			const VmcorrOffset *o = &g_array_index(apply.epochs, VmcorrOffset, i);

			printf("  VMCS %#" G_GINT64_MODIFIER "x  TSC offset %#" G_GINT64_MODIFIER "x (one of its epochs)\n",
			       o->vmcs, o->offset);
		}
	}
	goto done;
fail:
	vt_err("correlate", "%s", err->message);
	rc = exit_code_for(err);
done:
	if (apply.offsets != opt->offsets && apply.offsets)
		g_array_free(apply.offsets, TRUE);
	if (apply.epochs != opt->epochs && apply.epochs)
		g_array_free(apply.epochs, TRUE);
	g_clear_error(&err);
	vmcorr_result_free(disc);
	vmcorr_result_free(r);
	vmcorr_session_free(s);
	return rc;
}

static int do_recover(const char *path)
{
	GError *err = NULL;
	gboolean found;
	uint64_t n;

	if (!vmcorr_recover(path, &found, &n, &err)) {
		vt_err("correlate", "%s", err->message);
		g_error_free(err);
		return VT_EXIT_FAILURE;
	}
	if (found)
		printf("%s: completed an interrupted correction (%" G_GUINT64_FORMAT " TSC packets)\n", path, n);
	else
		printf("%s: no interrupted correction to complete; the file is as it was\n", path);
	return VT_EXIT_OK;
}

int cmd_correlate(int argc, char **argv)
{
	gboolean dry_run = FALSE, json = FALSE, verbose = FALSE, in_place = FALSE, force = FALSE, recover = FALSE;
	char *format = NULL, *out = NULL, *perf_arg = NULL;
	char **offsets = NULL, **scales = NULL, *meta_path = NULL;
	VmcorrKvmMeta *meta = NULL;
	gint jobs = 0;
	char *tolerance = NULL;
	GError *err = NULL;
	VmcorrOptions opt;
	VmcorrResult *r = NULL;
	int rc = VT_EXIT_USAGE;
	GOptionEntry entries[] = {
		{ "dry-run", 'n', 0, G_OPTION_ARG_NONE, &dry_run, "Only find and report the offsets; change nothing", NULL },
		{ "output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Write the corrected recording to OUT (a new file; a directory for directory input)", "OUT" },
		{ "in-place", 'i', 0, G_OPTION_ARG_NONE, &in_place, "Correct FILE itself, crash-safely (see --recover)", NULL },
		{ "offset", 0, 0, G_OPTION_ARG_STRING_ARRAY, &offsets, "Use this TSC offset for these VMCS (or for all others if none are listed) instead of discovering it; repeatable", "OFF[:VMCS[,VMCS...]]" },
		{ "vm-time-correlation", 0, 0, G_OPTION_ARG_STRING, &perf_arg, "perf inject's argument, as a drop-in: \"[dry-run] [OFF[:VMCS[,VMCS]...]]...\"", "STRING" },
		{ "tsc-scale", 0, 0, G_OPTION_ARG_STRING_ARRAY, &scales, "The guests use VMX TSC scaling: guest TSC = (host TSC * RATIO >> FRAC) + offset (FRAC default 48, as on VMX); for the listed VMCS or all; repeatable", "RATIO[/FRAC][:VMCS[,VMCS...]]" },
		{ "kvm-metadata", 0, 0, G_OPTION_ARG_FILENAME, &meta_path, "KVM time metadata (default: DIR/vmtrace-kvm.ini or FILE.vmtrace-kvm.ini, as vmtrace record writes it)", "FILE" },
		{ "force", 0, 0, G_OPTION_ARG_NONE, &force, "Correct a file that vmtrace has corrected before (subtracts again); replace an existing regular file OUT", NULL },
		{ "recover", 0, 0, G_OPTION_ARG_NONE, &recover, "Complete an interrupted --in-place correction of FILE", NULL },
		{ "format", 'f', 0, G_OPTION_ARG_STRING, &format, "Dry-run output: table (default), perf (perf inject's lines), json", "FMT" },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &json, "JSON output (same as --format=json)", NULL },
		{ "jobs", 'J', 0, G_OPTION_ARG_INT, &jobs, "Decode N AUX queues in parallel (default: number of CPUs)", "N" },
		{ "tolerance", 0, 0, G_OPTION_ARG_STRING, &tolerance, "Largest spread (TSC ticks) of a VMCS's estimates still called consistent (default: two CTC ticks in TSC ticks, plus 2)", "TICKS" },
		{ "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, "Also print the ERROR lines perf would print, on stderr", NULL },
		G_OPTION_ENTRY_NULL
	};
	GOptionContext *ctx = g_option_context_new("FILE - find each VMCS's TSC offset and correct guest TSC packets");
	const char *path;

	g_option_context_set_summary(ctx,
		"Reads a host Intel PT recording of KVM guests (perf.data file or directory),\n"
		"finds for every VMCS (one per vCPU) the VMX TSC offset that the guest's TSC\n"
		"packets carry, and rewrites those packets to host time - in one step, where\n"
		"perf needs a dry run and a second run with the copied offsets.\n\n"
		"Each guest TSC packet is compared with the host time that the MTC/TMA packets\n"
		"(driven by the crystal clock, which VMX does not offset) predict.  The\n"
		"decisions follow perf's `perf inject --vm-time-correlation`: --format=perf\n"
		"prints exactly perf's lines, and the rewritten data section is byte for byte\n"
		"what perf writes given the same offsets.  A marker after the file's sections\n"
		"records the correction, so a second correction is refused.\n\n"
		"TSC packets have 7 bytes: offsets are the 56-bit difference sign-extended to\n"
		"64 bits, as perf prints them; the top byte does not matter for correction.");
	g_option_context_set_description(ctx,
		"Exit status: 0 ok; 1 failure (I/O, or an interrupted correction to --recover);\n"
		"2 usage error (incl. bad offset or scale strings); 3 bad input file; 4 no time\n"
		"information (recorded with tsc=0 or mtc=0, or no TSC:CTC ratio: decode it\n"
		"timeless, per thread);\n"
		"5 some VMCS undetermined or inconsistent; 6 no VMCS found; 7 already\n"
		"corrected (nothing to do); 8 a VMCS given with --offset is not in the trace.\n"
		"Nothing is written unless the exit status is 0.\n\n"
		"Examples:\n"
		"  vmtrace correlate --dry-run perf.data.kvm\n"
		"  vmtrace correlate --dry-run --format=perf perf.data.kvm\n"
		"  vmtrace correlate perf.data.kvm -o perf.data.corrected\n"
		"  vmtrace correlate --in-place perf.data.kvm\n"
		"  vmtrace correlate --in-place --offset 0xfffffe3c8291b532:0x12340,0x12451 perf.data.kvm\n"
		"  vmtrace correlate --vm-time-correlation=\"dry-run\" perf.data.kvm\n"
		"  vmtrace correlate --recover perf.data.kvm\n");
	g_option_context_add_main_entries(ctx, entries, NULL);
	vmcorr_options_init(&opt);
	if (!g_option_context_parse(ctx, &argc, &argv, &err))
		goto usage_err;
	if (argc != 2) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    argc < 2 ? "missing FILE" : "only one FILE is accepted");
		goto usage_err;
	}
	path = argv[1];
	if (recover) {
		rc = do_recover(path);
		goto done;
	}
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
	opt.jobs = jobs;
	if (!vt_opt_u64("--tolerance", tolerance, &opt.tolerance, &err))
		goto usage_err;
	if (perf_arg) {
		gboolean perf_dry;

		if (!vmcorr_parse_perf_arg(perf_arg, &perf_dry, &opt, &err))
			goto usage_err;
		dry_run = dry_run || perf_dry;
	}
	for (char **o = offsets; o && *o; o++)
		if (!vmcorr_parse_offset_token(*o, &opt, &err))
			goto usage_err;
	for (char **o = scales; o && *o; o++)
		if (!vmcorr_parse_scale_token(*o, &opt, &err))
			goto usage_err;
	meta = vmcorr_kvm_meta_load(path, meta_path, &err);
	if (err) {
		vt_err("correlate", "%s", err->message);
		rc = VT_EXIT_BAD_INPUT;
		goto done;
	}
	if (meta && !opt.scales) {
		uint64_t ratio;
		guint frac;
		gboolean uniform;

		if (vmcorr_kvm_meta_scaling(meta, &ratio, &frac, &uniform)) {
			if (uniform) {
				/* KVM scales every vCPU alike: use it for all VMCS */
				opt.scales = g_array_new(FALSE, FALSE, sizeof(VmcorrScale));
				g_array_append_val(opt.scales, ((VmcorrScale){ 0, ratio, frac }));
			} else {
				vt_err("correlate", "%s: the vCPUs have different TSC scaling ratios; give each VMCS its "
				       "--tsc-scale", meta->path);
			}
		}
	}
	if (!dry_run && !in_place && !out) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "say where the correction goes: -o OUT, or --in-place (or use --dry-run)");
		goto usage_err;
	}
	if ((dry_run && (in_place || out)) || (in_place && out)) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "--dry-run, -o and --in-place exclude each other");
		goto usage_err;
	}
	if (out && (rc = check_output(path, out, force, &err)) != VT_EXIT_OK) {
		if (rc == VT_EXIT_USAGE)
			goto usage_err;
		vt_err("correlate", "%s", err->message);
		goto done;
	}
	if (!dry_run) {
		rc = do_apply(path, out, force, format && !strcmp(format, "json"), &opt);
		goto done;
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
		print_json(path, r, meta);
	} else {
		print_table(path, r, meta);
	}
	for (guint i = 0; meta && i < r->vmcs->len; i++) {
		const VmcorrVmcs *m = &g_array_index(r->vmcs, VmcorrVmcs, i);
		const VmcorrKvmVcpu *k = kvm_vcpu(meta, m);

		if (k && k->have_start && m->offset && !kvm_agrees(k, m))
			vt_err("correlate", "%s: VMCS %#" G_GINT64_MODIFIER "x: the trace shows TSC offset %#"
			       G_GINT64_MODIFIER "x, but KVM reported %#" G_GINT64_MODIFIER "x for vCPU %d (tid %u)",
			       path, m->vmcs, m->offset, (uint64_t)k->tsc_offset_start, k->vcpu, k->tid);
	}
	rc = VT_EXIT_OK;
	if (!r->vmcs->len)
		rc = VT_EXIT_NO_GUEST;
	for (guint i = 0; i < r->vmcs->len; i++) {
		VmcorrStatus st = g_array_index(r->vmcs, VmcorrVmcs, i).status;

		if (st != VMCORR_OK && st != VMCORR_ZERO && st != VMCORR_CHANGES)
			rc = VT_EXIT_UNRESOLVED;
	}
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
	g_free(out);
	g_free(perf_arg);
	g_strfreev(offsets);
	g_strfreev(scales);
	g_free(meta_path);
	vmcorr_kvm_meta_free(meta);
	if (opt.offsets)
		g_array_free(opt.offsets, TRUE);
	if (opt.scales)
		g_array_free(opt.scales, TRUE);
	return rc;
}
