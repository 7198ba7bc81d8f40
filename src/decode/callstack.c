/* callstack.c - perf's view of a branch: its sample flags, their names as
 * perf script prints them, and the per-thread call stack whose depth perf's
 * callindent field shows (--call-trace, --call-ret-trace).  Facts from perf
 * 6.1 (thread-stack.c, builtin-script.c), checked against its output on
 * traces of real kernel code (tests/t0093). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "src/decode/decode.h"

/* ---------------------------------------------------------------- flags */
static guint32 insn_flags(guint8 kind)
{
	switch (kind) {
	case VT_INSN_COND:
		return VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CONDITIONAL;
	case VT_INSN_CALL: case VT_INSN_CALL_IND:
		return VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CALL;
	case VT_INSN_RETURN:
		return VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_RETURN;
	case VT_INSN_SYSCALL:
		return VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CALL | VT_PERF_FLAG_SYSCALLRET;
	case VT_INSN_SYSRET:
		return VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_RETURN | VT_PERF_FLAG_SYSCALLRET;
	case VT_INSN_IRET:
		return VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_RETURN | VT_PERF_FLAG_INTERRUPT;
	case VT_INSN_INT:
		return VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CALL | VT_PERF_FLAG_INTERRUPT;
	case VT_INSN_VMENTRY:
		return VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CALL | VT_PERF_FLAG_VMENTRY;
	default:
		return VT_PERF_FLAG_BRANCH;
	}
}

guint32 vt_decode_perf_flags(const VtBranch *b)
{
	switch (b->kind) {
	case VT_BRANCH_ERROR: case VT_BRANCH_PSB: case VT_BRANCH_CBR: case VT_BRANCH_FLOW_END:
		return 0;
	case VT_BRANCH_TRACE_BEGIN:
		return VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_TRACE_BEGIN;
	case VT_BRANCH_TRACE_END:
		return (b->async ? VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_ASYNC : insn_flags(b->insn_kind)) |
		       VT_PERF_FLAG_TRACE_END;
	case VT_BRANCH_ASYNC:
		return VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CALL | VT_PERF_FLAG_ASYNC | VT_PERF_FLAG_INTERRUPT;
	case VT_BRANCH_VMEXIT:
		return VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CALL | VT_PERF_FLAG_ASYNC | VT_PERF_FLAG_VMEXIT;
	case VT_BRANCH_VMENTRY:
		return insn_flags(VT_INSN_VMENTRY);
	default:
		return insn_flags(b->insn_kind);
	}
}

static const char *flags_to_name(guint32 flags)
{
	static const struct { guint32 flags; const char *name; } names[] = {
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CALL, "call" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_RETURN, "return" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CONDITIONAL, "jcc" },
		{ VT_PERF_FLAG_BRANCH, "jmp" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CALL | VT_PERF_FLAG_INTERRUPT, "int" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_RETURN | VT_PERF_FLAG_INTERRUPT, "iret" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CALL | VT_PERF_FLAG_SYSCALLRET, "syscall" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_RETURN | VT_PERF_FLAG_SYSCALLRET, "sysret" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_ASYNC, "async" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CALL | VT_PERF_FLAG_ASYNC | VT_PERF_FLAG_INTERRUPT, "hw int" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_TX_ABORT, "tx abrt" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_TRACE_BEGIN, "tr strt" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_TRACE_END, "tr end" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CALL | VT_PERF_FLAG_VMENTRY, "vmentry" },
		{ VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CALL | VT_PERF_FLAG_VMEXIT, "vmexit" },
	};

	for (gsize i = 0; i < G_N_ELEMENTS(names); i++)
		if (names[i].flags == flags)
			return names[i].name;
	return NULL;
}

void vt_decode_perf_flags_name(guint32 flags, char buf[32])
{
	static const char chars[] = "bcrosyiABExgh";
	const char *name;
	gsize pos = 0;

	flags &= ~(guint32)VT_PERF_FLAG_IN_TX;
	if ((name = flags_to_name(flags))) {
		g_snprintf(buf, 32, "%-15s    ", name);
		return;
	}
	if ((flags & VT_PERF_FLAG_TRACE_BEGIN) && (name = flags_to_name(flags & ~(guint32)VT_PERF_FLAG_TRACE_BEGIN))) {
		g_snprintf(buf, 32, "tr strt %-7s    ", name);
		return;
	}
	if ((flags & VT_PERF_FLAG_TRACE_END) && (name = flags_to_name(flags & ~(guint32)VT_PERF_FLAG_TRACE_END))) {
		g_snprintf(buf, 32, "tr end  %-7s    ", name);
		return;
	}
	for (gsize i = 0; i < sizeof(chars) - 1; i++)
		if (flags & (1u << i))
			buf[pos++] = chars[i];
	buf[pos] = 0;
}

/* --------------------------------------------------------------- stacks */
typedef struct {
	guint64 ret;
	gboolean trace_end;        /* a call that ended the trace */
} Frame;

#define RET_SLOTS_LOG2 10

/* A thread's stack, and how many of its frames return to addresses of each
 * hash slot: a return to an address no frame has (perf pops nothing) needs
 * no walk over the frames - on synth's walks ~1 return in 12, each a walk
 * of hundreds of frames.  Unless another frame shares its slot: with 2^10
 * slots and stacks hundreds deep, 48,000 of 592,000 returns walk a whole
 * stack (1 MiB tnt-dense --call-trace: pop_to 69 M instructions).  2^12
 * slots (16 KiB a thread) halved that, but not the time: the samples in
 * the stacks' functions stayed (2.5-3.0% -> 3.0-3.4%, 3 runs each). */
typedef struct {
	GArray *frames;            /* the first depth; past them, room (never shrunk:
				    * g_array_set_size took 60 instructions a return) */
	guint depth;
	guint32 trace;             /* the trace (queue) that last changed it */
	guint32 *rets;             /* frames per slot of ret_slot() */
} Stack;

static inline guint ret_slot(guint64 ret)
{
	return (guint)((ret * 0x9e3779b97f4a7c15ULL) >> (64 - RET_SLOTS_LOG2));
}

static void stack_push(Stack *s, Frame f)
{
	if (s->depth < s->frames->len)
		g_array_index(s->frames, Frame, s->depth) = f;
	else
		g_array_append_val(s->frames, f);
	s->depth++;
	s->rets[ret_slot(f.ret)]++;
}

/* Down to its first n frames. */
static void stack_cut(Stack *s, guint n)
{
	for (guint i = n; i < s->depth; i++)
		s->rets[ret_slot(g_array_index(s->frames, Frame, i).ret)]--;
	s->depth = MIN(s->depth, n);
}

static void stack_free(gpointer p)
{
	Stack *s = p;

	g_array_unref(s->frames);
	g_free(s->rets);
	g_free(s);
}

#define NEAR_LOG2 6

/* A key's stack as last looked up, in a direct-mapped table of 2^NEAR_LOG2
 * by key: queues' branches merged by time change thread at most switches
 * of queue (1 MiB cyc --call-trace, 4 queues: 105,648 lookups in the hash
 * table of 277,000 branches, 9 M of the main thread's 205 M instructions). */
typedef struct {
	gpointer key;
	Stack *stack;              /* NULL: none yet */
} Near;

struct VtDecodeStacks {
	GHashTable *by_thread;     /* key (tid, or -1-cpu for thread 0) -> Stack */
	Near near[1u << NEAR_LOG2];   /* stacks are never removed: no invalidation */
};

VtDecodeStacks *vt_decode_stacks_new(void)
{
	VtDecodeStacks *st = g_new0(VtDecodeStacks, 1);

	st->by_thread = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, stack_free);
	return st;
}

void vt_decode_stacks_free(VtDecodeStacks *st)
{
	if (!st)
		return;
	g_hash_table_destroy(st->by_thread);
	g_free(st);
}

static Stack *stack_of(VtDecodeStacks *st, gint32 tid, gint32 cpu)
{
	gpointer key = GINT_TO_POINTER(tid ? tid : -1 - MAX(cpu, 0));
	Near *n = &st->near[((guint)GPOINTER_TO_INT(key) * 0x9e3779b1u) >> (32 - NEAR_LOG2)];
	Stack *s;

	if (n->stack && n->key == key)
		return n->stack;
	s = g_hash_table_lookup(st->by_thread, key);
	if (!s) {
		s = g_new0(Stack, 1);
		s->frames = g_array_new(FALSE, FALSE, sizeof(Frame));
		s->rets = g_new0(guint32, 1u << RET_SLOTS_LOG2);
		g_hash_table_insert(st->by_thread, key, s);
	}
	n->key = key;
	n->stack = s;
	return s;
}

/* Down to the frame that returns to `ret`, if there is one. */
static void pop_to(Stack *s, guint64 ret)
{
	if (!s->rets[ret_slot(ret)])
		return;
	for (guint i = s->depth; i;)
		if (g_array_index(s->frames, Frame, --i).ret == ret) {
			stack_cut(s, i);
			return;
		}
}

static void pop_trace_end(Stack *s)
{
	guint n = s->depth;

	while (n && g_array_index(s->frames, Frame, n - 1).trace_end)
		n--;
	stack_cut(s, n);
}

guint vt_decode_stacks_event(VtDecodeStacks *st, gint32 tid, gint32 cpu, guint32 trace, const VtBranch *b,
			     guint32 flags)
{
	Stack *stack = stack_of(st, tid, cpu);

	if (trace != stack->trace)
		stack_cut(stack, 0);
	stack->trace = trace;
	if (vt_branch_is_decode_error(b)) {
		stack_cut(stack, 0);
	} else if (flags & VT_PERF_FLAG_CALL) {
		Frame f = { b->from + b->insn_len, (flags & VT_PERF_FLAG_TRACE_END) != 0 };

		if (b->to && f.ret != b->to)
			stack_push(stack, f);
	} else if (flags & VT_PERF_FLAG_TRACE_BEGIN) {
		pop_to(stack, b->to);
		pop_trace_end(stack);
	} else if ((flags & VT_PERF_FLAG_RETURN) && b->from) {
		pop_to(stack, b->to);
	}
	return stack->depth + ((flags & VT_PERF_FLAG_RETURN) ? 1 : 0);
}

guint vt_decode_stacks_depth(VtDecodeStacks *st, gint32 tid, gint32 cpu, const VtBranch *b)
{
	return stack_of(st, tid, cpu)->depth + ((vt_decode_perf_flags(b) & VT_PERF_FLAG_RETURN) ? 1 : 0);
}
