/* correlate.c - `vmtrace correlate`: find each VMCS's TSC offset. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include <sys/stat.h>

#include "src/cli/json.h"
#include "src/cli/table.h"
#include "src/cmd/cmd.h"
#include "src/fs/fs.h"
#include "src/fs/output.h"
#include "vmcorr/session.h"
#include "vmcorr/vmcorr.h"

/* Exit code for an error while reading the input. */
static int exit_code_for(const GError *e)
{
	if (e->domain == VMCORR_ERROR && e->code == VMCORR_ERROR_NO_TIME)
		return VT_EXIT_NO_TIME;
	if (e->domain == VMCORR_ERROR && (e->code == VMCORR_ERROR_BUSY || e->code == VMCORR_ERROR_CHANGED))
		return VT_EXIT_BUSY;
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

static void table_row(VtTable *t, const VmcorrVmcs *m)
{
	g_autofree char *v = vcpu_str(m);

	vt_table_add_row(t);
	vt_table_cell(t, "%#" G_GINT64_MODIFIER "x", m->vmcs);
	vt_table_cell(t, "%s", v);
	if (m->offset)
		vt_table_cell(t, "%#018" G_GINT64_MODIFIER "x", m->offset);
	else
		vt_table_cell(t, "%s", m->status == VMCORR_ZERO ? "0" : "unknown");
	vt_table_cell(t, "%" G_GUINT64_FORMAT, m->n_guest_tsc);
	vt_table_cell(t, "%" G_GINT64_FORMAT, m->spread);
	vt_table_cell(t, "%s", vmcorr_status_name(m->status));
	for (guint k = 0; m->epochs && m->epochs->len > 1 && k < m->epochs->len; k++) {
		const VmcorrEpoch *e = &g_array_index(m->epochs, VmcorrEpoch, k);

		vt_table_note(t, "  epoch %u: offset %#018" G_GINT64_MODIFIER "x from host TSC %#" G_GINT64_MODIFIER
			      "x to %#" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT " estimate%s, spread %" G_GINT64_FORMAT,
			      k + 1, e->offset, e->t_first, e->t_last, e->n, e->n == 1 ? "" : "s", e->spread);
	}
}

static void print_kvm_meta(const VmcorrResult *r, const VmcorrKvmMeta *meta)
{
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

static void json_epoch(VtJson *j, const VmcorrEpoch *e)
{
	vt_json_begin_object(j);
	vt_json_kv_hex(j, "tsc_offset", e->offset);
	vt_json_kv_hex(j, "first_tsc", e->t_first);
	vt_json_kv_hex(j, "last_tsc", e->t_last);
	vt_json_kv_uint(j, "estimates", e->n);
	vt_json_kv_int(j, "spread", e->spread);
	vt_json_end_object(j);
}

static void print_table(const char *path, const VmcorrResult *r, const VmcorrKvmMeta *meta)
{
	g_autoptr(VtTable) t = vt_table_new();

	printf("%s: %u %s AUX queue%s, %.1f MiB, TSC:CTC %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT
	       ", MTC period %u, %" G_GUINT64_FORMAT " TSC packets (%" G_GUINT64_FORMAT " guest)\n",
	       path, r->nqueues, r->per_cpu ? "per-CPU" : "per-thread", r->nqueues == 1 ? "" : "s",
	       r->aux_bytes / 1048576.0, r->tsc_ctc_n, r->tsc_ctc_d, r->mtc_period, r->n_tsc, r->n_guest_tsc);
	vt_table_add_column(t, "VMCS", 14, FALSE, 0);
	vt_table_add_column(t, "VCPU", 16, FALSE, 1);
	vt_table_add_column(t, "TSC-OFFSET", 20, FALSE, 1);
	vt_table_add_column(t, "GUEST-TSC", 10, TRUE, 1);
	vt_table_add_column(t, "SPREAD", 8, TRUE, 1);
	vt_table_add_column(t, "STATUS", 0, FALSE, 2);
	for (guint i = 0; i < r->vmcs->len; i++)
		table_row(t, &g_array_index(r->vmcs, VmcorrVmcs, i));
	vt_table_print(t, stdout, TRUE);
	if (!r->vmcs->len)
		printf("(no VMCS found: the trace shows no guest activity)\n");
	if (meta)
		print_kvm_meta(r, meta);
}

static void json_vmcs(VtJson *j, const VmcorrVmcs *m, const VmcorrKvmMeta *meta)
{
	const VmcorrKvmVcpu *k = kvm_vcpu(meta, m);

	vt_json_begin_object(j);
	vt_json_kv_hex(j, "vmcs", m->vmcs);
	if (m->vcpu >= 0)
		vt_json_kv_int(j, "vcpu", m->vcpu);
	else
		vt_json_kv_null(j, "vcpu");
	if (m->tid) {
		vt_json_kv_uint(j, "pid", m->pid);
		vt_json_kv_uint(j, "tid", m->tid);
	}
	if (m->offset) {
		vt_json_kv_hex(j, "tsc_offset", m->offset);
		vt_json_kv_int(j, "tsc_offset_signed", (gint64)m->offset);
	} else {
		vt_json_kv_null(j, "tsc_offset");
	}
	if (k && k->have_start) {
		vt_json_kv_hex(j, "kvm_tsc_offset", (uint64_t)k->tsc_offset_start);
		vt_json_kv_bool(j, "kvm_agrees", kvm_agrees(k, m));
	}
	vt_json_key(j, "epochs");
	vt_json_begin_array(j);
	for (guint e = 0; m->epochs && e < m->epochs->len; e++)
		json_epoch(j, &g_array_index(m->epochs, VmcorrEpoch, e));
	vt_json_end_array(j);
	vt_json_kv_bool(j, "reliable", m->reliable);
	vt_json_kv_uint(j, "guest_tsc_packets", m->n_guest_tsc);
	vt_json_kv_uint(j, "estimates", m->n_est);
	vt_json_kv_int(j, "spread", m->spread);
	vt_json_kv_string(j, "status", vmcorr_status_name(m->status));
	vt_json_end_object(j);
}

static void json_strings(VtJson *j, const char *key, const GPtrArray *a)
{
	vt_json_key(j, key);
	vt_json_begin_array(j);
	for (guint i = 0; i < a->len; i++)
		vt_json_string(j, a->pdata[i]);
	vt_json_end_array(j);
}

static void print_json(const char *path, const VmcorrResult *r, const VmcorrKvmMeta *meta)
{
	g_autoptr(VtJson) j = vt_json_new(stdout);

	vt_json_begin_object(j);
	vt_json_kv_string(j, "file", path);
	vt_json_kv_uint(j, "queues", r->nqueues);
	vt_json_kv_string(j, "mode", r->per_cpu ? "per-cpu" : "per-thread");
	vt_json_kv_uint(j, "aux_bytes", r->aux_bytes);
	vt_json_key(j, "tsc_ctc_ratio");
	vt_json_begin_array(j);
	vt_json_uint(j, r->tsc_ctc_n);
	vt_json_uint(j, r->tsc_ctc_d);
	vt_json_end_array(j);
	vt_json_kv_uint(j, "mtc_period", r->mtc_period);
	vt_json_kv_uint(j, "tsc_packets", r->n_tsc);
	vt_json_kv_uint(j, "guest_tsc_packets", r->n_guest_tsc);
	vt_json_kv_uint(j, "host_tsc_packets", r->n_host_tsc);
	vt_json_kv_uint(j, "bad_packets", r->n_bad_packets);
	vt_json_kv_uint(j, "tolerance", r->tolerance);
	vt_json_key(j, "vmcs");
	vt_json_begin_array(j);
	for (guint i = 0; i < r->vmcs->len; i++)
		json_vmcs(j, &g_array_index(r->vmcs, VmcorrVmcs, i), meta);
	vt_json_end_array(j);
	json_strings(j, "perf_lines", r->perf_lines);
	json_strings(j, "perf_errors", r->perf_errors);
	vt_json_end_object(j);
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
	g_autoptr(VtJson) j = vt_json_new(stdout);

	vt_json_begin_object(j);
	vt_json_kv_string(j, "file", path);
	vt_json_kv_string(j, "output", out ? out : path);
	vt_json_kv_bool(j, "in_place", !out);
	vt_json_kv_uint(j, "tsc_packets_corrected", r->patches->len);
	vt_json_key(j, "offsets");
	vt_json_begin_array(j);
	for (guint i = 0; offs && i < offs->len; i++) {
		const VmcorrOffset *o = &g_array_index(offs, VmcorrOffset, i);

		vt_json_begin_object(j);
		vt_json_kv_hex(j, "vmcs", o->vmcs);
		vt_json_kv_hex(j, "tsc_offset", o->offset);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
	vt_json_kv_int(j, "decode_passes", passes);
	vt_json_kv_int(j, "process_bytes_written", process_bytes_written());
	vt_json_end_object(j);
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

/* The command line, and what is loaded from it. */
typedef struct {
	gboolean dry_run, json, verbose, in_place, force, recover, progress;
	char *format, *out, *perf_arg, **offsets, **scales, *meta_path, *tolerance;
	gint jobs;
	const char *path;          /* FILE (in argv) */
	VmcorrOptions opt;         /* offsets, scales, jobs, tolerance */
	VmcorrKvmMeta *meta;       /* the recording's KVM metadata, if any */
} CorrOpts;

static void corr_opts_clear(CorrOpts *o)
{
	g_free(o->format);
	g_free(o->tolerance);
	g_free(o->out);
	g_free(o->perf_arg);
	g_strfreev(o->offsets);
	g_strfreev(o->scales);
	g_free(o->meta_path);
	vmcorr_kvm_meta_free(o->meta);
	if (o->opt.offsets)
		g_array_free(o->opt.offsets, TRUE);
	if (o->opt.scales)
		g_array_free(o->opt.scales, TRUE);
}

/* Refused before anything is read: a journal to recover, or a file vmtrace
 * corrected before (unless --force). */
static int apply_preflight(const char *path, gboolean force)
{
	g_autofree char *marker = NULL;

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
	return VT_EXIT_OK;
}

/* One step: discover the offsets into *apply, keeping the discovery's
 * patches in *r when they are exactly the ones the apply pass would make.
 * Returns an exit status; *err is set for input errors. */
static int apply_discover(VmcorrSession *s, const char *path, const VmcorrOptions *opt, VmcorrOptions *apply,
			  VmcorrResult **disc, VmcorrResult **r, GError **err)
{
	VmcorrOptions dopt = *opt;
	int rc;

	dopt.collect_patches = TRUE;
	*disc = vmcorr_run_session(s, &dopt, err);
	if (!*disc)
		return exit_code_for(*err);
	rc = offsets_from_discovery(path, *disc, apply);
	if (rc != VT_EXIT_OK)
		return rc;
	/* VMTRACE_TWO_PASS: a test hook (see ENVIRONMENT in vmtrace(1)) */
	if (!g_getenv("VMTRACE_TWO_PASS") && vmcorr_patches_reusable(*disc, apply)) {
		/* discovery already translated every guest TSC with its final offset */
		*r = *disc;
		*disc = NULL;
	}
	return VT_EXIT_OK;
}

/* What the apply pass found that forbids writing. */
static int apply_refusal(const char *path, const VmcorrResult *r)
{
	if (r->unknown_vmcs->len) {
		vt_err("correlate", "%s: VMCS %#" G_GINT64_MODIFIER "x was given an offset but does not occur in "
		       "the trace (see vmtrace correlate --dry-run); nothing written", path,
		       g_array_index(r->unknown_vmcs, uint64_t, 0));
		return VT_EXIT_UNKNOWN_VMCS;
	}
	if (r->n_bad_packets) {
		vt_err("correlate", "%s: %" G_GUINT64_FORMAT " bad Intel PT packets (first at file offset %#"
		       G_GINT64_MODIFIER "x); nothing written", path, r->n_bad_packets, r->first_bad_offset);
		return VT_EXIT_BAD_INPUT;
	}
	return VT_EXIT_OK;
}

/* Write the patches (to OUT, or in place); the marker lists every offset
 * used, epochs included. */
static int apply_write(const char *path, int hold, const char *out, gboolean force, const VmcorrResult *r,
		       const VmcorrOptions *apply)
{
	g_autoptr(GArray) all = g_array_new(FALSE, FALSE, sizeof(VmcorrOffset));
	g_autoptr(GError) err = NULL;

	if (apply->offsets)
		g_array_append_vals(all, apply->offsets->data, apply->offsets->len);
	if (apply->epochs)
		g_array_append_vals(all, apply->epochs->data, apply->epochs->len);
	if (!vmcorr_apply_patches(path, hold, out, force, r, all, &err)) {
		vt_err("correlate", "%s", err->message);
		/* writing the output failed: not the input's fault */
		return err->domain == VMCORR_ERROR && err->code == VMCORR_ERROR_CHANGED ? VT_EXIT_BUSY
											 : VT_EXIT_FAILURE;
	}
	return VT_EXIT_OK;
}

static void apply_report(const CorrOpts *o, const VmcorrResult *r, const VmcorrOptions *apply, int passes)
{
	const char *target = o->out ? o->out : o->path;

	if (o->json) {
		print_apply_json(o->path, o->out, r, apply->offsets, passes);
	} else {
		printf("%s: corrected %u guest TSC packet%s of %u VMCS to host time", target, r->patches->len,
		       r->patches->len == 1 ? "" : "s", apply->offsets ? apply->offsets->len : 0);
		if (apply->have_default)
			printf(" (default offset %#" G_GINT64_MODIFIER "x)", apply->default_offset);
		printf("\n");
		for (guint i = 0; apply->offsets && i < apply->offsets->len; i++) {
			const VmcorrOffset *x = &g_array_index(apply->offsets, VmcorrOffset, i);

			printf("  VMCS %#" G_GINT64_MODIFIER "x  TSC offset %#" G_GINT64_MODIFIER "x\n", x->vmcs,
			       x->offset);
		}
		for (guint i = 0; apply->epochs && i < apply->epochs->len; i++) {
			const VmcorrOffset *x = &g_array_index(apply->epochs, VmcorrOffset, i);

			printf("  VMCS %#" G_GINT64_MODIFIER "x  TSC offset %#" G_GINT64_MODIFIER "x (one of its epochs)\n",
			       x->vmcs, x->offset);
		}
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		/* the correction is done and stays done: the report is what failed */
		fprintf(stderr, "vmtrace correlate: %s: corrected; the report could not be written to standard "
			"output (%s)\n", target, g_strerror(errno ? errno : EIO));
		__fpurge(stdout);        /* said: not a failure of the command */
		clearerr(stdout);
	}
}

/* Correct FILE: discover (unless offsets were given), check, write, report. */
/* The progress line while the AUX data is decoded (src/cli/progress.h):
 * the bytes the decoders have read, of the file's (mostly AUX data);
 * *done is what opt->progress counts into. */
static VtProgressTicker *corr_progress(const CorrOpts *o, VtProgress *p, guint64 *done)
{
	vt_progress_init(p, "correlate", o->progress, o->dry_run);   /* (-o, -i: the output is a file) */
	return vt_progress_ticker_start(p, done, vt_cmd_data_size(o->path));
}

static int corr_apply(const CorrOpts *o)
{
	VmcorrSession *s = NULL;
	VmcorrResult *disc = NULL, *r = NULL;
	VmcorrOptions apply = o->opt;
	g_autoptr(GError) err = NULL;
	int rc, passes = 1, hold;
	guint64 done = 0;
	VtProgress progress;
	VtProgressTicker *ticker;
	VmcorrOptions disc_opt = o->opt;

	/* held from before discovery until written: no other run in between */
	if ((hold = vmcorr_hold(o->path, !o->out, &err)) < 0) {
		vt_err("correlate", "%s", err->message);
		return exit_code_for(err);
	}
	rc = apply_preflight(o->path, o->force);
	if (rc == VT_EXIT_OK && !(s = vmcorr_session_open(o->path, VT_PERF_OPEN_RDONLY, &err)))
		rc = exit_code_for(err);
	ticker = rc == VT_EXIT_OK ? corr_progress(o, &progress, &done) : NULL;
	disc_opt.progress = apply.progress = &done;
	if (rc == VT_EXIT_OK && !o->opt.offsets && !o->opt.have_default)
		rc = apply_discover(s, o->path, &disc_opt, &apply, &disc, &r, &err);
	if (rc == VT_EXIT_OK && !r) {
		apply.collect_patches = TRUE;
		passes += disc != NULL;
		if (!(r = vmcorr_run_session(s, &apply, &err)))
			rc = exit_code_for(err);
	}
	vt_progress_ticker_stop(ticker, rc == VT_EXIT_OK);
	apply.progress = NULL;
	if (err)
		vt_err("correlate", "%s", err->message);
	if (rc == VT_EXIT_OK)
		rc = apply_refusal(o->path, r);
	vmcorr_session_free(s);
	if (rc == VT_EXIT_OK)
		rc = apply_write(o->path, hold, o->out, o->force, r, &apply);
	close(hold);
	if (rc == VT_EXIT_OK)
		apply_report(o, r, &apply, passes);
	if (apply.offsets != o->opt.offsets && apply.offsets)
		g_array_free(apply.offsets, TRUE);
	if (apply.epochs != o->opt.epochs && apply.epochs)
		g_array_free(apply.epochs, TRUE);
	vmcorr_result_free(disc);
	vmcorr_result_free(r);
	return rc;
}

static int corr_recover(const char *path)
{
	g_autoptr(GError) err = NULL;
	gboolean found;
	uint64_t n;

	if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
		vt_err("correlate", "%s: no such file", path);
		return VT_EXIT_BAD_INPUT;
	}
	if (!vmcorr_recover(path, &found, &n, &err)) {
		vt_err("correlate", "%s", err->message);
		return err->domain == VMCORR_ERROR && err->code == VMCORR_ERROR_BUSY ? VT_EXIT_BUSY : VT_EXIT_FAILURE;
	}
	if (found)
		printf("%s: completed an interrupted correction (%" G_GUINT64_FORMAT " TSC packets)\n", path, n);
	else
		printf("%s: no interrupted correction to complete; the file is as it was\n", path);
	return VT_EXIT_OK;
}

/* Every VMCS the trace and KVM disagree on: a warning, not an error. */
static void warn_kvm_disagreements(const CorrOpts *o, const VmcorrResult *r)
{
	for (guint i = 0; o->meta && i < r->vmcs->len; i++) {
		const VmcorrVmcs *m = &g_array_index(r->vmcs, VmcorrVmcs, i);
		const VmcorrKvmVcpu *k = kvm_vcpu(o->meta, m);

		if (k && k->have_start && m->offset && !kvm_agrees(k, m))
			vt_warn("correlate", "%s: VMCS %#" G_GINT64_MODIFIER "x: the trace shows TSC offset %#"
				G_GINT64_MODIFIER "x, but KVM reported %#" G_GINT64_MODIFIER "x for vCPU %d (tid %u)",
				o->path, m->vmcs, m->offset, (uint64_t)k->tsc_offset_start, k->vcpu, k->tid);
	}
}

/* The dry run's exit status, and what it says about it. */
static int dry_run_status(const CorrOpts *o, const VmcorrResult *r)
{
	int rc = r->vmcs->len ? VT_EXIT_OK : VT_EXIT_NO_GUEST;

	for (guint i = 0; i < r->vmcs->len; i++) {
		VmcorrStatus st = g_array_index(r->vmcs, VmcorrVmcs, i).status;

		if (st != VMCORR_OK && st != VMCORR_ZERO && st != VMCORR_CHANGES)
			rc = VT_EXIT_UNRESOLVED;
	}
	if (r->n_bad_packets) {
		/* decoding went on after resynchronising, but the input is damaged */
		vt_err("correlate", "%s: %" G_GUINT64_FORMAT " bad Intel PT packet%s (first at file offset %#"
		       G_GINT64_MODIFIER "x): the AUX data is corrupt", o->path, r->n_bad_packets,
		       r->n_bad_packets == 1 ? "" : "s", r->first_bad_offset);
		return VT_EXIT_BAD_INPUT;
	}
	if (o->json)    /* the JSON document says it all */
		return rc;
	if (rc == VT_EXIT_UNRESOLVED)
		vt_warn("correlate", "%s: some VMCS have no consistent TSC offset (see STATUS)", o->path);
	else if (rc == VT_EXIT_NO_GUEST)
		vt_warn("correlate", "%s: no VMCS packets: the trace shows no guest (was the QEMU process traced "
			"with intel_pt//k?)", o->path);
	return rc;
}

static int corr_dry_run(const CorrOpts *o)
{
	g_autoptr(GError) err = NULL;
	guint64 done = 0;
	VtProgress progress;
	VtProgressTicker *ticker = corr_progress(o, &progress, &done);
	VmcorrOptions opt = o->opt;
	VmcorrResult *r;
	int rc;

	opt.progress = &done;
	r = vmcorr_dry_run(o->path, &opt, &err);
	vt_progress_ticker_stop(ticker, r != NULL);

	if (!r) {
		vt_err("correlate", "%s", err->message);
		return exit_code_for(err);
	}
	if (o->verbose)
		for (guint i = 0; i < r->perf_errors->len; i++)
			fprintf(stderr, "%s\n", (char *)r->perf_errors->pdata[i]);
	if (o->json)
		print_json(o->path, r, o->meta);
	else if (o->format && !strcmp(o->format, "perf"))
		for (guint i = 0; i < r->perf_lines->len; i++)
			printf("%s\n", (char *)r->perf_lines->pdata[i]);
	else
		print_table(o->path, r, o->meta);
	warn_kvm_disagreements(o, r);
	rc = dry_run_status(o, r);
	vmcorr_result_free(r);
	return rc;
}

static const char corr_summary[] =
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
	"64 bits, as perf prints them; the top byte does not matter for correction.";

static const char corr_description[] =
	"Exit status: 0 ok; 1 failure (I/O, or an interrupted correction to --recover);\n"
	"2 usage error (incl. bad offset or scale strings); 3 bad input file; 4 no time\n"
	"information (recorded with tsc=0 or mtc=0, or no TSC:CTC ratio: decode it\n"
	"timeless, per thread);\n"
	"5 some VMCS undetermined or inconsistent; 6 no VMCS found; 7 already\n"
	"corrected (nothing to do); 8 a VMCS given with --offset is not in the trace;\n"
	"15 FILE is held by another correction (its PID is named), or changed while\n"
	"being corrected (replaced or written to).\n"
	"Nothing is written unless the exit status is 0 - except when an in-place\n"
	"correction fails after it began (disk error): FILE is then partly corrected,\n"
	"the message says so, and --recover completes it.\n\n"
	"Examples:\n"
	"  vmtrace correlate --dry-run perf.data.kvm\n"
	"  vmtrace correlate --dry-run --format=perf perf.data.kvm\n"
	"  vmtrace correlate perf.data.kvm -o perf.data.corrected\n"
	"  vmtrace correlate --in-place perf.data.kvm\n"
	"  vmtrace correlate --in-place --offset 0xfffffe3c8291b532:0x12340,0x12451 perf.data.kvm\n"
	"  vmtrace correlate --vm-time-correlation=\"dry-run\" perf.data.kvm\n"
	"  vmtrace correlate --recover perf.data.kvm\n";

static gboolean corr_parse(CorrOpts *o, int *argc, char ***argv, GError **err)
{
	GOptionEntry entries[] = {
		{ "dry-run", 'n', 0, G_OPTION_ARG_NONE, &o->dry_run, "Only find and report the offsets; change nothing", NULL },
		{ "output", 'o', 0, G_OPTION_ARG_FILENAME, &o->out, "Write the corrected recording to OUT (a new file; a directory for directory input)", "OUT" },
		{ "in-place", 'i', 0, G_OPTION_ARG_NONE, &o->in_place, "Correct FILE itself, crash-safely (see --recover)", NULL },
		{ "offset", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->offsets, "Use this TSC offset for these VMCS (or for all others if none are listed) instead of discovering it; repeatable", "OFF[:VMCS[,VMCS...]]" },
		{ "vm-time-correlation", 0, 0, G_OPTION_ARG_STRING, &o->perf_arg, "perf inject's argument, as a drop-in: \"[dry-run] [OFF[:VMCS[,VMCS]...]]...\"", "STRING" },
		{ "tsc-scale", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->scales, "The guests use VMX TSC scaling: guest TSC = (host TSC * RATIO >> FRAC) + offset (FRAC default 48, as on VMX); for the listed VMCS or all; repeatable", "RATIO[/FRAC][:VMCS[,VMCS...]]" },
		{ "kvm-metadata", 0, 0, G_OPTION_ARG_FILENAME, &o->meta_path, "KVM time metadata (default: DIR/vmtrace-kvm.ini or FILE.vmtrace-kvm.ini, as vmtrace record writes it)", "FILE" },
		{ "force", 0, 0, G_OPTION_ARG_NONE, &o->force, "Correct a file that vmtrace has corrected before (subtracts again); replace an existing regular file OUT", NULL },
		{ "recover", 0, 0, G_OPTION_ARG_NONE, &o->recover, "Complete an interrupted --in-place correction of FILE", NULL },
		{ "format", 'f', 0, G_OPTION_ARG_STRING, &o->format, "Dry-run output: table (default), perf (perf inject's lines), json", "FMT" },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &o->json, "JSON output (same as --format=json)", NULL },
		{ "jobs", 'J', 0, G_OPTION_ARG_INT, &o->jobs, "Decode N AUX queues in parallel (default: number of CPUs)", "N" },
		{ "tolerance", 0, 0, G_OPTION_ARG_STRING, &o->tolerance, "Largest spread (TSC ticks) of a VMCS's estimates still called consistent (default: two CTC ticks in TSC ticks, plus 2)", "TICKS" },
		{ "verbose", 'v', 0, G_OPTION_ARG_NONE, &o->verbose, "Also print the ERROR lines perf would print, on stderr", NULL },
		{ "progress", 0, 0, G_OPTION_ARG_NONE, &o->progress, "A progress line on stderr even when it is no terminal (by default: on a terminal, while the output goes elsewhere)", NULL },
		G_OPTION_ENTRY_NULL
	};
	gboolean ok = vt_cli_parse("FILE - find each VMCS's TSC offset and correct guest TSC packets", corr_summary,
				   corr_description, entries, argc, argv, err);

	if (ok && *argc != 2) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    *argc < 2 ? "missing FILE" : "only one FILE is accepted");
		return FALSE;
	}
	if (ok)
		o->path = (*argv)[1];
	return ok;
}

/* --format/--json, --jobs, --tolerance, --vm-time-correlation, --offset, --tsc-scale. */
static gboolean corr_validate_values(CorrOpts *o, GError **err)
{
	if (o->json || (o->format && !strcmp(o->format, "json")))
		o->json = TRUE;
	else if (o->format && strcmp(o->format, "table") && strcmp(o->format, "perf")) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "--format '%s': expected table, perf or json", o->format);
		return FALSE;
	}
	vt_cli_set_json(o->json);
	if (o->jobs < 0 || o->jobs > 1024) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--jobs must be 1..1024");
		return FALSE;
	}
	o->opt.jobs = o->jobs;
	/* VMTRACE_AUX_PREAD: a benchmark hook (see ENVIRONMENT in vmtrace(1)) */
	o->opt.aux_pread = g_getenv("VMTRACE_AUX_PREAD") != NULL;
	if (!vt_opt_u64("--tolerance", o->tolerance, &o->opt.tolerance, err))
		return FALSE;
	if (o->perf_arg) {
		gboolean perf_dry;

		if (!vmcorr_parse_perf_arg(o->perf_arg, &perf_dry, &o->opt, err))
			return FALSE;
		o->dry_run = o->dry_run || perf_dry;
	}
	for (char **s = o->offsets; s && *s; s++)
		if (!vmcorr_parse_offset_token(*s, &o->opt, err))
			return FALSE;
	for (char **s = o->scales; s && *s; s++)
		if (!vmcorr_parse_scale_token(*s, &o->opt, err))
			return FALSE;
	return TRUE;
}

/* Exactly one of --dry-run, -o, --in-place. */
static gboolean corr_validate_mode(const CorrOpts *o, GError **err)
{
	if (!o->dry_run && !o->in_place && !o->out) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "say where the correction goes: -o OUT, or --in-place (or use --dry-run)");
		return FALSE;
	}
	if ((o->dry_run && (o->in_place || o->out)) || (o->in_place && o->out)) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--dry-run, -o and --in-place exclude each other");
		return FALSE;
	}
	return TRUE;
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

/* The recording's KVM metadata; its TSC scaling unless --tsc-scale was given. */
static int corr_load_meta(CorrOpts *o)
{
	g_autoptr(GError) err = NULL;
	uint64_t ratio;
	guint frac;
	gboolean uniform;

	o->meta = vmcorr_kvm_meta_load(o->path, o->meta_path, &err);
	if (err) {
		vt_err("correlate", "%s", err->message);
		return VT_EXIT_BAD_INPUT;
	}
	if (!o->meta || o->opt.scales || !vmcorr_kvm_meta_scaling(o->meta, &ratio, &frac, &uniform))
		return VT_EXIT_OK;
	if (uniform) {
		/* KVM scales every vCPU alike: use it for all VMCS */
		o->opt.scales = g_array_new(FALSE, FALSE, sizeof(VmcorrScale));
		g_array_append_val(o->opt.scales, ((VmcorrScale){ 0, ratio, frac }));
	} else {
		vt_warn("correlate", "%s: the vCPUs have different TSC scaling ratios; give each VMCS its --tsc-scale",
			o->meta->path);
	}
	return VT_EXIT_OK;
}

int cmd_correlate(int argc, char **argv)
{
	CorrOpts o = { 0 };
	g_autoptr(GError) err = NULL;
	int rc;

	vmcorr_options_init(&o.opt);
	if (!corr_parse(&o, &argc, &argv, &err) ||
	    (!o.recover && (!corr_validate_values(&o, &err) || !corr_validate_mode(&o, &err)))) {
		vt_err("correlate", "%s (see vmtrace correlate --help)", err->message);
		rc = VT_EXIT_USAGE;
	} else if (o.out && (rc = check_output(o.path, o.out, o.force, &err)) != VT_EXIT_OK) {
		vt_err("correlate", "%s%s", err->message, rc == VT_EXIT_USAGE ? " (see vmtrace correlate --help)" : "");
	} else if (o.recover) {
		rc = corr_recover(o.path);                    /* complete an interrupted --in-place */
	} else if ((rc = corr_load_meta(&o)) == VT_EXIT_OK) {
		rc = o.dry_run ? corr_dry_run(&o)             /* find and report */
			       : corr_apply(&o);              /* find and correct: -o or --in-place */
	}
	corr_opts_clear(&o);
	return rc;
}
