/* code.c - the real-code walker of `vmtrace synth --host-code/--guest-code`
 * (see code.h). */
#include "config.h"

#include <string.h>

#include "src/synth/code.h"

#define DIST_INF G_MAXINT
#define DIST_NODES 4000          /* BFS budget per distance query */
#define COMP_DEPTH 64            /* Intel PT's return-compression stack */
#define NORETURN_LEVELS 2        /* --call-depth: calls into code that never returns, looked through */
#define NOCALL (NORETURN_LEVELS + 1)   /* dist[] of paths to a return without a call */
#define WALK_LIMIT 100000        /* instructions without a decision: stuck (e.g. jmp .) */
/* Addresses are hash keys themselves (64-bit pointers). */
G_STATIC_ASSERT(sizeof(gpointer) == sizeof(guint64));
#define KEY(a) ((gpointer)(guintptr)(a))

/* A decoded instruction, with per level of the distance search the search
 * that last reached it (its visited mark: no set per search) and its
 * successors() (SUCC_UNKNOWN: not asked yet); the successors' instructions
 * are linked once. */
typedef struct CodeInsn CodeInsn;
struct CodeInsn {
	VtInsn in;
	guint64 ip;
	guint32 search[NOCALL + 1];
	gint8 nsucc[NOCALL + 1];
	CodeInsn *succ[2];
};
#define SUCC_UNKNOWN G_MININT8

struct VtSynthCode {
	VtDecodeImage *img;
	GHashTable *insns;       /* ip -> CodeInsn* */
	GHashTable *dist[NOCALL + 1];   /* per level: ip -> distance + 1 (instructions to a return) */
	guint levels;            /* dist_to_return's level (0: a direct call always returns) */
	guint depth_limit;       /* from this call depth on, paths without calls first (0: none) */
	const guint64 *funcs;
	guint nfuncs;
	guint64 excluded[4];     /* never picked (vt_synth_code_exclude) */
	guint nexcluded;
	/* per level: the current distance search and its frontiers (CodeInsn*,
	 * reused; a search at level L asks only level L - 1 meanwhile) */
	guint32 search[NOCALL + 1];
	GArray *cur[NOCALL + 1], *next[NOCALL + 1];
};

VtSynthCode *vt_synth_code_new(VtDecodeImage *img)
{
	VtSynthCode *c = g_new0(VtSynthCode, 1);

	c->img = img;
	c->insns = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
	for (guint i = 0; i <= NOCALL; i++) {
		c->dist[i] = g_hash_table_new(g_direct_hash, g_direct_equal);
		c->cur[i] = g_array_new(FALSE, FALSE, sizeof(CodeInsn *));
		c->next[i] = g_array_new(FALSE, FALSE, sizeof(CodeInsn *));
	}
	c->funcs = vt_decode_image_functions(img, &c->nfuncs);
	return c;
}

void vt_synth_code_free(VtSynthCode *c)
{
	if (!c)
		return;
	g_hash_table_destroy(c->insns);
	for (guint i = 0; i <= NOCALL; i++) {
		g_hash_table_destroy(c->dist[i]);
		g_array_free(c->cur[i], TRUE);
		g_array_free(c->next[i], TRUE);
	}
	g_free(c);
}

/* The decoded instruction at ip (cached). */
static CodeInsn *code_insn_at(VtSynthCode *c, guint64 ip)
{
	CodeInsn *e = g_hash_table_lookup(c->insns, KEY(ip));

	if (!e) {
		e = g_new0(CodeInsn, 1);
		vt_decode_insn(c->img, ip, &e->in);
		e->ip = ip;
		memset(e->nsucc, SUCC_UNKNOWN, sizeof(e->nsucc));
		g_hash_table_insert(c->insns, KEY(ip), e);
	}
	return e;
}

static const VtInsn *insn_at(VtSynthCode *c, guint64 ip)
{
	return &code_insn_at(c, ip)->in;
}

guint64 vt_synth_code_after_call(VtSynthCode *c, guint64 ip)
{
	const VtInsn *in = insn_at(c, ip);

	return in->kind == VT_INSN_CALL || in->kind == VT_INSN_CALL_IND ? ip + in->len : 0;
}

void vt_synth_ctx_init(VtSynthCtx *ctx, guint64 ip)
{
	ctx->ip = ip;
	ctx->stack = g_array_new(FALSE, FALSE, sizeof(guint64));
	ctx->comp = g_array_new(FALSE, FALSE, sizeof(guint64));
	ctx->top_replaced = FALSE;
	ctx->insns = 0;
	ctx->hurry = FALSE;
	ctx->next_indirect = 0;
}

void vt_synth_ctx_clear(VtSynthCtx *ctx)
{
	if (ctx->stack)
		g_array_free(ctx->stack, TRUE);
	if (ctx->comp)
		g_array_free(ctx->comp, TRUE);
	memset(ctx, 0, sizeof(*ctx));
}

void vt_synth_ctx_flush_comp(VtSynthCtx *ctx)
{
	g_array_set_size(ctx->comp, 0);
}

static int dist_level(VtSynthCode *c, guint64 ip, guint level);

static int dist_to_return(VtSynthCode *c, guint64 ip)
{
	return dist_level(c, ip, c->levels);
}

void vt_synth_code_bound_depth(VtSynthCode *c, guint depth)
{
	c->levels = NORETURN_LEVELS;
	c->depth_limit = depth;
}

gboolean vt_synth_code_exclude(VtSynthCode *c, guint64 f)
{
	if (c->nexcluded == G_N_ELEMENTS(c->excluded))
		return FALSE;
	c->excluded[c->nexcluded++] = f;
	return TRUE;
}

/* A random function start (0: none but excluded ones). */
static guint64 pick_one(VtSynthCode *c, GRand *rng)
{
	for (guint tries = 0; tries < 64; tries++) {
		guint64 f = c->funcs[g_rand_int_range(rng, 0, (gint32)c->nfuncs)];
		guint k = 0;

		while (k < c->nexcluded && c->excluded[k] != f)
			k++;
		if (k == c->nexcluded)
			return f;
	}
	return 0;
}

/* A function start from which a return is reachable (not a halt loop,
 * not a BUG()), if one turns up within a few tries. */
guint64 vt_synth_code_pick(VtSynthCode *c, GRand *rng)
{
	guint64 f = 0;

	for (int i = 0; i < 20 && c->nfuncs; i++) {
		f = pick_one(c, rng);
		if (f && dist_to_return(c, f) != DIST_INF)
			break;
	}
	return f;
}

guint64 vt_synth_code_pick_short(VtSynthCode *c, GRand *rng, guint insns)
{
	guint64 best = 0;
	int best_d = DIST_INF;

	for (int i = 0; i < 64 && c->nfuncs; i++) {
		guint64 f = pick_one(c, rng);
		int d = f ? dist_level(c, f, NOCALL) : DIST_INF;

		if (d < best_d) {
			best = f;
			best_d = d;
		}
		if (d <= (int)insns)
			break;
	}
	return best ? best : vt_synth_code_pick(c, rng);
}

/* Successors of an instruction for the distance search: -1 dead end, 0 a
 * return (the goal), else the number of successors in succ[].  At level > 0
 * a direct call of code with no return in reach (level - 1: panic(),
 * __stack_chk_fail()) is a dead end too. */
static int successors(VtSynthCode *c, const VtInsn *in, guint64 ip, guint64 succ[2], guint level)
{
	if (level == NOCALL && (in->kind == VT_INSN_CALL || in->kind == VT_INSN_CALL_IND))
		return -1;
	switch (in->kind) {
	case VT_INSN_OTHER:
	case VT_INSN_VMEXIT:
	case VT_INSN_CALL_IND:           /* the callee returns here */
		succ[0] = ip + in->len;
		return 1;
	case VT_INSN_JUMP:
		succ[0] = in->target;
		return 1;
	case VT_INSN_CALL:
		/* past the call (the callee returns); into it only for the
		 * retpoline's short `call 1f` over its speculation trap, whose
		 * RET leaves from there */
		succ[0] = ip + in->len;
		if (level && level < NOCALL && dist_level(c, in->target, level - 1) == DIST_INF)
			return -1;
		if (in->target > ip && in->target - ip <= 32) {
			succ[1] = in->target;
			return 2;
		}
		return 1;
	case VT_INSN_COND:
		succ[0] = in->target;
		succ[1] = ip + in->len;
		return 2;
	case VT_INSN_RETURN:
	case VT_INSN_JUMP_IND:
	case VT_INSN_VMENTRY:
		return 0;
	default:
		return -1;
	}
}

static int successors(VtSynthCode *c, const VtInsn *in, guint64 ip, guint64 succ[2], guint level);

/* Mark e reached by the current search at level; FALSE when it was already. */
static gboolean code_reach(VtSynthCode *c, CodeInsn *e, guint level)
{
	if (e->search[level] == c->search[level])
		return FALSE;
	e->search[level] = c->search[level];
	return TRUE;
}

/* successors() of e at level, its successors' instructions in e->succ. */
static int code_successors(VtSynthCode *c, CodeInsn *e, guint level)
{
	if (e->nsucc[level] == SUCC_UNKNOWN) {
		guint64 succ[2];
		int n = successors(c, &e->in, e->ip, succ, level);

		for (int k = 0; k < n; k++)
			e->succ[k] = code_insn_at(c, succ[k]);
		e->nsucc[level] = (gint8)n;
	}
	return e->nsucc[level];
}

/* Instructions from ip to the nearest return or indirect jump (a bounded
 * breadth-first search; DIST_INF when none is within reach), calls looked
 * through `level` deep (successors()). */
static int dist_level(VtSynthCode *c, guint64 ip, guint level)
{
	gpointer hit = g_hash_table_lookup(c->dist[level], KEY(ip));
	GArray *cur = c->cur[level], *next = c->next[level];
	int d = DIST_INF, depth = 0;
	guint nodes = 0;

	if (hit)
		return GPOINTER_TO_INT(hit) == DIST_INF ? DIST_INF : GPOINTER_TO_INT(hit) - 1;
	c->search[level]++;
	g_array_set_size(cur, 0);
	g_array_set_size(next, 0);
	{
		CodeInsn *e = code_insn_at(c, ip);

		code_reach(c, e, level);
		g_array_append_val(cur, e);
	}
	while (cur->len && d == DIST_INF && nodes < DIST_NODES) {
		for (guint i = 0; i < cur->len && d == DIST_INF; i++) {
			CodeInsn *e = g_array_index(cur, CodeInsn *, i);
			int n = code_successors(c, e, level);

			nodes++;
			if (n == 0)
				d = depth;
			for (int k = 0; k < n; k++)
				if (code_reach(c, e->succ[k], level))
					g_array_append_val(next, e->succ[k]);
		}
		{
			GArray *t = cur;

			cur = next;
			next = t;
			g_array_set_size(next, 0);
		}
		depth++;
	}
	g_hash_table_insert(c->dist[level], KEY(ip), GINT_TO_POINTER(d == DIST_INF ? DIST_INF : d + 1));
	return d;
}

/* At the depth limit: towards a return that needs no call, if one side
 * has one (1: taken, 0: not taken, -1: neither or both equally). */
static int choose_nocall(VtSynthCode *c, const VtInsn *in, guint64 ip)
{
	int dt = dist_level(c, in->target, NOCALL), df = dist_level(c, ip + in->len, NOCALL);

	return dt == df ? -1 : dt < df;
}

static gboolean choose_taken(VtSynthCode *c, const VtSynthCtx *ctx, const VtInsn *in, guint64 ip, GRand *rng,
			     double bias)
{
	int nc = ctx->hurry || (c->depth_limit && ctx->stack->len >= c->depth_limit) ? choose_nocall(c, in, ip) : -1;
	int dt = dist_to_return(c, in->target), df = dist_to_return(c, ip + in->len);

	if (nc >= 0)
		return nc;
	if (dt == DIST_INF && df != DIST_INF)
		return FALSE;
	if (df == DIST_INF && dt != DIST_INF)
		return TRUE;
	if (dt != df && g_rand_double(rng) < bias)
		return dt < df;
	return g_rand_boolean(rng);
}

static void push_return(VtSynthCtx *ctx, guint64 ret, guint64 target)
{
	g_array_append_val(ctx->stack, ret);
	ctx->top_replaced = FALSE;
	if (target == ret)              /* zero-length calls are not pushed (SDM) */
		return;
	if (ctx->comp->len == COMP_DEPTH)
		g_array_remove_index(ctx->comp, 0);
	g_array_append_val(ctx->comp, ret);
}

/* A near RET: to the saved return address (compressed when the compression
 * stack holds it on top), or - the address replaced, or nothing saved - to
 * a function start with a TIP; an uncompressed RET forgets the compression
 * stack, so perf (pops on every RET) and libipt (pops on compressed ones)
 * stay in step. */
static void do_return(VtSynthCode *c, VtSynthCtx *ctx, GRand *rng, VtWalkStep *step)
{
	guint64 t = 0;
	gboolean have = ctx->stack->len && !ctx->top_replaced;

	if (ctx->stack->len) {
		t = g_array_index(ctx->stack, guint64, ctx->stack->len - 1);
		g_array_set_size(ctx->stack, ctx->stack->len - 1);
	}
	if (!have)
		t = vt_synth_code_pick(c, rng);
	ctx->top_replaced = FALSE;
	if (have && ctx->comp->len && g_array_index(ctx->comp, guint64, ctx->comp->len - 1) == t) {
		g_array_set_size(ctx->comp, ctx->comp->len - 1);
		step->what = VT_WALK_TNT;
		step->taken = TRUE;
	} else {
		g_array_set_size(ctx->comp, 0);
		step->what = VT_WALK_TIP;
		step->tip = t;
	}
	ctx->ip = t;
}

void vt_synth_walk(VtSynthCode *c, VtSynthCtx *ctx, GRand *rng, double bias, gboolean guest, VtWalkStep *step,
		   VtSynthBranchFn fn, gpointer user)
{
	memset(step, 0, sizeof(*step));
	for (guint n = 0; n < WALK_LIMIT; n++) {
		guint64 ip = ctx->ip, t;
		const VtInsn *in = insn_at(c, ip);

		/* ctx->insns counts what runs: not an instruction that exits
		 * the guest or where control cannot go on */
		switch (in->kind) {
		case VT_INSN_OTHER:
			ctx->top_replaced |= in->writes_stack_top;
			ctx->insns++;
			ctx->ip = ip + in->len;
			continue;
		case VT_INSN_VMEXIT:
			if (!guest) {
				ctx->insns++;
				ctx->ip = ip + in->len;
				continue;
			}
			step->what = VT_WALK_EXIT;     /* emulated by the host, which skips it */
			step->resume = ip + in->len;
			return;
		case VT_INSN_JUMP:
		case VT_INSN_CALL:
			if (insn_at(c, in->target)->kind == VT_INSN_BAD ||
			    (in->kind == VT_INSN_JUMP && in->target <= ip && dist_to_return(c, in->target) == DIST_INF)) {
				/* to code the image does not have (init text), or a
				 * loop nothing leaves (jmp ., a spin on a halt): the
				 * code goes no further here */
				step->what = guest ? VT_WALK_EXIT : VT_WALK_STUCK;
				step->resume = vt_synth_code_pick(c, rng);
				return;
			}
			ctx->insns++;
			if (in->kind == VT_INSN_JUMP) {
				fn(VT_BRANCH_JUMP, ip, in->target, user);
				ctx->ip = in->target;
				continue;
			}
			push_return(ctx, ip + in->len, in->target);
			fn(VT_BRANCH_CALL, ip, in->target, user);
			ctx->ip = in->target;
			continue;
		case VT_INSN_COND:
			ctx->insns++;
			step->what = VT_WALK_TNT;
			step->taken = choose_taken(c, ctx, in, ip, rng, bias);
			ctx->ip = step->taken ? in->target : ip + in->len;
			if (step->taken)
				fn(VT_BRANCH_JUMP, ip, in->target, user);
			return;
		case VT_INSN_JUMP_IND:
		case VT_INSN_CALL_IND:
			t = ctx->next_indirect ? ctx->next_indirect : vt_synth_code_pick(c, rng);
			ctx->next_indirect = 0;
			ctx->insns++;
			if (in->kind == VT_INSN_CALL_IND)
				push_return(ctx, ip + in->len, t);
			fn(in->kind == VT_INSN_CALL_IND ? VT_BRANCH_CALL : VT_BRANCH_JUMP, ip, t, user);
			step->what = VT_WALK_TIP;
			step->tip = ctx->ip = t;
			return;
		case VT_INSN_RETURN:
			ctx->insns++;
			do_return(c, ctx, rng, step);
			fn(VT_BRANCH_RETURN, ip, ctx->ip, user);
			return;
		case VT_INSN_VMENTRY:
			ctx->insns += !guest;      /* VMRESUME runs: the entry */
			step->what = guest ? VT_WALK_EXIT : VT_WALK_VMENTRY;
			step->resume = guest ? vt_synth_code_pick(c, rng) : 0;
			return;
		default:                       /* ud2, hlt, int3, sysret, iret, far, bad code */
			if (guest) {
				step->what = VT_WALK_EXIT;   /* the host injects something else */
				step->resume = in->kind == VT_INSN_STOP && in->len == 1 ? ip + 1   /* hlt */
										 : vt_synth_code_pick(c, rng);
			} else {
				step->what = VT_WALK_STUCK;
			}
			return;
		}
	}
	step->what = guest ? VT_WALK_EXIT : VT_WALK_STUCK;
	step->resume = vt_synth_code_pick(c, rng);
}
