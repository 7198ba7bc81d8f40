/* build.c - decoded branches -> timeline events (see timeline.h).  A
 * small model of what src/analyze computes; the command feeds it the
 * decoder's stream and it drives a sink. */
#include "config.h"

#include <string.h>

#include "src/timeline/timeline.h"

#define MAX_DEPTH 4096          /* deeper calls are not shown (their returns pop nothing) */
#define COUNTER_TIMED 1000000   /* a counter bucket: 1 ms ... */
#define COUNTER_TIMELESS 1000   /* ... or 1000 branches */

typedef struct {
	guint index;
	gint32 tid, vcpu;            /* the thread and its "CPU n/KVM" number */
	guint64 n;                   /* branches seen (timeless time) */
	guint64 last_ts;
	GPtrArray *stack[2];         /* open slice names per lane (const char *) */
	gboolean in_exit, exit_begun;
	guint64 exit_ts;
	char *exit_details;
	guint64 bucket;              /* counter: current bucket and its count */
	gint64 count;
	gboolean counted;
} Vcpu;

struct VtTimelineBuilder {
	VtTimelineSink *sink;
	const VtDecodeImage *img[2];          /* guest, host */
	VtDecodeDisasm *guest_disasm;
	gboolean timed;
	GHashTable *vcpus;                    /* tid -> Vcpu */
	GStringChunk *names;                  /* names not from an image */
	guint n_vcpus;
	guint64 n_slices, n_exits;
};

static void vcpu_free(gpointer p)
{
	Vcpu *v = p;

	g_ptr_array_free(v->stack[0], TRUE);
	g_ptr_array_free(v->stack[1], TRUE);
	g_free(v->exit_details);
	g_free(v);
}

VtTimelineBuilder *vt_timeline_builder_new(VtTimelineSink *sink, const VtDecodeImage *host,
					   const VtDecodeImage *guest, gboolean timed)
{
	VtTimelineBuilder *b = g_new0(VtTimelineBuilder, 1);

	b->sink = sink;
	b->img[VT_TIMELINE_GUEST] = guest;
	b->img[VT_TIMELINE_HOST] = host;
	if (guest)
		b->guest_disasm = vt_decode_disasm_new(guest);
	b->timed = timed;
	b->vcpus = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, vcpu_free);
	b->names = g_string_chunk_new(4096);
	return b;
}

void vt_timeline_builder_free(VtTimelineBuilder *b)
{
	if (!b)
		return;
	vt_decode_disasm_free(b->guest_disasm);
	g_hash_table_destroy(b->vcpus);
	g_string_chunk_free(b->names);
	g_free(b);
}

guint vt_timeline_builder_n_vcpus(const VtTimelineBuilder *b) { return b->n_vcpus; }
guint64 vt_timeline_builder_n_slices(const VtTimelineBuilder *b) { return b->n_slices; }
guint64 vt_timeline_builder_n_exits(const VtTimelineBuilder *b) { return b->n_exits; }

/* ------------------------------------------------------------- helpers */
/* The function at addr: its symbol, else its address. */
static const char *func_name(VtTimelineBuilder *b, guint64 addr, VtTimelineMode mode)
{
	const VtDecodeImage *img = b->img[mode];
	guint64 off;
	const char *sym = img ? vt_decode_image_symbol(img, addr, &off) : NULL;
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

static void push(VtTimelineBuilder *b, Vcpu *v, VtTimelineMode mode, guint64 ts, const char *name,
		 guint64 addr)
{
	g_autofree char *details = NULL;

	if (v->stack[mode]->len >= MAX_DEPTH)
		return;
	details = g_strdup_printf("address=%#" G_GINT64_MODIFIER "x", addr);
	g_ptr_array_add(v->stack[mode], (gpointer)name);
	b->sink->ops->begin(b->sink, VT_TIMELINE_LANE(v->index, mode), ts, VT_TIMELINE_FUNCTION, name, details);
	b->n_slices++;
}

static void pop(VtTimelineBuilder *b, Vcpu *v, VtTimelineMode mode, guint64 ts)
{
	if (!v->stack[mode]->len)
		return;
	g_ptr_array_set_size(v->stack[mode], v->stack[mode]->len - 1);
	b->sink->ops->end(b->sink, VT_TIMELINE_LANE(v->index, mode), ts, NULL);
}

/* End the lane's open slices. */
static void end_all(VtTimelineBuilder *b, Vcpu *v, VtTimelineMode mode, guint64 ts)
{
	for (guint i = v->stack[mode]->len; i > 0; i--)
		b->sink->ops->end(b->sink, VT_TIMELINE_LANE(v->index, mode), ts, NULL);
	g_ptr_array_set_size(v->stack[mode], 0);
}

/* ------------------------------------------------------------- VM exits */
static void exit_begin(VtTimelineBuilder *b, Vcpu *v, const char *handler)
{
	g_autofree char *name = g_strdup_printf("VM exit: %s", handler);
	g_autofree char *details = g_strdup_printf("%s\nhandler=%s", v->exit_details, handler);

	b->sink->ops->begin(b->sink, VT_TIMELINE_LANE(v->index, VT_TIMELINE_HOST), v->exit_ts, VT_TIMELINE_EXIT,
			    name, details);
	v->exit_begun = TRUE;
	b->n_slices++;
}

static char *exit_reason(VtTimelineBuilder *b, guint64 ip)
{
	VtInsn insn;
	const VtDisasmInsn *d;

	if (!b->guest_disasm || !vt_decode_insn(b->img[VT_TIMELINE_GUEST], ip, &insn) ||
	    insn.kind != VT_INSN_VMEXIT || !(d = vt_decode_disasm_at(b->guest_disasm, ip)))
		return g_strdup("asynchronous (interrupt, EPT violation, preemption timer, ...)");
	return g_strndup(d->text, strcspn(d->text, " \t"));
}

static void count_exit(Vcpu *v, guint64 ts, VtTimelineBuilder *b)
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

static void on_vmexit(VtTimelineBuilder *b, Vcpu *v, const VtBranch *br, guint64 ts)
{
	g_autofree char *reason = exit_reason(b, br->from);
	g_autofree char *from = where(b, br->from, VT_TIMELINE_GUEST);
	g_autofree char *to = where(b, br->to, VT_TIMELINE_HOST);

	end_all(b, v, VT_TIMELINE_HOST, ts);
	if (v->in_exit) {                  /* two exits without an entry between them */
		if (!v->exit_begun)
			exit_begin(b, v, "(no host call)");
		b->sink->ops->end(b->sink, VT_TIMELINE_LANE(v->index, VT_TIMELINE_HOST), ts, NULL);
	}
	g_free(v->exit_details);
	v->exit_details = g_strdup_printf("reason=%s\nguest_ip=%s\nexit_to=%s\nvcpu=%d\nvmcs=%#" G_GINT64_MODIFIER "x",
					  reason, from, to, v->vcpu, br->vmcs);
	v->in_exit = TRUE;
	v->exit_begun = FALSE;
	v->exit_ts = ts;
	b->n_exits++;
	count_exit(v, ts, b);
}

static void on_vmentry(VtTimelineBuilder *b, Vcpu *v, guint64 ts)
{
	end_all(b, v, VT_TIMELINE_HOST, ts);
	if (v->in_exit) {
		if (!v->exit_begun)
			exit_begin(b, v, "(no host call)");
		b->sink->ops->end(b->sink, VT_TIMELINE_LANE(v->index, VT_TIMELINE_HOST), ts, NULL);
	}
	v->in_exit = v->exit_begun = FALSE;
}

/* A decode error (or the end): what was open ends. */
static void on_break(VtTimelineBuilder *b, Vcpu *v, guint64 ts)
{
	end_all(b, v, VT_TIMELINE_GUEST, ts);
	end_all(b, v, VT_TIMELINE_HOST, ts);
	if (v->in_exit) {
		if (!v->exit_begun)
			exit_begin(b, v, "(no host call)");
		b->sink->ops->end(b->sink, VT_TIMELINE_LANE(v->index, VT_TIMELINE_HOST), ts, "ended=decode error or end of trace");
	}
	v->in_exit = v->exit_begun = FALSE;
}

/* A trace end (to user space, or tracing stopped): the kernel functions of
 * the mode end; a VM exit goes on (QEMU's user-space handling is part of
 * it) until the entry. */
static void on_trace_end(VtTimelineBuilder *b, Vcpu *v, const VtBranch *br, guint64 ts)
{
	end_all(b, v, br->from_guest ? VT_TIMELINE_GUEST : VT_TIMELINE_HOST, ts);
}

/* ------------------------------------------------------------- branches */
static Vcpu *vcpu_of(VtTimelineBuilder *b, const VtDecodeEvent *e)
{
	Vcpu *v = g_hash_table_lookup(b->vcpus, GINT_TO_POINTER(e->tid));
	g_autofree char *name = NULL;

	if (v || e->vcpu < 0)
		return v;
	v = g_new0(Vcpu, 1);
	v->index = b->n_vcpus++;
	v->tid = e->tid;
	v->vcpu = e->vcpu;
	v->stack[0] = g_ptr_array_new();
	v->stack[1] = g_ptr_array_new();
	g_hash_table_insert(b->vcpus, GINT_TO_POINTER(e->tid), v);
	name = g_strdup_printf("vCPU %d", e->vcpu);
	b->sink->ops->vcpu(b->sink, v->index, name, e->pid, e->tid, e->comm);
	return v;
}

static void on_call(VtTimelineBuilder *b, Vcpu *v, const VtBranch *br, guint64 ts)
{
	VtTimelineMode mode = br->to_guest ? VT_TIMELINE_GUEST : VT_TIMELINE_HOST;
	const char *name = func_name(b, br->to, mode);

	if (mode == VT_TIMELINE_HOST && v->in_exit && !v->exit_begun)
		exit_begin(b, v, name);   /* named after the first host function called */
	push(b, v, mode, ts, name, br->to);
}

void vt_timeline_builder_add(VtTimelineBuilder *b, const VtDecodeEvent *e)
{
	const VtBranch *br = &e->b;
	Vcpu *v = vcpu_of(b, e);
	guint64 ts;

	if (!v)
		return;
	v->n++;
	ts = b->timed ? e->time : v->n;
	ts = MAX(ts, v->last_ts);          /* a lane's events never go back in time */
	v->last_ts = ts;
	switch (br->kind) {
	case VT_BRANCH_CALL: case VT_BRANCH_SYSCALL: case VT_BRANCH_INT: case VT_BRANCH_ASYNC:
		if (br->from_guest == br->to_guest)
			on_call(b, v, br, ts);
		break;
	case VT_BRANCH_RETURN: case VT_BRANCH_SYSRET: case VT_BRANCH_IRET:
		pop(b, v, br->from_guest ? VT_TIMELINE_GUEST : VT_TIMELINE_HOST, ts);
		break;
	case VT_BRANCH_VMEXIT:
		on_vmexit(b, v, br, ts);
		break;
	case VT_BRANCH_VMENTRY:
		on_vmentry(b, v, ts);
		break;
	case VT_BRANCH_TRACE_END:
		on_trace_end(b, v, br, ts);
		break;
	case VT_BRANCH_ERROR:
		on_break(b, v, ts);
		break;
	default:
		break;
	}
}

void vt_timeline_builder_finish(VtTimelineBuilder *b)
{
	GHashTableIter it;
	gpointer p;

	g_hash_table_iter_init(&it, b->vcpus);
	while (g_hash_table_iter_next(&it, NULL, &p)) {
		Vcpu *v = p;
		guint64 width = b->timed ? COUNTER_TIMED : COUNTER_TIMELESS;

		on_break(b, v, v->last_ts);
		if (v->counted) {
			b->sink->ops->counter(b->sink, v->index, v->bucket * width, v->count);
			b->sink->ops->counter(b->sink, v->index, (v->bucket + 1) * width, 0);
			v->counted = FALSE;
		}
	}
}
