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
 *   end.tid=4012                      (only when KVM's vcpuN/pid changed)
 *   start.tsc_offset=-1941282476750   (signed decimal, as debugfs prints it)
 *   end.tsc_offset=-1941282476750
 *   tsc_scaling_ratio=281474976710656 (optional, with tsc_scaling_frac_bits)
 *   tsc_scaling_frac_bits=48
 *   start.guest_mode=0                (optional, also end.guest_mode)
 *
 *   [tsc-offset-writes]               (when kvm:kvm_write_tsc_offset was recorded)
 *   count=1
 *   w0=TIME;TID;VCPU;PREVIOUS;NEXT    (perf clock ns; offsets as u64)
 */
#include "config.h"

#include <string.h>

#include "src/fs/output.h"
#include "vmcorr/vmcorr.h"

#define META_MAX (256u << 20)   /* bytes: a million offset writes fit */

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
	g_array_free(m->writes, TRUE);
	g_free(m);
}

VmcorrKvmMeta *vmcorr_kvm_meta_new(void)
{
	VmcorrKvmMeta *m = g_new0(VmcorrKvmMeta, 1);

	m->vcpus = g_array_new(FALSE, TRUE, sizeof(VmcorrKvmVcpu));
	m->writes = g_array_new(FALSE, TRUE, sizeof(VmcorrTscWrite));
	return m;
}

gboolean vmcorr_kvm_meta_save(const VmcorrKvmMeta *m, const char *path, GError **error)
{
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_autofree char *data = NULL;
	gsize len;

	g_key_file_set_integer(kf, "vmtrace-kvm", "version", 1);
	if (m->domain)
		g_key_file_set_string(kf, "vmtrace-kvm", "domain", m->domain);
	g_key_file_set_uint64(kf, "vmtrace-kvm", "qemu_pid", m->qemu_pid);
	for (guint i = 0; i < m->vcpus->len; i++) {
		const VmcorrKvmVcpu *v = &g_array_index(m->vcpus, VmcorrKvmVcpu, i);
		g_autofree char *g = g_strdup_printf("vcpu%d", v->vcpu);

		g_key_file_set_uint64(kf, g, "tid", v->tid);
		if (v->end_tid)
			g_key_file_set_uint64(kf, g, "end.tid", v->end_tid);
		if (v->have_start)
			g_key_file_set_int64(kf, g, "start.tsc_offset", v->tsc_offset_start);
		if (v->have_end)
			g_key_file_set_int64(kf, g, "end.tsc_offset", v->tsc_offset_end);
		if (v->have_scaling) {
			g_key_file_set_uint64(kf, g, "tsc_scaling_ratio", v->tsc_scaling_ratio);
			g_key_file_set_uint64(kf, g, "tsc_scaling_frac_bits", v->tsc_scaling_frac_bits);
		}
		if (v->have_guest_mode_start)
			g_key_file_set_integer(kf, g, "start.guest_mode", v->guest_mode_start);
		if (v->have_guest_mode_end)
			g_key_file_set_integer(kf, g, "end.guest_mode", v->guest_mode_end);
	}
	if (m->have_writes) {
		g_key_file_set_uint64(kf, "tsc-offset-writes", "count", m->writes->len);
		for (guint i = 0; i < m->writes->len; i++) {
			const VmcorrTscWrite *w = &g_array_index(m->writes, VmcorrTscWrite, i);
			g_autofree char *k = g_strdup_printf("w%u", i);
			g_autofree char *v = g_strdup_printf("%" G_GUINT64_FORMAT ";%u;%u;%" G_GUINT64_FORMAT
							     ";%" G_GUINT64_FORMAT, w->time, w->tid, w->vcpu,
							     w->previous, w->next);

			g_key_file_set_string(kf, "tsc-offset-writes", k, v);
		}
	}
	data = g_key_file_to_data(kf, &len, NULL);
	return vt_fs_output_write_file(path, VT_FS_OUTPUT_REPLACE, 0666, data, len, error);
}

VmcorrKvmMeta *vmcorr_kvm_meta_load(const char *trace, const char *explicit_path, GError **error)
{
	g_autofree char *path = explicit_path ? g_strdup(explicit_path) : meta_path(trace);
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_auto(GStrv) groups = NULL;
	g_autofree char *text = NULL;
	gsize len = 0;
	VmcorrKvmMeta *m;
	GError *e = NULL;

	if (!explicit_path && !g_file_test(path, G_FILE_TEST_EXISTS))
		return NULL;
	text = vt_fs_read_all(path, META_MAX, &len, &e);   /* never blocks on a FIFO */
	if (!text || !g_key_file_load_from_data(kf, text, len, G_KEY_FILE_NONE, &e)) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_INPUT, "%s%s%s", text ? path : "", text ? ": " : "",
			    e->message);
		g_error_free(e);
		return NULL;
	}
	if (g_key_file_get_integer(kf, "vmtrace-kvm", "version", NULL) != 1) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_INPUT,
			    "%s: not vmtrace KVM metadata (need [vmtrace-kvm] version=1)", path);
		return NULL;
	}
	m = vmcorr_kvm_meta_new();
	m->path = g_strdup(path);
	m->domain = g_key_file_get_string(kf, "vmtrace-kvm", "domain", NULL);
	m->qemu_pid = (uint32_t)g_key_file_get_uint64(kf, "vmtrace-kvm", "qemu_pid", NULL);
	groups = g_key_file_get_groups(kf, NULL);
	if (g_key_file_has_group(kf, "tsc-offset-writes")) {
		guint64 count = g_key_file_get_uint64(kf, "tsc-offset-writes", "count", NULL);

		m->have_writes = TRUE;
		for (guint64 i = 0; i < count && i < 1000000; i++) {
			g_autofree char *k = g_strdup_printf("w%" G_GUINT64_FORMAT, i);
			g_autofree char *v = g_key_file_get_string(kf, "tsc-offset-writes", k, NULL);
			g_auto(GStrv) f = v ? g_strsplit(v, ";", -1) : NULL;
			VmcorrTscWrite w;

			if (!f || g_strv_length(f) != 5) {
				g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_INPUT,
					    "%s: [tsc-offset-writes] %s: need TIME;TID;VCPU;PREVIOUS;NEXT", path, k);
				vmcorr_kvm_meta_free(m);
				return NULL;
			}
			w.time = g_ascii_strtoull(f[0], NULL, 10);
			w.tid = (uint32_t)g_ascii_strtoull(f[1], NULL, 10);
			w.vcpu = (uint32_t)g_ascii_strtoull(f[2], NULL, 10);
			w.previous = g_ascii_strtoull(f[3], NULL, 10);
			w.next = g_ascii_strtoull(f[4], NULL, 10);
			g_array_append_val(m->writes, w);
		}
	}
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
		v.end_tid = (uint32_t)g_key_file_get_uint64(kf, groups[i], "end.tid", NULL);
		v.have_start = g_key_file_has_key(kf, groups[i], "start.tsc_offset", NULL);
		v.tsc_offset_start = g_key_file_get_int64(kf, groups[i], "start.tsc_offset", NULL);
		v.have_end = g_key_file_has_key(kf, groups[i], "end.tsc_offset", NULL);
		v.tsc_offset_end = g_key_file_get_int64(kf, groups[i], "end.tsc_offset", NULL);
		v.have_scaling = g_key_file_has_key(kf, groups[i], "tsc_scaling_ratio", NULL);
		v.tsc_scaling_ratio = g_key_file_get_uint64(kf, groups[i], "tsc_scaling_ratio", NULL);
		v.tsc_scaling_frac_bits = (guint)g_key_file_get_uint64(kf, groups[i], "tsc_scaling_frac_bits", NULL);
		v.have_guest_mode_start = g_key_file_has_key(kf, groups[i], "start.guest_mode", NULL);
		v.guest_mode_start = g_key_file_get_integer(kf, groups[i], "start.guest_mode", NULL);
		v.have_guest_mode_end = g_key_file_has_key(kf, groups[i], "end.guest_mode", NULL);
		v.guest_mode_end = g_key_file_get_integer(kf, groups[i], "end.guest_mode", NULL);
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
