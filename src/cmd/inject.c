/* inject.c - `vmtrace inject`: merge a guest's perf.data into a host recording. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "src/cli/json.h"
#include "src/cmd/cmd.h"
#include "src/fs/fs.h"
#include "src/fs/output.h"
#include "src/inject/inject.h"
#include "vmcorr/vmcorr.h"

typedef struct {
	char *guest, *out, *scale, **offsets;
	gint pid;
	gboolean json;
	const char *rec;
	VtInjectOptions opt;
	gboolean have_scale;
	uint64_t ratio;
	guint frac;
	const char *source;      /* where the offsets came from */
	VmcorrKvmMeta *meta;     /* REC's KVM metadata (NULL: none, or unreadable) */
	guint from_meta;         /* vCPU offsets taken from it */
	gboolean to_stderr;      /* the report on stderr (record --guest-ssh) */
	gboolean quiet;          /* no report (record --guest-ssh --quiet) */
	gboolean progress;       /* --progress */
	guint64 size;            /* REC's data file's (the progress lines') */
} InjOpts;

static void inj_opts_clear(InjOpts *o)
{
	g_free(o->guest);
	g_free(o->out);
	g_free(o->scale);
	g_strfreev(o->offsets);
	if (o->opt.clocks)
		g_array_free(o->opt.clocks, TRUE);
	vmcorr_kvm_meta_free(o->meta);
}

static int exit_code_for(const GError *e)
{
	if (e->domain != VT_INJECT_ERROR)    /* unreadable or malformed input */
		return VT_EXIT_BAD_INPUT;
	switch (e->code) {
	case VT_INJECT_ERROR_GUEST_CLOCK:
		return VT_EXIT_GUEST_CLOCK;
	case VT_INJECT_ERROR_GUEST_NO_IDS: case VT_INJECT_ERROR_GUEST_NO_ID_INDEX:
	case VT_INJECT_ERROR_GUEST_ID_NO_CPU: case VT_INJECT_ERROR_GUEST_VCPU:
		return VT_EXIT_GUEST_DATA;
	case VT_INJECT_ERROR_NO_CLOCK:
		return VT_EXIT_UNRESOLVED;
	case VT_INJECT_ERROR_OFFSET_CHANGE:
		return VT_EXIT_OFFSET_CHANGE;
	case VT_INJECT_ERROR_OUTPUT:
		return VT_EXIT_FAILURE;
	default:
		return VT_EXIT_HOST_SIDEBAND;
	}
}

/* OFF or OFF:VCPU[,VCPU...] */
static gboolean parse_offset(const char *tok, GArray *clocks, GError **err)
{
	g_auto(GStrv) parts = g_strsplit(tok, ":", 2);
	g_auto(GStrv) v = NULL;
	VtInjectClock c = { .vcpu = -1 };

	if (!vt_parse_u64(parts[0], &c.offset))
		goto bad;
	if (!parts[1]) {
		g_array_append_val(clocks, c);
		return TRUE;
	}
	v = g_strsplit(parts[1], ",", -1);
	for (char **p = v; *p; p++) {
		guint64 n;

		if (!vt_parse_u64(*p, &n) || n > 4095)
			goto bad;
		c.vcpu = (int)n;
		g_array_append_val(clocks, c);
	}
	return TRUE;
bad:
	g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
		    "--offset '%s': expected OFF or OFF:VCPU[,VCPU...] (OFF as perf prints it, e.g. 0xfffffe3c8291b532)",
		    tok);
	return FALSE;
}

/* No vCPU (nor "every other vCPU") given two offsets. */
static gboolean offsets_distinct(const GArray *clocks, GError **err)
{
	for (guint i = 0; i < clocks->len; i++)
		for (guint k = 0; k < i; k++) {
			int v = g_array_index(clocks, VtInjectClock, i).vcpu;
			g_autofree char *who = NULL;

			if (g_array_index(clocks, VtInjectClock, k).vcpu != v)
				continue;
			who = v < 0 ? g_strdup("every vCPU (OFF without :VCPU)") : g_strdup_printf("vCPU %d", v);
			g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--offset: %s given twice", who);
			return FALSE;
		}
	return TRUE;
}

/* Every vCPU an --offset names is one of the QEMU process's in REC: a
 * usage error (exit 2) otherwise. */
static int inj_check_offset_vcpus(const InjOpts *o)
{
	g_autoptr(GError) err = NULL;

	for (guint i = 0; o->offsets && o->opt.machine_pid && i < o->opt.clocks->len; i++) {
		const VtInjectClock *c = &g_array_index(o->opt.clocks, VtInjectClock, i);
		gboolean has;

		if (c->vcpu < 0)
			continue;
		if (!vt_inject_host_has_vcpu(o->rec, o->opt.machine_pid, (guint)c->vcpu, &has, &err)) {
			vt_err("inject", "%s", err->message);
			return VT_EXIT_BAD_INPUT;
		}
		if (!has) {
			vt_err("inject", "--offset for vCPU %d: %s has no \"CPU %d/KVM\" thread of QEMU process %u "
			       "(see vmtrace inject --help)", c->vcpu, o->rec, c->vcpu, o->opt.machine_pid);
			return VT_EXIT_USAGE;
		}
	}
	return VT_EXIT_OK;
}

/* RATIO[/FRAC] */
static gboolean parse_scale(InjOpts *o, GError **err)
{
	g_auto(GStrv) parts = g_strsplit(o->scale, "/", 2);
	guint64 frac = 48;

	if (!vt_parse_u64(parts[0], &o->ratio) || !o->ratio || (parts[1] && !vt_parse_u64(parts[1], &frac)) ||
	    frac > 63) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "--tsc-scale '%s': expected RATIO[/FRAC], RATIO > 0, FRAC 0..63 (default 48)", o->scale);
		return FALSE;
	}
	o->frac = frac;
	o->have_scale = TRUE;
	return TRUE;
}

static const char inj_summary[] =
	"Merges a guest's own perf.data (recorded inside the guest, system-wide, with\n"
	"sample ids) into a host recording REC, as `perf inject --guest-data` does:\n"
	"the guest's sideband (comm, fork, exit, mmap, mmap2, lost, context switches,\n"
	"out-of-line ksymbols, text_poke) goes into OUT with new sample ids, guest\n"
	"attrs and an ID_INDEX naming the QEMU pid and vCPU of each id, guest times\n"
	"converted to host time and guest CPUs to the host CPU the vCPU ran on.\n\n"
	"Times are converted exactly, in integers: guest perf time -> guest TSC\n"
	"(guest TIME_CONV) -> host TSC (minus the vCPU's TSC offset, TSC scaling\n"
	"undone in 128 bits) -> host perf time (host TIME_CONV).  The TSC offset of\n"
	"every vCPU is found in REC as `vmtrace correlate` finds it (where the trace\n"
	"shows none: KVM's, from REC's vmtrace-kvm.ini if it did not change), unless\n"
	"--offset gives it.  A vCPU's host CPU comes from the switch records that put\n"
	"its thread on a CPU.";

static const char inj_description[] =
	"Exit status: 0 ok; 1 failure (cannot write OUT); 2 usage error; 3 unreadable\n"
	"or malformed input (or a perf record --threads directory); 5 a vCPU's TSC\n"
	"offset cannot be discovered nor taken from REC's KVM metadata (give\n"
	"--offset); 17 the guest file cannot be injected (no sample ids, no ID_INDEX,\n"
	"an id with CPU -1, a guest CPU without a vCPU thread); 18 the guest's perf\n"
	"clock is not TSC-based (kvm-clock: boot the guest with no-kvmclock); 19 the\n"
	"host recording lacks what injection needs (\"CPU n/KVM\" COMMs, context\n"
	"switches with CPU, TIME_CONV; or several QEMU processes and no --pid; or that\n"
	"VM's guest records, injected before); 28 a vCPU's TSC offset changed during\n"
	"the recording and a guest record's time fits no epoch or two (the guest's\n"
	"TSC went back): give --offset OFF:VCPU.\n"
	"Nothing is written unless the exit status is 0.\n\n"
	"Examples:\n"
	"  vmtrace inject vm.data --guest-data guest.data -o vm+guest.data\n"
	"  vmtrace inject vm.data --guest-data guest.data --pid 4000 --offset 0xfffffe3c8291b532 -o out.data\n"
	"  vmtrace inject vm.data --guest-data guest.data --offset 0xffff0000:0 --offset 0xfffe0000:1 -o out.data\n"
	"  perf script -i out.data --show-task-events --show-mmap-events -F+machine_pid,+vcpu\n";

static gboolean inj_parse(InjOpts *o, int *argc, char ***argv, GError **err)
{
	GOptionEntry entries[] = {
		{ "guest-data", 'g', 0, G_OPTION_ARG_FILENAME, &o->guest, "The guest's perf.data (perf record -a --sample-identifier inside the guest, booted with no-kvmclock)", "GUEST.data" },
		{ "output", 'o', 0, G_OPTION_ARG_FILENAME, &o->out, "Write the merged recording to OUT, a new perf.data directory", "OUT" },
		{ "pid", 'p', 0, G_OPTION_ARG_INT, &o->pid, "The guest's QEMU process (default: the one process of REC with \"CPU n/KVM\" threads)", "PID" },
		{ "offset", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->offsets, "The VMX TSC offset of these vCPUs (or of all others if none are listed) instead of discovering it in REC; repeatable", "OFF[:VCPU[,VCPU...]]" },
		{ "tsc-scale", 0, 0, G_OPTION_ARG_STRING, &o->scale, "VMX TSC scaling: guest TSC = (host TSC * RATIO >> FRAC) + offset (FRAC default 48; default: REC's KVM metadata)", "RATIO[/FRAC]" },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &o->json, "Report as JSON", NULL },
		{ "progress", 0, 0, G_OPTION_ARG_NONE, &o->progress, "Progress lines on stderr even when it is no terminal (by default: on a terminal) - the search for the TSC offsets, then the merge", NULL },
		G_OPTION_ENTRY_NULL
	};
	gboolean ok = vt_cli_parse("REC - merge a guest's perf.data into a host recording", inj_summary,
				   inj_description, entries, argc, argv, err);

	if (ok && *argc != 2)
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    *argc < 2 ? "missing REC" : "only one REC is accepted");
	else if (ok && (!o->guest || !o->out))
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--guest-data and -o are required");
	else if (ok && (!*o->guest || !*o->out))
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "%s: empty path",
			    *o->out ? "--guest-data" : "-o");
	else if (ok && o->pid < 0)
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--pid must be a process id");
	if (ok && !*err)
		o->rec = (*argv)[1];
	return ok && !*err;
}

static gboolean inj_validate(InjOpts *o, GError **err)
{
	vt_cli_set_json(o->json);
	o->opt.machine_pid = o->pid;
	if (o->scale && !parse_scale(o, err))
		return FALSE;
	if (o->offsets)
		o->opt.clocks = g_array_new(FALSE, FALSE, sizeof(VtInjectClock));
	for (char **s = o->offsets; s && *s; s++)
		if (!parse_offset(*s, o->opt.clocks, err))
			return FALSE;
	if (o->offsets && !offsets_distinct(o->opt.clocks, err))
		return FALSE;
	if (vt_fs_path_inside(o->out, o->rec) || vt_fs_path_inside(o->rec, o->out) ||
	    vt_fs_path_inside(o->out, o->guest)) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "-o %s: choose an OUT apart from the inputs",
			    o->out);
		return FALSE;
	}
	return TRUE;
}

/* REC's KVM metadata, if any; its scale when every vCPU has the same. */
static void inj_meta_load(InjOpts *o)
{
	g_autoptr(GError) err = NULL;
	gboolean uniform;

	o->meta = vmcorr_kvm_meta_load(o->rec, NULL, &err);
	if (o->meta && !o->have_scale && vmcorr_kvm_meta_scaling(o->meta, &o->ratio, &o->frac, &uniform) && uniform)
		o->have_scale = TRUE;
}

/* Whether a KVM tsc-offset write of vCPU vcpu was recorded. */
static gboolean meta_written(const VmcorrKvmMeta *meta, int vcpu)
{
	for (guint i = 0; i < meta->writes->len; i++)
		if ((int)g_array_index(meta->writes, VmcorrTscWrite, i).vcpu == vcpu)
			return TRUE;
	return FALSE;
}

/* vCPU vcpu's TSC offset from REC's KVM metadata: KVM's own, when it is
 * that QEMU process's and did not change (the same at the start and the
 * end, no write recorded). */
static gboolean meta_offset(const InjOpts *o, int vcpu, uint64_t *off)
{
	for (guint i = 0; o->meta && i < o->meta->vcpus->len; i++) {
		const VmcorrKvmVcpu *k = &g_array_index(o->meta->vcpus, VmcorrKvmVcpu, i);

		if (k->vcpu != vcpu ||
		    (o->meta->qemu_pid && o->opt.machine_pid && o->meta->qemu_pid != o->opt.machine_pid))
			continue;
		if (!k->have_start || !k->have_end || k->tsc_offset_start != k->tsc_offset_end ||
		    meta_written(o->meta, vcpu))
			return FALSE;
		*off = (uint64_t)k->tsc_offset_start;
		return TRUE;
	}
	return FALSE;
}

static gboolean has_clock(const InjOpts *o, int vcpu)
{
	for (guint i = 0; i < o->opt.clocks->len; i++)
		if (g_array_index(o->opt.clocks, VtInjectClock, i).vcpu == vcpu)
			return TRUE;
	return FALSE;
}

/* Every vCPU of the metadata the trace gave no offset for: KVM's. */
static void add_meta_offsets(InjOpts *o)
{
	for (guint i = 0; o->meta && i < o->meta->vcpus->len; i++) {
		VtInjectClock c = { .vcpu = g_array_index(o->meta->vcpus, VmcorrKvmVcpu, i).vcpu };

		if (c.vcpu >= 0 && !has_clock(o, c.vcpu) && meta_offset(o, c.vcpu, &c.offset)) {
			g_array_append_val(o->opt.clocks, c);
			o->from_meta++;
		}
	}
}

/* The guest TSC at host TSC t by offset off (and the scaling, if any). */
static uint64_t guest_tsc(const InjOpts *o, uint64_t t, uint64_t off)
{
	return (o->have_scale ? (uint64_t)(((unsigned __int128)t * o->ratio) >> o->frac) : t) + off;
}

/* Epoch k's last and epoch k+1's first guest TSC, if the guest's TSC went
 * forward between them (else FALSE: its values may repeat). */
static gboolean forward_at(const InjOpts *o, const GArray *epochs, guint k, uint64_t *last, uint64_t *first)
{
	const VmcorrEpoch *a = &g_array_index(epochs, VmcorrEpoch, k), *b = &g_array_index(epochs, VmcorrEpoch, k + 1);

	*last = guest_tsc(o, a->t_last, a->offset);
	*first = guest_tsc(o, b->t_first, b->offset);
	return *first > *last;
}

/* The clock of each epoch of a VMCS whose offset changed: in force from
 * the last estimate of the epoch before to the first of the epoch after
 * (host TSC), and - where the guest's TSC went forward across the change -
 * between the guest TSCs of those estimates. */
static void add_epochs(InjOpts *o, const VmcorrVmcs *m)
{
	for (guint k = 0; k < m->epochs->len; k++) {
		const VmcorrEpoch *e = &g_array_index(m->epochs, VmcorrEpoch, k);
		VtInjectClock c = { .vcpu = m->vcpu, .offset = e->offset };
		uint64_t last, first;

		if (k > 0) {
			c.host_from = g_array_index(m->epochs, VmcorrEpoch, k - 1).t_last + 1;
			if (forward_at(o, m->epochs, k - 1, &last, &first))
				c.guest_from = last + 1;
		}
		if (k + 1 < m->epochs->len) {
			c.host_to = g_array_index(m->epochs, VmcorrEpoch, k + 1).t_first - 1;
			if (forward_at(o, m->epochs, k, &last, &first))
				c.guest_to = first - 1;
		}
		g_array_append_val(o->opt.clocks, c);
	}
}

/* One vCPU's offset (or its epochs' offsets) from a VMCS of the discovery. */
static int add_discovered(InjOpts *o, const VmcorrVmcs *m)
{
	VtInjectClock c = { .vcpu = m->vcpu, .offset = m->status == VMCORR_ZERO ? 0 : m->offset };

	if (m->status != VMCORR_OK && m->status != VMCORR_ZERO && m->status != VMCORR_CHANGES &&
	    !has_clock(o, m->vcpu) && meta_offset(o, m->vcpu, &c.offset)) {
		g_array_append_val(o->opt.clocks, c);    /* KVM's, from the metadata */
		o->from_meta++;
		return VT_EXIT_OK;
	}
	if (m->status != VMCORR_OK && m->status != VMCORR_ZERO && m->status != VMCORR_CHANGES) {
		vt_err("inject", "%s: the TSC offset of vCPU %d (VMCS %#" G_GINT64_MODIFIER "x) is %s; give it with "
		       "--offset OFF:%d (see vmtrace correlate --dry-run)", o->rec, m->vcpu, m->vmcs,
		       vmcorr_status_name(m->status), m->vcpu);
		return VT_EXIT_UNRESOLVED;
	}
	for (guint i = 0; i < o->opt.clocks->len; i++) {
		const VtInjectClock *x = &g_array_index(o->opt.clocks, VtInjectClock, i);

		if (x->vcpu == c.vcpu && (m->status == VMCORR_CHANGES || x->host_to || x->host_from ||
					  x->offset != c.offset)) {
			vt_err("inject", "%s: vCPU %d shows two TSC offsets (%#" G_GINT64_MODIFIER "x, %#"
			       G_GINT64_MODIFIER "x); give it with --offset OFF:%d", o->rec, c.vcpu, x->offset,
			       c.offset, c.vcpu);
			return VT_EXIT_UNRESOLVED;
		}
	}
	if (m->status == VMCORR_CHANGES)
		add_epochs(o, m);
	else
		g_array_append_val(o->opt.clocks, c);
	return VT_EXIT_OK;
}

/* The QEMU process: --pid, or REC's only one.  Several: the user says which. */
static int inj_pick_pid(InjOpts *o)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GArray) pids = NULL;

	if (o->opt.machine_pid)
		return VT_EXIT_OK;
	if (!(pids = vt_inject_host_qemu_pids(o->rec, &err))) {
		vt_err("inject", "%s", err->message);
		return VT_EXIT_BAD_INPUT;
	}
	if (pids->len > 1) {
		vt_err("inject", "%s: %u QEMU processes have vCPU threads (pids %u, %u%s); say which with --pid", o->rec,
		       pids->len, g_array_index(pids, uint32_t, 0), g_array_index(pids, uint32_t, 1),
		       pids->len > 2 ? ", ..." : "");
		return VT_EXIT_HOST_SIDEBAND;
	}
	if (pids->len)
		o->opt.machine_pid = g_array_index(pids, uint32_t, 0);
	return VT_EXIT_OK;    /* none: the merge says what is missing */
}

/* A progress line of `vmtrace inject` (src/cli/progress.h) while a phase
 * (what) runs: *done of REC's data file's bytes; NULL when off - never for
 * record --guest-ssh's merge (o->to_stderr), which stays silent. */
static VtProgressTicker *inj_progress(const InjOpts *o, VtProgress *p, const char *what, const guint64 *done)
{
	if (o->to_stderr)
		return NULL;
	vt_progress_init(p, what, o->progress, FALSE);    /* (the output is OUT) */
	return vt_progress_ticker_start(p, done, o->size);
}

/* Every vCPU's TSC offset, as `vmtrace correlate` finds it in REC. */
static int inj_discover(InjOpts *o)
{
	VmcorrOptions vo;
	g_autoptr(GError) err = NULL;
	VmcorrResult *r;
	uint32_t pid = o->opt.machine_pid;
	int rc = VT_EXIT_OK;
	gboolean dry_run_failed;
	guint64 done = 0;
	VtProgress progress;
	VtProgressTicker *ticker;

	vmcorr_options_init(&vo);
	if (o->have_scale) {
		vo.scales = g_array_new(FALSE, FALSE, sizeof(VmcorrScale));
		g_array_append_val(vo.scales, ((VmcorrScale){ 0, o->ratio, o->frac }));
	}
	vo.progress = &done;      /* the AUX bytes decoded */
	ticker = inj_progress(o, &progress, "inject (TSC offsets)", &done);
	r = vmcorr_dry_run(o->rec, &vo, &err);
	vt_progress_ticker_stop(ticker, r != NULL);
	vt_cli_line_end();        /* (no offsets found: KVM's metadata may have them, the merge goes on) */
	if (vo.scales)
		g_array_free(vo.scales, TRUE);
	if (!r && err->domain != VMCORR_ERROR) {    /* unreadable or malformed */
		vt_err("inject", "%s", err->message);
		return VT_EXIT_BAD_INPUT;
	}
	dry_run_failed = !r;
	o->opt.clocks = g_array_new(FALSE, FALSE, sizeof(VtInjectClock));
	for (guint i = 0; r && rc == VT_EXIT_OK && i < r->vmcs->len; i++) {
		const VmcorrVmcs *m = &g_array_index(r->vmcs, VmcorrVmcs, i);

		if (m->vcpu >= 0 && (!pid || m->pid == pid))
			rc = add_discovered(o, m);
	}
	vmcorr_result_free(r);
	if (rc == VT_EXIT_OK)
		add_meta_offsets(o);
	if (rc == VT_EXIT_OK && dry_run_failed && !o->opt.clocks->len) {
		vt_err("inject", "%s; the TSC offsets cannot be discovered: give them with --offset", err->message);
		return VT_EXIT_UNRESOLVED;
	}
	o->source = !o->from_meta ? "discovered in the host trace" :
		    o->from_meta == o->opt.clocks->len ? "KVM's, from REC's metadata (vmtrace-kvm.ini)" :
		    "discovered in the host trace, or KVM's from REC's metadata (vmtrace-kvm.ini)";
	return rc;
}

/* --tsc-scale (or the metadata's) on every clock. */
static void inj_apply_scale(InjOpts *o)
{
	for (guint i = 0; o->have_scale && i < o->opt.clocks->len; i++) {
		VtInjectClock *c = &g_array_index(o->opt.clocks, VtInjectClock, i);

		c->ratio = o->ratio;
		c->frac = o->frac;
	}
}

static void inj_report_json(const InjOpts *o, const VtInjectResult *r)
{
	g_autoptr(VtJson) j = vt_json_new(stdout);

	vt_json_begin_object(j);
	vt_json_kv_string(j, "output", o->out);
	vt_json_kv_uint(j, "machine_pid", r->machine_pid);
	vt_json_kv_uint(j, "vcpus", r->nvcpus);
	vt_json_kv_uint(j, "guest_ids", r->guest_ids);
	vt_json_kv_uint(j, "first_host_id", r->first_host_id);
	vt_json_kv_uint(j, "injected", r->injected);
	vt_json_kv_uint(j, "skipped", r->skipped);
	vt_json_kv_uint(j, "host_records", r->host_records);
	vt_json_kv_uint(j, "in_host_span", r->in_host_span);
	vt_json_kv_string(j, "offsets_from", o->source);
	vt_json_key(j, "clocks");
	vt_json_begin_array(j);
	for (guint i = 0; i < o->opt.clocks->len; i++) {
		const VtInjectClock *c = &g_array_index(o->opt.clocks, VtInjectClock, i);

		vt_json_begin_object(j);
		if (c->vcpu >= 0)
			vt_json_kv_int(j, "vcpu", c->vcpu);
		else
			vt_json_kv_null(j, "vcpu");
		vt_json_kv_hex(j, "tsc_offset", c->offset);
		vt_json_kv_uint(j, "tsc_scaling_ratio", c->ratio);
		vt_json_kv_uint(j, "tsc_scaling_frac", c->frac);
		if (c->host_from || c->host_to) {
			vt_json_kv_hex(j, "host_tsc_from", c->host_from);
			if (c->host_to)
				vt_json_kv_hex(j, "host_tsc_to", c->host_to);
			else
				vt_json_kv_null(j, "host_tsc_to");
			vt_json_kv_hex(j, "guest_tsc_from", c->guest_from);
			vt_json_kv_hex(j, "guest_tsc_to", c->guest_to);
		}
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
	vt_json_end_object(j);
}

static void inj_report_text(const InjOpts *o, const VtInjectResult *r)
{
	FILE *f = o->to_stderr ? stderr : stdout;

	fprintf(f, "%s: %" G_GUINT64_FORMAT " guest records injected (%" G_GUINT64_FORMAT " not injected: samples and "
	       "others), QEMU pid %u, %u vCPU%s, %" G_GUINT64_FORMAT " guest ids as host ids %" G_GUINT64_FORMAT
	       "..\n", o->out, r->injected, r->skipped, r->machine_pid, r->nvcpus, r->nvcpus == 1 ? "" : "s",
	       r->guest_ids, r->first_host_id);
	for (guint i = 0; i < o->opt.clocks->len; i++) {
		const VtInjectClock *c = &g_array_index(o->opt.clocks, VtInjectClock, i);
		g_autofree char *who = c->vcpu >= 0 ? g_strdup_printf("vCPU %d", c->vcpu) : g_strdup("every vCPU");

		fprintf(f, "  %s: TSC offset %#" G_GINT64_MODIFIER "x", who, c->offset);
		if (c->ratio)
			fprintf(f, ", TSC scaling %" G_GUINT64_FORMAT "/2^%u", c->ratio, c->frac);
		if (c->host_from || c->host_to)
			fprintf(f, ", host TSC %#" G_GINT64_MODIFIER "x..%s", c->host_from,
				c->host_to ? "" : "(end)");
		if (c->host_to)
			fprintf(f, "%#" G_GINT64_MODIFIER "x", c->host_to);
		fputc('\n', f);
	}
	fprintf(f, "  offsets %s\n", o->source);
}

static void inj_report(const InjOpts *o, const VtInjectResult *r)
{
	if (o->quiet)
		return;
	if (o->json && !o->to_stderr)
		inj_report_json(o, r);
	else
		inj_report_text(o, r);
	if (r->unplaced_vcpus)
		vt_warn("inject", "%s: %" G_GUINT64_FORMAT " vCPU thread%s never switched in or out on the host; "
			"its guest events show host CPU 0", o->rec, r->unplaced_vcpus, r->unplaced_vcpus == 1 ? "" : "s");
	if (r->host_last && r->timed && !r->in_host_span)
		vt_warn("inject", "%s: none of the %" G_GUINT64_FORMAT " timed guest records falls within the host "
			"recording's time span (a guest file of another run or machine, or a wrong --offset?)",
			o->out, r->timed);
}

static int inj_run(InjOpts *o)
{
	g_autoptr(GError) err = NULL;
	VtInjectResult r;
	int rc = VT_EXIT_OK;
	guint64 done = 0;
	VtProgress progress;
	VtProgressTicker *ticker;
	gboolean ok;

	inj_meta_load(o);
	o->size = vt_cmd_data_size(o->rec);
	o->source = "given with --offset";
	if (!vt_inject_one_data_file(o->guest, &err) || !vt_inject_one_data_file(o->rec, &err) ||
	    !vt_inject_guest_check(o->guest, &err)) {    /* before a long discovery */
		vt_err("inject", "%s", err->message);
		return exit_code_for(err);
	}
	rc = inj_pick_pid(o);
	if (rc == VT_EXIT_OK)
		rc = inj_check_offset_vcpus(o);
	if (rc == VT_EXIT_OK && !o->opt.clocks)
		rc = inj_discover(o);
	if (rc != VT_EXIT_OK)
		return rc;
	inj_apply_scale(o);
	o->opt.progress = &done;
	ticker = inj_progress(o, &progress, "inject", &done);
	ok = vt_inject_guest_data(o->rec, o->guest, o->out, &o->opt, &r, &err);
	vt_progress_ticker_stop(ticker, ok);
	o->opt.progress = NULL;
	if (!ok) {
		vt_err("inject", "%s", err->message);
		return exit_code_for(err);
	}
	inj_report(o, &r);
	return o->to_stderr ? VT_EXIT_OK : vt_cli_close_stdout("inject", VT_EXIT_OK);
}

int vt_cmd_inject_merge(const char *rec, const char *guest, const char *out, gboolean quiet)
{
	InjOpts o = { 0 };
	int rc;

	o.rec = rec;
	o.guest = g_strdup(guest);
	o.out = g_strdup(out);
	o.to_stderr = TRUE;
	o.quiet = quiet;
	rc = inj_run(&o);
	inj_opts_clear(&o);
	return rc;
}

int cmd_inject(int argc, char **argv)
{
	InjOpts o = { 0 };
	g_autoptr(GError) err = NULL;
	int rc;

	if (!inj_parse(&o, &argc, &argv, &err) || !inj_validate(&o, &err)) {
		vt_err("inject", "%s (see vmtrace inject --help)", err->message);
		rc = VT_EXIT_USAGE;
	} else if (!vt_fs_output_check(o.out, VT_FS_OUTPUT_DIR, &err)) {
		vt_err("inject", "%s (OUT is written as a new perf.data directory)", err->message);
		rc = VT_EXIT_FAILURE;
	} else {
		rc = inj_run(&o);
	}
	inj_opts_clear(&o);
	return rc;
}
