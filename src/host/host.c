/* host.c - host facts for recording (see host.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "src/host/host.h"

static char *root;
static gboolean root_set;

void vt_host_set_root(const char *r)
{
	g_free(root);
	root = r && *r ? g_strdup(r) : NULL;
	root_set = TRUE;
}

const char *vt_host_root(void)
{
	if (!root_set) {
		/* a test hook: see ENVIRONMENT in vmtrace(1) */
		const char *e = g_getenv("VMTRACE_SYSROOT");

		vt_host_set_root(e);
	}
	return root ? root : "";
}

char *vt_host_path(const char *path)
{
	return g_strconcat(vt_host_root(), path, NULL);
}

char *vt_host_read(const char *path)
{
	g_autofree char *p = vt_host_path(path);
	char *s = NULL;

	if (!g_file_get_contents(p, &s, NULL, NULL))
		return NULL;
	return g_strstrip(s);
}

gboolean vt_host_read_int(const char *path, gint64 *out)
{
	g_autofree char *s = vt_host_read(path);
	char *end;

	if (!s || !*s)
		return FALSE;
	*out = g_ascii_strtoll(s, &end, 0);
	return *end == '\0';
}

const char *vt_host_check_level_name(VtHostCheckLevel l)
{
	return l == VT_HOST_CHECK_OK ? "OK" : l == VT_HOST_CHECK_WARN ? "WARN" : "FAIL";
}

void vt_host_check_free(gpointer p)
{
	VtHostCheck *c = p;

	g_free(c->name);
	g_free(c->what);
	g_free(c->fix);
	g_free(c);
}

void vt_host_check_add(GPtrArray *checks, const char *name, VtHostCheckLevel level, const char *fix, const char *fmt, ...)
{
	VtHostCheck *c = g_new0(VtHostCheck, 1);
	va_list ap;

	va_start(ap, fmt);
	c->what = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	c->name = g_strdup(name);
	c->level = level;
	c->fix = g_strdup(fix);
	g_ptr_array_add(checks, c);
}

static GHashTable *read_dir_files(const char *dir)
{
	g_autofree char *p = vt_host_path(dir);
	GHashTable *h = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	GDir *d = g_dir_open(p, 0, NULL);
	const char *name;

	while (d && (name = g_dir_read_name(d))) {
		g_autofree char *f = g_build_filename(dir, name, NULL);
		char *v = vt_host_read(f);

		if (v)
			g_hash_table_insert(h, g_strdup(name), v);
	}
	if (d)
		g_dir_close(d);
	return h;
}

gboolean vt_host_intel_pt(VtHostIntelPt *pt)
{
	gint64 type;

	memset(pt, 0, sizeof(*pt));
	if (!vt_host_read_int("/sys/bus/event_source/devices/intel_pt/type", &type))
		return FALSE;
	pt->present = TRUE;
	pt->type = (guint)type;
	pt->caps = read_dir_files("/sys/bus/event_source/devices/intel_pt/caps");
	pt->format = read_dir_files("/sys/bus/event_source/devices/intel_pt/format");
	return TRUE;
}

void vt_host_intel_pt_clear(VtHostIntelPt *pt)
{
	if (pt->caps)
		g_hash_table_destroy(pt->caps);
	if (pt->format)
		g_hash_table_destroy(pt->format);
	memset(pt, 0, sizeof(*pt));
}

gboolean vt_host_intel_pt_field(const VtHostIntelPt *pt, const char *name, uint64_t *mask, guint *shift)
{
	const char *f = pt->format ? g_hash_table_lookup(pt->format, name) : NULL;
	unsigned lo, hi;

	if (!f || strncmp(f, "config:", 7))
		return FALSE;
	if (sscanf(f + 7, "%u-%u", &lo, &hi) == 2) {
		if (lo > hi || hi > 63)
			return FALSE;
	} else if (sscanf(f + 7, "%u", &lo) == 1 && lo <= 63) {
		hi = lo;
	} else {
		return FALSE;
	}
	*shift = lo;
	*mask = (hi - lo == 63 ? ~0ULL : ((1ULL << (hi - lo + 1)) - 1)) << lo;
	return TRUE;
}

static gboolean host_is_dir(const char *path)
{
	g_autofree char *p = vt_host_path(path);

	return g_file_test(p, G_FILE_TEST_IS_DIR);
}

/* IA32_VMX_MISC (0x485) bit 14: Intel PT can be used in VMX operation. */
static void check_vmx_misc(GPtrArray *checks)
{
	g_autofree char *p = vt_host_path("/dev/cpu/0/msr");
	uint64_t v;
	int fd = open(p, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		vt_host_check_add(checks, "vmx_misc", VT_HOST_CHECK_WARN, "modprobe msr (then run vmtrace check as root)",
			     "IA32_VMX_MISC[14] could not be checked: %s: %s", p, g_strerror(errno));
		return;
	}
	if (pread(fd, &v, 8, 0x485) != 8) {
		vt_host_check_add(checks, "vmx_misc", VT_HOST_CHECK_WARN, "run vmtrace check as root on an Intel CPU",
			     "IA32_VMX_MISC could not be read from %s", p);
	} else if (v & (1ULL << 14)) {
		vt_host_check_add(checks, "vmx_misc", VT_HOST_CHECK_OK, NULL,
			     "IA32_VMX_MISC[14]=1: Intel PT keeps tracing in VMX operation");
	} else {
		vt_host_check_add(checks, "vmx_misc", VT_HOST_CHECK_FAIL,
			     "use a newer CPU (this one stops Intel PT at VMXON; host traces of KVM guests stay empty)",
			     "IA32_VMX_MISC[14]=0: Intel PT is disabled while KVM runs guests");
	}
	close(fd);
}

void vt_host_readiness(GPtrArray *checks)
{
	VtHostIntelPt pt;
	gint64 v;
	g_autofree char *lockdown = NULL;
	uid_t euid = geteuid();

	/* intel_pt PMU and its capabilities */
	if (vt_host_intel_pt(&pt)) {
		GString *caps = g_string_new(NULL);
		const char *keys[] = { "mtc", "tsc_art_ratio", "psb_cyc", "cycle_thresholds", "mtc_periods",
				       "psb_periods", "ip_filtering", "ptwrite", "power_event_trace" };

		for (guint i = 0; i < G_N_ELEMENTS(keys); i++) {
			const char *c = g_hash_table_lookup(pt.caps, keys[i]);

			if (c)
				g_string_append_printf(caps, "%s%s=%s", caps->len ? " " : "", keys[i], c);
		}
		vt_host_check_add(checks, "intel_pt", VT_HOST_CHECK_OK, NULL, "intel_pt PMU type %u (%s)", pt.type,
			     caps->len ? caps->str : "no caps");
		{
			const char *mtc = g_hash_table_lookup(pt.caps, "mtc");

			if (mtc && !strcmp(mtc, "0"))
				vt_host_check_add(checks, "intel_pt_mtc", VT_HOST_CHECK_WARN,
					     "record timeless (vmtrace record --timeless): VM time correlation needs MTC",
					     "no MTC packets on this CPU: guest TSC offsets cannot be found");
		}
		g_string_free(caps, TRUE);
		vt_host_intel_pt_clear(&pt);
	} else {
		vt_host_check_add(checks, "intel_pt", VT_HOST_CHECK_FAIL,
			     "run on an Intel CPU with Intel PT (Broadwell or later), on bare metal or with PT "
			     "passed through; correlating and decoding existing traces works anywhere",
			     "no intel_pt PMU in %s/sys/bus/event_source/devices", vt_host_root());
	}
	check_vmx_misc(checks);

	/* kvm_intel pt_mode must be 0 (system mode) */
	if (vt_host_read_int("/sys/module/kvm_intel/parameters/pt_mode", &v)) {
		if (v == 0)
			vt_host_check_add(checks, "pt_mode", VT_HOST_CHECK_OK, NULL, "kvm_intel pt_mode=0: the host traces guests");
		else
			vt_host_check_add(checks, "pt_mode", VT_HOST_CHECK_FAIL,
				     "stop all VMs, then: modprobe -r kvm_intel && modprobe kvm_intel pt_mode=0",
				     "kvm_intel pt_mode=%" G_GINT64_FORMAT ": Intel PT is handed to guests, the host "
				     "trace hides them", v);
	} else if (host_is_dir("/sys/module/kvm_intel")) {
		vt_host_check_add(checks, "pt_mode", VT_HOST_CHECK_OK, NULL, "kvm_intel has no pt_mode parameter (system mode)");
	} else {
		vt_host_check_add(checks, "pt_mode", VT_HOST_CHECK_WARN, "modprobe kvm_intel (on an Intel host)",
			     "kvm_intel is not loaded: no VMX guests to trace here");
	}

	/* permissions */
	if (vt_host_read_int("/proc/sys/kernel/perf_event_paranoid", &v)) {
		if (euid == 0)
			vt_host_check_add(checks, "perf_event_paranoid", VT_HOST_CHECK_OK, NULL,
				     "perf_event_paranoid=%" G_GINT64_FORMAT ", running as root", v);
		else if (v <= 1)
			vt_host_check_add(checks, "perf_event_paranoid", VT_HOST_CHECK_OK, NULL,
				     "perf_event_paranoid=%" G_GINT64_FORMAT ": kernel tracing allowed", v);
		else
			vt_host_check_add(checks, "perf_event_paranoid", VT_HOST_CHECK_FAIL,
				     "sudo sysctl -w kernel.perf_event_paranoid=1, or run as root / with CAP_PERFMON",
				     "perf_event_paranoid=%" G_GINT64_FORMAT ": kernel tracing (intel_pt//k) is "
				     "refused to unprivileged users", v);
	} else {
		vt_host_check_add(checks, "perf_event_paranoid", VT_HOST_CHECK_FAIL, "use a kernel with perf events",
			     "no /proc/sys/kernel/perf_event_paranoid: perf events are not available");
	}
	if (vt_host_read_int("/proc/sys/kernel/kptr_restrict", &v)) {
		if (v == 0 || (v == 1 && euid == 0))
			vt_host_check_add(checks, "kptr_restrict", VT_HOST_CHECK_OK, NULL,
				     "kptr_restrict=%" G_GINT64_FORMAT ": kernel addresses visible", v);
		else
			vt_host_check_add(checks, "kptr_restrict", VT_HOST_CHECK_WARN,
				     "sudo sysctl -w kernel.kptr_restrict=0",
				     "kptr_restrict=%" G_GINT64_FORMAT ": /proc/kallsyms shows zeros, host kernel "
				     "code cannot be decoded", v);
	}
	lockdown = vt_host_read("/sys/kernel/security/lockdown");
	if (!lockdown || strstr(lockdown, "[none]"))
		vt_host_check_add(checks, "lockdown", VT_HOST_CHECK_OK, NULL, "kernel lockdown: none");
	else if (strstr(lockdown, "[integrity]"))
		vt_host_check_add(checks, "lockdown", VT_HOST_CHECK_WARN, "boot with lockdown=none (or without Secure Boot lockdown)",
			     "kernel lockdown=integrity: some tracing features may be refused");
	else
		vt_host_check_add(checks, "lockdown", VT_HOST_CHECK_FAIL, "boot with lockdown=none (or disable Secure Boot lockdown)",
			     "kernel lockdown=confidentiality: /proc/kcore and kernel tracing are blocked");

	/* debugfs, for KVM's per-vCPU pid/tsc-offset files */
	if (host_is_dir("/sys/kernel/debug/kvm"))
		vt_host_check_add(checks, "debugfs", VT_HOST_CHECK_OK, NULL, "debugfs mounted, KVM entries present");
	else
		vt_host_check_add(checks, "debugfs", VT_HOST_CHECK_WARN, "sudo mount -t debugfs none /sys/kernel/debug",
			     "KVM debugfs not found (%s/sys/kernel/debug/kvm): vCPU threads fall back to thread names "
			     "and TSC offsets are not recorded", vt_host_root());
}

GArray *vt_host_online_cpus(void)
{
	GArray *cpus = g_array_new(FALSE, FALSE, sizeof(int));
	g_autofree char *s = vt_host_read("/sys/devices/system/cpu/online");
	g_auto(GStrv) parts = s ? g_strsplit(s, ",", -1) : NULL;

	for (guint i = 0; parts && parts[i]; i++) {
		char *end;
		guint64 a = g_ascii_strtoull(parts[i], &end, 10), b = a;

		if (end == parts[i])
			continue;
		if (*end == '-')
			b = g_ascii_strtoull(end + 1, NULL, 10);
		for (guint64 c = a; c <= b && c < 8192; c++) {
			int v = (int)c;

			g_array_append_val(cpus, v);
		}
	}
	if (!cpus->len) {
		for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN); c++) {
			int v = (int)c;

			g_array_append_val(cpus, v);
		}
	}
	return cpus;
}
