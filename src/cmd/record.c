/* record.c - `vmtrace record`: find a libvirt domain's vCPU threads and
 * trace them with Intel PT into a perf.data directory, with sideband and
 * KVM time metadata. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "src/host/domain.h"
#include "guestfs/guestfs.h"
#include "src/cli/json.h"
#include "src/fs/fs.h"
#include "src/fs/output.h"
#include "src/fs/tempfile.h"
#include <glib/gstdio.h>
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

static void on_snapshot(int sig)
{
	(void)sig;
	snapshot_requests++;
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

/* --- the command: options -------------------------------------------------- */

/* The command line, as given and as validated. */
typedef struct {
	char *domain, *uri, *out, *source, *aux_size;
	char *synth_size, *synth_offset, *synth_seed, *synth_rate;
	char *snapshot_arg;          /* --snapshot=SIZE (NULL: --snapshot alone) */
	char *guestkallsyms, *tcg_limit, *tcg_skip;   /* --source tcg */
	gboolean kernel_only;
	guint64 tcg_limit_n, tcg_skip_n;
	GStrv qemu_argv;             /* --source tcg: the QEMU command after -- */
	gboolean snapshot;
	gint pid, mtc_period;
	gdouble duration;
	gboolean per_cpu, per_thread, timeless, cyc, qmp, kcore, json, quiet, no_tp, show_progress;
	GStrv cmdline;               /* "vmtrace record ...", for the perf.data header */
	/* derived */
	uint64_t aux_bytes, snap_bytes;
	VtSynthConfig sc;            /* --source synth */
	VtCaptureConfig cc;          /* without the threads (known after discovery) */
	gboolean tty, interactive;   /* stderr is a terminal; no --quiet */
	VtCmdSsh gssh;               /* --guest-ssh and its SSH options */
	char *guest_events;          /* --guest-events */
} RecordOpts;

/* One recording: what was found, opened and built, and the exit status. */
typedef struct {
	int rc;
	VtDomain d;
	GArray *tids;                /* int32_t: the vCPU threads */
	VtCapture *cap;
	VtRecorder *rec;
	VmcorrKvmMeta *meta;
	VtFsOutput *output;          /* the output while it is built (src/fs/output.h) */
	const char *tmpdir;          /* where it is built; NULL once in place */
	gint64 t_start;
	const GArray *writes;        /* kvm_write_tsc_offset events (NULL: none recorded ...) */
	const char *tp_why;          /* ... because of this */
	gboolean handlers;
	struct sigaction old_usr2;
	VtGuestSource *gsrc;         /* --guest-ssh: the connection */
	VtGuestPerf *gperf;          /* perf record in the guest */
	VtTempfile *gdir;            /* GDIR/data (the guest's perf.data), GDIR/kcore_dir (its snapshot) */
} Recording;

static void record_opts_init(RecordOpts *o)
{
	memset(o, 0, sizeof(*o));
	o->pid = G_MININT;
	o->mtc_period = -1;
	o->aux_bytes = 4ULL << 20;
	o->tty = isatty(2);
	o->gssh.timeout = VT_GUEST_SSH_TIMEOUT;
}

static void record_opts_clear(RecordOpts *o)
{
	g_free(o->domain);
	g_free(o->uri);
	g_free(o->out);
	g_free(o->source);
	g_free(o->aux_size);
	g_free(o->synth_size);
	g_free(o->synth_offset);
	g_free(o->synth_seed);
	g_free(o->synth_rate);
	g_free(o->snapshot_arg);
	g_free(o->guestkallsyms);
	g_free(o->tcg_limit);
	g_free(o->tcg_skip);
	g_strfreev(o->qemu_argv);
	g_strfreev(o->cmdline);
	vt_cmd_ssh_clear(&o->gssh);
	g_free(o->guest_events);
}

/* Report an error, set the exit status: FALSE. */
static gboolean record_fail(Recording *r, int rc, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean record_fail(Recording *r, int rc, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *msg = NULL;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	vt_err("record", "%s", msg);
	r->rc = rc;
	return FALSE;
}

/* A usage error: FALSE. */
static gboolean bad_usage(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static gboolean bad_usage(GError **error, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	g_propagate_error(error, g_error_new_valist(G_OPTION_ERROR, G_OPTION_ERROR_FAILED, fmt, ap));
	va_end(ap);
	return FALSE;
}

static gboolean parse_snapshot(const char *name, const char *value, gpointer data, GError **error)
{
	RecordOpts *o = data;

	(void)name;
	(void)error;
	o->snapshot = TRUE;
	g_free(o->snapshot_arg);
	o->snapshot_arg = g_strdup(value);
	return TRUE;
}

static const char record_summary[] =
	"Finds the domain through libvirt (or a QEMU process by --pid), its vCPU threads\n"
	"(KVM debugfs vcpuN/pid, then \"CPU n/KVM\" thread names, then QMP with --qmp),\n"
	"checks that this host can trace them, and records kernel-only Intel PT\n"
	"(intel_pt//k) of those threads into a perf.data directory that perf reads:\n"
	"DIR/data with the trace, sideband (comm, task, mmap, context switches) and\n"
	"DIR/vmtrace-kvm.ini, KVM's tsc-offset and TSC scaling of every vCPU at the\n"
	"start and the end, plus kvm:kvm_write_tsc_offset events when available.\n"
	"Next step: vmtrace correlate DIR.";

static const char record_description[] =
	"Signals: Ctrl-C (SIGINT), SIGTERM or SIGHUP stop cleanly (a second one ends\n"
	"the run at once, removing the unfinished output); SIGUSR2 takes a snapshot in\n"
	"--snapshot mode.  Under sudo the output belongs to the invoking user.\n"
	"Exit status: 0 recorded; 1 failure; 2 usage; 14 this machine cannot trace\n"
	"(no Intel PT: run `vmtrace check` to see what is missing).  --guest-ssh:\n"
	"9-12, 16 as guest fetch (SSH), 3, 5, 17-19, 28 as inject (DIR kept,\n"
	"unmerged); 20 no perf in the guest;\n"
	"21 perf record in the guest failed.  --source tcg: 26 QEMU did not run the\n"
	"plugin to its end, 27 no kernel code ran; --domain: 25 its QEMU does not\n"
	"load the plugin (what to add to the domain's XML is printed).\n"
	"--source tcg runs the QEMU command after -- with vmtrace's TCG plugin and\n"
	"writes what Intel PT would have recorded (DIR/data) and the executed code\n"
	"(DIR/guest): vmtrace script DIR --guest DIR/guest.\n"
	"\n"
	"Examples:\n"
	"  sudo vmtrace record --domain kubuntu20.04 --duration 5\n"
	"  sudo vmtrace record --domain vm0 --per-cpu --cyc -o vm0.data\n"
	"  sudo vmtrace record --domain vm0 --snapshot=16M     # then: kill -USR2 <pid>\n"
	"  vmtrace record --pid $(pgrep -f qemu) --source synth -t 1   # no Intel PT needed\n"
	"  sudo vmtrace record --domain vm0 -t 5 --guest-ssh root@vm0   # + the guest's own perf.data\n"
	"  vmtrace record --source tcg -o boot.data -- qemu-system-x86_64 -accel tcg -kernel vmlinux ...\n"
	"  vmtrace record --source tcg --domain vm0 -o vm0.data   # a TCG domain started with the plugin\n";

static GOptionContext *record_option_context(RecordOpts *o)
{
	GOptionEntry entries[] = {
		{ "domain", 'd', 0, G_OPTION_ARG_STRING, &o->domain, "Trace the libvirt domain NAME", "NAME" },
		{ "connect", 'c', 0, G_OPTION_ARG_STRING, &o->uri, "libvirt URI (default $LIBVIRT_DEFAULT_URI, else qemu:///system)", "URI" },
		{ "pid", 'p', 0, G_OPTION_ARG_INT, &o->pid, "Trace a QEMU process not managed by libvirt", "PID" },
		{ "qmp", 0, 0, G_OPTION_ARG_NONE, &o->qmp, "Allow QMP query-cpus-fast to find vCPU threads (taints the domain)", NULL },
		{ "output", 'o', 0, G_OPTION_ARG_FILENAME, &o->out, "perf.data directory to write (default perf.data; an existing one becomes perf.data.old)", "DIR" },
		{ "per-thread", 0, 0, G_OPTION_ARG_NONE, &o->per_thread, "One trace buffer per vCPU thread (default)", NULL },
		{ "per-cpu", 0, 0, G_OPTION_ARG_NONE, &o->per_cpu, "One trace buffer per host CPU, vCPU threads only", NULL },
		{ "timeless", 0, 0, G_OPTION_ARG_NONE, &o->timeless, "No timing packets (tsc=0,mtc=0), per-thread: decode with --itrace without time", NULL },
		{ "cyc", 0, 0, G_OPTION_ARG_NONE, &o->cyc, "Cycle-accurate mode (intel_pt/cyc=1/)", NULL },
		{ "mtc-period", 0, 0, G_OPTION_ARG_INT, &o->mtc_period, "MTC every 2^N CTC ticks (default 3; caps/mtc_periods)", "N" },
		{ "snapshot", 'S', G_OPTION_FLAG_OPTIONAL_ARG, G_OPTION_ARG_CALLBACK, (gpointer)parse_snapshot,
		  "Snapshot mode: keep the newest SIZE bytes per buffer (default: all of --aux-size); SIGUSR2 (and the end) write them", "SIZE" },
		{ "duration", 't', 0, G_OPTION_ARG_DOUBLE, &o->duration, "Stop after SECONDS (default: at Ctrl-C or when QEMU exits)", "SECONDS" },
		{ "aux-size", 0, 0, G_OPTION_ARG_STRING, &o->aux_size, "Trace buffer per thread/CPU, a power of two (default 4M)", "SIZE" },
		{ "kcore", 0, 0, G_OPTION_ARG_NONE, &o->kcore, "Copy the kernel text and modules from /proc/kcore to DIR/kcore_dir (as perf record --kcore)", NULL },
		{ "no-tsc-tracepoint", 0, 0, G_OPTION_ARG_NONE, &o->no_tp, "Do not record kvm:kvm_write_tsc_offset", NULL },
		{ "progress", 0, 0, G_OPTION_ARG_NONE, &o->show_progress, "Live progress line even when stderr is not a terminal", NULL },
		{ "quiet", 'q', 0, G_OPTION_ARG_NONE, &o->quiet, "No mapping, progress or summary on stderr", NULL },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &o->json, "Print a JSON summary on stdout", NULL },
		{ "source", 0, 0, G_OPTION_ARG_STRING, &o->source, "intel_pt (default); tcg: run the QEMU command after -- with vmtrace's TCG plugin; synth: packets from `vmtrace synth` for the real threads", "SOURCE" },
		{ "kernel-only", 0, 0, G_OPTION_ARG_NONE, &o->kernel_only, "tcg: trace kernel-half addresses only", NULL },
		{ "guestkallsyms", 0, 0, G_OPTION_ARG_FILENAME, &o->guestkallsyms, "tcg: the guest's kallsyms (or System.map) for REC/guest/kallsyms", "FILE" },
		G_OPTION_ENTRY_NULL
	};
	GOptionEntry test_entries[] = {
		{ "tcg-skip", 0, 0, G_OPTION_ARG_STRING, &o->tcg_skip, "tcg: start tracing after N instructions", "N" },
		{ "tcg-limit", 0, 0, G_OPTION_ARG_STRING, &o->tcg_limit, "tcg: stop tracing N instructions after it started (QEMU runs on)", "N" },
		{ "synth-size", 0, 0, G_OPTION_ARG_STRING, &o->synth_size, "synth: total trace bytes (default 16M)", "SIZE" },
		{ "synth-offset", 0, 0, G_OPTION_ARG_STRING, &o->synth_offset, "synth: the guest's TSC offset", "OFF" },
		{ "synth-seed", 0, 0, G_OPTION_ARG_STRING, &o->synth_seed, "synth: random seed", "N" },
		{ "synth-rate", 0, 0, G_OPTION_ARG_STRING, &o->synth_rate, "synth: produce SIZE bytes per second (default: as fast as they are read)", "SIZE" },
		G_OPTION_ENTRY_NULL
	};
	GOptionEntry guest_entries[VT_CMD_SSH_ENTRIES + 2] = {
		[VT_CMD_SSH_ENTRIES] = { "guest-events", 0, 0, G_OPTION_ARG_STRING, &o->guest_events,
					 "perf record -e EVENTS in the guest (default dummy: sideband only)", "EVENTS" },
		[VT_CMD_SSH_ENTRIES + 1] = G_OPTION_ENTRY_NULL
	};
	GOptionGroup *gg = g_option_group_new("guest", "The guest's own perf.data (--guest-ssh):",
					      "Show the options of record --guest-ssh", NULL, NULL);
	GOptionContext *ctx = g_option_context_new("- trace a KVM guest's vCPUs with Intel PT");
	/* the main group carries o for --snapshot's callback */
	GOptionGroup *main_group = g_option_group_new(NULL, NULL, NULL, o, NULL);
	GOptionGroup *tg = g_option_group_new("testing", "Testing without Intel PT:",
					      "Show the synthetic trace source's options", NULL, NULL);

	g_option_context_set_summary(ctx, record_summary);
	g_option_context_set_description(ctx, record_description);
	g_option_group_add_entries(main_group, entries);
	g_option_context_set_main_group(ctx, main_group);
	g_option_group_add_entries(tg, test_entries);
	g_option_context_add_group(ctx, tg);
	vt_cmd_ssh_entries(&o->gssh, guest_entries, "guest-ssh", FALSE);
	guest_entries[0].description = "Also run perf record in the guest over SSH (libssh) and inject its sideband";
	g_option_group_add_entries(gg, guest_entries);
	g_option_context_add_group(ctx, gg);
	return ctx;
}

/* --domain or --pid. */
static gboolean validate_target(const RecordOpts *o, GError **error)
{
	if (!!o->domain == (o->pid != G_MININT))
		return bad_usage(error, "give either --domain NAME or --pid PID");
	if (!o->domain && o->pid <= 0)
		return bad_usage(error, "--pid %d: not a process id", o->pid);
	return TRUE;
}

/* Buffers per thread or per CPU, timing packets, --duration. */
static gboolean validate_mode(const RecordOpts *o, GError **error)
{
	if (o->per_cpu && o->per_thread)
		return bad_usage(error, "--per-cpu and --per-thread exclude each other");
	if (o->timeless && o->per_cpu)
		return bad_usage(error, "--timeless needs per-thread buffers (without time, per-CPU data cannot be split by thread)");
	if (o->timeless && o->mtc_period >= 0)
		return bad_usage(error, "--timeless has no MTC: drop --mtc-period");
	if (o->timeless && o->cyc)
		return bad_usage(error, "--timeless has no time for cycle counts to refine: drop --cyc");
	if (o->mtc_period > 15 || o->mtc_period < -1)
		return bad_usage(error, "--mtc-period %d: must be 0..15", o->mtc_period);
	if (!(o->duration >= 0 && o->duration < 1e9))    /* also NaN */
		return bad_usage(error, "--duration %g: expected seconds >= 0 (0: until Ctrl-C or QEMU exits)", o->duration);
	return TRUE;
}

/* --aux-size and --snapshot=SIZE: aux_bytes, snap_bytes. */
static gboolean validate_sizes(RecordOpts *o, GError **error)
{
	if (o->aux_size && (!vt_parse_size(o->aux_size, &o->aux_bytes) || !pow2(o->aux_bytes) || o->aux_bytes < 16384 ||
			    o->aux_bytes > (1ULL << 30)))
		return bad_usage(error, "--aux-size '%s': need a power of two from 16K to 1G, e.g. 4M", o->aux_size);
	if (o->snapshot && o->snapshot_arg && (!vt_parse_size(o->snapshot_arg, &o->snap_bytes) || o->snap_bytes < 4096))
		return bad_usage(error, "--snapshot='%s': expected a size of 4K or more, like 16M", o->snapshot_arg);
	if (o->snap_bytes > (1ULL << 30))
		return bad_usage(error, "--snapshot=%s: at most 1G per buffer", o->snapshot_arg);
	if (o->snap_bytes > o->aux_bytes) {
		/* like perf: the buffer must hold a snapshot */
		o->aux_bytes = 1;
		while (o->aux_bytes < o->snap_bytes)
			o->aux_bytes <<= 1;
	}
	return TRUE;
}

/* --source and the synthetic source's options; source is set after. */
static gboolean validate_source(RecordOpts *o, GError **error)
{
	if (o->source && strcmp(o->source, "intel_pt") && strcmp(o->source, "synth") && strcmp(o->source, "tcg"))
		return bad_usage(error, "--source '%s': intel_pt, tcg or synth", o->source);
	if (g_strcmp0(o->source, "tcg") && (o->kernel_only || o->guestkallsyms || o->tcg_limit || o->tcg_skip))
		return bad_usage(error, "--kernel-only, --guestkallsyms and --tcg-* options need --source tcg");
	vt_synth_config_init(&o->sc);
	o->sc.size = 16ULL << 20;
	if (!vt_opt_size("--synth-size", o->synth_size, &o->sc.size, error) ||
	    !vt_opt_u64("--synth-offset", o->synth_offset, &o->sc.vm_offset[0], error) ||
	    !vt_opt_size("--synth-rate", o->synth_rate, &o->cc.synth_rate, error) ||
	    !vt_opt_u64("--synth-seed", o->synth_seed, &o->sc.seed, error))
		return FALSE;
	if (o->synth_offset)
		o->sc.have_offset[0] = TRUE;
	if (g_strcmp0(o->source, "synth") && (o->synth_size || o->synth_offset || o->synth_rate || o->synth_seed))
		return bad_usage(error, "--synth-* options need --source synth");
	if (!o->source)
		o->source = g_strdup("intel_pt");
	return TRUE;
}

/* --guest-ssh and its options. */
static gboolean validate_guest(const RecordOpts *o, GError **error)
{
	if (!o->gssh.ssh && (o->gssh.identity || o->gssh.known_hosts || o->gssh.batch || o->guest_events ||
			     o->gssh.timeout != VT_GUEST_SSH_TIMEOUT))
		return bad_usage(error, "--identity, --known-hosts, --batch, --timeout and --guest-events need --guest-ssh");
	if (o->guest_events && !vt_guest_perf_events_ok(o->guest_events))
		return bad_usage(error, "--guest-events '%s': perf event names (letters, digits, ,:/=._-), e.g. cpu-clock,dummy",
				 o->guest_events);
	if (o->gssh.ssh && o->timeless)
		return bad_usage(error, "--guest-ssh needs time: drop --timeless");
	return vt_cmd_ssh_validate(&o->gssh, error);
}

/* --source tcg: the QEMU command line after --, no domain or process. */
static gboolean validate_tcg(RecordOpts *o, int argc, char **argv, GError **error)
{
	int first = argc > 1 && !strcmp(argv[1], "--") ? 2 : 1;

	if ((o->domain && first < argc) || o->pid != G_MININT)
		return bad_usage(error, "--source tcg: give either --domain NAME (a libvirt domain started with the plugin) "
				 "or the QEMU command line after --, not both, not --pid");
	if ((o->tcg_limit && !vt_opt_u64("--tcg-limit", o->tcg_limit, &o->tcg_limit_n, error)) ||
	    (o->tcg_skip && !vt_opt_u64("--tcg-skip", o->tcg_skip, &o->tcg_skip_n, error)))
		return FALSE;
	if (o->domain)
		return TRUE;
	if (first >= argc)
		return bad_usage(error, "--source tcg: give the QEMU command line after --, e.g. -- qemu-system-x86_64 -accel tcg ...");
	o->qemu_argv = g_new0(char *, argc - first + 1);
	for (int i = first; i < argc; i++)
		o->qemu_argv[i - first] = g_strdup(argv[i]);
	return TRUE;
}

/* Options: FALSE (reported, exit 2) on a usage error. */
static gboolean record_parse(RecordOpts *o, int argc, char **argv, Recording *r)
{
	g_autoptr(GOptionContext) ctx = record_option_context(o);
	g_autoptr(GError) err = NULL;

	o->cmdline = g_new0(char *, argc + 2);
	o->cmdline[0] = g_strdup("vmtrace");
	for (int i = 0; i < argc; i++)
		o->cmdline[i + 1] = g_strdup(argv[i]);
	if (!g_option_context_parse(ctx, &argc, &argv, &err))
		goto usage;
	if (!g_strcmp0(o->source, "tcg")) {
		if (!validate_tcg(o, argc, argv, &err) || !validate_source(o, &err))
			goto usage;
	} else if (argc > 1) {
		bad_usage(&err, "unexpected argument '%s'", argv[1]);
		goto usage;
	} else if (!validate_target(o, &err) || !validate_mode(o, &err) || !validate_sizes(o, &err) ||
		   !validate_source(o, &err))
		goto usage;
	if (!validate_guest(o, &err))
		goto usage;
	if (!o->out)
		o->out = g_strdup("perf.data");
	if (output_path_ok(&o->out, &err))
		return TRUE;
usage:
	vt_err("record", "%s (see vmtrace record --help)", err->message);
	r->rc = VT_EXIT_USAGE;
	return FALSE;
}

/* Before anything is looked up or opened: may -o be replaced, and can this
 * machine trace with these options ("no Intel PT" is the first thing said)? */
static gboolean record_preflight(RecordOpts *o, Recording *r)
{
	g_autoptr(GError) err = NULL;

	if (!output_replaceable(o->out, &err))
		return record_fail(r, VT_EXIT_FAILURE, "%s", err->message);
	o->cc.per_cpu = o->per_cpu;
	o->cc.timeless = o->timeless;
	o->cc.cyc = o->cyc;
	o->cc.mtc_period = o->mtc_period;
	o->cc.snapshot = o->snapshot;
	o->cc.aux_bytes = o->aux_bytes;
	o->cc.data_bytes = 512u << 10;
	o->cc.synth = &o->sc;
	o->cc.stop = &stop_signal;
	if (!vt_capture_probe(o->source, &o->cc, &err))   /* else the options do not fit: usage */
		return record_fail(r, exit_for_capture_error(err, VT_EXIT_USAGE), "%s", err->message);
	o->interactive = !o->quiet;
	return TRUE;
}

/* --- the command: recording ------------------------------------------------ */

/* Signals first: a Ctrl-C or SIGUSR2 during the setup must not kill us with
 * a half-built output; it stops (or snapshots) cleanly instead. */
static void signals_install(Recording *r)
{
	struct sigaction sa_stop = { .sa_handler = on_stop }, sa_snap = { 0 };

	sigemptyset(&sa_stop.sa_mask);      /* none of them interrupts on_stop */
	for (guint i = 0; i < G_N_ELEMENTS(stop_signals); i++)
		sigaddset(&sa_stop.sa_mask, stop_signals[i]);
	for (guint i = 0; i < G_N_ELEMENTS(stop_signals); i++)
		sigaction(stop_signals[i], &sa_stop, &stop_old[i]);
	sa_snap.sa_handler = on_snapshot;
	sigemptyset(&sa_snap.sa_mask);
	sigaction(SIGUSR2, &sa_snap, &r->old_usr2);
	stop_signal = 0;
	snapshot_requests = 0;
	r->handlers = TRUE;
}

static void signals_restore(Recording *r)
{
	if (!r->handlers)
		return;
	for (guint i = 0; i < G_N_ELEMENTS(stop_signals); i++)
		sigaction(stop_signals[i], &stop_old[i], NULL);
	sigaction(SIGUSR2, &r->old_usr2, NULL);
	r->handlers = FALSE;
}

/* "vmtrace record: domain 'NAME' on URI, QEMU pid N, 2 vCPUs: vCPU 0 = tid T (how), ..." */
static void print_vcpus(const RecordOpts *o, const Recording *r)
{
	guint n = r->tids->len;

	if (o->domain)
		fprintf(stderr, "vmtrace record: domain '%s' on %s, QEMU pid %u, %u vCPU%s:", o->domain, r->d.uri, r->d.pid,
			n, n == 1 ? "" : "s");
	else
		fprintf(stderr, "vmtrace record: QEMU pid %u, %u vCPU%s:", r->d.pid, n, n == 1 ? "" : "s");
	for (guint i = 0; i < r->d.vcpus->len; i++) {
		const VtDomainVcpu *v = &g_array_index(r->d.vcpus, VtDomainVcpu, i);

		fprintf(stderr, "%s vCPU %d = tid %u (%s)", i ? "," : "", v->vcpu, v->tid, v->source);
	}
	fputc('\n', stderr);
}

/* The domain (or process) and every vCPU's thread. */
static gboolean record_discover(const RecordOpts *o, Recording *r)
{
	g_autoptr(GError) err = NULL;
	const char *what = o->domain ? o->domain : "the process";

	if (o->domain ? !vt_domain_find(o->domain, o->uri, o->qmp, &r->d, &err)
		      : !vt_domain_from_pid((uint32_t)o->pid, &r->d, &err))
		return record_fail(r, VT_EXIT_FAILURE, "%s", err->message);
	r->tids = g_array_new(FALSE, FALSE, sizeof(int32_t));
	for (guint i = 0; i < r->d.vcpus->len; i++) {
		const VtDomainVcpu *v = &g_array_index(r->d.vcpus, VtDomainVcpu, i);
		int32_t t = (int32_t)v->tid;

		if (!v->tid)
			return record_fail(r, VT_EXIT_FAILURE, "vCPU %d of %s (QEMU pid %u): thread not found; is the guest "
					   "running? %s", v->vcpu, what, r->d.pid,
					   o->qmp ? "" : "(--qmp asks QEMU, but taints the domain)");
		g_array_append_val(r->tids, t);
	}
	if (!r->tids->len)
		return record_fail(r, VT_EXIT_FAILURE, "%s (QEMU pid %u) has no vCPU threads: is it QEMU?  Threads are "
				   "found through KVM's debugfs (mount -t debugfs none /sys/kernel/debug) or QEMU's "
				   "thread names (-name NAME,debug-threads=on; libvirt sets it)", what, r->d.pid);
	if (o->interactive)
		print_vcpus(o, r);
	return TRUE;
}

/* The trace source, with a stream per vCPU thread (or per host CPU). */
static gboolean open_capture(const RecordOpts *o, Recording *r, GError **error)
{
	VtCaptureConfig cc = o->cc;

	cc.qemu_pid = r->d.pid;
	cc.tids = (const int32_t *)r->tids->data;
	cc.ntids = r->tids->len;
	r->cap = vt_capture_new(o->source, &cc, error);
	if (!r->cap)
		return FALSE;
	if (o->per_cpu) {
		g_autoptr(GArray) cpus = vt_host_online_cpus();

		for (guint i = 0; i < cpus->len && vt_capture_add_stream(r->cap, -1, g_array_index(cpus, int, i)); i++)
			;
	} else {
		for (guint i = 0; i < r->tids->len; i++)
			vt_capture_add_stream(r->cap, g_array_index(r->tids, int32_t, i), -1);
	}
	return TRUE;
}

/* The output is built in a temporary directory next to it (src/fs/output.h:
 * removed on failure, at exit and on signals); an OUT there now is moved to
 * OUT.old at the end. */
static gboolean output_begin(const char *out, Recording *r, GError **error)
{
	r->output = vt_fs_output_new(out, VT_FS_OUTPUT_DIR | VT_FS_OUTPUT_REPLACE, 0755, error);
	if (!r->output)
		return FALSE;
	r->tmpdir = vt_fs_output_tmp(r->output);
	chmod(r->tmpdir, 0755);
	return TRUE;
}

/* The trace source, the output directory, KVM's state at the start, the recorder. */
static gboolean record_open(const RecordOpts *o, Recording *r)
{
	g_autoptr(GError) err = NULL;
	VtRecorderOptions ro = { 0 };

	if (!open_capture(o, r, &err) || !output_begin(o->out, r, &err))
		return record_fail(r, VT_EXIT_FAILURE, "%s", err->message);
	r->meta = vmcorr_kvm_meta_new();
	r->meta->domain = g_strdup(o->domain);
	r->meta->qemu_pid = r->d.pid;
	kvm_snapshot(&r->d, r->meta, TRUE);
	ro.out_dir = r->tmpdir;
	ro.qemu_pid = r->d.pid;
	ro.tids = (const int32_t *)r->tids->data;
	ro.ntids = r->tids->len;
	ro.tsc_tracepoint = !o->no_tp;
	ro.snapshot_size = o->snap_bytes;
	ro.argv = (const char *const *)o->cmdline;
	r->rec = vt_recorder_new(r->cap, &ro, &err);
	if (!r->rec)
		return record_fail(r, exit_for_capture_error(err, VT_EXIT_FAILURE), "%s", err->message);
	return TRUE;
}

/* --kcore: the host's kernel code into DIR/kcore_dir. */
static gboolean record_kcore(const RecordOpts *o, Recording *r)
{
	g_autoptr(GError) err = NULL;
	uint64_t copied = 0;

	if (!o->kcore)
		return TRUE;
	if (!copy_kcore(r->tmpdir, &copied, &err))
		return record_fail(r, VT_EXIT_FAILURE, "%s", err->message);
	if (o->interactive)
		fprintf(stderr, "vmtrace record: copied %.1f MiB of kernel memory to %s/kcore_dir\n", copied / 1048576.0,
			o->out);
	return TRUE;
}

/* --guest-ssh: connect, start perf record in the guest (before the host
 * trace starts, so the guest's file covers it). */
static gboolean record_guest_start(const RecordOpts *o, Recording *r)
{
	g_autoptr(GError) err = NULL;
	int rc;

	if (!o->gssh.ssh)
		return TRUE;
	r->gdir = vt_tempfile_new_dir(o->out, 0700, &err);
	if (!r->gdir)
		return record_fail(r, VT_EXIT_FAILURE, "%s", err->message);
	/* no stop flag: a Ctrl-C stops the recording, and the guest's perf
	 * must still be stopped and copied (every wait has --timeout) */
	r->gsrc = vt_cmd_ssh_open(&o->gssh, NULL, &rc, &err);
	if (!r->gsrc)
		return record_fail(r, rc, "%s", err->message);
	r->gperf = vt_guest_perf_start(r->gsrc, o->guest_events, &err);
	if (!r->gperf)
		return record_fail(r, vt_cmd_guest_exit_code(err), "%s: %s", vt_guest_source_describe(r->gsrc),
				   err->message);
	if (o->interactive)
		fprintf(stderr, "vmtrace record: perf record runs in the guest (%s, events %s)\n",
			vt_guest_source_describe(r->gsrc), o->guest_events ? o->guest_events : "dummy");
	return TRUE;
}

/* Stop the guest's perf, copy its file to GDIR/data and the guest's
 * kallsyms/modules/kcore snapshot to GDIR/kcore_dir. */
static gboolean record_guest_stop(const RecordOpts *o, Recording *r)
{
	g_autoptr(GError) err = NULL;
	const char *gd;
	g_autofree char *cache = NULL, *kd = NULL;
	VtGuestFetchResult fr = { 0 };
	VtGuestFetchOptions fo = { NULL, TRUE, 4, NULL };
	guint64 bytes = 0;
	gboolean ok;

	if (!r->gperf)
		return TRUE;
	gd = vt_tempfile_path(r->gdir);
	if (!vt_guest_perf_stop(r->gperf, gd, "data", &bytes, &err))
		return record_fail(r, vt_cmd_guest_exit_code(err), "%s: %s", vt_guest_source_describe(r->gsrc),
				   err->message);
	cache = g_build_filename(gd, "cache", NULL);
	kd = g_build_filename(gd, "kcore_dir", NULL);
	fo.cache = cache;
	ok = vt_guest_fetch(r->gsrc, &fo, &fr, &err);
	if (ok && g_rename(fr.dir, kd) < 0) {
		g_set_error(&err, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot rename %s to %s: %s", fr.dir, kd,
			    g_strerror(errno));
		ok = FALSE;
	}
	vt_guest_fetch_result_clear(&fr);
	if (!ok)
		return record_fail(r, vt_cmd_guest_exit_code(err), "%s: guest snapshot: %s",
				   vt_guest_source_describe(r->gsrc), err->message);
	vt_tempfile_remove_tree(cache);
	if (o->interactive)
		fprintf(stderr, "vmtrace record: the guest's perf.data (%" G_GUINT64_FORMAT " bytes) and kernel snapshot copied\n",
			bytes);
	return TRUE;
}

/* Read the buffers until a stop signal, --duration, QEMU's exit or the end
 * of the synthetic trace; take the snapshots SIGUSR2 asks for. */
static gboolean poll_until_stopped(const RecordOpts *o, Recording *r, GError **error)
{
	gint64 last = 0;
	guint seen_snaps = 0;

	for (;;) {
		gint64 now = g_get_monotonic_time();
		double secs = (now - r->t_start) / 1e6;

		if (stop_signal || (o->duration > 0 && secs >= o->duration))
			return TRUE;
		if (r->d.pid && kill((pid_t)r->d.pid, 0) < 0 && errno == ESRCH) {
			if (o->interactive)
				fprintf(stderr, "\nvmtrace record: QEMU (pid %u) exited\n", r->d.pid);
			return TRUE;
		}
		if (r->cap->ops->exhausted(r->cap) && o->duration <= 0)
			return TRUE;
		if (!vt_recorder_poll(r->rec, 100, error))
			return FALSE;
		while (seen_snaps != (guint)snapshot_requests) {
			seen_snaps++;
			if (!vt_recorder_snapshot(r->rec, error))
				return FALSE;
		}
		if (o->interactive && (o->tty || o->show_progress) && now - last >= 500000) {
			progress(vt_recorder_stats(r->rec), secs, FALSE);
			last = now;
		}
	}
}

/* Start tracing, poll until stopped, finish (flush every buffer). */
static gboolean record_run(const RecordOpts *o, Recording *r)
{
	g_autoptr(GError) err = NULL;
	guint n;

	if (stop_signal)
		return record_fail(r, VT_EXIT_FAILURE, "interrupted before the recording started; nothing written");
	if (!vt_recorder_start(r->rec, &err))
		goto failed;
	r->t_start = g_get_monotonic_time();
	n = r->cap->streams->len;
	if (o->interactive)
		fprintf(stderr, "vmtrace record: recording %s from the %s source (%s, %u buffer%s of %" G_GUINT64_FORMAT
			" KiB)%s; Ctrl-C stops\n", r->cap->event_name, r->cap->ops->name,
			o->per_cpu ? "per-CPU" : "per-thread", n, n == 1 ? "" : "s", o->aux_bytes >> 10,
			o->snapshot ? ", snapshot mode: kill -USR2 to take one" : "");
	if (poll_until_stopped(o, r, &err) && vt_recorder_finish(r->rec, &err))
		return TRUE;
failed:
	if (o->interactive && o->tty)
		fputc('\n', stderr);    /* end the progress line */
	return record_fail(r, VT_EXIT_FAILURE, "%s", err->message);
}

/* DIR/vmtrace-kvm.ini: KVM's state at the start and the end, the
 * kvm_write_tsc_offset events. */
static gboolean record_metadata(Recording *r)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *ini = g_build_filename(r->tmpdir, "vmtrace-kvm.ini", NULL);

	kvm_snapshot(&r->d, r->meta, FALSE);
	r->writes = vt_recorder_tsc_writes(r->rec, &r->tp_why);
	if (r->writes) {
		r->meta->have_writes = TRUE;
		for (guint i = 0; i < r->writes->len; i++) {
			const VtRecorderTscWrite *w = &g_array_index(r->writes, VtRecorderTscWrite, i);
			VmcorrTscWrite mw = { w->time, w->tid, w->vcpu, w->previous, w->next };

			g_array_append_val(r->meta->writes, mw);
		}
	}
	if (!vmcorr_kvm_meta_save(r->meta, ini, &err))
		return record_fail(r, VT_EXIT_FAILURE, "%s", err->message);
	return TRUE;
}

/* The built output becomes OUT: owned by the sudo user, an existing OUT
 * moved to OUT.old first. */
static gboolean output_commit(const char *out, Recording *r, GError **error)
{
	uid_t uid;
	gid_t gid;

	if (vt_fs_sudo_owner(&uid, &gid) && !vt_fs_chown_tree(r->tmpdir, uid, gid, error))
		return FALSE;
	if (!move_old(out, error) || !vt_fs_output_commit(r->output, error))
		return FALSE;
	r->tmpdir = NULL;
	return TRUE;
}

/* The injection failed (its error is printed, r->rc says which): what was
 * recorded cannot be recorded again, so OUT becomes the host recording with
 * the guest's file beside it (OUT/guest.data) and the guest's kernel
 * snapshot where a merge puts it (OUT/kcore_dir__PID: inject copies it with
 * REC's files), and the user is told how to retry.  FALSE: the run still
 * fails with the injection's status. */
static gboolean keep_host_recording(const RecordOpts *o, Recording *r)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *name = g_strdup_printf("kcore_dir__%u", r->d.pid);
	g_autofree char *from = g_build_filename(vt_tempfile_path(r->gdir), "kcore_dir", NULL);
	g_autofree char *to = g_build_filename(r->tmpdir, name, NULL);

	if (g_rename(from, to) < 0) {
		vt_err("record", "cannot rename %s to %s: %s", from, to, g_strerror(errno));
		return FALSE;
	}
	if (!output_commit(o->out, r, &err)) {
		vt_err("record", "%s", err->message);
		return FALSE;
	}
	vt_err("record", "kept %s: the host recording, the guest's perf.data (%s/guest.data) and kernel snapshot "
	       "(%s/%s), not merged; once the cause is fixed: vmtrace inject %s --guest-data %s/guest.data -o NEW",
	       o->out, o->out, o->out, name, o->out, o->out);
	return FALSE;
}

/* --guest-ssh: OUT is the host recording with the guest's sideband
 * injected (vmtrace inject), its kcore_dir as kcore_dir__PID. */
static gboolean record_commit_guest(const RecordOpts *o, Recording *r)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *from = g_build_filename(vt_tempfile_path(r->gdir), "data", NULL);
	g_autofree char *to = g_build_filename(r->tmpdir, "guest.data", NULL);
	uid_t uid;
	gid_t gid;

	/* the guest's own perf.data comes along (inject copies REC's files) */
	if (link(from, to) < 0)
		return record_fail(r, VT_EXIT_FAILURE, "cannot link %s to %s: %s", from, to, g_strerror(errno));
	if (!move_old(o->out, &err))
		return record_fail(r, VT_EXIT_FAILURE, "%s", err->message);
	r->rc = vt_cmd_inject_merge(r->tmpdir, vt_tempfile_path(r->gdir), o->out, !o->interactive);
	if (r->rc != VT_EXIT_OK)
		return keep_host_recording(o, r);
	if (vt_fs_sudo_owner(&uid, &gid) && !vt_fs_chown_tree(o->out, uid, gid, &err))
		return record_fail(r, VT_EXIT_FAILURE, "%s", err->message);
	return TRUE;
}

static gboolean record_commit(const RecordOpts *o, Recording *r)
{
	g_autoptr(GError) err = NULL;

	if (o->gssh.ssh)
		return record_commit_guest(o, r);

	if (!output_commit(o->out, r, &err))
		return record_fail(r, VT_EXIT_FAILURE, "%s", err->message);
	return TRUE;
}

/* "vmtrace record: wrote OUT: ..." on stderr, a warning if anything was lost. */
static void report_text(const RecordOpts *o, const Recording *r, const VtRecorderStats *st, double secs)
{
	g_autofree char *a = human(st->aux_bytes);
	guint n = r->cap->streams->len;
	gboolean w = r->writes != NULL;

	if (o->tty || o->show_progress)
		progress(st, secs, TRUE);
	fprintf(stderr, "vmtrace record: wrote %s: %s of trace in %u buffer%s, %" G_GUINT64_FORMAT
		" sideband records, KVM metadata %s/vmtrace-kvm.ini%s%s%s\n", o->out, a, n, n == 1 ? "" : "s",
		st->sideband_records, o->out, w ? "" : " (no kvm_write_tsc_offset: ", w ? "" : r->tp_why, w ? "" : ")");
	if (st->lost || st->truncated)
		fprintf(stderr, "vmtrace record: WARNING: %" G_GUINT64_FORMAT " records lost, %" G_GUINT64_FORMAT
			" trace buffers truncated: use a larger --aux-size\n", st->lost, st->truncated);
	if (!o->timeless)
		fprintf(stderr, "next: vmtrace correlate --dry-run %s\n", o->out);
}

/* --json: {"output": .., "domain": ..|null, "qemu_pid": .., "source": .., "event": ..,
 * "mode": .., "snapshot": .., "vcpus": [{"vcpu": .., "tid": .., "source": ..}], "seconds": ..,
 * "aux_bytes": .., "buffers": .., "sideband_records": .., "lost": .., "truncated": ..,
 * "snapshots": .., "tsc_offset_writes": N (-1: not recorded)} */
static void report_json(const RecordOpts *o, const Recording *r, const VtRecorderStats *st, double secs)
{
	g_autoptr(VtJson) j = vt_json_new(stdout);

	vt_json_begin_object(j);
	vt_json_kv_string(j, "output", o->out);
	vt_json_kv_string(j, "domain", o->domain);
	vt_json_kv_uint(j, "qemu_pid", r->d.pid);
	vt_json_kv_string(j, "source", o->source);
	vt_json_kv_string(j, "event", r->cap->event_name);
	vt_json_kv_string(j, "mode", o->per_cpu ? "per-cpu" : "per-thread");
	vt_json_kv_bool(j, "snapshot", o->snapshot);
	vt_json_key(j, "vcpus");
	vt_json_begin_array(j);
	for (guint i = 0; i < r->d.vcpus->len; i++) {
		const VtDomainVcpu *v = &g_array_index(r->d.vcpus, VtDomainVcpu, i);

		vt_json_begin_object(j);
		vt_json_kv_int(j, "vcpu", v->vcpu);
		vt_json_kv_uint(j, "tid", v->tid);
		vt_json_kv_string(j, "source", v->source);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
	vt_json_kv_double(j, "seconds", secs, 3);
	vt_json_kv_uint(j, "aux_bytes", st->aux_bytes);
	vt_json_kv_uint(j, "buffers", r->cap->streams->len);
	vt_json_kv_uint(j, "sideband_records", st->sideband_records);
	vt_json_kv_uint(j, "lost", st->lost);
	vt_json_kv_uint(j, "truncated", st->truncated);
	vt_json_kv_uint(j, "snapshots", st->snapshots);
	vt_json_kv_int(j, "tsc_offset_writes", r->writes ? (gint64)r->writes->len : -1);
	vt_json_end_object(j);
}

static void record_report(const RecordOpts *o, const Recording *r)
{
	const VtRecorderStats *st = vt_recorder_stats(r->rec);
	double secs = (g_get_monotonic_time() - r->t_start) / 1e6;

	if (o->interactive)
		report_text(o, r, st, secs);
	if (o->json)
		report_json(o, r, st, secs);
}

/* Close everything; an output that was not put in place is removed. */
static void recording_clear(Recording *r)
{
	vt_guest_perf_free(r->gperf);
	if (r->gsrc)
		vt_guest_source_close(r->gsrc);
	vt_tempfile_free(r->gdir);
	vt_recorder_free(r->rec);
	vt_capture_free(r->cap);
	vt_fs_output_free(r->output);     /* the temporary directory, unless renamed */
	signals_restore(r);
	vmcorr_kvm_meta_free(r->meta);
	if (r->d.vcpus)
		vt_domain_clear(&r->d);
	if (r->tids)
		g_array_unref(r->tids);
}

int cmd_record(int argc, char **argv)
{
	RecordOpts o;
	Recording r = { .rc = VT_EXIT_OK };
	gboolean ok;

	record_opts_init(&o);
	ok = record_parse(&o, argc, argv, &r);        /* options; usage errors: exit 2 */
	if (ok && !strcmp(o.source, "tcg")) {          /* QEMU with the TCG plugin, then REC */
		VtRecordTcg t = { .out = o.out, .kallsyms = o.guestkallsyms, .kernel_only = o.kernel_only,
				  .json = o.json, .quiet = o.quiet, .limit = o.tcg_limit_n, .skip = o.tcg_skip_n, .qemu_argv = o.qemu_argv,
				  .domain = o.domain, .uri = o.uri,
				  .cmdline = (const char *const *)o.cmdline };

		r.rc = vt_record_tcg(&t);
		record_opts_clear(&o);
		return r.rc;
	}
	ok = ok && record_preflight(&o, &r);           /* -o replaceable?  Intel PT here (else 14)? */
	if (ok) {
		signals_install(&r);                   /* Ctrl-C/SIGTERM stop, SIGUSR2 snapshots */
		ok = record_discover(&o, &r) &&        /* the domain and its vCPU threads */
		     record_open(&o, &r) &&            /* trace source, output directory, recorder */
		     record_kcore(&o, &r) &&           /* --kcore */
		     record_guest_start(&o, &r) &&     /* --guest-ssh: perf record in the guest */
		     record_run(&o, &r) &&             /* trace until stopped */
		     record_guest_stop(&o, &r) &&      /* its file and the guest's snapshot copied */
		     record_metadata(&r) &&            /* vmtrace-kvm.ini */
		     record_commit(&o, &r);            /* OUT -> OUT.old, the new OUT in place */
	}
	if (ok)
		record_report(&o, &r);                 /* summary on stderr, --json on stdout */
	recording_clear(&r);
	record_opts_clear(&o);
	return r.rc;
}
