/* synth.c - `vmtrace synth`: write a synthetic host Intel PT recording of
 * KVM guests (perf.data) plus its ground truth. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "src/cli/json.h"
#include "src/cmd/cmd.h"
#include "src/fs/fs.h"
#include "src/fs/output.h"
#include "src/synth/synth.h"

static gboolean parse_offset_opt(VtSynthConfig *cfg, const char *s, GError **error)
{
	/* OFF[:VM] */
	g_auto(GStrv) parts = g_strsplit(s, ":", 2);
	guint64 off, vm = 0;

	if (!parts[0] || !vt_parse_u64(parts[0], &off) || (parts[1] && (!vt_parse_u64(parts[1], &vm) || vm >= VT_SYNTH_MAX_VMS))) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "--offset '%s': expected OFFSET[:VM] (e.g. 0xffffff0000000000:1)", s);
		return FALSE;
	}
	cfg->vm_offset[vm] = off;
	cfg->have_offset[vm] = TRUE;
	return TRUE;
}

/* OFF:[VM.]VCPU - after --vcpus and --vms are known */
static gboolean parse_vcpu_offset_opt(VtSynthConfig *cfg, const char *s, GError **error)
{
	g_auto(GStrv) parts = g_strsplit(s, ":", 2);
	g_auto(GStrv) who = parts[0] && parts[1] ? g_strsplit(parts[1], ".", 2) : NULL;
	guint64 off, vm = 0, idx;
	gint v;

	if (!who || !vt_parse_u64(parts[0], &off) || !vt_parse_u64(who[who[1] ? 1 : 0], &idx) ||
	    (who[1] && !vt_parse_u64(who[0], &vm))) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "--vcpu-offset '%s': expected OFFSET:[VM.]VCPU (e.g. 0xffffff0000000000:1.0)", s);
		return FALSE;
	}
	if (vm >= cfg->nvms || idx > G_MAXUINT || (v = vt_synth_vcpu_of(cfg, vm, idx)) < 0) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "--vcpu-offset '%s': VM %" G_GUINT64_FORMAT " has no vCPU %" G_GUINT64_FORMAT
			    " (--vcpus %u, --vms %u)", s, vm, idx, cfg->nvcpus, cfg->nvms);
		return FALSE;
	}
	cfg->vcpu_offset[v] = off;
	cfg->have_vcpu_offset[v] = TRUE;
	return TRUE;
}

static gboolean parse_scale_opt(VtSynthConfig *cfg, const char *s, GError **error)
{
	/* RATIO[/FRAC][:VM] */
	g_auto(GStrv) parts = g_strsplit(s, ":", 2);
	g_auto(GStrv) rf = g_strsplit(parts[0] ? parts[0] : "", "/", 2);
	guint64 ratio, frac = 48, vm = 0;

	if (!rf[0] || !vt_parse_u64(rf[0], &ratio) || !ratio || (rf[1] && (!vt_parse_u64(rf[1], &frac) || frac > 63)) ||
	    (parts[1] && (!vt_parse_u64(parts[1], &vm) || vm >= VT_SYNTH_MAX_VMS))) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "--tsc-scale '%s': expected RATIO[/FRAC_BITS][:VM], e.g. 0x1400000000000/48:0 for 1.25", s);
		return FALSE;
	}
	cfg->vm_ratio[vm] = ratio;
	cfg->vm_frac[vm] = frac;
	return TRUE;
}

static gboolean parse_change_opt(VtSynthConfig *cfg, const char *s, GError **error)
{
	/* [VM:]OFFSET@FRACTION */
	const char *at = strchr(s, '@');
	g_autofree char *head = at ? g_strndup(s, at - s) : NULL;
	g_auto(GStrv) parts = NULL;
	guint64 vm = 0, off;
	char *end;
	double frac;

	if (!at)
		goto bad;
	parts = g_strsplit(head, ":", 2);
	if (!parts[0])
		goto bad;
	if (parts[1]) {
		if (!vt_parse_u64(parts[0], &vm) || !vt_parse_u64(parts[1], &off))
			goto bad;
	} else if (!vt_parse_u64(parts[0], &off)) {
		goto bad;
	}
	frac = g_ascii_strtod(at + 1, &end);
	if (*end || end == at + 1)
		goto bad;
	cfg->have_change = TRUE;
	cfg->change_vm = vm;
	cfg->change_offset = off;
	cfg->change_at = frac;
	return TRUE;
bad:
	g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
		    "--offset-change '%s': expected [VM:]OFFSET@FRACTION (e.g. 0:0xfffffff000000000@0.5)", s);
	return FALSE;
}

/* What stands at -o and --truth may be replaced only if it is a regular
 * file (src/fs/output.h) - with --dir, a recording directory - never a
 * link, directory, FIFO or device. */
static gboolean outputs_ok(const char *out, gboolean as_dir, const char *truth, GError **error)
{
	g_autoptr(GError) why = NULL;

	if (as_dir && !vt_fs_is_recording(out, &why)) {
		g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST, "refusing to write into %s, it is not a "
			    "recording (%s): move it away or choose another -o", out, why->message);
		return FALSE;
	}
	return (as_dir || vt_fs_output_check(out, VT_FS_OUTPUT_REPLACE, error)) &&
	       (!truth || vt_fs_output_check(truth, VT_FS_OUTPUT_REPLACE, error));
}

/* The command line, as given. */
typedef struct {
	gint vcpus, vms, cpus, mtc_period, cyc_thresh, psb_period, guest_pct, tip_pct, host_steps, user_exit_pct, ovf_every, aux_trunc, call_depth;   /* -1: default */
	gboolean per_cpu, per_thread, cyc, no_mtc, timeless, as_dir, json, cbr_vary;
	char *ratio, *size, *bufsize, *seed, *out, *truth, *change, *tsc_start;
	char **offsets, **scales, **vcpu_offsets;
	char *host_code, *guest_code, *branches;
	char **guest_user;           /* FILE[@ADDR], ... */
	gint guest_user_pct;
} SynthOpts;

static void synth_opts_clear(SynthOpts *o)
{
	g_free(o->ratio);
	g_free(o->size);
	g_free(o->bufsize);
	g_free(o->seed);
	g_free(o->tsc_start);
	g_free(o->out);
	g_free(o->truth);
	g_free(o->change);
	g_free(o->host_code);
	g_free(o->guest_code);
	g_free(o->branches);
	g_strfreev(o->guest_user);
	g_strfreev(o->offsets);
	g_strfreev(o->vcpu_offsets);
	g_strfreev(o->scales);
}

static const char synth_summary[] =
	"Generates, with libipt's encoder, the Intel PT trace a host would record of\n"
	"QEMU/KVM vCPUs (host KVM code, VM entries/exits, guest kernel code, PSB+ with\n"
	"TSC/TMA/PIP/VMCS, MTC, CYC) as a perf.data that perf reads, and a ground-truth\n"
	"JSON with every VMCS, vCPU and TSC offset.  Guest TSC packets carry the VM's\n"
	"TSC offset, so `vmtrace correlate --dry-run` has something to find.";

static const char synth_description[] =
	"Examples:\n"
	"  vmtrace synth -o guest.data --truth guest.json\n"
	"  vmtrace synth -o big.data --per-cpu --vcpus 16 --cyc --size 512M\n"
	"  vmtrace synth -o two.data --vms 2 --offset 0x0123456789abcdef:0 --offset 0xffffff8000000000:1\n"
	"  vmtrace synth -o skew.data --vcpus 2 --offset 0xfffffe0000000000 --vcpu-offset 0xfffffe0000003000:1\n"
	"  vmtrace synth -o real.data --host-code HOSTDIR --guest-code GUESTDIR --branches real.branches\n\n"
	"Real code: the flow walks the kernel code of HOSTDIR and GUESTDIR (Zydis decodes\n"
	"it; TNT directions and indirect targets - real function starts - are chosen,\n"
	"returns follow a call stack); VM exits go to HOSTDIR's vmx_vmexit, VM entries\n"
	"happen at the VMRESUME the host reaches.  -o is then a directory with\n"
	"kcore_dir/ (HOSTDIR's files) and a guest kernel MMAP, so that\n"
	"  perf script -i real.data --guestkallsyms GUESTDIR/kallsyms --itrace=be\n"
	"decodes it.\n\n"
	"Exit status: 0 ok; 1 failure (cannot write FILE); 2 usage error.  Nothing is\n"
	"left behind on failure.\n";

static gboolean synth_parse(SynthOpts *o, int *argc, char ***argv, GError **err)
{
	GOptionEntry entries[] = {
		{ "output", 'o', 0, G_OPTION_ARG_FILENAME, &o->out, "Write the perf.data to FILE (required)", "FILE" },
		{ "dir", 0, 0, G_OPTION_ARG_NONE, &o->as_dir, "Write a perf.data directory (FILE/data), like perf record --kcore", NULL },
		{ "truth", 't', 0, G_OPTION_ARG_FILENAME, &o->truth, "Write the ground truth JSON to FILE", "FILE" },
		{ "vcpus", 'n', 0, G_OPTION_ARG_INT, &o->vcpus, "Number of vCPUs over all VMs (default 4)", "N" },
		{ "vms", 0, 0, G_OPTION_ARG_INT, &o->vms, "Number of VMs; vCPUs are split between them (default 1)", "N" },
		{ "per-thread", 0, 0, G_OPTION_ARG_NONE, &o->per_thread, "One AUX queue per vCPU thread (default)", NULL },
		{ "per-cpu", 0, 0, G_OPTION_ARG_NONE, &o->per_cpu, "One AUX queue per host CPU; vCPUs migrate between CPUs", NULL },
		{ "cpus", 0, 0, G_OPTION_ARG_INT, &o->cpus, "Host CPUs in per-CPU mode (default min(vcpus,4))", "N" },
		{ "cyc", 0, 0, G_OPTION_ARG_NONE, &o->cyc, "Emit CYC packets (intel_pt/cyc=1/)", NULL },
		{ "cyc-thresh", 0, 0, G_OPTION_ARG_INT, &o->cyc_thresh, "With --cyc: a CYC packet only after 2^(N-1) cycles, 0..15 (intel_pt/cyc_thresh=N/; default 0: before every packet)", "N" },
		{ "no-mtc", 0, 0, G_OPTION_ARG_NONE, &o->no_mtc, "No MTC/TMA packets (intel_pt/mtc=0/)", NULL },
		{ "mtc-period", 0, 0, G_OPTION_ARG_INT, &o->mtc_period, "MTC every 2^N CTC ticks, 0..15 (default 3)", "N" },
		{ "psb-period", 0, 0, G_OPTION_ARG_INT, &o->psb_period, "PSB every 2K<<N bytes, 0..15 (default 3)", "N" },
		{ "tsc-ctc-ratio", 0, 0, G_OPTION_ARG_STRING, &o->ratio, "CPUID.15H EBX/EAX, TSC ticks per CTC tick (default 168/2)", "N/D" },
		{ "timeless", 0, 0, G_OPTION_ARG_NONE, &o->timeless, "No timing packets at all (intel_pt/tsc=0,mtc=0/)", NULL },
		{ "cbr-vary", 0, 0, G_OPTION_ARG_NONE, &o->cbr_vary, "The core:bus ratio (CBR packets in PSB+) changes: 30, 30, 24, 36, ... (perf's cbr events)", NULL },
		{ "size", 's', 0, G_OPTION_ARG_STRING, &o->size, "Total AUX bytes, e.g. 16M (default 4M)", "SIZE" },
		{ "buffer-size", 0, 0, G_OPTION_ARG_STRING, &o->bufsize, "Bytes per AUXTRACE record (default 256K)", "SIZE" },
		{ "seed", 0, 0, G_OPTION_ARG_STRING, &o->seed, "Random seed; same options and seed give the same bytes (default 1)", "N" },
		{ "tsc-start", 0, 0, G_OPTION_ARG_STRING, &o->tsc_start, "Host TSC at the start of the recording (default 0x100000000000; e.g. 0x80000000000000 for a host up 139 days at 3 GHz)", "TSC" },
		{ "offset", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->offsets, "TSC offset of VM; repeatable (default: a negative offset derived from the seed)", "OFF[:VM]" },
		{ "vcpu-offset", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->vcpu_offsets, "TSC offset of one vCPU of a VM (VM default 0), instead of the VM's: its own VMCS's offset, as KVM allows; repeatable", "OFF:[VM.]VCPU" },
		{ "offset-change", 0, 0, G_OPTION_ARG_STRING, &o->change, "VM's TSC offset changes to OFF at FRACTION of the trace", "[VM:]OFF@FRACTION" },
		{ "tsc-scale", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->scales, "VMX TSC scaling of VM: guest TSC = (host * RATIO >> FRAC) + offset (FRAC default 48); repeatable", "RATIO[/FRAC][:VM]" },
		{ "guest-percent", 0, 0, G_OPTION_ARG_INT, &o->guest_pct, "Share of time in guest mode, 0..95 (default 60)", "PCT" },
		{ "tip-percent", 0, 0, G_OPTION_ARG_INT, &o->tip_pct, "Packet mix: share of branches that are a TIP (else a TNT), 0..100 (default 25)", "PCT" },
		{ "host-steps", 0, 0, G_OPTION_ARG_INT, &o->host_steps, "Packet mix: mean host branches per VM exit (default 20..220; small = exit-heavy)", "N" },
		{ "user-exit-percent", 0, 0, G_OPTION_ARG_INT, &o->user_exit_pct, "Packet mix: VM exits handled in user space, traced as TIP.PGD...TIP.PGE, 0..100 (default 0)", "PCT" },
		{ "ovf-every", 0, 0, G_OPTION_ARG_INT, &o->ovf_every, "Lost trace, with real code: an OVF packet and a FUP after every N-th flow decision of a queue running a vCPU (default 0: none)", "N" },
		{ "aux-truncated-every", 0, 0, G_OPTION_ARG_INT, &o->aux_trunc, "Lost trace: a PERF_RECORD_AUX flagged TRUNCATED after every N-th AUXTRACE chunk of a queue running a vCPU (default 0: none)", "N" },
		{ "call-depth", 0, 0, G_OPTION_ARG_INT, &o->call_depth, "With real code: keep call depths near N (at depth N a walk heads for returns; the guest's stack survives injected events); default 0: unbounded", "N" },
		{ "host-code", 0, 0, G_OPTION_ARG_FILENAME, &o->host_code, "Walk the real kernel code of DIR (kcore + kallsyms + modules, as in a kcore_dir) in the host; needs --guest-code", "DIR" },
		{ "guest-code", 0, 0, G_OPTION_ARG_FILENAME, &o->guest_code, "Walk the real kernel code of DIR (a kcore_dir or a guest fetch snapshot) in the guests", "DIR" },
		{ "branches", 0, 0, G_OPTION_ARG_FILENAME, &o->branches, "With real code: write every branch taken (the ground truth of decoding) to FILE", "FILE" },
		{ "guest-user", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &o->guest_user, "With real code: guest time runs the user code of the ELF FILE too (its first executable PT_LOAD mapped at ADDR, default its link address; one process per VM, its own guest CR3); --branches names the mapping.  Up to 4 times: vCPU v runs file v mod n, a process each", "FILE[@ADDR]" },
		{ "guest-user-percent", 0, 0, G_OPTION_ARG_INT, &o->guest_user_pct, "With --guest-user: share of VM entries into the user code, 0..100 (default 50)", "PCT" },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &o->json, "Print a JSON summary on stdout", NULL },
		G_OPTION_ENTRY_NULL
	};
	gboolean ok = vt_cli_parse("- write a synthetic host Intel PT recording of KVM guests", synth_summary,
				   synth_description, entries, argc, argv, err);

	if (ok && *argc > 1) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "unexpected argument '%s'", (*argv)[1]);
		return FALSE;
	}
	return ok;
}

/* Counts given on the command line: -1 is "not given", anything else
 * below 0 is refused here (the generator's checks see unsigned values). */
static gboolean synth_counts(const SynthOpts *o, VtSynthConfig *cfg, GError **err)
{
	const struct { const char *name; gint v; guint *to; } n[] = {
		{ "--vcpus", o->vcpus, &cfg->nvcpus }, { "--vms", o->vms, &cfg->nvms },
		{ "--cpus", o->cpus, &cfg->ncpus }, { "--mtc-period", o->mtc_period, &cfg->mtc_period },
		{ "--cyc-thresh", o->cyc_thresh, &cfg->cyc_thresh },
		{ "--psb-period", o->psb_period, &cfg->psb_period }, { "--guest-percent", o->guest_pct, &cfg->guest_percent },
		{ "--tip-percent", o->tip_pct, &cfg->tip_percent }, { "--host-steps", o->host_steps, &cfg->host_steps },
		{ "--user-exit-percent", o->user_exit_pct, &cfg->user_exit_percent },
		{ "--ovf-every", o->ovf_every, &cfg->ovf_every }, { "--aux-truncated-every", o->aux_trunc, &cfg->aux_truncated_every },
		{ "--call-depth", o->call_depth, &cfg->call_depth },
	};

	for (gsize i = 0; i < G_N_ELEMENTS(n); i++) {
		if (n[i].v == G_MININT)
			continue;
		if (n[i].v < 0) {
			g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
				    "%s %d: expected a number >= 0", n[i].name, n[i].v);
			return FALSE;
		}
		*n[i].to = (guint)n[i].v;
	}
	return TRUE;
}

static gboolean synth_ratio(const char *ratio, VtSynthConfig *cfg, GError **err)
{
	guint64 n, d;
	g_auto(GStrv) p = NULL;

	if (!ratio)
		return TRUE;
	p = g_strsplit(ratio, "/", 2);
	if (!p[0] || !p[1] || !vt_parse_u64(p[0], &n) || !vt_parse_u64(p[1], &d) || n > G_MAXUINT32 ||
	    d > G_MAXUINT32) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--tsc-ctc-ratio '%s': expected N/D", ratio);
		return FALSE;
	}
	cfg->tsc_ctc_n = n;
	cfg->tsc_ctc_d = d;
	return TRUE;
}

static gboolean synth_vm_options(const SynthOpts *o, VtSynthConfig *cfg, GError **err)
{
	for (char **s = o->offsets; s && *s; s++)
		if (!parse_offset_opt(cfg, *s, err))
			return FALSE;
	for (char **s = o->vcpu_offsets; s && *s; s++)
		if (!parse_vcpu_offset_opt(cfg, *s, err))
			return FALSE;
	if (o->change && !parse_change_opt(cfg, o->change, err))
		return FALSE;
	for (char **s = o->scales; s && *s; s++)
		if (!parse_scale_opt(cfg, *s, err))
			return FALSE;
	return TRUE;
}

/* --guest-user FILE[@ADDR] (up to VT_SYNTH_MAX_USER), --guest-user-percent */
static gboolean synth_guest_user(const SynthOpts *o, VtSynthConfig *cfg, GError **err)
{
	guint n = o->guest_user ? g_strv_length(o->guest_user) : 0;

	if (o->guest_user_pct != G_MININT) {
		if (o->guest_user_pct < 0 || !n) {
			g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
				    "--guest-user-percent must be 0..100 and goes with --guest-user");
			return FALSE;
		}
		cfg->guest_user_percent = (guint)o->guest_user_pct;
	}
	if (n > VT_SYNTH_MAX_USER) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--guest-user: at most %d files",
			    VT_SYNTH_MAX_USER);
		return FALSE;
	}
	for (guint i = 0; i < n; i++) {
		char *at = strrchr(o->guest_user[i], '@');

		if (at) {
			*at = '\0';      /* the option's own string: FILE */
			if (!vt_opt_u64("--guest-user ADDR", at + 1, &cfg->guest_user_start[i], err))
				return FALSE;
		}
		cfg->guest_user[i] = o->guest_user[i];
	}
	return TRUE;
}

/* Options -> the generator's configuration; FALSE: a usage error. */
static gboolean synth_validate(const SynthOpts *o, VtSynthConfig *cfg, GError **err)
{
	if (!o->out) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "-o FILE is required");
		return FALSE;
	}
	if (o->per_cpu && o->per_thread) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--per-cpu and --per-thread exclude each other");
		return FALSE;
	}
	if (!o->host_code != !o->guest_code || (o->branches && !o->host_code)) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
			    "--host-code and --guest-code go together (and --branches needs them)");
		return FALSE;
	}
	vt_synth_config_init(cfg);
	cfg->per_cpu = o->per_cpu;
	cfg->cyc = o->cyc;
	cfg->mtc = !o->no_mtc;
	cfg->timeless = o->timeless;
	cfg->cbr_vary = o->cbr_vary;
	cfg->host_code = o->host_code;
	cfg->guest_code = o->guest_code;
	cfg->branches = o->branches;
	return synth_guest_user(o, cfg, err) && synth_counts(o, cfg, err) && synth_ratio(o->ratio, cfg, err) &&
	       vt_opt_size("--size", o->size, &cfg->size, err) &&
	       vt_opt_size("--buffer-size", o->bufsize, &cfg->buffer_size, err) &&
	       vt_opt_u64("--seed", o->seed, &cfg->seed, err) && vt_opt_u64("--tsc-start", o->tsc_start, &cfg->t0, err) &&
	       synth_vm_options(o, cfg, err) &&
	       vt_synth_config_check(cfg, err);
}

static void synth_report(const SynthOpts *o, const VtSynthConfig *cfg, const VtSynthStats *st)
{
	g_autoptr(VtJson) j = NULL;

	if (!o->json) {
		fprintf(stderr, "vmtrace synth: wrote %s: %u %s queues, %" G_GUINT64_FORMAT " AUX bytes, %"
			G_GUINT64_FORMAT " guest / %" G_GUINT64_FORMAT " host TSC packets, %" G_GUINT64_FORMAT
			" VM entries\n", o->out, st->nqueues, cfg->per_cpu ? "per-CPU" : "per-thread", st->aux_bytes,
			st->guest_tsc_packets, st->host_tsc_packets, st->vm_entries);
		return;
	}
	j = vt_json_new(stdout);
	vt_json_begin_object(j);
	vt_json_kv_string(j, "output", o->out);
	vt_json_kv_uint(j, "queues", st->nqueues);
	vt_json_kv_uint(j, "aux_bytes", st->aux_bytes);
	vt_json_kv_uint(j, "guest_tsc_packets", st->guest_tsc_packets);
	vt_json_kv_uint(j, "host_tsc_packets", st->host_tsc_packets);
	vt_json_kv_uint(j, "vm_entries", st->vm_entries);
	vt_json_end_object(j);
}

int cmd_synth(int argc, char **argv)
{
	SynthOpts o = { .vcpus = G_MININT, .vms = G_MININT, .cpus = G_MININT, .mtc_period = G_MININT, .cyc_thresh = G_MININT,
			.psb_period = G_MININT, .guest_pct = G_MININT,
			.tip_pct = G_MININT, .host_steps = G_MININT, .user_exit_pct = G_MININT, .call_depth = G_MININT,
			.ovf_every = G_MININT, .aux_trunc = G_MININT, .guest_user_pct = G_MININT };
	VtSynthConfig cfg;
	VtSynthStats st;
	g_autoptr(GError) err = NULL;
	int rc = VT_EXIT_OK;

	if (!synth_parse(&o, &argc, &argv, &err) || !synth_validate(&o, &cfg, &err)) {
		vt_err("synth", "%s (see vmtrace synth --help)", err->message);
		rc = VT_EXIT_USAGE;
	} else if (!outputs_ok(o.out, o.as_dir, o.truth, &err) ||
		   !vt_synth_generate(&cfg, o.out, o.as_dir, o.truth, &st, &err)) {
		vt_err("synth", "%s", err->message);
		rc = VT_EXIT_FAILURE;
	} else {
		synth_report(&o, &cfg, &st);
	}
	synth_opts_clear(&o);
	return rc;
}
