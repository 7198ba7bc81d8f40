/* guest-threads.c - the guest sideband of an injected recording (vmtrace
 * inject, perf inject --guest-data): which guest thread runs on each vCPU
 * when, and each guest thread's pid and comm - what perf 6.1's Intel PT
 * decoder gives guest branches.
 *
 * Guest records are those whose cpumode is GUEST_KERNEL or GUEST_USER; the
 * ID_INDEX entries of their sample ids name the QEMU pid (machine_pid) and
 * the vCPU.  perf (intel_pt_guest_context_switch) makes the task of a
 * switch-in record the vCPU's current guest thread; a thread's comm is its
 * last COMM (a forked thread starts with its parent's), ":TID" without one,
 * "swapper" for the idle task 0.
 * Indexed like the host's switches: per vCPU an array in time order. */
#include "config.h"

#include <string.h>

#include "src/decode/internal.h"

typedef struct {
	guint64 time;
	gint32 pid, tid;
} GuestSwitch;

typedef struct {
	guint64 time;
	const char *comm;         /* in strings */
} GuestComm;

typedef struct {
	gint32 pid;
	GArray *comms;            /* GuestComm, time order */
} GuestThread;

struct VtDecodeGuestThreads {
	gint32 machine_pid;
	char *kernel_dso;         /* the guest kernel's DSO as perf names it */
	GHashTable *ids;          /* sample id -> vcpu + 1 */
	GPtrArray *vcpus;         /* vcpu -> GArray of GuestSwitch */
	GHashTable *threads;      /* tid -> GuestThread */
	GStringChunk *strings;
};

static void thread_free(gpointer p)
{
	GuestThread *t = p;

	g_array_free(t->comms, TRUE);
	g_free(t);
}

static GuestThread *thread_get(VtDecodeGuestThreads *g, gint32 pid, gint32 tid)
{
	GuestThread *t = g_hash_table_lookup(g->threads, GINT_TO_POINTER(tid));

	if (!t) {
		t = g_new0(GuestThread, 1);
		t->comms = g_array_new(FALSE, FALSE, sizeof(GuestComm));
		g_hash_table_insert(g->threads, GINT_TO_POINTER(tid), t);
	}
	t->pid = pid;
	return t;
}

static const char *thread_comm_at(const GuestThread *t, guint64 time)
{
	const char *c = NULL;

	for (guint i = 0; i < t->comms->len && g_array_index(t->comms, GuestComm, i).time <= time; i++)
		c = g_array_index(t->comms, GuestComm, i).comm;
	return c;
}

static void add_comm(VtDecodeGuestThreads *g, gint32 pid, gint32 tid, guint64 time, const char *comm)
{
	GuestThread *t = thread_get(g, pid, tid);
	GuestComm c = { time, g_string_chunk_insert_const(g->strings, comm) };

	g_array_append_val(t->comms, c);
}

static void add_index(VtDecodeGuestThreads *g, const VtPerfRecord *rec)
{
	guint n = 0;
	g_autofree VtPerfIdIndexEntry *e = vt_perf_record_id_index(rec, &n, NULL);

	for (guint i = 0; e && i < n; i++) {
		if (!e[i].machine_pid)
			continue;
		g->machine_pid = (gint32)e[i].machine_pid;
		g_hash_table_insert(g->ids, GSIZE_TO_POINTER(e[i].id), GSIZE_TO_POINTER(e[i].vcpu + 1));
	}
}

static void add_switch(VtDecodeGuestThreads *g, guint vcpu, const VtPerfSampleId *sid)
{
	GuestSwitch sw = { sid->time, (gint32)sid->pid, (gint32)sid->tid };

	while (g->vcpus->len <= vcpu)
		g_ptr_array_add(g->vcpus, g_array_new(FALSE, FALSE, sizeof(GuestSwitch)));
	g_array_append_val(g_ptr_array_index(g->vcpus, vcpu), sw);
	thread_get(g, sw.pid, sw.tid);
}

static gboolean is_guest(const VtPerfRecord *rec)
{
	guint mode = rec->misc & PERF_RECORD_MISC_CPUMODE_MASK;

	return rec->type < 64 && (mode == PERF_RECORD_MISC_GUEST_KERNEL || mode == PERF_RECORD_MISC_GUEST_USER);
}

/* One guest record: its vCPU from its sample id. */
static void add_record(VtDecodeGuestThreads *g, const VtPerfFile *f, const VtPerfRecord *rec)
{
	VtPerfSampleId sid;
	gpointer v;
	VtPerfComm c;
	VtPerfSwitch sw;

	if (!vt_perf_record_sample_id(f, rec, &sid) || !sid.has_time)
		return;
	v = g_hash_table_lookup(g->ids, GSIZE_TO_POINTER(sid.has_id ? sid.id : sid.identifier));
	if (!v)
		return;
	if (rec->type == PERF_RECORD_COMM && vt_perf_record_comm(rec, &c, NULL)) {
		add_comm(g, (gint32)c.pid, (gint32)c.tid, sid.time, c.comm);
	} else if (rec->type == PERF_RECORD_FORK && rec->size >= 24) {
		guint32 pid, tid, ppid, ptid;
		const GuestThread *parent;
		const char *comm;

		memcpy(&pid, rec->data + 8, 4);
		memcpy(&ppid, rec->data + 12, 4);
		memcpy(&tid, rec->data + 16, 4);
		memcpy(&ptid, rec->data + 20, 4);
		parent = g_hash_table_lookup(g->threads, GINT_TO_POINTER((gint32)ptid));
		comm = parent ? thread_comm_at(parent, sid.time) : NULL;
		thread_get(g, (gint32)pid, (gint32)tid);
		if (comm)
			add_comm(g, (gint32)pid, (gint32)tid, sid.time, comm);
	} else if ((rec->type == PERF_RECORD_SWITCH || rec->type == PERF_RECORD_SWITCH_CPU_WIDE) &&
		   vt_perf_record_switch(rec, &sw, NULL) && !sw.out && sid.has_tid) {
		add_switch(g, GPOINTER_TO_UINT(v) - 1, &sid);
	}
}

/* Is a HEADER_BUILD_ID entry's file a kernel module, as perf 6.1's
 * kmod_path parse decides: a "[NAME]" other than the kernels' and the
 * vDSOs', or a file whose extension is .ko (before a compression's perf
 * reads: .gz, .xz - not .zst). */
static gboolean is_module_file(const char *path)
{
	static const char *const kernels[] = { "[kernel.kallsyms]", "[guest.kernel.kallsyms", "[vdso]", "[vdso32]",
					       "[vdsox32]", "[vsyscall]" };
	static const char *const compressed[] = { ".gz", ".xz" };
	const char *base = strrchr(path, '/'), *ext = strrchr(path, '.');

	base = base ? base + 1 : path;
	if (base[0] == '[') {
		for (guint i = 0; i < G_N_ELEMENTS(kernels); i++)
			if (g_str_has_prefix(base, kernels[i]))
				return FALSE;
		return TRUE;
	}
	if (!ext || ext <= base)           /* (a dot in a directory's name, or ".ko" alone) */
		return FALSE;
	for (guint i = 0; i < G_N_ELEMENTS(compressed); i++)
		if (!strcmp(ext, compressed[i]) && ext - base >= 3)
			ext -= 3;
	return ext > base && g_str_has_prefix(ext, ".ko");
}

/* The guest machine's kernel DSO as perf 6.1 names it
 * (machine__process_kernel_mmap_event): the first kernel file of that
 * machine in the recording's build id table (cpumode kernel or guest
 * kernel, pid the QEMU pid: the guest's own entries, which inject copies),
 * else the machine's own name "[guest.kernel.kallsyms.PID]".  A guest
 * perf.data has the kernel's build id only when a sample hit the kernel
 * (perf record marks hit files), so the name differs between recordings. */
static char *kernel_dso(const VtPerfFile *f, gint32 machine_pid)
{
	const guint8 *p;
	guint64 n, off = 0;
	VtPerfBuildId e;

	if (vt_perf_file_feature(f, VT_PERF_FEAT_BUILD_ID, &p, &n))
		while (vt_perf_build_id_next(p, n, &off, &e)) {
			guint mode = e.misc & PERF_RECORD_MISC_CPUMODE_MASK;

			if (e.pid == machine_pid && e.name && *e.name && !is_module_file(e.name) &&
			    (mode == PERF_RECORD_MISC_KERNEL || mode == PERF_RECORD_MISC_GUEST_KERNEL))
				return g_strdup(e.name);
		}
	return g_strdup_printf("[guest.kernel.kallsyms.%d]", machine_pid);
}

static gint cmp_switch(gconstpointer a, gconstpointer b)
{
	const GuestSwitch *x = a, *y = b;

	return x->time < y->time ? -1 : x->time > y->time;
}

VtDecodeGuestThreads *vt_decode_guest_threads_load(const VtPerfFile *f, GError **error)
{
	VtDecodeGuestThreads *g = g_new0(VtDecodeGuestThreads, 1);
	VtPerfIter it;
	VtPerfRecord rec;
	int r;

	g->ids = g_hash_table_new(g_direct_hash, g_direct_equal);
	g->vcpus = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
	g->threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, thread_free);
	g->strings = g_string_chunk_new(4096);
	vt_perf_iter_init(&it, f);
	while ((r = vt_perf_iter_next(&it, &rec, error)) > 0) {
		if (rec.type == VT_PERF_RECORD_ID_INDEX)
			add_index(g, &rec);
		else if (is_guest(&rec) && g->machine_pid)
			add_record(g, f, &rec);
	}
	if (r < 0) {
		vt_decode_guest_threads_free(g);
		return NULL;
	}
	for (guint i = 0; i < g->vcpus->len; i++)
		g_array_sort(g_ptr_array_index(g->vcpus, i), cmp_switch);
	if (g->machine_pid)
		g->kernel_dso = kernel_dso(f, g->machine_pid);
	return g;
}

void vt_decode_guest_threads_free(VtDecodeGuestThreads *g)
{
	if (!g)
		return;
	g_hash_table_destroy(g->ids);
	g_ptr_array_free(g->vcpus, TRUE);
	g_hash_table_destroy(g->threads);
	g_string_chunk_free(g->strings);
	g_free(g->kernel_dso);
	g_free(g);
}

gint32 vt_decode_guest_threads_machine_pid(const VtDecodeGuestThreads *g)
{
	return g ? g->machine_pid : 0;
}

const char *vt_decode_guest_threads_kernel_dso(const VtDecodeGuestThreads *g)
{
	return g ? g->kernel_dso : NULL;
}

gboolean vt_decode_guest_threads_at(const VtDecodeGuestThreads *g, gint32 vcpu, guint64 time, gint32 *pid,
				    gint32 *tid, const char **comm)
{
	GArray *a;
	const GuestSwitch *sw;
	const GuestThread *t;
	guint lo = 0, hi;

	if (!g || vcpu < 0 || (guint)vcpu >= g->vcpus->len)
		return FALSE;
	a = g_ptr_array_index(g->vcpus, vcpu);
	/* the last switch-in at or before time */
	hi = a->len;
	while (lo < hi) {
		guint mid = (lo + hi) / 2;

		if (g_array_index(a, GuestSwitch, mid).time <= time)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return FALSE;
	sw = &g_array_index(a, GuestSwitch, lo - 1);
	t = g_hash_table_lookup(g->threads, GINT_TO_POINTER(sw->tid));
	*pid = t ? t->pid : sw->pid;
	*tid = sw->tid;
	*comm = t ? thread_comm_at(t, time) : NULL;
	if (!*comm && !sw->tid)
		*comm = "swapper";      /* perf's idle thread of every machine */
	return TRUE;
}
