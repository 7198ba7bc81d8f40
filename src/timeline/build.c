/* build.c - decoded branches -> timeline events (see timeline.h): an
 * adapter from src/analyze's visitor to a sink, so the timeline draws the
 * slices and VM exits `vmtrace report` counts.  What it keeps: per vCPU a
 * mirror of each lane's open slices (at most analyze's 1024 frames) and
 * the exit being drawn; nothing per branch. */
#include "config.h"

#include <string.h>

#include "src/analyze/analyze.h"
#include "src/timeline/timeline.h"

#define COUNTER_TIMED 1000000   /* a counter bucket: 1 ms ... */
#define COUNTER_TIMELESS 1000   /* ... or 1000 instructions */

/* A slice analyze has open on a lane; drawn: still open in the sink. */
typedef struct {
	const char *name;
	guint64 func;
	gboolean drawn;
} Open;

typedef struct {
	guint index;
	gint32 vcpu;                 /* its "CPU n/KVM" number */
	guint64 last[2];             /* per lane: time of its last event */
	GArray *open[2];             /* Open, per lane, index = analyze's depth */
	GArray *resume[2];           /* Open: inner slices to draw again after a full stack's drop */
	gboolean in_exit, exit_drawn;
	VtAnalyzeExit exit;
	guint64 bucket;              /* counter: current bucket and its count */
	gint64 count;
	gboolean counted;
} Vcpu;

struct VtTimelineBuilder {
	VtTimelineSink *sink;
	const VtDecodeImage *img[2];          /* guest, host */
	VtDecodeDisasm *guest_disasm;
	gboolean timed;
	VtAnalyze *analyze;
	GHashTable *vcpus;                    /* tid -> Vcpu */
	GStringChunk *names;                  /* names not from an image */
	guint n_vcpus;
	guint64 n_slices, n_exits;
};

static void vcpu_free(gpointer p)
{
	Vcpu *v = p;

	for (int i = 0; i < 2; i++) {
		g_array_free(v->open[i], TRUE);
		g_array_free(v->resume[i], TRUE);
	}
	g_free(v);
}

/* ------------------------------------------------------------- helpers */
static Vcpu *vcpu_at(VtTimelineBuilder *b, const VtAnalyzeWhere *w)
{
	return g_hash_table_lookup(b->vcpus, GINT_TO_POINTER(w->tid));
}

/* The function at addr: its symbol, else its address. */
static const char *func_name(VtTimelineBuilder *b, const char *sym, guint64 addr)
{
	char buf[32];

	if (sym)
		return sym;
	g_snprintf(buf, sizeof buf, "%#" G_GINT64_MODIFIER "x", addr);
	return g_string_chunk_insert_const(b->names, buf);
}

static char *where(VtTimelineBuilder *b, guint64 addr, VtTimelineMode mode)
{
	const VtDecodeImage *img = b->img[mode];
	guint64 off = 0;
	const char *sym = img ? vt_decode_image_symbol(img, addr, &off) : NULL;

	if (!sym)
		return g_strdup_printf("%#" G_GINT64_MODIFIER "x", addr);
	return g_strdup_printf("%#" G_GINT64_MODIFIER "x (%s+%#" G_GINT64_MODIFIER "x)", addr, sym, off);
}

/* A lane's events never go back in time (per-CPU contexts share a lane). */
static guint64 lane_time(Vcpu *v, VtTimelineMode mode, guint64 ts)
{
	v->last[mode] = MAX(ts, v->last[mode]);
	return v->last[mode];
}

static void draw_begin(VtTimelineBuilder *b, Vcpu *v, VtTimelineMode mode, guint64 ts, const Open *o,
		       const char *extra)
{
	g_autofree char *details = g_strdup_printf("address=%#" G_GINT64_MODIFIER "x%s", o->func, extra);

	b->sink->ops->begin(b->sink, VT_TIMELINE_LANE(v->index, mode), lane_time(v, mode, ts),
			    VT_TIMELINE_FUNCTION, o->name, details);
	b->n_slices++;
}

static void draw_end(VtTimelineBuilder *b, Vcpu *v, VtTimelineMode mode, guint64 ts, const char *details)
{
	b->sink->ops->end(b->sink, VT_TIMELINE_LANE(v->index, mode), lane_time(v, mode, ts), details);
}

/* End, in the sink, the lane's drawn slices from the innermost down to
 * depth `from` (they stay open in analyze: their own end draws nothing). */
static void undraw(VtTimelineBuilder *b, Vcpu *v, VtTimelineMode mode, guint from, guint64 ts)
{
	GArray *o = v->open[mode];

	for (guint i = o->len; i > from; i--) {
		Open *s = &g_array_index(o, Open, i - 1);

		if (s->drawn)
			draw_end(b, v, mode, ts, NULL);
		s->drawn = FALSE;
	}
}

/* ------------------------------------------------------------- VM exits */
static char *exit_reason(VtTimelineBuilder *b, guint64 ip)
{
	VtInsn insn;
	const VtDisasmInsn *d;

	if (!b->guest_disasm || !vt_decode_insn(b->img[VT_TIMELINE_GUEST], ip, &insn) ||
	    insn.kind != VT_INSN_VMEXIT || !(d = vt_decode_disasm_at(b->guest_disasm, ip)))
		return g_strdup("asynchronous (interrupt, EPT violation, preemption timer, ...)");
	return g_strndup(vt_disasm_insn_text(d), strcspn(vt_disasm_insn_text(d), " \t"));
}

/* The exit's slice, named after the first host function called. */
static void exit_draw(VtTimelineBuilder *b, Vcpu *v, const char *handler)
{
	const VtAnalyzeExit *x = &v->exit;
	g_autofree char *name = g_strdup_printf("VM exit: %s", handler);
	g_autofree char *reason = exit_reason(b, x->exit_ip);
	g_autofree char *from = where(b, x->exit_ip, VT_TIMELINE_GUEST);
	g_autofree char *to = where(b, x->handler_ip, VT_TIMELINE_HOST);
	g_autofree char *details = g_strdup_printf("reason=%s\nguest_ip=%s\nexit_to=%s\nvcpu=%d\nvmcs=%#"
						   G_GINT64_MODIFIER "x\nhandler=%s", reason, from, to, v->vcpu,
						   x->w.vmcs, handler);

	b->sink->ops->begin(b->sink, VT_TIMELINE_LANE(v->index, VT_TIMELINE_HOST),
			    lane_time(v, VT_TIMELINE_HOST, x->exit_time), VT_TIMELINE_EXIT, name, details);
	v->exit_drawn = TRUE;
	b->n_slices++;
}

static void count_exit(VtTimelineBuilder *b, Vcpu *v, guint64 ts)
{
	guint64 width = b->timed ? COUNTER_TIMED : COUNTER_TIMELESS, k = ts / width;

	if (v->counted && k != v->bucket) {
		b->sink->ops->counter(b->sink, v->index, v->bucket * width, v->count);
		if (k > v->bucket + 1)
			b->sink->ops->counter(b->sink, v->index, (v->bucket + 1) * width, 0);
		v->count = 0;
	}
	v->bucket = k;
	v->counted = TRUE;
	v->count++;
}

/* An exit begins: the host functions drawn so far end (the exit's slice
 * holds what the host does for it); it is drawn at the first host call
 * (named after it) or at its end. */
static void on_exit_begin(const VtAnalyzeExit *x, gpointer user)
{
	VtTimelineBuilder *b = user;
	Vcpu *v = vcpu_at(b, &x->w);

	if (!v)
		return;
	undraw(b, v, VT_TIMELINE_HOST, 0, x->exit_time);
	v->exit = *x;
	v->in_exit = TRUE;
	v->exit_drawn = FALSE;
	b->n_exits++;
	count_exit(b, v, x->exit_time);
}

/* An exit ends (re-entry, break, next exit, end of the recording): the
 * host functions called in it end with it. */
static void on_exit_end(const VtAnalyzeExit *x, gpointer user)
{
	VtTimelineBuilder *b = user;
	Vcpu *v = vcpu_at(b, &x->w);

	if (!v || !v->in_exit)
		return;
	undraw(b, v, VT_TIMELINE_HOST, 0, x->end);
	if (!v->exit_drawn)
		exit_draw(b, v, "(no host call)");
	draw_end(b, v, VT_TIMELINE_HOST, x->end, x->reentered ? NULL : "ended=decode error or end of trace");
	v->in_exit = v->exit_drawn = FALSE;
}

/* -------------------------------------------------------------- slices */
static void on_slice_begin(const VtAnalyzeSlice *s, gpointer user)
{
	VtTimelineBuilder *b = user;
	Vcpu *v = vcpu_at(b, &s->w);
	VtTimelineMode mode = s->guest ? VT_TIMELINE_GUEST : VT_TIMELINE_HOST;
	Open o = { .name = func_name(b, s->sym, s->func), .func = s->func, .drawn = TRUE };
	GArray *r;

	if (!v)
		return;
	r = v->resume[mode];
	for (guint i = 0; i < r->len; i++) {   /* a full stack's inner slices, drawn again */
		Open *c = &g_array_index(r, Open, i);

		if (c->drawn)   /* (not if an exit ended it already) */
			draw_begin(b, v, mode, s->start, c, "\ncontinued=the outer frames were dropped (stack full)");
		g_array_append_val(v->open[mode], *c);
	}
	g_array_set_size(r, 0);
	if (mode == VT_TIMELINE_HOST && v->in_exit && !v->exit_drawn)
		exit_draw(b, v, o.name);
	draw_begin(b, v, mode, s->start, &o, "");
	g_array_append_val(v->open[mode], o);
}

static void on_slice(const VtAnalyzeSlice *s, gpointer user)
{
	VtTimelineBuilder *b = user;
	Vcpu *v = vcpu_at(b, &s->w);
	VtTimelineMode mode = s->guest ? VT_TIMELINE_GUEST : VT_TIMELINE_HOST;
	GArray *o;

	if (!v)
		return;
	o = v->open[mode];
	if (s->depth >= o->len)              /* begun before its vCPU was known: never */
		return;
	if (s->depth + 1 < o->len) {           /* a full stack drops its outer frames */
		g_array_append_vals(v->resume[mode], &g_array_index(o, Open, s->depth + 1),
				    o->len - s->depth - 1);
		undraw(b, v, mode, s->depth + 1, s->end);
		g_array_set_size(o, s->depth + 1);
	}
	if (g_array_index(o, Open, s->depth).drawn)
		draw_end(b, v, mode, s->end, NULL);
	g_array_set_size(o, s->depth);
}

/* ------------------------------------------------------------- builder */
VtTimelineBuilder *vt_timeline_builder_new(VtTimelineSink *sink, const VtDecodeImage *host,
					   const VtDecodeImage *guest, gboolean timed)
{
	VtTimelineBuilder *b = g_new0(VtTimelineBuilder, 1);
	VtAnalyzeVisitor vis = { .exit = on_exit_end, .slice = on_slice, .slice_begin = on_slice_begin,
				 .exit_begin = on_exit_begin, .user = b };

	b->sink = sink;
	b->img[VT_TIMELINE_GUEST] = guest;
	b->img[VT_TIMELINE_HOST] = host;
	if (guest)
		b->guest_disasm = vt_decode_disasm_new(guest);
	b->timed = timed;
	b->analyze = vt_analyze_new(&(VtAnalyzeOptions){ .host = host, .guest = guest, .timed = timed,
							 .vcpu = -1 }, &vis);
	b->vcpus = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, vcpu_free);
	b->names = g_string_chunk_new(4096);
	return b;
}

void vt_timeline_builder_free(VtTimelineBuilder *b)
{
	if (!b)
		return;
	vt_analyze_free(b->analyze);
	vt_decode_disasm_free(b->guest_disasm);
	g_hash_table_destroy(b->vcpus);
	g_string_chunk_free(b->names);
	g_free(b);
}

guint vt_timeline_builder_n_vcpus(const VtTimelineBuilder *b) { return b->n_vcpus; }
guint64 vt_timeline_builder_n_slices(const VtTimelineBuilder *b) { return b->n_slices; }
guint64 vt_timeline_builder_n_exits(const VtTimelineBuilder *b) { return b->n_exits; }

/* The lanes of a vCPU thread, at its first branch. */
static void vcpu_add(VtTimelineBuilder *b, const VtDecodeEvent *e)
{
	g_autofree char *name = NULL;
	Vcpu *v;

	if (e->vcpu < 0 || g_hash_table_contains(b->vcpus, GINT_TO_POINTER(e->tid)))
		return;
	v = g_new0(Vcpu, 1);
	v->index = b->n_vcpus++;
	v->vcpu = e->vcpu;
	for (int i = 0; i < 2; i++) {
		v->open[i] = g_array_new(FALSE, FALSE, sizeof(Open));
		v->resume[i] = g_array_new(FALSE, FALSE, sizeof(Open));
	}
	g_hash_table_insert(b->vcpus, GINT_TO_POINTER(e->tid), v);
	name = g_strdup_printf("vCPU %d", e->vcpu);
	b->sink->ops->vcpu(b->sink, v->index, name, e->pid, e->tid, e->comm);
}

void vt_timeline_builder_add(VtTimelineBuilder *b, const VtDecodeEvent *e)
{
	vcpu_add(b, e);
	vt_analyze_event(b->analyze, e);
}

void vt_timeline_builder_finish(VtTimelineBuilder *b)
{
	GHashTableIter it;
	gpointer p;

	vt_analyze_finish(b->analyze);
	g_hash_table_iter_init(&it, b->vcpus);
	while (g_hash_table_iter_next(&it, NULL, &p)) {
		Vcpu *v = p;
		guint64 width = b->timed ? COUNTER_TIMED : COUNTER_TIMELESS;

		if (v->counted) {
			b->sink->ops->counter(b->sink, v->index, v->bucket * width, v->count);
			b->sink->ops->counter(b->sink, v->index, (v->bucket + 1) * width, 0);
			v->counted = FALSE;
		}
	}
}
