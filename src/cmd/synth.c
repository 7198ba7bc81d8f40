/* synth.c - `vmtrace synth`: write a synthetic host Intel PT recording of
 * KVM guests (perf.data) plus its ground truth. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "src/synth/synth.h"
#include "src/fs/fs.h"
#include "src/fs/output.h"
#include "src/cmd/cmd.h"

static gboolean parse_offset_opt(VtSynthConfig *cfg, const char *s, GError **error)
{
	/* OFF[:VM] */
	g_auto(GStrv) parts = g_strsplit(s, ":", 2);
	guint64 off, vm = 0;

	if (!vt_parse_u64(parts[0], &off) || (parts[1] && (!vt_parse_u64(parts[1], &vm) || vm >= VT_SYNTH_MAX_VMS))) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "--offset '%s': expected OFFSET[:VM] (e.g. 0xffffff0000000000:1)", s);
		return FALSE;
	}
	cfg->vm_offset[vm] = off;
	cfg->have_offset[vm] = TRUE;
	return TRUE;
}

static gboolean parse_scale_opt(VtSynthConfig *cfg, const char *s, GError **error)
{
	/* RATIO[/FRAC][:VM] */
	g_auto(GStrv) parts = g_strsplit(s, ":", 2);
	g_auto(GStrv) rf = g_strsplit(parts[0], "/", 2);
	guint64 ratio, frac = 48, vm = 0;

	if (!vt_parse_u64(rf[0], &ratio) || !ratio || (rf[1] && (!vt_parse_u64(rf[1], &frac) || frac > 63)) ||
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

int cmd_synth(int argc, char **argv)
{
	VtSynthConfig cfg;
	VtSynthStats st;
	gint vcpus = -1, vms = -1, cpus = -1, mtc_period = -1, psb_period = -1, guest_pct = -1;
	gboolean per_cpu = FALSE, per_thread = FALSE, cyc = FALSE, no_mtc = FALSE, timeless = FALSE;
	gboolean as_dir = FALSE, json = FALSE;
	char *ratio = NULL, *size = NULL, *bufsize = NULL, *seed = NULL, *out = NULL, *truth = NULL;
	char **offsets = NULL, *change = NULL, **scales = NULL;
	GError *err = NULL;
	int rc = VT_EXIT_USAGE;
	GOptionEntry entries[] = {
		{ "output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Write the perf.data to FILE (required)", "FILE" },
		{ "dir", 0, 0, G_OPTION_ARG_NONE, &as_dir, "Write a perf.data directory (FILE/data), like perf record --kcore", NULL },
		{ "truth", 't', 0, G_OPTION_ARG_FILENAME, &truth, "Write the ground truth JSON to FILE", "FILE" },
		{ "vcpus", 'n', 0, G_OPTION_ARG_INT, &vcpus, "Number of vCPUs over all VMs (default 4)", "N" },
		{ "vms", 0, 0, G_OPTION_ARG_INT, &vms, "Number of VMs; vCPUs are split between them (default 1)", "N" },
		{ "per-thread", 0, 0, G_OPTION_ARG_NONE, &per_thread, "One AUX queue per vCPU thread (default)", NULL },
		{ "per-cpu", 0, 0, G_OPTION_ARG_NONE, &per_cpu, "One AUX queue per host CPU; vCPUs migrate between CPUs", NULL },
		{ "cpus", 0, 0, G_OPTION_ARG_INT, &cpus, "Host CPUs in per-CPU mode (default min(vcpus,4))", "N" },
		{ "cyc", 0, 0, G_OPTION_ARG_NONE, &cyc, "Emit CYC packets (intel_pt/cyc=1/)", NULL },
		{ "no-mtc", 0, 0, G_OPTION_ARG_NONE, &no_mtc, "No MTC/TMA packets (intel_pt/mtc=0/)", NULL },
		{ "mtc-period", 0, 0, G_OPTION_ARG_INT, &mtc_period, "MTC every 2^N CTC ticks, 0..15 (default 3)", "N" },
		{ "psb-period", 0, 0, G_OPTION_ARG_INT, &psb_period, "PSB every 2K<<N bytes, 0..15 (default 3)", "N" },
		{ "tsc-ctc-ratio", 0, 0, G_OPTION_ARG_STRING, &ratio, "CPUID.15H EBX/EAX, TSC ticks per CTC tick (default 168/2)", "N/D" },
		{ "timeless", 0, 0, G_OPTION_ARG_NONE, &timeless, "No timing packets at all (intel_pt/tsc=0,mtc=0/)", NULL },
		{ "size", 's', 0, G_OPTION_ARG_STRING, &size, "Total AUX bytes, e.g. 16M (default 4M)", "SIZE" },
		{ "buffer-size", 0, 0, G_OPTION_ARG_STRING, &bufsize, "Bytes per AUXTRACE record (default 256K)", "SIZE" },
		{ "seed", 0, 0, G_OPTION_ARG_STRING, &seed, "Random seed; same options and seed give the same bytes (default 1)", "N" },
		{ "offset", 0, 0, G_OPTION_ARG_STRING_ARRAY, &offsets, "TSC offset of VM; repeatable (default: a negative offset derived from the seed)", "OFF[:VM]" },
		{ "offset-change", 0, 0, G_OPTION_ARG_STRING, &change, "VM's TSC offset changes to OFF at FRACTION of the trace", "[VM:]OFF@FRACTION" },
		{ "tsc-scale", 0, 0, G_OPTION_ARG_STRING_ARRAY, &scales, "VMX TSC scaling of VM: guest TSC = (host * RATIO >> FRAC) + offset (FRAC default 48); repeatable", "RATIO[/FRAC][:VM]" },
		{ "guest-percent", 0, 0, G_OPTION_ARG_INT, &guest_pct, "Share of time in guest mode, 0..95 (default 60)", "PCT" },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &json, "Print a JSON summary on stdout", NULL },
		G_OPTION_ENTRY_NULL
	};
	GOptionContext *ctx = g_option_context_new("- write a synthetic host Intel PT recording of KVM guests");

	g_option_context_set_summary(ctx,
		"Generates, with libipt's encoder, the Intel PT trace a host would record of\n"
		"QEMU/KVM vCPUs (host KVM code, VM entries/exits, guest kernel code, PSB+ with\n"
		"TSC/TMA/PIP/VMCS, MTC, CYC) as a perf.data that perf reads, and a ground-truth\n"
		"JSON with every VMCS, vCPU and TSC offset.  Guest TSC packets carry the VM's\n"
		"TSC offset, so `vmtrace correlate --dry-run` has something to find.");
	g_option_context_set_description(ctx,
		"Examples:\n"
		"  vmtrace synth -o guest.data --truth guest.json\n"
		"  vmtrace synth -o big.data --per-cpu --vcpus 16 --cyc --size 512M\n"
		"  vmtrace synth -o two.data --vms 2 --offset 0x0123456789abcdef:0 --offset 0xffffff8000000000:1\n\n"
		"Exit status: 0 ok; 1 failure (cannot write FILE); 2 usage error.  Nothing is\n"
		"left behind on failure.\n");
	g_option_context_add_main_entries(ctx, entries, NULL);
	if (!g_option_context_parse(ctx, &argc, &argv, &err))
		goto usage_err;
	if (argc > 1) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "unexpected argument '%s'", argv[1]);
		goto usage_err;
	}
	if (!out) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "-o FILE is required");
		goto usage_err;
	}
	if (per_cpu && per_thread) {
		g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "--per-cpu and --per-thread exclude each other");
		goto usage_err;
	}
	vt_synth_config_init(&cfg);
	if (vcpus >= 0) cfg.nvcpus = vcpus;
	if (vms >= 0) cfg.nvms = vms;
	if (cpus >= 0) cfg.ncpus = cpus;
	if (mtc_period >= 0) cfg.mtc_period = mtc_period;
	if (psb_period >= 0) cfg.psb_period = psb_period;
	if (guest_pct >= 0) cfg.guest_percent = guest_pct;
	cfg.per_cpu = per_cpu;
	cfg.cyc = cyc;
	cfg.mtc = !no_mtc;
	cfg.timeless = timeless;
	if (ratio) {
		guint64 n, d;
		g_auto(GStrv) p = g_strsplit(ratio, "/", 2);

		if (!p[1] || !vt_parse_u64(p[0], &n) || !vt_parse_u64(p[1], &d) || n > G_MAXUINT32 || d > G_MAXUINT32) {
			g_set_error(&err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--tsc-ctc-ratio '%s': expected N/D", ratio);
			goto usage_err;
		}
		cfg.tsc_ctc_n = n;
		cfg.tsc_ctc_d = d;
	}
	if (!vt_opt_size("--size", size, &cfg.size, &err) ||
	    !vt_opt_size("--buffer-size", bufsize, &cfg.buffer_size, &err) ||
	    !vt_opt_u64("--seed", seed, &cfg.seed, &err))
		goto usage_err;
	for (char **o = offsets; o && *o; o++)
		if (!parse_offset_opt(&cfg, *o, &err))
			goto usage_err;
	if (change && !parse_change_opt(&cfg, change, &err))
		goto usage_err;
	for (char **o = scales; o && *o; o++)
		if (!parse_scale_opt(&cfg, *o, &err))
			goto usage_err;
	if (!vt_synth_config_check(&cfg, &err))
		goto usage_err;

	if (!outputs_ok(out, as_dir, truth, &err) || !vt_synth_generate(&cfg, out, as_dir, truth, &st, &err)) {
		vt_err("synth", "%s", err->message);
		rc = VT_EXIT_FAILURE;
		goto done;
	}
	if (json) {
		printf("{\"output\": ");
		{
			GString *s = g_string_new(NULL);

			vt_json_str(s, out);
			fputs(s->str, stdout);
			g_string_free(s, TRUE);
		}
		printf(", \"queues\": %u, \"aux_bytes\": %" G_GUINT64_FORMAT ", \"guest_tsc_packets\": %"
		       G_GUINT64_FORMAT ", \"host_tsc_packets\": %" G_GUINT64_FORMAT ", \"vm_entries\": %"
		       G_GUINT64_FORMAT "}\n", st.nqueues, st.aux_bytes, st.guest_tsc_packets, st.host_tsc_packets,
		       st.vm_entries);
	} else {
		fprintf(stderr, "vmtrace synth: wrote %s: %u %s queues, %" G_GUINT64_FORMAT " AUX bytes, %"
			G_GUINT64_FORMAT " guest / %" G_GUINT64_FORMAT " host TSC packets, %" G_GUINT64_FORMAT
			" VM entries\n", out, st.nqueues, cfg.per_cpu ? "per-CPU" : "per-thread", st.aux_bytes,
			st.guest_tsc_packets, st.host_tsc_packets, st.vm_entries);
	}
	rc = VT_EXIT_OK;
	goto done;
usage_err:
	vt_err("synth", "%s (see vmtrace synth --help)", err->message);
	rc = VT_EXIT_USAGE;
done:
	g_clear_error(&err);
	g_option_context_free(ctx);
	g_free(ratio);
	g_free(size);
	g_free(bufsize);
	g_free(seed);
	g_free(out);
	g_free(truth);
	g_free(change);
	g_strfreev(offsets);
	g_strfreev(scales);
	return rc;
}
