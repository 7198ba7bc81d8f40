/* domain.c - libvirt domain -> QEMU pid -> vCPU threads (see domain.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libvirt/libvirt.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include <dlfcn.h>

#include "src/host/domain.h"
#include "src/host/host.h"

G_DEFINE_QUARK(vt-domain-error-quark, vt_domain_error)

/* libvirt is loaded when a domain is looked up, not linked: it brings ~50
 * shared libraries whose loading and relocation cost every vmtrace run
 * ~10 ms of system and ~15 ms of user time (a third of a 64 MiB dry run's
 * system time), and only this file uses it.  The calls below go through
 * pointers of the functions' own types. */
#define VIRT_FUNCS(X)							\
	X(virConnectListAllDomains) X(virDomainGetName) X(virDomainFree)	\
	X(virConnectOpen) X(virConnectOpenReadOnly) X(virConnectClose)	\
	X(virGetLastErrorMessage) X(virConnectGetType)			\
	X(virDomainLookupByName) X(virDomainGetInfo) X(virDomainGetXMLDesc) \
	X(virSetErrorFunc)
#define VIRT_QEMU_FUNCS(X)	X(virDomainQemuMonitorCommand)
#define VIRT_PTR(f)	static __typeof__(f) *p_##f;
VIRT_FUNCS(VIRT_PTR)
VIRT_QEMU_FUNCS(VIRT_PTR)

static gboolean virt_sym(void *lib, const char *name, void **fp, GString *missing)
{
	*fp = lib ? dlsym(lib, name) : NULL;
	if (!*fp && lib)
		g_string_append_printf(missing, " %s", name);
	return *fp != NULL;
}

/* Load libvirt (once; thread-safe).  NULL or a message saying why not. */
static gpointer virt_load_once(gpointer unused)
{
	void *v = dlopen("libvirt.so.0", RTLD_NOW | RTLD_LOCAL);
	void *q = v ? dlopen("libvirt-qemu.so.0", RTLD_NOW | RTLD_LOCAL) : NULL;
	GString *missing = g_string_new(NULL);
	gboolean ok = TRUE;

	(void)unused;
	if (!v || !q) {
		char *m = g_strdup_printf("cannot load libvirt: %s (apt-get install libvirt0)", dlerror());

		g_string_free(missing, TRUE);
		return m;
	}
#define VIRT_SYM(f)	ok &= virt_sym(v, #f, (void **)&p_##f, missing);
#define VIRT_QSYM(f)	ok &= virt_sym(q, #f, (void **)&p_##f, missing);
	VIRT_FUNCS(VIRT_SYM)
	VIRT_QEMU_FUNCS(VIRT_QSYM)
	if (ok) {
		g_string_free(missing, TRUE);
		return NULL;
	}
	return g_strdup_printf("libvirt.so.0 lacks%s (libvirt 6.0 or later needed)", g_string_free(missing, FALSE));
}

static gboolean virt_load(GError **error)
{
	static GOnce once = G_ONCE_INIT;
	const char *msg = g_once(&once, virt_load_once, NULL);

	if (!msg)
		return TRUE;
	g_set_error_literal(error, VT_DOMAIN_ERROR, VT_DOMAIN_ERROR_CONNECT, msg);
	return FALSE;
}

#define virConnectListAllDomains	p_virConnectListAllDomains
#define virDomainGetName		p_virDomainGetName
#define virDomainFree			p_virDomainFree
#define virConnectOpen			p_virConnectOpen
#define virConnectOpenReadOnly		p_virConnectOpenReadOnly
#define virConnectClose			p_virConnectClose
#define virGetLastErrorMessage		p_virGetLastErrorMessage
#define virConnectGetType		p_virConnectGetType
#define virDomainLookupByName		p_virDomainLookupByName
#define virDomainGetInfo		p_virDomainGetInfo
#define virDomainGetXMLDesc		p_virDomainGetXMLDesc
#define virSetErrorFunc			p_virSetErrorFunc
#define virDomainQemuMonitorCommand	p_virDomainQemuMonitorCommand

static void silent(void *ud, virErrorPtr e)
{
	(void)ud;
	(void)e;
}

static const char *state_name(int s)
{
	switch (s) {
	case VIR_DOMAIN_RUNNING: return "running";
	case VIR_DOMAIN_BLOCKED: return "blocked";
	case VIR_DOMAIN_PAUSED: return "paused";
	case VIR_DOMAIN_SHUTDOWN: return "shutting down";
	case VIR_DOMAIN_SHUTOFF: return "shut off";
	case VIR_DOMAIN_CRASHED: return "crashed";
	case VIR_DOMAIN_PMSUSPENDED: return "suspended";
	default: return "unknown";
	}
}

static char *domain_list(virConnectPtr c)
{
	virDomainPtr *doms = NULL;
	int n = virConnectListAllDomains(c, &doms, 0);
	GString *s = g_string_new(NULL);

	for (int i = 0; i < n; i++) {
		g_string_append_printf(s, "%s%s", i ? ", " : "", virDomainGetName(doms[i]));
		virDomainFree(doms[i]);
	}
	free(doms);
	return g_string_free(s, FALSE);
}

static int cmp_vcpu(gconstpointer a, gconstpointer b)
{
	return ((const VtDomainVcpu *)a)->vcpu - ((const VtDomainVcpu *)b)->vcpu;
}

/* kvm/<pid>-<fd>/vcpuN/pid */
static void vcpus_from_debugfs(VtDomain *d)
{
	g_autofree char *kvm = vt_host_path("/sys/kernel/debug/kvm");
	g_autofree char *prefix = g_strdup_printf("%u-", d->pid);
	GDir *dir = g_dir_open(kvm, 0, NULL);
	const char *name;

	while (dir && (name = g_dir_read_name(dir))) {
		if (!g_str_has_prefix(name, prefix))
			continue;
		d->kvm_dir = g_build_filename("/sys/kernel/debug/kvm", name, NULL);
		break;
	}
	if (dir)
		g_dir_close(dir);
	if (!d->kvm_dir)
		return;
	for (guint v = 0; v < 4096; v++) {
		g_autofree char *p = g_strdup_printf("%s/vcpu%u/pid", d->kvm_dir, v);
		gint64 tid;

		if (!vt_host_read_int(p, &tid))
			break;
		g_array_append_val(d->vcpus, ((VtDomainVcpu){ .vcpu = v, .tid = (uint32_t)tid, .source = "debugfs" }));
	}
}

/* /proc/<pid>/task/<tid>/comm == "CPU n/KVM" (QEMU's debug-threads=on names) */
static void vcpus_from_comm(VtDomain *d)
{
	g_autofree char *task = g_strdup_printf("%s/proc/%u/task", vt_host_root(), d->pid);
	GDir *dir = g_dir_open(task, 0, NULL);
	const char *name;

	while (dir && (name = g_dir_read_name(dir))) {
		g_autofree char *p = g_strdup_printf("/proc/%u/task/%s/comm", d->pid, name);
		g_autofree char *comm = vt_host_read(p);
		unsigned v;
		char accel[8];

		if (comm && sscanf(comm, "CPU %u/%7s", &v, accel) == 2)
			g_array_append_val(d->vcpus, ((VtDomainVcpu){ .vcpu = (int)v, .tid = (uint32_t)atoi(name),
								.source = "thread name" }));
	}
	if (dir)
		g_dir_close(dir);
	g_array_sort(d->vcpus, cmp_vcpu);
}

static void vcpus_from_qmp(VtDomain *d, virDomainPtr dom)
{
	char *reply = NULL;
	GRegex *re;
	GMatchInfo *mi;

	if (virDomainQemuMonitorCommand(dom, "{\"execute\":\"query-cpus-fast\"}", &reply, 0) < 0 || !reply)
		return;
	/* {"thread-id": 123, ..., "cpu-index": 0, ...} objects */
	re = g_regex_new("\\{[^{}]*?\"thread-id\":\\s*(\\d+)[^{}]*?\"cpu-index\":\\s*(\\d+)", 0, 0, NULL);
	g_regex_match(re, reply, 0, &mi);
	while (g_match_info_matches(mi)) {
		g_autofree char *tid = g_match_info_fetch(mi, 1);
		g_autofree char *idx = g_match_info_fetch(mi, 2);

		g_array_append_val(d->vcpus, ((VtDomainVcpu){ .vcpu = atoi(idx), .tid = (uint32_t)atoll(tid), .source = "qmp" }));
		g_match_info_next(mi, NULL);
	}
	g_match_info_free(mi);
	g_regex_unref(re);
	free(reply);
	g_array_sort(d->vcpus, cmp_vcpu);
}

void vt_domain_threads(VtDomain *d)
{
	gboolean unknown = FALSE;

	g_array_set_size(d->vcpus, 0);
	g_clear_pointer(&d->kvm_dir, g_free);
	vcpus_from_debugfs(d);
	for (guint i = 0; i < d->vcpus->len; i++)
		unknown = unknown || !g_array_index(d->vcpus, VtDomainVcpu, i).tid;
	if (!d->vcpus->len) {
		vcpus_from_comm(d);
	} else if (unknown) {
		/* KVM reports pid 0 until a vCPU first runs: ask the thread names */
		GArray *dbg = d->vcpus;

		d->vcpus = g_array_new(FALSE, TRUE, sizeof(VtDomainVcpu));
		vcpus_from_comm(d);
		for (guint i = 0; i < dbg->len; i++) {
			VtDomainVcpu *v = &g_array_index(dbg, VtDomainVcpu, i);

			for (guint j = 0; !v->tid && j < d->vcpus->len; j++)
				if (g_array_index(d->vcpus, VtDomainVcpu, j).vcpu == v->vcpu) {
					v->tid = g_array_index(d->vcpus, VtDomainVcpu, j).tid;
					v->source = "debugfs + thread name";
				}
		}
		g_array_free(d->vcpus, TRUE);
		d->vcpus = dbg;
	}
}

gboolean vt_domain_from_pid(uint32_t pid, VtDomain *d, GError **error)
{
	g_autofree char *p = g_strdup_printf("/proc/%u/comm", pid);
	g_autofree char *comm = NULL;

	memset(d, 0, sizeof(*d));
	d->vcpus = g_array_new(FALSE, TRUE, sizeof(VtDomainVcpu));
	comm = vt_host_read(p);
	if (!comm) {
		g_set_error(error, VT_DOMAIN_ERROR, VT_DOMAIN_ERROR_NO_PROCESS, "no process %u (%s%s)", pid,
			    vt_host_root(), p);
		return FALSE;
	}
	{
		/* a thread id opens /proc/TID too: insist on the process */
		g_autofree char *sp = g_strdup_printf("/proc/%u/status", pid);
		g_autofree char *status = vt_host_read(sp);
		const char *t = status ? strstr(status, "\nTgid:") : NULL;
		guint64 tgid = t ? g_ascii_strtoull(t + 6, NULL, 10) : pid;

		if (tgid != pid) {
			g_set_error(error, VT_DOMAIN_ERROR, VT_DOMAIN_ERROR_NO_PROCESS,
				    "%u is a thread of process %" G_GUINT64_FORMAT ": give the process id (--pid %"
				    G_GUINT64_FORMAT ")", pid, tgid, tgid);
			return FALSE;
		}
	}
	d->pid = pid;
	d->name = g_strdup_printf("pid %u (%s)", pid, comm);
	d->uri = g_strdup("(no libvirt)");
	d->driver = g_strdup("process");
	d->state = g_strdup("running");
	d->running = TRUE;
	vt_domain_threads(d);
	d->nvcpus = d->vcpus->len;
	d->kvm = d->kvm_dir != NULL;
	for (guint i = 0; !d->kvm && i < d->vcpus->len; i++) {
		g_autofree char *c = g_strdup_printf("/proc/%u/task/%u/comm", pid,
						     g_array_index(d->vcpus, VtDomainVcpu, i).tid);
		g_autofree char *name = vt_host_read(c);

		d->kvm = name && g_str_has_suffix(name, "/KVM");
	}
	vt_domain_read_kvm(d);
	return TRUE;
}

void vt_domain_read_kvm(VtDomain *d)
{
	for (guint i = 0; d->kvm_dir && i < d->vcpus->len; i++) {
		VtDomainVcpu *v = &g_array_index(d->vcpus, VtDomainVcpu, i);
		g_autofree char *base = g_strdup_printf("%s/vcpu%d/", d->kvm_dir, v->vcpu);
		g_autofree char *off = g_strconcat(base, "tsc-offset", NULL);
		g_autofree char *ratio = g_strconcat(base, "tsc-scaling-ratio", NULL);
		g_autofree char *frac = g_strconcat(base, "tsc-scaling-ratio-frac-bits", NULL);
		g_autofree char *gm = g_strconcat(base, "guest_mode", NULL);
		gint64 x;

		v->have_kvm = vt_host_read_int(off, &x);
		v->tsc_offset = v->have_kvm ? x : 0;
		v->have_scaling = vt_host_read_int(ratio, &x);
		v->tsc_scaling_ratio = v->have_scaling ? (uint64_t)x : 0;
		v->tsc_scaling_frac_bits = vt_host_read_int(frac, &x) ? (guint)x : 0;
		v->guest_mode = vt_host_read_int(gm, &x) ? (int)x : -1;
	}
}

gboolean vt_domain_find(const char *name, const char *uri, gboolean qmp, VtDomain *d, GError **error)
{
	virConnectPtr c;
	virDomainPtr dom;
	virDomainInfo info;
	const char *u = uri ? uri : g_getenv("LIBVIRT_DEFAULT_URI");

	memset(d, 0, sizeof(*d));
	d->vcpus = g_array_new(FALSE, TRUE, sizeof(VtDomainVcpu));
	d->name = g_strdup(name);
	d->uri = g_strdup(u && *u ? u : "qemu:///system");
	if (!virt_load(error))
		return FALSE;
	virSetErrorFunc(NULL, silent);
	c = qmp ? virConnectOpen(d->uri) : virConnectOpenReadOnly(d->uri);
	if (!c) {
		g_set_error(error, VT_DOMAIN_ERROR, VT_DOMAIN_ERROR_CONNECT,
			    "cannot connect to %s: %s (is libvirtd running? try --connect URI)", d->uri,
			    virGetLastErrorMessage());
		return FALSE;
	}
	d->driver = g_strdup(virConnectGetType(c));
	dom = virDomainLookupByName(c, name);
	if (!dom) {
		g_autofree char *all = domain_list(c);

		g_set_error(error, VT_DOMAIN_ERROR, VT_DOMAIN_ERROR_NOT_FOUND,
			    "no domain named '%s' on %s (domains: %s)", name, d->uri, *all ? all : "none");
		virConnectClose(c);
		return FALSE;
	}
	if (virDomainGetInfo(dom, &info) == 0) {
		d->state = g_strdup(state_name(info.state));
		d->running = info.state == VIR_DOMAIN_RUNNING || info.state == VIR_DOMAIN_BLOCKED ||
			     info.state == VIR_DOMAIN_PAUSED;
		d->nvcpus = info.nrVirtCpu;
	}
	if (!d->running) {
		g_set_error(error, VT_DOMAIN_ERROR, VT_DOMAIN_ERROR_NOT_RUNNING,
			    "domain '%s' is not running (%s); start it: virsh -c %s start %s", name,
			    d->state ? d->state : "unknown state", d->uri, name);
		virDomainFree(dom);
		virConnectClose(c);
		return FALSE;
	}
	{
		char *xml = virDomainGetXMLDesc(dom, 0);

		d->kvm = xml && strstr(xml, "type='kvm'") != NULL;
		free(xml);
	}
	if (!g_ascii_strcasecmp(d->driver, "QEMU")) {
		g_autofree char *pf = g_strdup_printf("/run/libvirt/qemu/%s.pid", name);
		gint64 pid;

		if (vt_host_read_int(pf, &pid))
			d->pid = (uint32_t)pid;
	}
	if (d->pid)
		vt_domain_threads(d);
	if (!d->vcpus->len && qmp)
		vcpus_from_qmp(d, dom);
	vt_domain_read_kvm(d);
	virDomainFree(dom);
	virConnectClose(c);
	return TRUE;
}

void vt_domain_clear(VtDomain *d)
{
	g_free(d->name);
	g_free(d->uri);
	g_free(d->driver);
	g_free(d->state);
	g_free(d->kvm_dir);
	if (d->vcpus)
		g_array_free(d->vcpus, TRUE);
	memset(d, 0, sizeof(*d));
}
