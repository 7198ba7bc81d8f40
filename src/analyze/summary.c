/* summary.c - the aggregation visitor: per vCPU (mode times, exits,
 * latency distributions, longest exits), per exit handler, per function
 * (self and inclusive), first calls and syscalls.  Memory: per vCPU,
 * handler pair, function and syscall name - never per exit: a vCPU's
 * latencies exactly up to VT_ANALYZE_EXACT, then in a histogram; the exit
 * groups' exactly while all groups together hold at most
 * VT_ANALYZE_GROUP_EXACT, then in histograms of at most
 * VT_ANALYZE_GROUP_BUCKETS buckets in all (analyze.h). */
#include "config.h"

#include <string.h>

#include "src/analyze/analyze.h"

G_STATIC_ASSERT(sizeof(gpointer) == sizeof(guint64));
#define KEY(a) ((gpointer)(guintptr)(a))   /* an address as a GHashTable key */

#define SUB_BITS 7                /* histogram: 128 buckets per power of two */
#define N_BUCKETS (64 << SUB_BITS)
#define PAIR_SHIFT 48             /* a group's histogram: bucket << PAIR_SHIFT | count */
#define PAIR_COUNT ((1ULL << PAIR_SHIFT) - 1)

typedef struct {
	VtAnalyzeStats st;
	GArray *exact;                /* guint64; NULL once a histogram took over */
	guint64 *hist;                /* vCPUs: N_BUCKETS counts */
	GArray *pairs;                /* groups: guint64 pairs by bucket (PAIR_SHIFT), the buckets in use */
} Dist;

typedef struct {
	VtAnalyzeVcpu v;
	Dist lat;
	gboolean seen;
} Vcpu;

typedef struct {
	VtAnalyzeExitGroup g;
	Dist lat;
} Group;

/* Function rows by (vCPU, machine, function): the rows in one array (no
 * allocation per row), found through one GHashTable per (vCPU, machine):
 * KEY(function start) -> row index + 1. */
typedef struct {
	GArray *rows;                 /* VtAnalyzeFunction */
	GPtrArray *index;             /* GHashTable at (vcpu + 1) * 2 + guest (NULL: none yet) */
} FuncTable;

struct VtAnalyzeSummary {
	VtAnalyzeSummaryOptions o;
	GHashTable *vcpus;            /* vcpu -> Vcpu */
	GHashTable *groups;           /* GroupKey -> Group */
	guint64 group_values;         /* latencies the groups hold exactly */
	gboolean group_hist;          /* the groups' histograms took over */
	guint64 group_pairs;          /* buckets in use in all groups' histograms */
	guint group_bits;             /* their resolution: 2^group_bits buckets per power of two */
	FuncTable funcs;              /* per vCPU (-1: threads that are no vCPU); all vCPUs: at the end */
	GHashTable *sys;              /* name -> VtAnalyzeSyscallStats */
	GArray *first;                /* VtAnalyzeFirstCall */
	GArray *out_vcpus, *out_groups, *out_funcs, *out_sys;
	gboolean done;
};

/* -------------------------------------------------------- distributions */
/* Log-linear buckets: values below 2^bits one each, then 2^bits per power of two. */
static guint bucket_of(guint64 v, guint bits)
{
	guint msb;

	if (v < (1u << bits))
		return (guint)v;
	msb = 63 - __builtin_clzll(v);
	return ((msb - bits + 1) << bits) + (guint)((v >> (msb - bits)) & ((1u << bits) - 1));
}

/* the smallest value of bucket i */
static guint64 bucket_low(guint i, guint bits)
{
	guint e = i >> bits, m = i & ((1u << bits) - 1);

	if (!e)
		return m;
	return ((guint64)((1u << bits) | m)) << (e - 1);
}

static void stats_add(VtAnalyzeStats *s, guint64 v)
{
	s->min = s->count ? MIN(s->min, v) : v;
	s->max = MAX(s->max, v);
	s->count++;
	s->total += v;
}

/* A vCPU's latency: exact up to VT_ANALYZE_EXACT, then the histogram. */
static void dist_add(Dist *d, guint64 v)
{
	stats_add(&d->st, v);
	if (!d->exact && !d->hist)
		d->exact = g_array_new(FALSE, FALSE, sizeof(guint64));
	if (d->exact && d->exact->len < VT_ANALYZE_EXACT) {
		g_array_append_val(d->exact, v);
		return;
	}
	if (d->exact) {
		d->hist = g_new0(guint64, N_BUCKETS);
		for (guint i = 0; i < d->exact->len; i++)
			d->hist[bucket_of(g_array_index(d->exact, guint64, i), SUB_BITS)]++;
		g_array_free(d->exact, TRUE);
		d->exact = NULL;
	}
	d->hist[bucket_of(v, SUB_BITS)]++;
}

/* n more in bucket b of sorted pairs p: 1 if b is new there, else 0 */
static guint pairs_add(GArray *p, guint b, guint64 n)
{
	const guint64 *x = (const guint64 *)(gpointer)p->data;
	guint lo = 0, hi = p->len;

	while (lo < hi) {
		guint mid = (lo + hi) / 2;

		if (x[mid] >> PAIR_SHIFT < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->len && x[lo] >> PAIR_SHIFT == b) {
		g_array_index(p, guint64, lo) += n;
		return 0;
	}
	g_array_insert_val(p, lo, ((guint64){ (guint64)b << PAIR_SHIFT | n }));
	return 1;
}

/* p at one bit less: neighbouring buckets merged (each bucket lies in one
 * of the coarser ones), in an array of its new size; the buckets left */
static guint pairs_coarsen(GArray **p, guint bits)
{
	GArray *from = *p, *to;
	guint n = 0;

	for (guint i = 0; i < from->len; i++) {
		guint64 x = g_array_index(from, guint64, i);
		guint b = bucket_of(bucket_low((guint)(x >> PAIR_SHIFT), bits), bits - 1);

		if (n && g_array_index(from, guint64, n - 1) >> PAIR_SHIFT == b)
			g_array_index(from, guint64, n - 1) += x & PAIR_COUNT;
		else
			g_array_index(from, guint64, n++) = (guint64)b << PAIR_SHIFT | (x & PAIR_COUNT);
	}
	to = g_array_sized_new(FALSE, FALSE, sizeof(guint64), n);
	g_array_append_vals(to, from->data, n);
	g_array_free(from, TRUE);
	*p = to;
	return n;
}

/* The groups' histograms hold too many buckets: one bit less, until they fit */
static void groups_coarsen(VtAnalyzeSummary *s)
{
	GHashTableIter it;
	gpointer k, val;

	while (s->group_pairs > VT_ANALYZE_GROUP_BUCKETS && s->group_bits) {
		s->group_pairs = 0;
		g_hash_table_iter_init(&it, s->groups);
		while (g_hash_table_iter_next(&it, &k, &val))
			s->group_pairs += pairs_coarsen(&((Group *)val)->lat.pairs, s->group_bits);
		s->group_bits--;
	}
}

/* The groups hold VT_ANALYZE_GROUP_EXACT latencies: histograms take over */
static void groups_to_hist(VtAnalyzeSummary *s)
{
	GHashTableIter it;
	gpointer k, val;

	s->group_hist = TRUE;
	g_hash_table_iter_init(&it, s->groups);
	while (g_hash_table_iter_next(&it, &k, &val)) {
		Dist *d = &((Group *)val)->lat;

		d->pairs = g_array_new(FALSE, FALSE, sizeof(guint64));
		for (guint i = 0; d->exact && i < d->exact->len; i++)
			s->group_pairs += pairs_add(d->pairs, bucket_of(g_array_index(d->exact, guint64, i),
									 s->group_bits), 1);
		if (d->exact)
			g_array_free(d->exact, TRUE);
		d->exact = NULL;
	}
	s->group_values = 0;
	groups_coarsen(s);
}

/* A group's latency: exact while the groups hold fewer than
 * VT_ANALYZE_GROUP_EXACT, then into its histogram. */
static void group_dist_add(VtAnalyzeSummary *s, Dist *d, guint64 v)
{
	stats_add(&d->st, v);
	if (!s->group_hist && s->group_values == VT_ANALYZE_GROUP_EXACT)
		groups_to_hist(s);
	if (!s->group_hist) {
		if (!d->exact)
			d->exact = g_array_new(FALSE, FALSE, sizeof(guint64));
		g_array_append_val(d->exact, v);
		s->group_values++;
		return;
	}
	if (!d->pairs)
		d->pairs = g_array_new(FALSE, FALSE, sizeof(guint64));
	s->group_pairs += pairs_add(d->pairs, bucket_of(v, s->group_bits), 1);
	if (s->group_pairs > VT_ANALYZE_GROUP_BUCKETS)
		groups_coarsen(s);
}

static gint cmp_u64(gconstpointer a, gconstpointer b)
{
	guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;

	return x < y ? -1 : x > y;
}

/* nearest rank: the smallest value with at least pct% of the values at or
 * below it (histograms: the low end of its bucket, within min and max) */
static guint64 dist_rank(const Dist *d, guint pct, guint bits)
{
	guint64 rank = (d->st.count * pct + 99) / 100, seen = 0;

	if (!d->st.count)
		return 0;
	rank = MAX(rank, 1);
	if (d->exact)
		return g_array_index(d->exact, guint64, rank - 1);
	for (guint i = 0; d->pairs && i < d->pairs->len; i++) {
		guint64 x = g_array_index(d->pairs, guint64, i);

		seen += x & PAIR_COUNT;
		if (seen >= rank)
			return CLAMP(bucket_low((guint)(x >> PAIR_SHIFT), bits), d->st.min, d->st.max);
	}
	for (guint i = 0; d->hist && i < N_BUCKETS; i++) {
		seen += d->hist[i];
		if (seen >= rank)
			return CLAMP(bucket_low(i, bits), d->st.min, d->st.max);
	}
	return d->st.max;
}

static void dist_finish(Dist *d, guint bits)
{
	if (d->exact)
		g_array_sort(d->exact, cmp_u64);
	d->st.p50 = dist_rank(d, 50, bits);
	d->st.p90 = dist_rank(d, 90, bits);
	d->st.p99 = dist_rank(d, 99, bits);
}

static void dist_clear(Dist *d)
{
	if (d->exact)
		g_array_free(d->exact, TRUE);
	if (d->pairs)
		g_array_free(d->pairs, TRUE);
	g_free(d->hist);
}

/* ----------------------------------------------------------------- keys */
/* Names (NULL allowed): groups and syscalls go by name - static functions
 * of one name are one row. */
static guint name_hash(gconstpointer p)
{
	return p ? g_str_hash(p) : 0;
}

static gboolean name_equal(gconstpointer a, gconstpointer b)
{
	return !g_strcmp0(a, b);
}

typedef struct {
	gint32 vcpu;
	const char *handler, *first_call;
} GroupKey;

static guint group_hash(gconstpointer p)
{
	const GroupKey *k = p;

	return (guint)k->vcpu * 31u + name_hash(k->handler) * 17u + name_hash(k->first_call);
}

static gboolean group_equal(gconstpointer a, gconstpointer b)
{
	const GroupKey *x = a, *y = b;

	return x->vcpu == y->vcpu && !g_strcmp0(x->handler, y->handler) && !g_strcmp0(x->first_call, y->first_call);
}

/* ------------------------------------------------------- function rows */
static void index_free(gpointer h)
{
	if (h)
		g_hash_table_unref(h);
}

static void ftable_init(FuncTable *t)
{
	t->rows = g_array_new(FALSE, FALSE, sizeof(VtAnalyzeFunction));
	t->index = g_ptr_array_new_with_free_func(index_free);
}

static void ftable_clear(FuncTable *t)
{
	g_array_free(t->rows, TRUE);
	g_ptr_array_free(t->index, TRUE);
}

/* The index of (vcpu >= -1, guest): function start -> row index + 1 */
static GHashTable *ftable_index(FuncTable *t, gint32 vcpu, gboolean guest)
{
	guint i = (guint)(vcpu + 1) * 2 + !!guest;

	if (i >= t->index->len)
		g_ptr_array_set_size(t->index, (gint)(i + 1));
	if (!t->index->pdata[i])
		t->index->pdata[i] = g_hash_table_new(g_direct_hash, g_direct_equal);
	return t->index->pdata[i];
}

/* The row of (vcpu, guest, func), made (zero, named sym) if new. */
static VtAnalyzeFunction *ftable_get(FuncTable *t, gint32 vcpu, gboolean guest, guint64 func, const char *sym)
{
	GHashTable *h = ftable_index(t, vcpu, guest);
	guint row = GPOINTER_TO_UINT(g_hash_table_lookup(h, KEY(func)));

	if (!row) {
		g_array_append_val(t->rows, ((VtAnalyzeFunction){ .vcpu = vcpu, .guest = guest, .func = func, .sym = sym }));
		row = t->rows->len;
		g_hash_table_insert(h, KEY(func), GUINT_TO_POINTER(row));
	}
	return &g_array_index(t->rows, VtAnalyzeFunction, row - 1);
}

static void func_sum(VtAnalyzeFunction *to, const VtAnalyzeFunction *f)
{
	to->calls += f->calls;
	to->self += f->self;
	to->inclusive += f->inclusive;
	to->self_insns += f->self_insns;
	to->insns += f->insns;
}

/* -------------------------------------------------------------- visitor */
static gboolean in_range(const VtAnalyzeSummary *s, guint64 t)
{
	return !s->o.have_range || (t >= s->o.range_start && t <= s->o.range_end);
}

static Vcpu *vcpu_get(VtAnalyzeSummary *s, const VtAnalyzeWhere *w)
{
	Vcpu *v = g_hash_table_lookup(s->vcpus, GINT_TO_POINTER(w->vcpu));

	if (!v) {
		v = g_new0(Vcpu, 1);
		v->v.vcpu = w->vcpu;
		v->v.tid = w->tid;
		v->v.longest = g_array_new(FALSE, FALSE, sizeof(VtAnalyzeExit));
		g_hash_table_insert(s->vcpus, GINT_TO_POINTER(w->vcpu), v);
	}
	return v;
}

static void on_mode(const VtAnalyzeMode *m, gpointer user)
{
	VtAnalyzeSummary *s = user;
	guint64 a = m->start, b = m->end, insns = m->insns;
	Vcpu *v;

	if (s->o.have_range) {
		if (b < s->o.range_start || a > s->o.range_end)
			return;
		a = MAX(a, s->o.range_start);
		b = MIN(b, s->o.range_end);
		if (m->end > m->start)   /* instructions in proportion to the part kept */
			insns = (guint64)((double)m->insns * (double)(b - a) / (double)(m->end - m->start));
	}
	v = vcpu_get(s, &m->w);
	v->v.first = v->seen ? MIN(v->v.first, a) : a;
	v->v.last = MAX(v->v.last, b);
	v->seen = TRUE;
	if (m->guest) {
		v->v.guest += b - a;
		v->v.guest_insns += insns;
	} else {
		v->v.host += b - a;
		v->v.host_insns += insns;
	}
}

static gint cmp_longest(gconstpointer a, gconstpointer b)
{
	const VtAnalyzeExit *x = a, *y = b;

	if (x->latency != y->latency)
		return x->latency > y->latency ? -1 : 1;
	return x->exit_time < y->exit_time ? -1 : x->exit_time > y->exit_time;
}

static void keep_longest(VtAnalyzeSummary *s, Vcpu *v, const VtAnalyzeExit *x)
{
	GArray *l = v->v.longest;
	guint n = s->o.longest ? s->o.longest : 10;

	if (l->len == n && cmp_longest(x, &g_array_index(l, VtAnalyzeExit, n - 1)) >= 0)
		return;
	g_array_append_val(l, *x);
	g_array_sort(l, cmp_longest);
	if (l->len > n)
		g_array_set_size(l, n);
}

static void group_add(VtAnalyzeSummary *s, gint32 vcpu, const VtAnalyzeExit *x)
{
	GroupKey k = { vcpu, x->handler, x->first_call };
	Group *g = g_hash_table_lookup(s->groups, &k);

	if (!g) {
		g = g_new0(Group, 1);
		g->g.vcpu = vcpu;
		g->g.handler = x->handler;
		g->g.first_call = x->first_call;
		g_hash_table_insert(s->groups, g_memdup2(&k, sizeof(k)), g);
	}
	group_dist_add(s, &g->lat, x->latency);
}

static void on_vmexit_done(const VtAnalyzeExit *x, gpointer user)
{
	VtAnalyzeSummary *s = user;
	Vcpu *v;

	if (!in_range(s, x->exit_time))
		return;
	v = vcpu_get(s, &x->w);
	v->v.exits++;
	if (!x->reentered)
		return;
	dist_add(&v->lat, x->latency);
	keep_longest(s, v, x);
	if (x->w.vcpu >= 0)
		group_add(s, x->w.vcpu, x);
	group_add(s, -1, x);
}

static void on_slice(const VtAnalyzeSlice *sl, gpointer user)
{
	VtAnalyzeSummary *s = user;
	VtAnalyzeFunction *f;

	if (!in_range(s, sl->start))
		return;
	f = ftable_get(&s->funcs, sl->w.vcpu, sl->guest, sl->func, sl->sym);
	f->calls++;
	f->self += sl->self;
	f->inclusive += sl->end - sl->start;
	f->self_insns += sl->self_insns;
	f->insns += sl->insns;
}

static void on_first_call(const VtAnalyzeFirstCall *f, gpointer user)
{
	VtAnalyzeSummary *s = user;

	g_array_append_val(s->first, *f);
}

static void on_syscall(const VtAnalyzeSyscall *sc, gpointer user)
{
	VtAnalyzeSummary *s = user;
	VtAnalyzeSyscallStats *st;

	if (!in_range(s, sc->start))
		return;
	st = g_hash_table_lookup(s->sys, sc->name);
	if (!st) {
		st = g_new0(VtAnalyzeSyscallStats, 1);
		st->name = sc->name;
		st->first = sc->start;
		g_hash_table_insert(s->sys, (gpointer)sc->name, st);
	}
	st->count++;
	st->first = MIN(st->first, sc->start);
	st->last = MAX(st->last, sc->start);
	if (sc->complete) {
		st->complete++;
		st->total += sc->end - sc->start;
	}
}

VtAnalyzeVisitor vt_analyze_summary_visitor(VtAnalyzeSummary *s)
{
	return (VtAnalyzeVisitor){ .mode = on_mode, .exit = on_vmexit_done, .slice = on_slice,
				   .first_call = on_first_call, .syscall = on_syscall, .user = s };
}

/* -------------------------------------------------------------- results */
static gint cmp_vcpu(gconstpointer a, gconstpointer b)
{
	const VtAnalyzeVcpu *x = a, *y = b;

	return (x->vcpu > y->vcpu) - (x->vcpu < y->vcpu);
}

static gint cmp_group(gconstpointer a, gconstpointer b)
{
	const VtAnalyzeExitGroup *x = a, *y = b;

	if (x->vcpu != y->vcpu)
		return x->vcpu < y->vcpu ? -1 : 1;
	if (x->latency.count != y->latency.count)
		return x->latency.count > y->latency.count ? -1 : 1;
	return g_strcmp0(x->handler, y->handler) ?: g_strcmp0(x->first_call, y->first_call);
}

static gint cmp_func(gconstpointer a, gconstpointer b)
{
	const VtAnalyzeFunction *x = a, *y = b;

	if (x->vcpu != y->vcpu)
		return x->vcpu < y->vcpu ? -1 : 1;
	if (x->guest != y->guest)
		return x->guest ? -1 : 1;
	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->self_insns != y->self_insns)
		return x->self_insns > y->self_insns ? -1 : 1;
	return x->func < y->func ? -1 : x->func > y->func;
}

static gint cmp_first(gconstpointer a, gconstpointer b)
{
	const VtAnalyzeFirstCall *x = a, *y = b;

	if (x->guest != y->guest)
		return x->guest ? -1 : 1;
	return (x->index > y->index) - (x->index < y->index);
}

static gint cmp_sys(gconstpointer a, gconstpointer b)
{
	const VtAnalyzeSyscallStats *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return g_strcmp0(x->name, y->name);
}

/* The rows of each vCPU, and those of all (vcpu -1: every row's sum,
 * threads that are no vCPU included) - in the rows' own array (no copy:
 * they are the biggest thing report holds at its peak, tens of MB for
 * synth's walks over the whole kernel), the per-vCPU indexes freed first. */
static void funcs_finish(VtAnalyzeSummary *s)
{
	FuncTable all;
	GArray *rows = s->funcs.rows;
	guint n = 0;

	g_ptr_array_set_size(s->funcs.index, 0);
	ftable_init(&all);
	for (guint i = 0; i < rows->len; i++) {
		const VtAnalyzeFunction *f = &g_array_index(rows, VtAnalyzeFunction, i);

		func_sum(ftable_get(&all, -1, f->guest, f->func, f->sym), f);
		if (f->vcpu >= 0)
			g_array_index(rows, VtAnalyzeFunction, n++) = *f;
	}
	g_array_set_size(rows, n);
	g_array_append_vals(rows, all.rows->data, all.rows->len);
	ftable_clear(&all);
	g_array_sort(rows, cmp_func);
	g_array_free(s->out_funcs, TRUE);
	s->out_funcs = rows;
	s->funcs.rows = g_array_new(FALSE, FALSE, sizeof(VtAnalyzeFunction));
}

static void finish(VtAnalyzeSummary *s)
{
	GHashTableIter it;
	gpointer k, val;

	if (s->done)
		return;
	s->done = TRUE;
	g_hash_table_iter_init(&it, s->vcpus);
	while (g_hash_table_iter_next(&it, &k, &val)) {
		Vcpu *v = val;

		dist_finish(&v->lat, SUB_BITS);
		v->v.latency = v->lat.st;
		g_array_append_val(s->out_vcpus, v->v);
	}
	g_array_sort(s->out_vcpus, cmp_vcpu);
	g_hash_table_iter_init(&it, s->groups);
	while (g_hash_table_iter_next(&it, &k, &val)) {
		Group *g = val;

		dist_finish(&g->lat, s->group_bits);
		g->g.latency = g->lat.st;
		g_array_append_val(s->out_groups, g->g);
	}
	g_array_sort(s->out_groups, cmp_group);
	funcs_finish(s);
	g_array_sort(s->first, cmp_first);
	g_hash_table_iter_init(&it, s->sys);
	while (g_hash_table_iter_next(&it, &k, &val))
		g_array_append_val(s->out_sys, *(VtAnalyzeSyscallStats *)val);
	g_array_sort(s->out_sys, cmp_sys);
}

const GArray *vt_analyze_summary_vcpus(VtAnalyzeSummary *s)
{
	finish(s);
	return s->out_vcpus;
}

const GArray *vt_analyze_summary_exit_groups(VtAnalyzeSummary *s)
{
	finish(s);
	return s->out_groups;
}

const GArray *vt_analyze_summary_functions(VtAnalyzeSummary *s)
{
	finish(s);
	return s->out_funcs;
}

const GArray *vt_analyze_summary_first_calls(VtAnalyzeSummary *s)
{
	finish(s);
	return s->first;
}

const GArray *vt_analyze_summary_syscalls(VtAnalyzeSummary *s)
{
	finish(s);
	return s->out_sys;
}

/* ------------------------------------------------------------ lifetime */
static void vcpu_free(gpointer p)
{
	Vcpu *v = p;

	dist_clear(&v->lat);
	g_array_free(v->v.longest, TRUE);
	g_free(v);
}

static void group_free(gpointer p)
{
	Group *g = p;

	dist_clear(&g->lat);
	g_free(g);
}

VtAnalyzeSummary *vt_analyze_summary_new(const VtAnalyzeSummaryOptions *opts)
{
	VtAnalyzeSummary *s = g_new0(VtAnalyzeSummary, 1);

	s->o = *opts;
	s->vcpus = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, vcpu_free);
	s->groups = g_hash_table_new_full(group_hash, group_equal, g_free, group_free);
	s->group_bits = SUB_BITS;
	ftable_init(&s->funcs);
	s->sys = g_hash_table_new_full(name_hash, name_equal, NULL, g_free);
	s->first = g_array_new(FALSE, FALSE, sizeof(VtAnalyzeFirstCall));
	s->out_vcpus = g_array_new(FALSE, FALSE, sizeof(VtAnalyzeVcpu));
	s->out_groups = g_array_new(FALSE, FALSE, sizeof(VtAnalyzeExitGroup));
	s->out_funcs = g_array_new(FALSE, FALSE, sizeof(VtAnalyzeFunction));
	s->out_sys = g_array_new(FALSE, FALSE, sizeof(VtAnalyzeSyscallStats));
	return s;
}

void vt_analyze_summary_free(VtAnalyzeSummary *s)
{
	if (!s)
		return;
	g_hash_table_destroy(s->vcpus);
	g_hash_table_destroy(s->groups);
	ftable_clear(&s->funcs);
	g_hash_table_destroy(s->sys);
	g_array_free(s->first, TRUE);
	g_array_free(s->out_vcpus, TRUE);
	g_array_free(s->out_groups, TRUE);
	g_array_free(s->out_funcs, TRUE);
	g_array_free(s->out_sys, TRUE);
	g_free(s);
}
