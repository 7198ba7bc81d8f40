/* inject.c - the merge: host records in file order, guest sideband records
 * (converted to host time, ids and CPUs) woven in by time, guest attrs and
 * their ID_INDEX, guest build ids; written to a new perf.data directory.
 * See inject.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/fs/fs.h"
#include "src/fs/output.h"
#include "src/inject/internal.h"
#include "src/perf/perf-encode.h"

/* A guest record ready to go: its host time and its bytes. */
typedef struct {
	uint64_t time;
	guint seq;
	GByteArray *bytes;
} Ev;

/* A guest id and the host id it becomes. */
typedef struct {
	uint64_t guest_id, host_id;
	guint vcpu;
	guint attr;
} IdMap;

typedef struct {
	const VtInjectOptions *opt;
	const char *guest_path;
	VtInjectResult *res;
	InjHost *h;
	InjGuest *g;
	GArray *ids;             /* IdMap */
	GHashTable *by_guest;    /* guest id -> index in ids + 1 */
	GArray *evs;             /* Ev by time */
	guint next_ev;
	gboolean index_done;
	VtPerfWriter *w;
	GByteArray *aux;         /* an AUX payload, read (not mapped: no SIGBUS) */
} Merge;

static const IdMap *id_map(const Merge *m, uint64_t guest_id)
{
	guint i = GPOINTER_TO_UINT(g_hash_table_lookup(m->by_guest, &guest_id));

	return i ? &g_array_index(m->ids, IdMap, i - 1) : NULL;
}

static gboolean host_id_used(const VtPerfFile *f, uint64_t id)
{
	return vt_perf_file_attr_by_id(f, id) != NULL;
}

/* Every guest id gets the next unused host id above the host's highest. */
static void map_ids(Merge *m)
{
	uint64_t next = m->h->max_id;

	for (guint i = 0; i < vt_perf_file_n_attrs(m->g->f); i++) {
		const VtPerfAttr *a = vt_perf_file_attr(m->g->f, i);

		for (uint64_t k = 0; k < a->nr_ids; k++) {
			IdMap x = { a->ids[k], 0, inj_guest_id_cpu(m->g, a->ids[k]), i };

			do
				next++;
			while (!next || host_id_used(m->h->f, next));
			x.host_id = next;
			g_array_append_val(m->ids, x);
			g_hash_table_insert(m->by_guest, g_memdup2(&x.guest_id, 8), GUINT_TO_POINTER(m->ids->len));
		}
	}
	m->res->guest_ids = m->ids->len;
	m->res->first_host_id = m->ids->len ? g_array_index(m->ids, IdMap, 0).host_id : 0;
}

static const VtInjectClock *clock_of(const VtInjectOptions *opt, guint vcpu)
{
	const VtInjectClock *dflt = NULL;

	for (guint i = 0; opt->clocks && i < opt->clocks->len; i++) {
		const VtInjectClock *c = &g_array_index(opt->clocks, VtInjectClock, i);

		if (c->vcpu >= 0 && (guint)c->vcpu == vcpu)
			return c;
		if (c->vcpu < 0)
			dflt = c;
	}
	return dflt;
}

static const InjVcpu *vcpu_of(const Merge *m, guint vcpu)
{
	return vcpu < m->h->vcpus->len ? g_ptr_array_index(m->h->vcpus, vcpu) : NULL;
}

static gboolean vcpu_check(const Merge *m, guint vcpu, GError **error);

/* Every guest CPU of the ID_INDEX has a vCPU thread and a clock. */
static gboolean check_vcpus(const Merge *m, GError **error)
{
	for (guint i = 0; i < m->ids->len; i++)
		if (!vcpu_check(m, g_array_index(m->ids, IdMap, i).vcpu, error))
			return FALSE;
	return TRUE;
}

/* The host attr of a guest attr: + IDENTIFIER, guest-only. */
static struct perf_event_attr host_attr(const Merge *m, guint i)
{
	struct perf_event_attr a = vt_perf_file_attr(m->g->f, i)->attr;

	a.sample_type |= PERF_SAMPLE_IDENTIFIER;
	a.exclude_host = 1;
	a.exclude_guest = 0;
	if (vt_perf_file_n_attrs(m->h->f))
		a.size = vt_perf_file_attr(m->h->f, 0)->attr.size;
	return a;
}

/* The id sample of sample_type st (sample_id_all layout). */
static void put_id_sample(GByteArray *b, uint64_t st, const VtPerfSampleId *sid, uint64_t time, uint32_t cpu,
			  uint64_t id)
{
	if (st & PERF_SAMPLE_TID) {
		vt_perf_put_u32(b, sid->pid);
		vt_perf_put_u32(b, sid->tid);
	}
	if (st & PERF_SAMPLE_TIME)
		vt_perf_put_u64(b, time);
	if (st & PERF_SAMPLE_ID)
		vt_perf_put_u64(b, id);
	if (st & PERF_SAMPLE_STREAM_ID)
		vt_perf_put_u64(b, id);
	if (st & PERF_SAMPLE_CPU) {
		vt_perf_put_u32(b, cpu);
		vt_perf_put_u32(b, 0);
	}
	if (st & PERF_SAMPLE_IDENTIFIER)
		vt_perf_put_u64(b, id);
}

static uint16_t guest_misc(uint16_t misc)
{
	uint16_t mode = misc & PERF_RECORD_MISC_CPUMODE_MASK;

	mode = (mode & PERF_RECORD_MISC_USER) ? PERF_RECORD_MISC_GUEST_USER : PERF_RECORD_MISC_GUEST_KERNEL;
	return (misc & ~PERF_RECORD_MISC_CPUMODE_MASK) | mode;
}

static gboolean bad_record(GError **error, const VtPerfFile *f, const VtPerfRecord *rec, const char *what)
{
	g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT, "%s: %s record at offset %#" G_GINT64_MODIFIER "x: %s",
		    vt_perf_file_path(f), vt_perf_record_name(rec->type), rec->file_offset, what);
	return FALSE;
}

static gboolean vcpu_check(const Merge *m, guint vcpu, GError **error)
{
	if (!vcpu_of(m, vcpu)) {
		g_set_error(error, VT_INJECT_ERROR, VT_INJECT_ERROR_GUEST_VCPU,
			    "%s: guest CPU %u has no vCPU thread \"CPU %u/KVM\" in process %u of the host recording "
			    "(another VM's guest file?)", vt_perf_file_path(m->g->f), vcpu, vcpu, m->h->pid);
		return FALSE;
	}
	if (!clock_of(m->opt, vcpu)) {
		g_set_error(error, VT_INJECT_ERROR, VT_INJECT_ERROR_NO_CLOCK, "no TSC offset for vCPU %u (the host "
			    "trace shows none): give it with --offset OFF:%u", vcpu, vcpu);
		return FALSE;
	}
	return TRUE;
}

static gboolean in_range(const VtInjectClock *c, uint64_t h)
{
	return h >= c->host_from && (!c->host_to || h <= c->host_to);
}

/* A record at guest time t that fits no epoch of vCPU vcpu (none: a, b
 * its first and last) or two (a, b). */
static gboolean epoch_error(const Merge *m, guint vcpu, uint64_t t, const VtInjectClock *a, const VtInjectClock *b,
			    gboolean none, GError **error)
{
	uint64_t ha = vt_inject_host_tsc(t, &m->g->tc, a), hb = vt_inject_host_tsc(t, &m->g->tc, b);

	g_set_error(error, VT_INJECT_ERROR, VT_INJECT_ERROR_OFFSET_CHANGE,
		    "vCPU %u's TSC offset changed during the recording and its guest record at guest time %"
		    G_GUINT64_FORMAT " fits %s: host TSC %#" G_GINT64_MODIFIER "x by offset %#" G_GINT64_MODIFIER
		    "x, %#" G_GINT64_MODIFIER "x by offset %#" G_GINT64_MODIFIER "x (%s); give the offset to use with "
		    "--offset OFF:%u", vcpu, t, none ? "no epoch" : "two epochs", ha, a->offset, hb, b->offset,
		    none ? "each outside its epoch: a guest time the guest's TSC skipped" :
			     "the guest's TSC went back: its times repeat", vcpu);
	return FALSE;
}

static gboolean in_guest_range(const VtInjectClock *c, uint64_t g)
{
	return g >= c->guest_from && (!c->guest_to || g <= c->guest_to);
}

/* The clock of vCPU vcpu (its own entries, else the -1 ones) in force at
 * guest perf time t: the only one, or the one epoch whose host time for t
 * lies in its range (of two, the one whose guest range holds t's TSC). */
static gboolean clock_at(const Merge *m, guint vcpu, uint64_t t, const VtInjectClock **c, GError **error)
{
	const VtInjectClock *first = NULL, *last = NULL, *hits[2] = { NULL, NULL }, *ghit = NULL;
	guint nh = 0, ng = 0;
	int want = -1;

	for (guint i = 0; i < m->opt->clocks->len; i++)
		if (g_array_index(m->opt->clocks, VtInjectClock, i).vcpu == (int)vcpu)
			want = (int)vcpu;
	for (guint i = 0; i < m->opt->clocks->len; i++) {
		const VtInjectClock *x = &g_array_index(m->opt->clocks, VtInjectClock, i);

		if (x->vcpu != want)
			continue;
		if (!first)
			first = x;
		last = x;
		if (!t || (x->host_from == 0 && x->host_to == 0)) {
			*c = first;     /* no time (kept 0), or one offset for all time */
			return TRUE;
		}
		if (!in_range(x, vt_inject_host_tsc(t, &m->g->tc, x)))
			continue;
		hits[MIN(nh, 1)] = x;
		nh++;
		if (in_guest_range(x, vt_perf_time_to_tsc(t, &m->g->tc))) {
			ghit = x;
			ng++;
		}
	}
	*c = nh == 1 ? hits[0] : ng == 1 ? ghit : NULL;
	return *c || (nh ? epoch_error(m, vcpu, t, hits[0], hits[1], FALSE, error)
			 : epoch_error(m, vcpu, t, first, last, TRUE, error));
}

/* The guest CPU an event ran on and the clock that converts its time. */
static gboolean event_vcpu(const Merge *m, const VtPerfSampleId *sid, const IdMap *x, guint *vcpu,
			   const VtInjectClock **c, GError **error)
{
	*vcpu = sid->has_cpu && sid->cpu != (uint32_t)-1 ? sid->cpu : x->vcpu;
	return vcpu_check(m, *vcpu, error) && clock_at(m, *vcpu, sid->has_time ? sid->time : 0, c, error);
}

/* One guest record as the host file holds it. */
static gboolean convert(Merge *m, const VtPerfRecord *rec, guint seq, GError **error)
{
	VtPerfSampleId sid;
	const VtPerfAttr *a;
	const IdMap *x;
	const VtInjectClock *c = NULL;
	guint vcpu;
	uint64_t id;
	uint32_t cpu;
	Ev ev = { 0, seq, NULL };
	struct perf_event_attr ha;
	gsize start;

	if (!vt_perf_record_sample_id(m->g->f, rec, &sid))
		return bad_record(error, m->g->f, rec, "no sample id");
	id = sid.has_identifier ? sid.identifier : sid.id;
	if (!id)    /* records perf record synthesized: the first event's id */
		id = vt_perf_file_attr(m->g->f, 0)->ids[0];
	if (!(a = vt_perf_file_attr_by_id(m->g->f, id)) || !(x = id_map(m, id)))
		return bad_record(error, m->g->f, rec, "unknown sample id");
	if (rec->size & 7 || rec->size < 8 + (uint32_t)a->id_hdr_size)
		return bad_record(error, m->g->f, rec, "bad size");
	if (!event_vcpu(m, &sid, x, &vcpu, &c, error))
		return FALSE;
	ev.time = sid.has_time ? vt_inject_time(sid.time, &m->g->tc, &m->h->tc, c) : 0;
	cpu = sid.has_cpu && sid.cpu != (uint32_t)-1 ? inj_host_cpu(vcpu_of(m, vcpu), ev.time) : (uint32_t)-1;
	ha = host_attr(m, x->attr);
	ev.bytes = g_byte_array_sized_new(rec->size + 16);
	start = vt_perf_rec_begin(ev.bytes);
	g_byte_array_append(ev.bytes, rec->data + 8, rec->size - 8 - a->id_hdr_size);
	put_id_sample(ev.bytes, ha.sample_type, &sid, ev.time, cpu, x->host_id);
	vt_perf_rec_end(ev.bytes, start, rec->type, guest_misc(rec->misc));
	g_array_append_val(m->evs, ev);
	return TRUE;
}

static gint cmp_ev(gconstpointer a, gconstpointer b)
{
	const Ev *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static gboolean convert_all(Merge *m, GError **error)
{
	for (guint i = 0; i < m->g->recs->len; i++)
		if (!convert(m, &g_array_index(m->g->recs, VtPerfRecord, i), i, error))
			return FALSE;
	g_array_sort(m->evs, cmp_ev);
	return TRUE;
}

/* PERF_RECORD_ID_INDEX of the new ids: {id, idx, cpu -1, vCPU thread},
 * then {machine pid, vCPU} per entry. */
static gboolean write_id_index(Merge *m, GError **error)
{
	g_autoptr(GByteArray) b = g_byte_array_new();
	gsize s = vt_perf_rec_begin(b);

	m->index_done = TRUE;
	vt_perf_put_u64(b, m->ids->len);
	for (guint i = 0; i < m->ids->len; i++) {
		const IdMap *x = &g_array_index(m->ids, IdMap, i);
		const InjVcpu *v = vcpu_of(m, x->vcpu);

		vt_perf_put_u64(b, x->host_id);
		vt_perf_put_u64(b, 0);
		vt_perf_put_u64(b, (uint64_t)-1);
		vt_perf_put_u64(b, v ? v->tid : (uint64_t)-1);
	}
	for (guint i = 0; i < m->ids->len; i++) {
		vt_perf_put_u64(b, m->h->pid);
		vt_perf_put_u64(b, g_array_index(m->ids, IdMap, i).vcpu);
	}
	vt_perf_rec_end(b, s, VT_PERF_RECORD_ID_INDEX, 0);
	return vt_perf_writer_write_record(m->w, b->data, error);
}

/* The guest records up to host time t. */
static gboolean flush_guest(Merge *m, uint64_t t, GError **error)
{
	if (!m->index_done && !write_id_index(m, error))
		return FALSE;
	for (; m->next_ev < m->evs->len; m->next_ev++) {
		Ev *e = &g_array_index(m->evs, Ev, m->next_ev);

		if (e->time > t)
			break;
		if (!vt_perf_writer_write_record(m->w, e->bytes->data, error))
			return FALSE;
		m->res->injected++;
	}
	return TRUE;
}

static gboolean copy_auxtrace(Merge *m, const VtPerfRecord *rec, GError **error)
{
	VtPerfAuxtrace aux;

	if (!vt_perf_record_auxtrace(rec, &aux, error))
		return FALSE;
	g_byte_array_set_size(m->aux, aux.size);
	/* read, not mapped: a file that shrinks is an error, not SIGBUS */
	return vt_perf_file_read(m->h->f, aux.payload_file_offset, m->aux->data, aux.size, error) &&
	       vt_perf_writer_write_auxtrace(m->w, &aux, m->aux->data, aux.size, NULL, error);
}

/* How many timed guest records lie within host time lo..hi. */
static void count_in_span(Merge *m, uint64_t lo, uint64_t hi)
{
	for (guint i = 0; i < m->evs->len; i++) {
		uint64_t t = g_array_index(m->evs, Ev, i).time;

		m->res->timed += t != 0;
		m->res->in_host_span += t && t >= lo && t <= hi;
	}
}

/* Host records in file order; before each one with a time, the guest
 * records up to that time; at FINISHED_INIT the guest's ID_INDEX and
 * untimed records; at FINISHED_ROUND those up to the round's latest time. */
static gboolean write_records(Merge *m, GError **error)
{
	VtPerfIter it;
	VtPerfRecord rec;
	VtPerfSampleId sid;
	uint64_t latest = 0, first = UINT64_MAX;
	int r;

	vt_perf_iter_init(&it, m->h->f);
	while ((r = vt_perf_iter_next(&it, &rec, error)) > 0) {
		gboolean ok = TRUE;

		m->res->host_records++;
		if (rec.type == VT_PERF_RECORD_FINISHED_INIT)
			ok = flush_guest(m, 0, error);
		else if (rec.type == VT_PERF_RECORD_FINISHED_ROUND)
			ok = flush_guest(m, latest, error);
		else if (vt_perf_record_sample_id(m->h->f, &rec, &sid) && sid.has_time) {
			latest = MAX(latest, sid.time);
			first = sid.time ? MIN(first, sid.time) : first;
			ok = flush_guest(m, sid.time, error);
		}
		if (ok)
			ok = rec.type == VT_PERF_RECORD_AUXTRACE ? copy_auxtrace(m, &rec, error)
								  : vt_perf_writer_write_record(m->w, rec.data, error);
		if (!ok)
			return FALSE;
		if (m->opt->progress)    /* (copy_auxtrace left the payload's size in m->aux) */
			__atomic_add_fetch(m->opt->progress,
					   rec.size + (rec.type == VT_PERF_RECORD_AUXTRACE ? m->aux->len : 0),
					   __ATOMIC_RELAXED);
	}
	if (latest) {
		m->res->host_first = first;
		m->res->host_last = latest;
		count_in_span(m, first, latest);
	}
	return r == 0 && flush_guest(m, UINT64_MAX, error);
}

static gboolean add_attrs(Merge *m, GError **error)
{
	for (guint i = 0; i < vt_perf_file_n_attrs(m->h->f); i++) {
		const VtPerfAttr *a = vt_perf_file_attr(m->h->f, i);

		if (!vt_perf_writer_add_attr(m->w, &a->attr, a->ids, a->nr_ids, error))
			return FALSE;
	}
	for (guint i = 0; i < vt_perf_file_n_attrs(m->g->f); i++) {
		struct perf_event_attr a = host_attr(m, i);
		g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(uint64_t));

		for (guint k = 0; k < m->ids->len; k++)
			if (g_array_index(m->ids, IdMap, k).attr == i)
				g_array_append_val(ids, g_array_index(m->ids, IdMap, k).host_id);
		if (!vt_perf_writer_add_attr(m->w, &a, (const uint64_t *)ids->data, ids->len, error))
			return FALSE;
	}
	return TRUE;
}

/* HEADER_BUILD_ID records of the guest, as the guest machine's. */
static void guest_build_ids(const Merge *m, GByteArray *b)
{
	const uint8_t *p;
	uint64_t n, off = 0;

	if (!vt_perf_file_feature(m->g->f, VT_PERF_FEAT_BUILD_ID, &p, &n))
		return;
	while (off + 8 <= n) {
		struct perf_event_header hdr;
		gsize at = b->len;
		int32_t pid = (int32_t)m->h->pid;

		memcpy(&hdr, p + off, sizeof(hdr));
		if (hdr.size < 16 || hdr.size > n - off)
			break;
		g_byte_array_append(b, p + off, hdr.size);
		hdr.misc = guest_misc(hdr.misc);
		memcpy(b->data + at, &hdr, sizeof(hdr));
		memcpy(b->data + at + 8, &pid, 4);
		off += hdr.size;
	}
}

/* The guest event's name as perf gives the new event: the guest's name
 * without its modifiers, ":G" (exclude_host, not exclude_guest) plus the
 * k/u/h and p modifiers perf prints first. */
static char *guest_event_name(const char *gname, const struct perf_event_attr *a)
{
	g_autofree char *base = g_strndup(gname, strcspn(gname, ":"));
	g_autofree char *m = NULL;
	GString *mods = g_string_new(NULL);

	if (a->exclude_kernel || a->exclude_user || a->exclude_hv) {
		if (!a->exclude_kernel)
			g_string_append_c(mods, 'k');
		if (!a->exclude_user)
			g_string_append_c(mods, 'u');
		if (!a->exclude_hv)
			g_string_append_c(mods, 'h');
	}
	g_string_append_len(mods, "ppp", a->precise_ip);
	g_string_append_c(mods, 'G');
	m = g_string_free(mods, FALSE);
	return g_strdup_printf("%s:%s", base, m);
}

/* One HEADER_EVENT_DESC entry (attr cut or zero-extended to attr_size). */
static void put_desc(GByteArray *b, const struct perf_event_attr *a, uint32_t attr_size, const char *name,
		     const uint64_t *ids, guint n)
{
	uint8_t buf[512] = { 0 };

	memcpy(buf, a, MIN(sizeof(*a), sizeof(buf)));
	vt_perf_put(b, buf, attr_size);
	vt_perf_put_u32(b, n);
	vt_perf_put_string(b, name);
	for (guint i = 0; i < n; i++)
		vt_perf_put_u64(b, ids[i]);
}

/* The name of each guest attr in the guest's HEADER_EVENT_DESC ("" if none). */
static GPtrArray *desc_names(const VtPerfFile *f)
{
	GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
	const uint8_t *p;
	uint64_t n, off = 8;
	uint32_t nr = 0, asz = 0;

	if (vt_perf_file_feature(f, VT_PERF_FEAT_EVENT_DESC, &p, &n) && n >= 8) {
		memcpy(&nr, p, 4);
		memcpy(&asz, p + 4, 4);
	}
	for (uint32_t i = 0; i < nr && asz <= 512 && off + asz + 8 <= n; i++) {
		uint32_t nids, len;

		memcpy(&nids, p + off + asz, 4);
		memcpy(&len, p + off + asz + 4, 4);
		if (len > n - off - asz - 8 || (uint64_t)nids * 8 > n - off - asz - 8 - len)
			break;
		g_ptr_array_add(names, g_strndup((const char *)p + off + asz + 8, len));
		off += asz + 8 + len + (uint64_t)nids * 8;
	}
	while (names->len < vt_perf_file_n_attrs(f))
		g_ptr_array_add(names, g_strdup(""));
	return names;
}

/* HEADER_EVENT_DESC: the host's, then the guest events (perf writes all). */
static gboolean event_desc(Merge *m, const uint8_t *p, uint64_t n, GError **error)
{
	g_autoptr(GByteArray) b = g_byte_array_new();
	g_autoptr(GPtrArray) names = desc_names(m->g->f);
	uint32_t nr, asz;

	memcpy(&nr, p, 4);
	memcpy(&asz, p + 4, 4);
	if (asz > 512)
		return vt_perf_writer_set_feature(m->w, VT_PERF_FEAT_EVENT_DESC, p, n, error);
	nr += vt_perf_file_n_attrs(m->g->f);
	vt_perf_put_u32(b, nr);
	vt_perf_put_u32(b, asz);
	g_byte_array_append(b, p + 8, n - 8);
	for (guint i = 0; i < vt_perf_file_n_attrs(m->g->f); i++) {
		struct perf_event_attr a = host_attr(m, i);
		g_autofree char *name = guest_event_name(names->pdata[i], &a);
		g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(uint64_t));

		for (guint k = 0; k < m->ids->len; k++)
			if (g_array_index(m->ids, IdMap, k).attr == i)
				g_array_append_val(ids, g_array_index(m->ids, IdMap, k).host_id);
		put_desc(b, &a, asz, name, (const uint64_t *)ids->data, ids->len);
	}
	return vt_perf_writer_set_feature(m->w, VT_PERF_FEAT_EVENT_DESC, b->data, b->len, error);
}

/* The host's feature sections, the guest's build ids and events added. */
static gboolean copy_features(Merge *m, GError **error)
{
	g_autoptr(GByteArray) bid = g_byte_array_new();
	const uint8_t *p;
	uint64_t n;

	for (guint bit = 0; bit < VT_PERF_FEAT_BITS; bit++) {
		if (bit == VT_PERF_FEAT_AUXTRACE || bit == VT_PERF_FEAT_BUILD_ID ||
		    !vt_perf_file_feature(m->h->f, bit, &p, &n))
			continue;
		if (bit == VT_PERF_FEAT_EVENT_DESC && n >= 8 ? !event_desc(m, p, n, error)
							     : !vt_perf_writer_set_feature(m->w, bit, p, n, error))
			return FALSE;
	}
	if (vt_perf_file_feature(m->h->f, VT_PERF_FEAT_BUILD_ID, &p, &n))
		g_byte_array_append(bid, p, n);
	guest_build_ids(m, bid);
	return !bid->len || vt_perf_writer_set_feature(m->w, VT_PERF_FEAT_BUILD_ID, bid->data, bid->len, error);
}

/* ------------------------------------------------- the output directory */

/* The files and directories of a recording directory (kcore_dir,
 * vmtrace-kvm.ini, ...) but its data; links are left out, and so are hidden
 * entries (temporaries); a FIFO or device is an error. */
static gboolean not_rec_data(const char *name, guint depth)
{
	return name[0] == '.' || (depth == 0 && (!strcmp(name, "data") || g_str_has_prefix(name, "data.")));
}

static gboolean not_hidden(const char *name, guint depth)
{
	(void)depth;
	return name[0] == '.';
}

/* A guest perf.data directory's kcore_dir, as OUT/kcore_dir__PID (where
 * perf inject --guest-data puts it). */
static gboolean copy_guest_kcore(const Merge *m, const char *tmp, GError **error)
{
	g_autofree char *dir = g_path_get_dirname(vt_perf_file_path(m->g->f));
	g_autofree char *kcore = g_build_filename(dir, "kcore_dir", NULL);
	g_autofree char *name = g_strdup_printf("kcore_dir__%u", m->h->pid);
	g_autofree char *dst = g_build_filename(tmp, name, NULL);

	if (!g_file_test(m->guest_path, G_FILE_TEST_IS_DIR) || !g_file_test(kcore, G_FILE_TEST_IS_DIR))
		return TRUE;
	return vt_fs_copy_tree(kcore, dst, not_hidden, error);
}

static gboolean write_output_(Merge *m, const char *rec, const char *out, GError **error)
{
	g_autoptr(VtFsOutput) o = vt_fs_output_new(out, VT_FS_OUTPUT_DIR, 0700, error);
	g_autofree char *data = NULL;
	gboolean ok;

	if (!o)
		return FALSE;
	if (g_file_test(rec, G_FILE_TEST_IS_DIR) && !vt_fs_copy_tree(rec, vt_fs_output_tmp(o), not_rec_data, error))
		return FALSE;
	if (!copy_guest_kcore(m, vt_fs_output_tmp(o), error))
		return FALSE;
	data = g_build_filename(vt_fs_output_tmp(o), "data", NULL);
	if (!(m->w = vt_perf_writer_new(data, FALSE, error)))
		return FALSE;
	ok = add_attrs(m, error) && write_records(m, error) && copy_features(m, error) &&
	     vt_perf_writer_finish(m->w, error);
	vt_perf_writer_free(m->w);
	m->w = NULL;
	return ok && vt_fs_output_commit(o, error);
}

/* Errors while writing are VT_INJECT_ERROR_OUTPUT (reading REC's
 * records again can only fail as it did not the first time). */
static gboolean write_output(Merge *m, const char *rec, const char *out, GError **error)
{
	GError *e = NULL;

	if (write_output_(m, rec, out, &e))
		return TRUE;
	g_set_error_literal(error, VT_INJECT_ERROR, VT_INJECT_ERROR_OUTPUT, e->message);
	g_error_free(e);
	return FALSE;
}

/* ----------------------------------------------------------- the whole */

static gboolean select_pid(InjHost *h, uint32_t pid, GError **error)
{
	g_autoptr(GArray) pids = inj_host_pids(h);
	const char *path = vt_perf_file_path(h->f);

	if (!pid && pids->len > 1) {
		g_set_error(error, VT_INJECT_ERROR, VT_INJECT_ERROR_HOST_PIDS,
			    "%s: %u QEMU processes have vCPU threads (pids %u, %u%s); say which with --pid", path,
			    pids->len, g_array_index(pids, uint32_t, 0), g_array_index(pids, uint32_t, 1),
			    pids->len > 2 ? ", ..." : "");
		return FALSE;
	}
	if (!pid && !pids->len) {
		g_set_error(error, VT_INJECT_ERROR, VT_INJECT_ERROR_HOST_NO_VCPUS,
			    "%s: no COMM record names a \"CPU n/KVM\" thread (QEMU's vCPU threads: run QEMU with "
			    "-name debug-threads=on, and record its comm events)", path);
		return FALSE;
	}
	pid = pid ? pid : g_array_index(pids, uint32_t, 0);
	for (guint i = 0; i < h->injected->len; i++)
		if (g_array_index(h->injected, uint32_t, i) == pid) {
			g_set_error(error, VT_INJECT_ERROR, VT_INJECT_ERROR_HOST_INJECTED,
				    "%s: already holds guest records of QEMU process %u (its ID_INDEX names them: "
				    "injected before); inject into the recording without them", path, pid);
			return FALSE;
		}
	return inj_host_select(h, pid, error);
}

static gboolean fail_host(GError **error, VtInjectErrorCode code, const char *path, const char *what)
{
	g_set_error(error, VT_INJECT_ERROR, code, "%s: %s", path, what);
	return FALSE;
}

static gboolean check_host(InjHost *h, GError **error)
{
	const char *path = vt_perf_file_path(h->f);

	if (!h->have_tc || !h->tc.cap_user_time_zero || !h->tc.time_mult)
		return fail_host(error, VT_INJECT_ERROR_HOST_NO_TIME, path,
				 "no TIME_CONV with cap_user_time_zero: host times cannot be related to the TSC");
	if (!h->switches->len)
		return fail_host(error, VT_INJECT_ERROR_HOST_NO_SWITCH, path,
				 "no context-switch records with a CPU: which host CPU each vCPU ran on is unknown "
				 "(record with --switch-events, or per CPU)");
	return TRUE;
}

GArray *vt_inject_host_qemu_pids(const char *rec, GError **error)
{
	InjHost *h = inj_host_open(rec, error);
	GArray *pids;

	if (!h)
		return NULL;
	pids = inj_host_pids(h);
	inj_host_free(h);
	return pids;
}

gboolean vt_inject_host_has_vcpu(const char *rec, uint32_t pid, guint vcpu, gboolean *has, GError **error)
{
	InjHost *h = inj_host_open(rec, error);

	if (!h)
		return FALSE;
	*has = FALSE;
	for (guint i = 0; i < h->comms->len && !*has; i++) {
		const InjVcpu *v = &g_array_index(h->comms, InjVcpu, i);

		*has = v->pid == pid && v->vcpu == vcpu;
	}
	inj_host_free(h);
	return TRUE;
}

/* A perf.data directory of several data files holds most records outside
 * DIR/data, which is all that is read: refused, not injected in part. */
gboolean vt_inject_one_data_file(const char *path, GError **error)
{
	g_autoptr(GDir) d = g_file_test(path, G_FILE_TEST_IS_DIR) ? g_dir_open(path, 0, NULL) : NULL;
	const char *name;

	while (d && (name = g_dir_read_name(d)))
		if (g_str_has_prefix(name, "data.") && name[5] && strspn(name + 5, "0123456789") == strlen(name + 5)) {
			g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
				    "%s: a perf.data directory of several files (%s beside data: perf record --threads); "
				    "inject reads one data file only: record without --threads", path, name);
			return FALSE;
		}
	return TRUE;
}

static void ev_clear(gpointer p)
{
	g_byte_array_unref(((Ev *)p)->bytes);
}

gboolean vt_inject_guest_data(const char *rec, const char *guest, const char *out, const VtInjectOptions *opt,
			      VtInjectResult *res, GError **error)
{
	Merge m = { .opt = opt, .guest_path = guest, .res = res };
	gboolean ok;

	memset(res, 0, sizeof(*res));
	m.ids = g_array_new(FALSE, FALSE, sizeof(IdMap));
	m.by_guest = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	m.evs = g_array_new(FALSE, FALSE, sizeof(Ev));
	m.aux = g_byte_array_new();
	g_array_set_clear_func(m.evs, ev_clear);
	ok = vt_inject_one_data_file(guest, error) && vt_inject_one_data_file(rec, error) &&
	     (m.g = inj_guest_open(guest, error)) && (m.h = inj_host_open(rec, error)) &&
	     check_host(m.h, error) && select_pid(m.h, opt->machine_pid, error);
	if (ok) {
		res->machine_pid = m.h->pid;
		for (guint v = 0; v < m.h->vcpus->len; v++) {
			const InjVcpu *x = g_ptr_array_index(m.h->vcpus, v);

			res->nvcpus += x != NULL;
			res->unplaced_vcpus += x && !x->placed;
		}
		res->skipped = m.g->skipped;
		map_ids(&m);
		ok = check_vcpus(&m, error) && convert_all(&m, error) && write_output(&m, rec, out, error);
	}
	g_array_free(m.evs, TRUE);
	g_byte_array_unref(m.aux);
	g_hash_table_unref(m.by_guest);
	g_array_free(m.ids, TRUE);
	inj_host_free(m.h);
	inj_guest_free(m.g);
	return ok;
}
