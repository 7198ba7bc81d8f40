/* kvmmeta.c - KVM time metadata stored with a recording.
 *
 * `vmtrace record` snapshots, for every vCPU, KVM's debugfs view
 * (kvm/<pid>-<fd>/vcpuN/{tsc-offset,tsc-scaling-ratio,...}) at the start and
 * the end of the recording into a key file next to the trace:
 * DIR/vmtrace-kvm.ini for a perf.data directory, FILE.vmtrace-kvm.ini for a
 * file.  Format (GKeyFile):
 *
 *   [vmtrace-kvm]
 *   version=1
 *   domain=kubuntu20.04          (optional)
 *   qemu_pid=4000
 *
 *   [vcpu0]
 *   tid=4010
 *   start.tsc_offset=-1941282476750   (signed decimal, as debugfs prints it)
 *   end.tsc_offset=-1941282476750
 *   tsc_scaling_ratio=281474976710656 (optional, with tsc_scaling_frac_bits)
 *   tsc_scaling_frac_bits=48
 */
#include "config.h"

#include <string.h>

#include "vmcorr/vmcorr.h"

static char *meta_path(const char *trace)
{
	if (g_file_test(trace, G_FILE_TEST_IS_DIR))
		return g_build_filename(trace, "vmtrace-kvm.ini", NULL);
	return g_strconcat(trace, ".vmtrace-kvm.ini", NULL);
}

void vmcorr_kvm_meta_free(VmcorrKvmMeta *m)
{
	if (!m)
		return;
	g_free(m->path);
	g_free(m->domain);
	g_array_free(m->vcpus, TRUE);
	g_free(m);
}

VmcorrKvmMeta *vmcorr_kvm_meta_load(const char *trace, const char *explicit_path, GError **error)
{
	g_autofree char *path = explicit_path ? g_strdup(explicit_path) : meta_path(trace);
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_auto(GStrv) groups = NULL;
	VmcorrKvmMeta *m;
	GError *e = NULL;

	if (!explicit_path && !g_file_test(path, G_FILE_TEST_EXISTS))
		return NULL;
	if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &e)) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_INPUT, "%s: %s", path, e->message);
		g_error_free(e);
		return NULL;
	}
	if (g_key_file_get_integer(kf, "vmtrace-kvm", "version", NULL) != 1) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_INPUT,
			    "%s: not vmtrace KVM metadata (need [vmtrace-kvm] version=1)", path);
		return NULL;
	}
	m = g_new0(VmcorrKvmMeta, 1);
	m->path = g_strdup(path);
	m->domain = g_key_file_get_string(kf, "vmtrace-kvm", "domain", NULL);
	m->qemu_pid = (uint32_t)g_key_file_get_uint64(kf, "vmtrace-kvm", "qemu_pid", NULL);
	m->vcpus = g_array_new(FALSE, TRUE, sizeof(VmcorrKvmVcpu));
	groups = g_key_file_get_groups(kf, NULL);
	for (guint i = 0; groups[i]; i++) {
		VmcorrKvmVcpu v = { 0 };
		char *end;

		if (!g_str_has_prefix(groups[i], "vcpu"))
			continue;
		v.vcpu = (int)g_ascii_strtoll(groups[i] + 4, &end, 10);
		if (*end || end == groups[i] + 4) {
			g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_INPUT, "%s: bad group [%s]", path, groups[i]);
			vmcorr_kvm_meta_free(m);
			return NULL;
		}
		v.tid = (uint32_t)g_key_file_get_uint64(kf, groups[i], "tid", NULL);
		v.have_start = g_key_file_has_key(kf, groups[i], "start.tsc_offset", NULL);
		v.tsc_offset_start = g_key_file_get_int64(kf, groups[i], "start.tsc_offset", NULL);
		v.have_end = g_key_file_has_key(kf, groups[i], "end.tsc_offset", NULL);
		v.tsc_offset_end = g_key_file_get_int64(kf, groups[i], "end.tsc_offset", NULL);
		v.have_scaling = g_key_file_has_key(kf, groups[i], "tsc_scaling_ratio", NULL);
		v.tsc_scaling_ratio = g_key_file_get_uint64(kf, groups[i], "tsc_scaling_ratio", NULL);
		v.tsc_scaling_frac_bits = (guint)g_key_file_get_uint64(kf, groups[i], "tsc_scaling_frac_bits", NULL);
		if (v.have_scaling && (!v.tsc_scaling_ratio || v.tsc_scaling_frac_bits > 63)) {
			g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_INPUT, "%s: [%s]: bad TSC scaling values",
				    path, groups[i]);
			vmcorr_kvm_meta_free(m);
			return NULL;
		}
		g_array_append_val(m->vcpus, v);
	}
	return m;
}

const VmcorrKvmVcpu *vmcorr_kvm_meta_vcpu(const VmcorrKvmMeta *m, uint32_t tid)
{
	for (guint i = 0; m && tid && i < m->vcpus->len; i++)
		if (g_array_index(m->vcpus, VmcorrKvmVcpu, i).tid == tid)
			return &g_array_index(m->vcpus, VmcorrKvmVcpu, i);
	return NULL;
}

gboolean vmcorr_kvm_meta_scaling(const VmcorrKvmMeta *m, uint64_t *ratio, guint *frac, gboolean *uniform)
{
	gboolean any = FALSE;

	*uniform = TRUE;
	for (guint i = 0; m && i < m->vcpus->len; i++) {
		const VmcorrKvmVcpu *v = &g_array_index(m->vcpus, VmcorrKvmVcpu, i);

		if (!v->have_scaling || v->tsc_scaling_ratio == (1ULL << v->tsc_scaling_frac_bits))
			continue;      /* no scaling */
		if (any && (v->tsc_scaling_ratio != *ratio || v->tsc_scaling_frac_bits != *frac))
			*uniform = FALSE;
		*ratio = v->tsc_scaling_ratio;
		*frac = v->tsc_scaling_frac_bits;
		any = TRUE;
	}
	return any;
}
