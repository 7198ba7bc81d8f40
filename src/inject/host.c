/* host.c - what the merge needs from the host recording: the QEMU
 * process's vCPU threads ("CPU n/KVM" COMMs), where each vCPU ran (switch
 * records), the time conversion and the highest sample id.  See inject.h. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "src/inject/internal.h"

/* "CPU %u/KVM" exactly (QEMU's vCPU thread name). */
static gboolean vcpu_name(const char *comm, guint *vcpu)
{
	char tail[8];
	int n = 0;

	if (sscanf(comm, "CPU %u/KVM%n", vcpu, &n) != 1 || n == 0)
		return FALSE;
	return sscanf(comm + n, "%7s", tail) != 1;
}

/* A record injected from a guest file (its cpumode is the guest's): not
 * the host's COMM or switch. */
static gboolean guest_record(const VtPerfRecord *rec)
{
	uint16_t mode = rec->misc & PERF_RECORD_MISC_CPUMODE_MASK;

	return mode == PERF_RECORD_MISC_GUEST_KERNEL || mode == PERF_RECORD_MISC_GUEST_USER;
}

static void host_comm(InjHost *h, const VtPerfRecord *rec)
{
	VtPerfComm c;
	InjVcpu v = { 0 };

	if (guest_record(rec) || !vt_perf_record_comm(rec, &c, NULL) || !vcpu_name(c.comm, &v.vcpu))
		return;
	v.pid = c.pid;
	v.tid = c.tid;
	v.placements = g_array_new(FALSE, FALSE, sizeof(InjPlacement));
	g_array_append_val(h->comms, v);
}

static void host_switch(InjHost *h, const VtPerfFile *f, const VtPerfRecord *rec)
{
	VtPerfSampleId sid;
	InjSwitch s;

	if (guest_record(rec) || !vt_perf_record_sample_id(f, rec, &sid) || !sid.has_cpu || !sid.has_tid)
		return;
	s.out = (rec->misc & PERF_RECORD_MISC_SWITCH_OUT) != 0;
	s.pid = sid.pid;
	s.tid = sid.tid;
	s.cpu = sid.cpu;
	s.time = sid.has_time ? sid.time : 0;
	g_array_append_val(h->switches, s);
}

static void host_max_id(InjHost *h, const VtPerfFile *f)
{
	h->max_id = 1;    /* as perf: new ids start above 1 at least */
	for (guint i = 0; i < vt_perf_file_n_attrs(f); i++) {
		const VtPerfAttr *a = vt_perf_file_attr(f, i);

		for (uint64_t k = 0; k < a->nr_ids; k++)
			h->max_id = MAX(h->max_id, a->ids[k]);
	}
}

/* The machine pids an ID_INDEX names (vmtrace or perf inject wrote it). */
static gboolean host_id_index(InjHost *h, const VtPerfRecord *rec, GError **error)
{
	guint n;
	g_autofree VtPerfIdIndexEntry *e = vt_perf_record_id_index(rec, &n, error);

	if (!e)
		return FALSE;
	for (guint i = 0; i < n; i++) {
		uint32_t pid = (uint32_t)e[i].machine_pid;
		gboolean seen = FALSE;

		for (guint k = 0; k < h->injected->len && !seen; k++)
			seen = g_array_index(h->injected, uint32_t, k) == pid;
		if (e[i].has_vm && pid && !seen)
			g_array_append_val(h->injected, pid);
	}
	return TRUE;
}

static gboolean host_scan(InjHost *h, GError **error)
{
	VtPerfIter it;
	VtPerfRecord rec;
	int r;

	vt_perf_iter_init(&it, h->f);
	while ((r = vt_perf_iter_next(&it, &rec, error)) > 0) {
		if (rec.type == VT_PERF_RECORD_ID_INDEX && !host_id_index(h, &rec, error))
			return FALSE;
		if (rec.type == PERF_RECORD_COMM)
			host_comm(h, &rec);
		else if (rec.type == PERF_RECORD_SWITCH || rec.type == PERF_RECORD_SWITCH_CPU_WIDE)
			host_switch(h, h->f, &rec);
		else if (rec.type == VT_PERF_RECORD_TIME_CONV && !h->have_tc)
			h->have_tc = vt_perf_record_time_conv(&rec, &h->tc, NULL);
	}
	return r == 0;
}

InjHost *inj_host_open(const char *path, GError **error)
{
	InjHost *h = g_new0(InjHost, 1);

	h->comms = g_array_new(FALSE, FALSE, sizeof(InjVcpu));
	h->switches = g_array_new(FALSE, FALSE, sizeof(InjSwitch));
	h->injected = g_array_new(FALSE, FALSE, sizeof(uint32_t));
	h->f = vt_perf_file_open(path, VT_PERF_OPEN_RDONLY, error);
	if (!h->f || !host_scan(h, error)) {
		inj_host_free(h);
		return NULL;
	}
	host_max_id(h, h->f);
	return h;
}

void inj_host_free(InjHost *h)
{
	if (!h)
		return;
	for (guint i = 0; i < h->comms->len; i++)
		g_array_free(g_array_index(h->comms, InjVcpu, i).placements, TRUE);
	g_array_free(h->comms, TRUE);
	g_array_free(h->switches, TRUE);
	g_array_free(h->injected, TRUE);
	if (h->vcpus)
		g_ptr_array_free(h->vcpus, TRUE);
	vt_perf_file_close(h->f);
	g_free(h);
}

static gint cmp_u32(gconstpointer a, gconstpointer b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

GArray *inj_host_pids(const InjHost *h)
{
	GArray *pids = g_array_new(FALSE, FALSE, sizeof(uint32_t));

	for (guint i = 0; i < h->comms->len; i++) {
		uint32_t pid = g_array_index(h->comms, InjVcpu, i).pid;
		gboolean seen = FALSE;

		for (guint k = 0; k < pids->len && !seen; k++)
			seen = g_array_index(pids, uint32_t, k) == pid;
		if (!seen)
			g_array_append_val(pids, pid);
	}
	g_array_sort(pids, cmp_u32);
	return pids;
}

static gint cmp_placement(gconstpointer a, gconstpointer b)
{
	const InjPlacement *x = a, *y = b;

	return x->time < y->time ? -1 : x->time > y->time;
}

/* Where vCPU thread v ran: its IN switch records put it on a CPU from
 * their time on.  Before its first IN it was where its first OUT record
 * takes it off (else where the first IN puts it). */
static void vcpu_placements(InjVcpu *v, const GArray *switches)
{
	gboolean have_out = FALSE;

	for (guint i = 0; i < switches->len; i++) {
		const InjSwitch *s = &g_array_index(switches, InjSwitch, i);
		InjPlacement p = { s->time, s->cpu };

		if (s->tid != v->tid || s->pid != v->pid)
			continue;
		if (s->out && (!have_out || s->time < v->first_time)) {
			v->first_time = s->time;
			v->first_cpu = s->cpu;
			have_out = TRUE;
		}
		if (!s->out)
			g_array_append_val(v->placements, p);
	}
	g_array_sort(v->placements, cmp_placement);
	v->placed = have_out || v->placements->len;
	if (!have_out && v->placements->len)
		v->first_cpu = g_array_index(v->placements, InjPlacement, 0).cpu;
}

/* The vCPU threads of pid, indexed by vCPU number. */
gboolean inj_host_select(InjHost *h, uint32_t pid, GError **error)
{
	h->pid = pid;
	h->vcpus = g_ptr_array_new();
	for (guint i = 0; i < h->comms->len; i++) {
		InjVcpu *v = &g_array_index(h->comms, InjVcpu, i);

		if (v->pid != pid)
			continue;
		if (v->vcpu < h->vcpus->len && g_ptr_array_index(h->vcpus, v->vcpu)) {
			InjVcpu *o = g_ptr_array_index(h->vcpus, v->vcpu);

			if (o->tid == v->tid)
				continue;    /* the same thread named again */
			g_set_error(error, VT_INJECT_ERROR, VT_INJECT_ERROR_HOST_NO_VCPUS,
				    "%s: threads %u and %u of process %u are both named \"CPU %u/KVM\"",
				    vt_perf_file_path(h->f), o->tid, v->tid, pid, v->vcpu);
			return FALSE;
		}
		if (v->vcpu >= h->vcpus->len)
			g_ptr_array_set_size(h->vcpus, v->vcpu + 1);
		g_ptr_array_index(h->vcpus, v->vcpu) = v;
		vcpu_placements(v, h->switches);
	}
	if (!h->vcpus->len) {
		g_set_error(error, VT_INJECT_ERROR, VT_INJECT_ERROR_HOST_NO_VCPUS,
			    "%s: no thread of process %u is named \"CPU n/KVM\" (QEMU's vCPU threads; run QEMU "
			    "with -name debug-threads=on)", vt_perf_file_path(h->f), pid);
		return FALSE;
	}
	return TRUE;
}

/* The host CPU vCPU v runs on at host time t. */
uint32_t inj_host_cpu(const InjVcpu *v, uint64_t t)
{
	guint lo = 0, hi = v->placements->len;

	while (lo < hi) {    /* the last IN at or before t */
		guint mid = (lo + hi) / 2;

		if (g_array_index(v->placements, InjPlacement, mid).time <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo)
		return g_array_index(v->placements, InjPlacement, lo - 1).cpu;
	return v->placed ? v->first_cpu : 0;
}
