/* record.c - `vmtrace record`: find a libvirt domain's vCPU threads and
 * trace them with Intel PT into a perf.data directory, with sideband and
 * KVM time metadata. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "src/host/domain.h"
#include "guestfs/guestfs.h"
#include "src/fs/fs.h"
#include "src/fs/output.h"
#include "src/host/host.h"
#include "src/record/capture.h"
#include "src/record/recorder.h"
#include "src/synth/synth.h"
#include "vmcorr/vmcorr.h"
#include "src/cmd/cmd.h"

static volatile sig_atomic_t stop_signal, snapshot_requests;

/* The signals that stop a recording cleanly, and what they did before
 * (src/fs's cleanup of temporaries, installed by main). */
static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP };
static struct sigaction stop_old[G_N_ELEMENTS(stop_signals)];

/* The first one stops the recording; the next one, of any of them, gets
 * the previous action (the temporaries are removed, the process ends): a
 * stuck run can still be killed. */
static void on_stop(int sig)
{
	stop_signal = sig;
	for (guint i = 0; i < G_N_ELEMENTS(stop_signals); i++)
		sigaction(stop_signals[i], &stop_old[i], NULL);
}

static void stop_handlers(gboolean on)
{
	struct sigaction sa = { .sa_handler = on_stop };

	sigemptyset(&sa.sa_mask);      /* none of them interrupts on_stop */
	for (guint i = 0; i < G_N_ELEMENTS(stop_signals); i++)
		sigaddset(&sa.sa_mask, stop_signals[i]);
	for (guint i = 0; i < G_N_ELEMENTS(stop_signals); i++) {
		if (on)
			sigaction(stop_signals[i], &sa, &stop_old[i]);
		else
			sigaction(stop_signals[i], &stop_old[i], NULL);
	}
}

static void on_snapshot(int sig)
{
	(void)sig;
	snapshot_requests++;
}

typedef struct {
	char *snapshot_arg;
	gboolean snapshot;
} SnapOpt;

static SnapOpt snap_opt;

static gboolean parse_snapshot(const char *name, const char *value, gpointer data, GError **error)
{
	(void)name;
	(void)data;
	(void)error;
	snap_opt.snapshot = TRUE;
	g_free(snap_opt.snapshot_arg);
	snap_opt.snapshot_arg = g_strdup(value);
	return TRUE;
}

static gboolean pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static char *human(uint64_t b)
{
	return g_format_size_full(b, G_FORMAT_SIZE_IEC_UNITS);
}

static void progress(const VtRecorderStats *st, double secs, gboolean final)
{
	g_autofree char *a = human(st->aux_bytes);
	g_autofree char *r = human(secs >= 0.5 ? (uint64_t)(st->aux_bytes / secs) : 0);

	fprintf(stderr, "\r[ vmtrace record: %.1f s, %s trace (%s/s), %" G_GUINT64_FORMAT " sideband records",
		secs, a, r, st->sideband_records);
	if (st->snapshots)
		fprintf(stderr, ", %" G_GUINT64_FORMAT " snapshot%s", st->snapshots, st->snapshots == 1 ? "" : "s");
	if (st->lost)
		fprintf(stderr, ", %" G_GUINT64_FORMAT " LOST records", st->lost);
	if (st->truncated)
		fprintf(stderr, ", %" G_GUINT64_FORMAT " TRUNCATED AUX", st->truncated);
	fputs(final ? " ]\n" : " ]   ", stderr);
	fflush(stderr);
}

static void kvm_snapshot(VtDomain *d, VmcorrKvmMeta *m, gboolean start)
{
	vt_domain_read_kvm(d);
	for (guint i = 0; i < d->vcpus->len; i++) {
		const VtDomainVcpu *v = &g_array_index(d->vcpus, VtDomainVcpu, i);
		VmcorrKvmVcpu *k;

		if (start) {
			VmcorrKvmVcpu z = { .vcpu = v->vcpu, .tid = v->tid };

			g_array_append_val(m->vcpus, z);
		}
		k = &g_array_index(m->vcpus, VmcorrKvmVcpu, i);
		if (!v->have_kvm)
			continue;
		if (start) {
			k->have_start = TRUE;
			k->tsc_offset_start = v->tsc_offset;
			k->have_guest_mode_start = v->guest_mode >= 0;
			k->guest_mode_start = v->guest_mode;
		} else {
			g_autofree char *pp = d->kvm_dir ? g_strdup_printf("%s/vcpu%d/pid", d->kvm_dir, v->vcpu) : NULL;
			gint64 tid;

			/* the thread that runs the vCPU now, if KVM says another */
			if (pp && vt_host_read_int(pp, &tid) && tid > 0 && (uint32_t)tid != k->tid)
				k->end_tid = (uint32_t)tid;
			k->have_end = TRUE;
			k->tsc_offset_end = v->tsc_offset;
			k->have_guest_mode_end = v->guest_mode >= 0;
			k->guest_mode_end = v->guest_mode;
		}
		if (v->have_scaling) {
			k->have_scaling = TRUE;
			k->tsc_scaling_ratio = v->tsc_scaling_ratio;
			k->tsc_scaling_frac_bits = v->tsc_scaling_frac_bits;
		}
	}
}

/* --kcore: DIR/kcore_dir/{kcore,kallsyms,modules} as perf record --kcore
 * writes them - the host's /proc/kcore cut down to what decoding needs
 * (kernel text, the module/BPF area, the PTI entry trampolines: the same
 * code as `vmtrace guest fetch`), mode 0600 (it is kernel memory).  Fails if
 * kallsyms or modules change during the copy. */
static gboolean copy_kcore(const char *dir, uint64_t *copied, GError **error)
{
	const char *root = *vt_host_root() ? vt_host_root() : "/";
	g_autofree char *kd = g_build_filename(dir, "kcore_dir", NULL);
	g_autofree char *kc = g_build_filename(kd, "kcore", NULL);
	VtGuestSource *src = vt_guest_source_root_open(root, error);
	g_autoptr(GBytes) ks = NULL, mods = NULL;
	VtGuestKallsyms k = { 0 };
	g_autoptr(GArray) ranges = NULL;
	gboolean ok = FALSE;

	if (!src)
		return FALSE;
	if (!vt_guest_read_symbols(src, &ks, &mods, error) || !vt_guest_kallsyms_parse(ks, mods, &k, error))
		goto out;
	if (k.all_zero) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA,
			    "--kcore: /proc/kallsyms shows only zero addresses (kptr_restrict); run as root or "
			    "sysctl -w kernel.kptr_restrict=0");
		goto out;
	}
	ranges = vt_guest_kallsyms_ranges(&k);
	if (mkdir(kd, 0700) < 0) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: %s", kd, g_strerror(errno));
		goto out;
	}
	if (!vt_guest_kcore_copy(src, "/proc/kcore", ranges, kc, &stop_signal, copied, error) ||
	    !vt_guest_cache_write(kd, "kallsyms", ks, error) || !vt_guest_cache_write(kd, "modules", mods, error))
		goto out;
	if (!vt_guest_symbols_unchanged(src, ks, mods, error)) {
		g_prefix_error(error, "--kcore: ");
		goto out;
	}
	ok = TRUE;
out:
	vt_guest_kallsyms_clear(&k);
	vt_guest_source_close(src);
	return ok;
}

/* -o: not empty, ".", ".." or "/"; trailing slashes dropped (the output
 * is built next to it and renamed onto it). */
static gboolean output_path_ok(char **out, GError **error)
{
	gsize n = strlen(*out);
	g_autofree char *base = NULL;

	while (n > 1 && (*out)[n - 1] == '/')
		(*out)[--n] = '\0';
	base = g_path_get_basename(*out);
	if (!n || !strcmp(base, ".") || !strcmp(base, "..") || !strcmp(base, "/")) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "-o '%s': name the recording's directory, e.g. -o vm0.data", *out);
		return FALSE;
	}
	return TRUE;
}

/* OUT and OUT.old may be replaced only if they are absent or recordings:
 * a perf.data file (PERFILE2) or a directory holding only what perf and
 * vmtrace record write there.  Anything else is the user's: refuse. */
static gboolean output_replaceable(const char *out, GError **error)
{
	g_autofree char *old = g_strconcat(out, ".old", NULL);
	const char *const paths[] = { out, old };

	for (guint i = 0; i < G_N_ELEMENTS(paths); i++) {
		g_autoptr(GError) why = NULL;

		if (!vt_fs_is_recording(paths[i], &why)) {
			g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
				    "refusing to %s %s, it is not a recording (%s): move it away or choose another -o",
				    i ? "delete" : "move aside", paths[i], why->message);
			return FALSE;
		}
	}
	return TRUE;
}

/* Move an existing OUT aside as OUT.old, as perf record does (both were
 * checked by output_replaceable; checked again here, just before). */
static gboolean move_old(const char *out, GError **error)
{
	g_autofree char *old = g_strconcat(out, ".old", NULL);
	struct stat st;

	if (lstat(out, &st) < 0)
		return TRUE;
	if (!output_replaceable(out, error))
		return FALSE;
	if (lstat(old, &st) == 0 && !vt_fs_remove_recording(old, error))
		return FALSE;
	if (rename(out, old) < 0) {
		int e = errno;

		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e), "cannot move %s to %s: %s", out, old,
			    g_strerror(e));
		return FALSE;
	}
	return TRUE;
}

/* 14 when this machine cannot trace, else `other`. */
static int exit_for_capture_error(const GError *e, int other)
{
	if (e->domain == VT_CAPTURE_ERROR && e->code == VT_CAPTURE_ERROR_NO_PT)
		return VT_EXIT_NO_PT;
	return other;
}

int cmd_record(int argc, char **argv)
{
	char *domain = NULL, *uri = NULL, *out = NULL, *source = NULL, *aux_size = NULL;
	char *synth_size = NULL, *synth_offset = NULL, *synth_seed = NULL, *synth_rate = NULL;
	gint pid = G_MININT, mtc_period = -1;
	gdouble duration = 0;
	gboolean per_cpu = FALSE, per_thread = FALSE, timeless = FALSE, cyc = FALSE, qmp = FALSE, kcore = FALSE;
	gboolean json = FALSE, quiet = FALSE, no_tp = FALSE, show_progress = FALSE;
	GOptionEntry entries[] = {
		{ "domain", 'd', 0, G_OPTION_ARG_STRING, &domain, "Trace the libvirt domain NAME", "NAME" },
		{ "connect", 'c', 0, G_OPTION_ARG_STRING, &uri, "libvirt URI (default $LIBVIRT_DEFAULT_URI, else qemu:///system)", "URI" },
		{ "pid", 'p', 0, G_OPTION_ARG_INT, &pid, "Trace a QEMU process not managed by libvirt", "PID" },
		{ "qmp", 0, 0, G_OPTION_ARG_NONE, &qmp, "Allow QMP query-cpus-fast to find vCPU threads (taints the domain)", NULL },
		{ "output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "perf.data directory to write (default perf.data; an existing one becomes perf.data.old)", "DIR" },
		{ "per-thread", 0, 0, G_OPTION_ARG_NONE, &per_thread, "One trace buffer per vCPU thread (default)", NULL },
		{ "per-cpu", 0, 0, G_OPTION_ARG_NONE, &per_cpu, "One trace buffer per host CPU, vCPU threads only", NULL },
		{ "timeless", 0, 0, G_OPTION_ARG_NONE, &timeless, "No timing packets (tsc=0,mtc=0), per-thread: decode with --itrace without time", NULL },
		{ "cyc", 0, 0, G_OPTION_ARG_NONE, &cyc, "Cycle-accurate mode (intel_pt/cyc=1/)", NULL },
		{ "mtc-period", 0, 0, G_OPTION_ARG_INT, &mtc_period, "MTC every 2^N CTC ticks (default 3; caps/mtc_periods)", "N" },
		{ "snapshot", 'S', G_OPTION_FLAG_OPTIONAL_ARG, G_OPTION_ARG_CALLBACK, (gpointer)parse_snapshot,
		  "Snapshot mode: keep the newest SIZE bytes per buffer (default: all of --aux-size); SIGUSR2 (and the end) write them", "SIZE" },
		{ "duration", 't', 0, G_OPTION_ARG_DOUBLE, &duration, "Stop after SECONDS (default: at Ctrl-C or when QEMU exits)", "SECONDS" },
		{ "aux-size", 0, 0, G_OPTION_ARG_STRING, &aux_size, "Trace buffer per thread/CPU, a power of two (default 4M)", "SIZE" },
		{ "kcore", 0, 0, G_OPTION_ARG_NONE, &kcore, "Copy the kernel text and modules from /proc/kcore to DIR/kcore_dir (as perf record --kcore)", NULL },
		{ "no-tsc-tracepoint", 0, 0, G_OPTION_ARG_NONE, &no_tp, "Do not record kvm:kvm_write_tsc_offset", NULL },
		{ "progress", 0, 0, G_OPTION_ARG_NONE, &show_progress, "Live progress line even when stderr is not a terminal", NULL },
		{ "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "No mapping, progress or summary on stderr", NULL },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &json, "Print a JSON summary on stdout", NULL },
		G_OPTION_ENTRY_NULL
	};
	GOptionEntry test_entries[] = {
		{ "source", 0, 0, G_OPTION_ARG_STRING, &source, "intel_pt (default) or synth: packets from `vmtrace synth` for the real threads", "SOURCE" },
		{ "synth-size", 0, 0, G_OPTION_ARG_STRING, &synth_size, "synth: total trace bytes (default 16M)", "SIZE" },
		{ "synth-offset", 0, 0, G_OPTION_ARG_STRING, &synth_offset, "synth: the guest's TSC offset", "OFF" },
		{ "synth-seed", 0, 0, G_OPTION_ARG_STRING, &synth_seed, "synth: random seed", "N" },
		{ "synth-rate", 0, 0, G_OPTION_ARG_STRING, &synth_rate, "synth: produce SIZE bytes per second (default: as fast as they are read)", "SIZE" },
		G_OPTION_ENTRY_NULL
	};
	GOptionContext *ctx = g_option_context_new("- trace a KVM guest's vCPUs with Intel PT");
	GOptionGroup *tg;
	GError *err = NULL;
	int rc = VT_EXIT_USAGE;
	VtDomain d = { 0 };
	VtCaptureConfig cc = { 0 };
	VtSynthConfig sc;
	VtCapture *cap = NULL;
	VtRecorder *rec = NULL;
	VmcorrKvmMeta *meta = NULL;
	VtFsOutput *output = NULL;
	const char *tmpdir = NULL;
	g_auto(GStrv) cmdline = NULL;
	g_autoptr(GArray) tids = g_array_new(FALSE, FALSE, sizeof(int32_t));
	g_autoptr(GArray) cpus = NULL;
	uint64_t aux_bytes = 4ULL << 20, snap_bytes = 0;
	gint64 t_start;
	gboolean tty = isatty(2), interactive, handlers = FALSE;
	struct sigaction sa_snap = { 0 }, old_usr2;
	const GArray *writes;
	const char *tp_why = NULL;

	memset(&snap_opt, 0, sizeof(snap_opt));
	g_option_context_set_summary(ctx,
		"Finds the domain through libvirt (or a QEMU process by --pid), its vCPU threads\n"
		"(KVM debugfs vcpuN/pid, then \"CPU n/KVM\" thread names, then QMP with --qmp),\n"
		"checks that this host can trace them, and records kernel-only Intel PT\n"
		"(intel_pt//k) of those threads into a perf.data directory that perf reads:\n"
		"DIR/data with the trace, sideband (comm, task, mmap, context switches) and\n"
		"DIR/vmtrace-kvm.ini, KVM's tsc-offset and TSC scaling of every vCPU at the\n"
		"start and the end, plus kvm:kvm_write_tsc_offset events when available.\n"
		"Next step: vmtrace correlate DIR.");
	g_option_context_set_description(ctx,
		"Signals: Ctrl-C (SIGINT), SIGTERM or SIGHUP stop cleanly (a second one ends\n"
		"the run at once, removing the unfinished output); SIGUSR2 takes a snapshot in\n"
		"--snapshot mode.  Under sudo the output belongs to the invoking user.\n"
		"Exit status: 0 recorded; 1 failure; 2 usage; 14 this machine cannot trace\n"
		"(no Intel PT: run `vmtrace check` to see what is missing).\n"
		"\n"
		"Examples:\n"
		"  sudo vmtrace record --domain kubuntu20.04 --duration 5\n"
		"  sudo vmtrace record --domain vm0 --per-cpu --cyc -o vm0.data\n"
		"  sudo vmtrace record --domain vm0 --snapshot=16M     # then: kill -USR2 <pid>\n"
		"  vmtrace record --pid $(pgrep -f qemu) --source synth -t 1   # no Intel PT needed\n");
	g_option_context_add_main_entries(ctx, entries, NULL);
	tg = g_option_group_new("testing", "Testing without Intel PT:", "Show the synthetic trace source's options", NULL, NULL);
	g_option_group_add_entries(tg, test_entries);
	g_option_context_add_group(ctx, tg);
	cmdline = g_new0(char *, argc + 2);
	cmdline[0] = g_strdup("vmtrace");
	for (int i = 0; i < argc; i++)
		cmdline[i + 1] = g_strdup(argv[i]);
	if (!g_option_context_parse(ctx, &argc, &argv, &err))
		goto usage_err;
	if (argc > 1) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "unexpected argument '%s'", argv[1]);
		goto usage_err;
	}
	if (!!domain == (pid != G_MININT)) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "give either --domain NAME or --pid PID");
		goto usage_err;
	}
	if (!domain && pid <= 0) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--pid %d: not a process id", pid);
		goto usage_err;
	}
	if (per_cpu && per_thread) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--per-cpu and --per-thread exclude each other");
		goto usage_err;
	}
	if (timeless && per_cpu) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "--timeless needs per-thread buffers (without time, per-CPU data cannot be split by thread)");
		goto usage_err;
	}
	if (timeless && mtc_period >= 0) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--timeless has no MTC: drop --mtc-period");
		goto usage_err;
	}
	if (timeless && cyc) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "--timeless has no time for cycle counts to refine: drop --cyc");
		goto usage_err;
	}
	if (mtc_period > 15 || mtc_period < -1) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--mtc-period %d: must be 0..15", mtc_period);
		goto usage_err;
	}
	if (!(duration >= 0 && duration < 1e9)) {    /* also NaN */
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "--duration %g: expected seconds >= 0 (0: until Ctrl-C or QEMU exits)", duration);
		goto usage_err;
	}
	if (aux_size && (!vt_parse_size(aux_size, &aux_bytes) || !pow2(aux_bytes) || aux_bytes < 16384 ||
			 aux_bytes > (1ULL << 30))) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "--aux-size '%s': need a power of two from 16K to 1G, e.g. 4M", aux_size);
		goto usage_err;
	}
	if (snap_opt.snapshot && snap_opt.snapshot_arg &&
	    (!vt_parse_size(snap_opt.snapshot_arg, &snap_bytes) || snap_bytes < 4096)) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--snapshot='%s': expected a size of 4K or more, like 16M",
			    snap_opt.snapshot_arg);
		goto usage_err;
	}
	if (snap_bytes > (1ULL << 30)) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--snapshot=%s: at most 1G per buffer",
			    snap_opt.snapshot_arg);
		goto usage_err;
	}
	if (snap_bytes > aux_bytes) {
		/* like perf: the buffer must hold a snapshot */
		aux_bytes = 1;
		while (aux_bytes < snap_bytes)
			aux_bytes <<= 1;
	}
	if (source && strcmp(source, "intel_pt") && strcmp(source, "synth")) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--source '%s': intel_pt or synth", source);
		goto usage_err;
	}
	vt_synth_config_init(&sc);
	sc.size = 16ULL << 20;
	if (!vt_opt_size("--synth-size", synth_size, &sc.size, &err) ||
	    !vt_opt_u64("--synth-offset", synth_offset, &sc.vm_offset[0], &err) ||
	    !vt_opt_size("--synth-rate", synth_rate, &cc.synth_rate, &err) ||
	    !vt_opt_u64("--synth-seed", synth_seed, &sc.seed, &err))
		goto usage_err;
	if (synth_offset)
		sc.have_offset[0] = TRUE;
	if (g_strcmp0(source, "synth") && (synth_size || synth_offset || synth_rate || synth_seed)) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--synth-* options need --source synth");
		goto usage_err;
	}
	if (!out)
		out = g_strdup("perf.data");
	if (!output_path_ok(&out, &err))
		goto usage_err;
	if (!output_replaceable(out, &err)) {
		vt_err("record", "%s", err->message);
		rc = VT_EXIT_FAILURE;
		goto done;
	}
	/* Can this machine trace with these options?  Asked before anything
	 * is looked up or opened, so "no Intel PT" is the first thing said. */
	cc.per_cpu = per_cpu;
	cc.timeless = timeless;
	cc.cyc = cyc;
	cc.mtc_period = mtc_period;
	cc.snapshot = snap_opt.snapshot;
	cc.aux_bytes = aux_bytes;
	cc.data_bytes = 512u << 10;
	cc.synth = &sc;
	cc.stop = &stop_signal;
	if (!vt_capture_probe(source ? source : "intel_pt", &cc, &err)) {
		vt_err("record", "%s", err->message);
		rc = exit_for_capture_error(err, VT_EXIT_USAGE);   /* else the options do not fit */
		goto done;
	}
	interactive = !quiet;

	/* Signals first: a Ctrl-C or SIGUSR2 during the setup must not kill us
	 * with a half-built output; it stops (or snapshots) cleanly instead. */
	stop_handlers(TRUE);
	sa_snap.sa_handler = on_snapshot;
	sigemptyset(&sa_snap.sa_mask);
	sigaction(SIGUSR2, &sa_snap, &old_usr2);
	stop_signal = 0;
	snapshot_requests = 0;
	handlers = TRUE;

	/* 1. the domain and its vCPU threads */
	if (domain ? !vt_domain_find(domain, uri, qmp, &d, &err) : !vt_domain_from_pid((uint32_t)pid, &d, &err)) {
		vt_err("record", "%s", err->message);
		rc = VT_EXIT_FAILURE;
		goto done;
	}
	for (guint i = 0; i < d.vcpus->len; i++) {
		const VtDomainVcpu *v = &g_array_index(d.vcpus, VtDomainVcpu, i);
		int32_t t = (int32_t)v->tid;

		if (!v->tid) {
			vt_err("record", "vCPU %d of %s (QEMU pid %u): thread not found; is the guest running? %s", v->vcpu,
			       domain ? domain : "the process", d.pid, qmp ? "" : "(--qmp asks QEMU, but taints the domain)");
			rc = VT_EXIT_FAILURE;
			goto done;
		}
		g_array_append_val(tids, t);
	}
	if (!tids->len) {
		vt_err("record", "%s (QEMU pid %u) has no vCPU threads: is it QEMU?  Threads are found through KVM's "
		       "debugfs (mount -t debugfs none /sys/kernel/debug) or QEMU's thread names (-name NAME,"
		       "debug-threads=on; libvirt sets it)", domain ? domain : "the process", d.pid);
		rc = VT_EXIT_FAILURE;
		goto done;
	}
	if (interactive) {
		if (domain)
			fprintf(stderr, "vmtrace record: domain '%s' on %s, QEMU pid %u, %u vCPU%s:", domain, d.uri, d.pid,
				tids->len, tids->len == 1 ? "" : "s");
		else
			fprintf(stderr, "vmtrace record: QEMU pid %u, %u vCPU%s:", d.pid, tids->len,
				tids->len == 1 ? "" : "s");
		for (guint i = 0; i < d.vcpus->len; i++) {
			const VtDomainVcpu *v = &g_array_index(d.vcpus, VtDomainVcpu, i);

			fprintf(stderr, "%s vCPU %d = tid %u (%s)", i ? "," : "", v->vcpu, v->tid, v->source);
		}
		fputc('\n', stderr);
	}

	/* 2. the trace source and its streams */
	cc.qemu_pid = d.pid;
	cc.tids = (const int32_t *)tids->data;
	cc.ntids = tids->len;
	cap = vt_capture_new(source ? source : "intel_pt", &cc, &err);
	if (!cap) {
		vt_err("record", "%s", err->message);
		rc = VT_EXIT_FAILURE;
		goto done;
	}
	if (per_cpu) {
		cpus = vt_host_online_cpus();
		for (guint i = 0; i < cpus->len && vt_capture_add_stream(cap, -1, g_array_index(cpus, int, i)); i++)
			;
	} else {
		for (guint i = 0; i < tids->len; i++)
			vt_capture_add_stream(cap, g_array_index(tids, int32_t, i), -1);
	}

	/* 3. the output, built in a temporary directory next to it (an OUT
	 * there now is moved to OUT.old at the end) */
	output = vt_fs_output_new(out, VT_FS_OUTPUT_DIR | VT_FS_OUTPUT_REPLACE, 0755, &err);
	if (!output) {
		vt_err("record", "%s", err->message);
		rc = VT_EXIT_FAILURE;
		goto done;
	}
	tmpdir = vt_fs_output_tmp(output);
	chmod(tmpdir, 0755);
	meta = vmcorr_kvm_meta_new();
	meta->domain = g_strdup(domain);
	meta->qemu_pid = d.pid;
	kvm_snapshot(&d, meta, TRUE);
	{
		VtRecorderOptions ro = {
			.out_dir = tmpdir,
			.qemu_pid = d.pid,
			.tids = (const int32_t *)tids->data,
			.ntids = tids->len,
			.tsc_tracepoint = !no_tp,
			.snapshot_size = snap_bytes,
			.argv = (const char *const *)cmdline,
		};

		rec = vt_recorder_new(cap, &ro, &err);
	}
	if (!rec) {
		vt_err("record", "%s", err->message);
		rc = exit_for_capture_error(err, VT_EXIT_FAILURE);
		goto done;
	}
	/* 4. record */
	if (kcore) {
		uint64_t copied = 0;

		if (!copy_kcore(tmpdir, &copied, &err)) {
			vt_err("record", "%s", err->message);
			rc = VT_EXIT_FAILURE;
			goto done;
		}
		if (interactive)
			fprintf(stderr, "vmtrace record: copied %.1f MiB of kernel memory to %s/kcore_dir\n",
				copied / 1048576.0, out);
	}
	if (stop_signal) {
		vt_err("record", "interrupted before the recording started; nothing written");
		rc = VT_EXIT_FAILURE;
		goto done;
	}
	if (!vt_recorder_start(rec, &err))
		goto fail_restore;
	t_start = g_get_monotonic_time();
	if (interactive)
		fprintf(stderr, "vmtrace record: recording %s from the %s source (%s, %u buffer%s of %" G_GUINT64_FORMAT
			" KiB)%s; Ctrl-C stops\n", cap->event_name, cap->ops->name,
			per_cpu ? "per-CPU" : "per-thread", cap->streams->len, cap->streams->len == 1 ? "" : "s",
			aux_bytes >> 10, snap_opt.snapshot ? ", snapshot mode: kill -USR2 to take one" : "");
	{
		gint64 last = 0;
		guint seen_snaps = 0;

		for (;;) {
			gint64 now = g_get_monotonic_time();
			double secs = (now - t_start) / 1e6;

			if (stop_signal || (duration > 0 && secs >= duration))
				break;
			if (d.pid && kill((pid_t)d.pid, 0) < 0 && errno == ESRCH) {
				if (interactive)
					fprintf(stderr, "\nvmtrace record: QEMU (pid %u) exited\n", d.pid);
				break;
			}
			if (cap->ops->exhausted(cap) && duration <= 0)
				break;
			if (!vt_recorder_poll(rec, 100, &err))
				goto fail_restore;
			while (seen_snaps != (guint)snapshot_requests) {
				seen_snaps++;
				if (!vt_recorder_snapshot(rec, &err))
					goto fail_restore;
			}
			if (interactive && (tty || show_progress) && now - last >= 500000) {
				progress(vt_recorder_stats(rec), secs, FALSE);
				last = now;
			}
		}
	}
	if (!vt_recorder_finish(rec, &err))
		goto fail_restore;

	/* 5. metadata, ownership, into place */
	kvm_snapshot(&d, meta, FALSE);
	writes = vt_recorder_tsc_writes(rec, &tp_why);
	if (writes) {
		meta->have_writes = TRUE;
		for (guint i = 0; i < writes->len; i++) {
			const VtRecorderTscWrite *w = &g_array_index(writes, VtRecorderTscWrite, i);
			VmcorrTscWrite mw = { w->time, w->tid, w->vcpu, w->previous, w->next };

			g_array_append_val(meta->writes, mw);
		}
	}
	{
		g_autofree char *ini = g_build_filename(tmpdir, "vmtrace-kvm.ini", NULL);

		if (!vmcorr_kvm_meta_save(meta, ini, &err)) {
			vt_err("record", "%s", err->message);
			rc = VT_EXIT_FAILURE;
			goto done;
		}
	}
	{
		uid_t uid;
		gid_t gid;

		if (vt_fs_sudo_owner(&uid, &gid) && !vt_fs_chown_tree(tmpdir, uid, gid, &err)) {
			vt_err("record", "%s", err->message);
			rc = VT_EXIT_FAILURE;
			goto done;
		}
	}
	if (!move_old(out, &err)) {
		vt_err("record", "%s", err->message);
		rc = VT_EXIT_FAILURE;
		goto done;
	}
	if (!vt_fs_output_commit(output, &err)) {
		vt_err("record", "%s", err->message);
		rc = VT_EXIT_FAILURE;
		goto done;
	}
	{
		const VtRecorderStats *st = vt_recorder_stats(rec);
		double secs = (g_get_monotonic_time() - t_start) / 1e6;

		if (interactive) {
			g_autofree char *a = human(st->aux_bytes);

			if (tty || show_progress)
				progress(st, secs, TRUE);
			fprintf(stderr, "vmtrace record: wrote %s: %s of trace in %u buffer%s, %" G_GUINT64_FORMAT
				" sideband records, KVM metadata %s/vmtrace-kvm.ini%s%s%s\n", out, a, cap->streams->len,
				cap->streams->len == 1 ? "" : "s", st->sideband_records, out,
				writes ? "" : " (no kvm_write_tsc_offset: ", writes ? "" : tp_why, writes ? "" : ")");
			if (st->lost || st->truncated)
				fprintf(stderr, "vmtrace record: WARNING: %" G_GUINT64_FORMAT " records lost, %"
					G_GUINT64_FORMAT " trace buffers truncated: use a larger --aux-size\n",
					st->lost, st->truncated);
			if (!timeless)
				fprintf(stderr, "next: vmtrace correlate --dry-run %s\n", out);
		}
		if (json) {
			GString *s = g_string_new("{\"output\": ");

			vt_json_str(s, out);
			g_string_append(s, ", \"domain\": ");
			if (domain)
				vt_json_str(s, domain);
			else
				g_string_append(s, "null");
			g_string_append_printf(s, ", \"qemu_pid\": %u, \"source\": ", d.pid);
			vt_json_str(s, source ? source : "intel_pt");
			g_string_append(s, ", \"event\": ");
			vt_json_str(s, cap->event_name);
			g_string_append_printf(s, ", \"mode\": \"%s\", \"snapshot\": %s, \"vcpus\": [",
					       per_cpu ? "per-cpu" : "per-thread", snap_opt.snapshot ? "true" : "false");
			for (guint i = 0; i < d.vcpus->len; i++) {
				const VtDomainVcpu *v = &g_array_index(d.vcpus, VtDomainVcpu, i);

				g_string_append_printf(s, "%s{\"vcpu\": %d, \"tid\": %u, \"source\": ", i ? ", " : "",
						       v->vcpu, v->tid);
				vt_json_str(s, v->source);
				g_string_append(s, "}");
			}
			g_string_append_printf(s, "], \"seconds\": %.3f, \"aux_bytes\": %" G_GUINT64_FORMAT
					       ", \"buffers\": %u, \"sideband_records\": %" G_GUINT64_FORMAT
					       ", \"lost\": %" G_GUINT64_FORMAT ", \"truncated\": %" G_GUINT64_FORMAT
					       ", \"snapshots\": %" G_GUINT64_FORMAT ", \"tsc_offset_writes\": %d}",
					       secs, st->aux_bytes, cap->streams->len, st->sideband_records, st->lost,
					       st->truncated, st->snapshots, writes ? (int)writes->len : -1);
			puts(s->str);
			g_string_free(s, TRUE);
		}
	}
	rc = VT_EXIT_OK;
	goto done;

fail_restore:
	if (interactive && tty)
		fputc('\n', stderr);
	vt_err("record", "%s", err->message);
	rc = VT_EXIT_FAILURE;
	goto done;

usage_err:
	vt_err("record", "%s (see vmtrace record --help)", err->message);
done:
	vt_recorder_free(rec);
	vt_capture_free(cap);
	vt_fs_output_free(output);     /* the temporary directory, unless renamed */
	if (handlers) {
		stop_handlers(FALSE);
		sigaction(SIGUSR2, &old_usr2, NULL);
	}
	vmcorr_kvm_meta_free(meta);
	if (d.vcpus)
		vt_domain_clear(&d);
	g_clear_error(&err);
	g_option_context_free(ctx);
	g_free(domain);
	g_free(uri);
	g_free(out);
	g_free(source);
	g_free(aux_size);
	g_free(synth_size);
	g_free(synth_offset);
	g_free(synth_seed);
	g_free(synth_rate);
	g_free(snap_opt.snapshot_arg);
	return rc;
}
