/* analyze.c - the decoder's branch stream turned into mode intervals, VM
 * exits, function slices, first calls and syscalls (definitions in
 * analyze.h). */
#include "config.h"

#include <string.h>

#include "src/analyze/analyze.h"

#define MAX_DEPTH 1024            /* frames a call stack holds at most */
#define SYM_CACHE 16384           /* branch targets' symbols remembered (direct-mapped) */
#define CTX_CACHE 64              /* queues whose context is remembered */
#define THUNK_MAX 64              /* bytes a thunk named so spans at most */

/* Addresses as GHashTable keys, the pointers themselves (0 too: NULL is a key) */
G_STATIC_ASSERT(sizeof(gpointer) == sizeof(guint64));
#define KEY(a) ((gpointer)(guintptr)(a))

typedef struct {
	guint64 func, ret;            /* symbol start called, return address */
	const char *sym;
	guint64 start, insn0;         /* clock and instructions at the call */
	guint64 child, child_insns;   /* children's inclusive */
	guint64 other, other_insns;   /* the other machine's time while this frame was on top */
	gboolean syscall;             /* the frame of the context's open syscall */
	gboolean pending;             /* called through a thunk: its function not yet known */
} Frame;

/* Code of retpoline and return thunks (see thunks_find), ascending. */
typedef struct {
	guint64 start, end;
} Range;

/* A call stack: a plain array (frames pushed and popped on most branches:
 * no GArray calls), grown by doubling up to MAX_DEPTH. */
typedef struct {
	Frame *f;
	guint len, cap;
} Stack;

typedef struct {
	VtAnalyzeWhere w;
	gboolean started, guest;
	guint64 now, insns;           /* clock and instructions of the last branch */
	guint64 first;                /* clock of the first branch */
	guint64 mode_start, mode_insns;
	Stack stack[2];               /* host, guest */
	gboolean in_exit, exit_call_seen;
	VtAnalyzeExit exit;
	guint64 exit_insns;
	gboolean sys_open;            /* entry_SYSCALL_64 seen, handler not yet called */
	VtAnalyzeSyscall sys;
	VtAnalyzeHealth *health;      /* its vCPU's (w.vcpu) */
} Ctx;

/* A branch target's symbol, remembered: most targets recur (the same
 * calls, returns and jumps), and a lookup costs a code check and a binary
 * search.  first_seen: the first call of its function was reported;
 * thunk: the target is thunk code. */
typedef struct {
	guint64 addr, start;          /* the target, its symbol's start */
	const char *sym;
	guint8 key_guest, valid, first_seen, thunk;
} SymEntry;

#define CODE_RANGES 4             /* code ranges resolved() remembers per machine */
#define THUNK_LINES 4096          /* thunk code's 64-byte lines, hashed into a bitmap */

struct VtAnalyze {
	VtAnalyzeOptions o;
	VtAnalyzeVisitor v;
	VtAnalyzeHealth health;
	GPtrArray *vhealth;           /* VtAnalyzeVcpuHealth by vcpu + 1 (NULL: none yet) */
	GArray *vhealth_out;
	GHashTable *tid_vcpu;         /* tid -> vcpu + 1, as the branches name them */
	GHashTable *ctx;              /* key -> Ctx */
	SymEntry *syms;
	struct { guint64 key; Ctx *c; } ctx_cache[CTX_CACHE];   /* by queue */
	GHashTable *first_seen[2];    /* function starts called so far, per machine (KEY(addr)) */
	guint first_index[2];
	guint64 sys_entry;            /* guest entry_SYSCALL_64 (0: none) */
	GArray *thunks[2];            /* Range: thunk code per machine */
	guint64 thunk_lines[2][THUNK_LINES / 64];   /* bit (addr / 64) % THUNK_LINES: maybe thunk code */
	guint64 unmatched_returns;    /* (overall only) */
	/* resolved(): code ranges found (vt_decode_image_code's [addr, +avail))
	 * and the lowest symbol start found, per machine */
	struct { guint64 lo, hi; } code[2][CODE_RANGES];
	guint code_next[2];
	guint64 sym_min[2];
};

/* ------------------------------------------------------------- symbols */
static const VtDecodeImage *image(const VtAnalyze *a, gboolean guest)
{
	return guest ? a->o.guest : a->o.host;
}

/* The symbol containing addr and its start; NULL outside the code. */
static const char *symbol_lookup(const VtAnalyze *a, gboolean guest, guint64 addr, guint64 *start)
{
	const VtDecodeImage *img = image(a, guest);
	guint64 off = 0;
	gsize avail;
	const char *s;

	*start = addr;
	if (!img || !addr || !vt_decode_image_code(img, addr, &avail))
		return NULL;
	s = vt_decode_image_symbol(img, addr, &off);
	if (s)
		*start = addr - off;
	return s;
}

static gboolean is_thunk(const VtAnalyze *a, gboolean guest, guint64 addr);

/* symbol_lookup through the cache: the entry it is in */
static SymEntry *symbol_entry(VtAnalyze *a, gboolean guest, guint64 addr)
{
	SymEntry *e = &a->syms[(guint)(((addr * 0x9e3779b97f4a7c15ULL) >> 40) ^ (guest ? 1u : 0u)) % SYM_CACHE];

	if (e->valid && e->addr == addr && e->key_guest == !!guest)
		return e;
	e->addr = addr;
	e->key_guest = !!guest;
	e->valid = TRUE;
	e->first_seen = FALSE;
	e->sym = symbol_lookup(a, guest, addr, &e->start);
	e->thunk = is_thunk(a, guest, addr);
	if (e->sym)
		a->sym_min[guest] = MIN(a->sym_min[guest], e->start);
	return e;
}

/* A symbol contains addr (symbol_lookup's answer, without the symbol):
 * addr is code and at or above the lowest symbol start (kallsyms is
 * sorted: every address from there on has one).  For the targets the
 * analysis needs no symbol of (returns, exits...): the health's
 * "unresolved" without a cache entry each. */
static gboolean resolved(VtAnalyze *a, gboolean guest, guint64 addr)
{
	const VtDecodeImage *img = image(a, guest);
	gsize avail;
	guint i;

	for (i = 0; i < CODE_RANGES; i++)
		if (addr - a->code[guest][i].lo < a->code[guest][i].hi - a->code[guest][i].lo)
			break;
	if (i == CODE_RANGES) {
		if (!img || !addr || !vt_decode_image_code(img, addr, &avail))
			return FALSE;
		i = a->code_next[guest]++ % CODE_RANGES;
		a->code[guest][i].lo = addr;
		a->code[guest][i].hi = addr + avail;
	}
	return addr >= a->sym_min[guest] || symbol_entry(a, guest, addr)->sym;
}

static const char *symbol(VtAnalyze *a, gboolean guest, guint64 addr, guint64 *start)
{
	const SymEntry *e = symbol_entry(a, guest, addr);

	*start = e->start;
	return e->sym;
}

/* -------------------------------------------------------------- thunks */
/* Retpolines and return thunks: an indirect call is `call
 * __x86_indirect_thunk_REG`, whose `call 1f; ...; mov %REG, (%rsp); jmp
 * __x86_return_thunk` ends in a RET to the real callee (ITS thunks: `jmp
 * *%REG`), and a return may be `jmp __x86_return_thunk` (whose RET goes
 * back to the caller).  Their code: the kernel's [__indirect_thunk_start,
 * __indirect_thunk_end) and every function named __x86_indirect_*thunk*,
 * or *_return_thunk, *_safe_ret, *_untrain_ret, __x86_return_skl with a
 * mitigation's prefix (__x86_, srso_, retbleed_, its_, call_depth_, zen_,
 * entry_), up to the next function
 * and at most THUNK_MAX bytes (kernels without those bounds; SRSO's pieces
 * outside them). */
static gboolean ends_with(const char *s, gsize len, const char *suffix)
{
	gsize n = strlen(suffix);

	return len >= n && !memcmp(s + len - n, suffix, n);
}

/* (every function's name is tested: the cheap tests first) */
static gboolean thunk_name(const char *s)
{
	static const char *const prefix[] = { "__x86_", "srso_", "retbleed_", "its_", "call_depth_", "zen_", "entry_" };
	gsize len = s ? strlen(s) : 0;

	if (!strncmp(s ? s : "", "__x86_indirect_", 15))
		return strstr(s, "thunk") != NULL;
	if (!len || !(ends_with(s, len, "_return_thunk") || ends_with(s, len, "_safe_ret") ||
		      ends_with(s, len, "_untrain_ret") || !strcmp(s, "__x86_return_skl")))
		return FALSE;
	for (guint i = 0; i < G_N_ELEMENTS(prefix); i++)
		if (g_str_has_prefix(s, prefix[i]))
			return TRUE;
	return FALSE;
}

static gint range_cmp(gconstpointer x, gconstpointer y)
{
	const Range *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

/* The thunk code of img: its ranges sorted and merged. */
static GArray *thunks_find(const VtDecodeImage *img)
{
	g_autoptr(GArray) all = g_array_new(FALSE, FALSE, sizeof(Range));
	GArray *r = g_array_new(FALSE, FALSE, sizeof(Range));
	guint64 lo = img ? vt_decode_image_lookup(img, "__indirect_thunk_start") : 0;
	guint64 hi = img ? vt_decode_image_lookup(img, "__indirect_thunk_end") : 0;
	guint n = 0;
	const guint64 *f = img ? vt_decode_image_functions(img, &n) : NULL;

	if (lo && hi > lo)
		g_array_append_val(all, ((Range){ lo, hi }));
	for (guint i = 0; i < n; i++) {
		guint64 off, end = MIN(i + 1 < n ? f[i + 1] : G_MAXUINT64, f[i] + THUNK_MAX);

		if (end > f[i] && thunk_name(vt_decode_image_symbol(img, f[i], &off)))
			g_array_append_val(all, ((Range){ f[i], end }));
	}
	g_array_sort(all, range_cmp);
	for (guint i = 0; i < all->len; i++) {
		const Range *x = &g_array_index(all, Range, i);
		Range *last = r->len ? &g_array_index(r, Range, r->len - 1) : NULL;

		if (last && x->start <= last->end)
			last->end = MAX(last->end, x->end);
		else
			g_array_append_val(r, *x);
	}
	return r;
}

static gboolean is_thunk(const VtAnalyze *a, gboolean guest, guint64 addr)
{
	const GArray *r = a->thunks[guest];
	guint lo = 0, hi = r->len;
	guint line = (guint)(addr >> 6) % THUNK_LINES;

	if (!(a->thunk_lines[guest][line / 64] & (1ULL << (line % 64))))
		return FALSE;
	if (!hi || addr < g_array_index(r, Range, 0).start || addr >= g_array_index(r, Range, hi - 1).end)
		return FALSE;
	while (lo < hi) {
		guint mid = (lo + hi) / 2;
		const Range *m = &g_array_index(r, Range, mid);

		if (addr < m->start)
			hi = mid;
		else if (addr >= m->end)
			lo = mid + 1;
		else
			return TRUE;
	}
	return FALSE;
}

/* The lines of thunk code, in the bitmap is_thunk tests first. */
static void thunk_lines_mark(VtAnalyze *a, gboolean guest)
{
	const GArray *r = a->thunks[guest];

	for (guint i = 0; i < r->len; i++) {
		const Range *x = &g_array_index(r, Range, i);
		guint64 n = MIN((x->end - 1) / 64 - x->start / 64 + 1, (guint64)THUNK_LINES);

		for (guint64 k = 0; k < n; k++) {
			guint line = (guint)(x->start / 64 + k) % THUNK_LINES;

			a->thunk_lines[guest][line / 64] |= 1ULL << (line % 64);
		}
	}
}

/* ------------------------------------------------------------ contexts */
static guint64 ctx_key(const VtDecodeEvent *e)
{
	return e->tid > 0 ? (guint64)(guint32)e->tid : (1ULL << 32) | (guint32)(e->cpu + 1);
}

static void ctx_free(gpointer p)
{
	Ctx *c = p;

	g_free(c->stack[0].f);
	g_free(c->stack[1].f);
	g_free(c);
}

static VtAnalyzeHealth *vcpu_health(VtAnalyze *a, gint32 vcpu);

static Ctx *ctx_new(VtAnalyze *a, guint64 key)
{
	guint64 *k = g_new(guint64, 1);
	Ctx *c = g_new0(Ctx, 1);

	*k = key;
	g_hash_table_insert(a->ctx, k, c);
	return c;
}

/* The event's thread, vCPU and CPU into c (they changed, or c starts) */
static void ctx_name(VtAnalyze *a, Ctx *c, const VtDecodeEvent *e)
{
	if (e->tid > 0)
		g_hash_table_insert(a->tid_vcpu, GINT_TO_POINTER(e->tid), GINT_TO_POINTER(e->vcpu + 1));
	c->w.vcpu = e->vcpu;
	c->w.tid = e->tid;
	c->w.cpu = e->cpu;
	c->health = vcpu_health(a, e->vcpu);
}

static Ctx *ctx_get(VtAnalyze *a, const VtDecodeEvent *e)
{
	guint64 key = ctx_key(e);
	guint slot = e->queue % CTX_CACHE;
	Ctx *c = a->ctx_cache[slot].key == key ? a->ctx_cache[slot].c : g_hash_table_lookup(a->ctx, &key);

	if (G_UNLIKELY(!c))
		c = ctx_new(a, key);
	a->ctx_cache[slot].key = key;
	a->ctx_cache[slot].c = c;
	if (G_UNLIKELY(!c->started || c->w.tid != e->tid || c->w.vcpu != e->vcpu || c->w.cpu != e->cpu ||
		       !c->health))
		ctx_name(a, c, e);
	if (e->b.vmcs)
		c->w.vmcs = e->b.vmcs;
	return c;
}

/* -------------------------------------------------------------- frames */
static void frame_begin(VtAnalyze *a, const Ctx *c, gboolean guest);

static void frame_close(VtAnalyze *a, Ctx *c, gboolean guest, gboolean complete)
{
	Stack *st = &c->stack[guest];
	Frame f = st->f[st->len - 1];

	if (f.pending)
		frame_begin(a, c, guest);     /* its thunk never left: the thunk's frame */
	VtAnalyzeSlice s = { .w = c->w, .guest = guest, .depth = st->len - 1, .func = f.func, .sym = f.sym,
			     .start = f.start, .end = c->now, .complete = complete };
	guint64 incl = c->now - f.start, insns = c->insns - f.insn0;

	st->len--;
	s.self = incl - MIN(incl, f.child + f.other);
	s.insns = insns;
	s.self_insns = insns - MIN(insns, f.child_insns + f.other_insns);
	if (st->len) {
		Frame *p = &st->f[st->len - 1];

		p->child += incl;
		p->child_insns += insns;
	}
	if (f.syscall && a->v.syscall) {
		c->sys.end = c->now;
		c->sys.complete = complete;
		a->v.syscall(&c->sys, a->v.user);
	}
	if (a->v.slice)
		a->v.slice(&s, a->v.user);
}

/* A stack is full: its outermost MAX_DEPTH / 2 frames (calls whose returns
 * the trace never showed: longjmp-like flows, a guest task switch) end now,
 * innermost first, as if they returned - so memory stays flat. */
static void frames_drop_outer(VtAnalyze *a, Ctx *c, gboolean guest)
{
	Stack *st = &c->stack[guest];
	guint keep = st->len - MAX_DEPTH / 2;
	g_autofree Frame *inner = g_memdup2(st->f + MAX_DEPTH / 2, keep * sizeof(Frame));

	st->len = MAX_DEPTH / 2;
	while (st->len)
		frame_close(a, c, guest, FALSE);
	memcpy(st->f, inner, keep * sizeof(Frame));
	st->len = keep;
}

static void frames_close_all(VtAnalyze *a, Ctx *c, gboolean guest)
{
	while (c->stack[guest].len)
		frame_close(a, c, guest, FALSE);
}

/* The other machine ran from `since` to now: not this stack's top frame's own time. */
static void frame_charge_other(Ctx *c, gboolean guest, guint64 since, guint64 since_insns)
{
	Stack *st = &c->stack[guest];

	if (st->len) {
		Frame *f = &st->f[st->len - 1];

		f->other += c->now - since;
		f->other_insns += c->insns - since_insns;
	}
}

static void syscall_unnamed(VtAnalyze *a, Ctx *c)
{
	if (c->sys_open && a->v.syscall) {
		c->sys.name = NULL;
		c->sys.end = c->now;
		c->sys.complete = FALSE;
		a->v.syscall(&c->sys, a->v.user);
	}
	c->sys_open = FALSE;
}

/* The call of func (at the cache entry `at` if that still holds addr) */
static void first_call(VtAnalyze *a, const Ctx *c, gboolean guest, guint64 func, const char *sym,
		       SymEntry *at, guint64 addr)
{
	gboolean mine = at->valid && at->addr == addr && at->key_guest == !!guest;

	if (mine && at->first_seen)
		return;
	if (mine)
		at->first_seen = TRUE;
	if (!g_hash_table_add(a->first_seen[guest], KEY(func)))
		return;
	if (a->v.first_call) {
		VtAnalyzeFirstCall f = { .w = c->w, .guest = guest, .func = func, .sym = sym, .time = c->now,
					 .index = a->first_index[guest] };

		a->v.first_call(&f, a->v.user);
	}
	a->first_index[guest]++;
}

static gboolean is_syscall_handler(const char *sym)
{
	return sym && (g_str_has_prefix(sym, "__x64_sys_") || g_str_has_prefix(sym, "__ia32_sys_") ||
		       g_str_has_prefix(sym, "__do_sys_"));
}

/* A frame's function is known (f: the top one): the exit's first host
 * call, the syscall's handler; TRUE when f is the syscall's frame. */
static gboolean frame_function(Ctx *c, gboolean guest, const char *sym)
{
	if (!guest && c->in_exit && !c->exit_call_seen) {
		c->exit.first_call = sym;
		c->exit_call_seen = TRUE;
	}
	if (guest && c->sys_open && is_syscall_handler(sym)) {
		c->sys_open = FALSE;
		c->sys.name = sym;
		return TRUE;
	}
	return FALSE;
}

static void frame_begin(VtAnalyze *a, const Ctx *c, gboolean guest)
{
	const Stack *st = &c->stack[guest];
	const Frame *f = &st->f[st->len - 1];
	VtAnalyzeSlice s = { .w = c->w, .guest = guest, .depth = st->len - 1, .func = f->func, .sym = f->sym,
			     .start = f->start };

	if (a->v.slice_begin)
		a->v.slice_begin(&s, a->v.user);
}

/* f on top of the stack (a full one first drops its outer half) */
static void frame_push(VtAnalyze *a, Ctx *c, gboolean guest, const Frame *f)
{
	Stack *st = &c->stack[guest];

	if (st->len == MAX_DEPTH)
		frames_drop_outer(a, c, guest);
	if (st->len == st->cap) {
		st->cap = st->cap ? st->cap * 2 : 32;
		st->f = g_renew(Frame, st->f, st->cap);
	}
	st->f[st->len++] = *f;
}

/* (se: the target's symbol entry, vt_analyze_event's) */
static void on_call(VtAnalyze *a, Ctx *c, const VtBranch *b, SymEntry *se)
{
	gboolean guest = b->to_guest;
	Frame f = { .ret = b->from + b->insn_len, .start = c->now, .insn0 = c->insns };

	f.sym = se->sym;
	f.func = se->start;
	f.pending = se->thunk;
	f.syscall = !f.pending && frame_function(c, guest, f.sym);
	frame_push(a, c, guest, &f);
	if (f.pending)
		return;
	frame_begin(a, c, guest);
	first_call(a, c, guest, f.func, f.sym, se, b->to);
}

/* The top frame, called through a thunk, gets its function: the one at
 * `to` (the thunk's final target). */
static void frame_resolve(VtAnalyze *a, Ctx *c, gboolean guest, guint64 to)
{
	Stack *st = &c->stack[guest];
	Frame *f = &st->f[st->len - 1];
	SymEntry *se = symbol_entry(a, guest, to);

	f->pending = FALSE;
	f->sym = se->sym;
	f->func = se->start;
	f->syscall = frame_function(c, guest, f->sym);
	frame_begin(a, c, guest);
	first_call(a, c, guest, f->func, f->sym, se, to);
}

/* A jump into the first instruction of a function from outside it is a
 * tail call (start_kernel: `jmp start_kernel` ends x86_64_start_reservations):
 * the function's first entry when no call came first.  No slice: its
 * return goes to the caller of the function that jumped. */
static void on_jump(VtAnalyze *a, Ctx *c, const VtBranch *b, const SymEntry *se)
{
	gboolean guest = b->to_guest;
	const char *sym = se->sym;
	guint64 func = se->start, from_func;

	if (!sym || func != b->to || se->first_seen)
		return;
	symbol(a, guest, b->from, &from_func);
	if (from_func != func)
		first_call(a, c, guest, func, sym, symbol_entry(a, guest, b->to), b->to);
}

/* 1 + the index of the innermost frame returning to `to`; 0: none */
static guint frame_find(const Stack *st, guint64 to)
{
	guint i = st->len;

	while (i && st->f[i - 1].ret != to)
		i--;
	return i;
}

static void on_return(VtAnalyze *a, Ctx *c, const VtBranch *b)
{
	const Stack *st = &c->stack[b->from_guest];
	guint i = frame_find(st, b->to);

	if (!i) {
		a->unmatched_returns++;
		return;
	}
	while (st->len >= i)
		frame_close(a, c, b->from_guest, TRUE);
}

/* A jump or return out of thunk code: the final target of a call through
 * a thunk (its frame gets the function there; the thunk itself when it
 * returns to the call), else a return when a frame returns there, else a
 * jump (an indirect tail call through a thunk). */
static void thunk_leave(VtAnalyze *a, Ctx *c, const VtBranch *b, const SymEntry *se)
{
	gboolean guest = b->from_guest;
	const Stack *st = &c->stack[guest];
	Frame *top = st->len ? &st->f[st->len - 1] : NULL;

	if (top && top->pending && top->ret == b->to) {
		frame_resolve(a, c, guest, top->func);
		frame_close(a, c, guest, TRUE);
	} else if (top && top->pending) {
		frame_resolve(a, c, guest, b->to);
	} else if (frame_find(st, b->to)) {
		on_return(a, c, b);
	} else {                      /* (se NULL: a return, its target not looked up) */
		on_jump(a, c, b, se ? se : symbol_entry(a, b->to_guest, b->to));
	}
}

/* Calls, returns and jumps within one machine, thunks seen through: TRUE
 * when b was one that touches thunk code (handled). */
static gboolean thunk_flow(VtAnalyze *a, Ctx *c, const VtBranch *b, const SymEntry *se)
{
	gboolean guest = b->from_guest, from, to;

	if (!a->thunks[guest]->len)
		return FALSE;
	from = is_thunk(a, guest, b->from);
	to = se ? se->thunk : is_thunk(a, guest, b->to);
	if (from == to)
		return from;                  /* within thunk code: nothing */
	if (b->kind == VT_BRANCH_CALL)
		return FALSE;                 /* a call: a frame (pending into a thunk) */
	if (to)
		return b->kind == VT_BRANCH_JUMP;   /* `jmp __x86_return_thunk`: the RET tells */
	thunk_leave(a, c, b, se);
	return TRUE;
}

/* ------------------------------------------------------ modes and exits */
static void mode_end(VtAnalyze *a, Ctx *c)
{
	VtAnalyzeMode m = { .w = c->w, .guest = c->guest, .start = c->mode_start, .end = c->now,
			    .insns = c->insns - c->mode_insns };

	if (a->v.mode)
		a->v.mode(&m, a->v.user);
	/* the stack of the machine that waited */
	frame_charge_other(c, !c->guest, c->mode_start, c->mode_insns);
	c->mode_start = c->now;
	c->mode_insns = c->insns;
}

static void exit_end(VtAnalyze *a, Ctx *c, gboolean reentered)
{
	if (!c->in_exit)
		return;
	c->in_exit = FALSE;
	c->exit.reentered = reentered;
	c->exit.entry_time = reentered ? c->now : 0;
	c->exit.latency = reentered ? c->now - c->exit.exit_time : 0;
	c->exit.host_insns = reentered ? c->insns - c->exit_insns : 0;
	c->exit.end = c->now;
	c->exit.w = c->w;
	if (a->v.exit)
		a->v.exit(&c->exit, a->v.user);
}

static void on_vmexit(VtAnalyze *a, Ctx *c, const VtBranch *b)
{
	guint64 start;

	exit_end(a, c, FALSE);
	if (c->guest)
		mode_end(a, c);
	c->guest = FALSE;
	c->in_exit = TRUE;
	c->exit_call_seen = FALSE;
	c->exit = (VtAnalyzeExit){ .w = c->w, .exit_time = c->now, .exit_ip = b->from, .handler_ip = b->to };
	c->exit.handler = symbol(a, FALSE, b->to, &start);
	c->exit_insns = c->insns;
	if (a->v.exit_begin)
		a->v.exit_begin(&c->exit, a->v.user);
}

static void on_vmentry(VtAnalyze *a, Ctx *c)
{
	if (!c->guest)
		mode_end(a, c);
	c->guest = TRUE;
	exit_end(a, c, TRUE);
}

/* A break in the trace of one machine (trace end) or both (error). */
static void on_break(VtAnalyze *a, Ctx *c, gboolean guest, gboolean both)
{
	frames_close_all(a, c, guest);
	if (both)
		frames_close_all(a, c, !guest);
	if (guest || both)
		syscall_unnamed(a, c);
	if (both)
		exit_end(a, c, FALSE);
}

/* ---------------------------------------------------------------- event */
#define MAX_VCPU_HEALTH 4096      /* vCPUs with their own health (above: counted as -1) */

static VtAnalyzeHealth *vcpu_health(VtAnalyze *a, gint32 vcpu)
{
	guint i = vcpu >= 0 && vcpu < MAX_VCPU_HEALTH ? (guint)vcpu + 1 : 0;
	VtAnalyzeVcpuHealth *h;

	if (i >= a->vhealth->len)
		g_ptr_array_set_size(a->vhealth, (gint)i + 1);
	h = g_ptr_array_index(a->vhealth, i);
	if (!h) {
		h = g_new0(VtAnalyzeVcpuHealth, 1);
		h->vcpu = i ? vcpu : -1;
		g_ptr_array_index(a->vhealth, i) = h;
	}
	return &h->h;
}

static void health_add(VtAnalyzeHealth *h, const VtDecodeEvent *e, gboolean unresolved)
{
	const VtBranch *b = &e->b;

	h->branches++;
	h->overflows += b->overflows;
	if (e->vcpu < 0)
		h->unknown_vcpu++;
	if (b->kind == VT_BRANCH_ERROR) {
		h->errors++;
		h->error_codes[b->code > 0 && b->code < 31 ? b->code : 31]++;
	} else if (b->kind == VT_BRANCH_TRACE_END) {
		h->trace_breaks++;
	} else if (unresolved) {
		h->unresolved++;
	}
}

static void lost_add(VtAnalyzeHealth *h, gboolean aux, guint64 flags, guint64 n)
{
	if (!aux) {
		h->lost_records += n;
		return;
	}
	h->aux_records++;
	h->aux_truncated += !!(flags & VT_PERF_AUX_FLAG_TRUNCATED);
	h->aux_partial += !!(flags & VT_PERF_AUX_FLAG_PARTIAL);
	h->aux_collision += !!(flags & VT_PERF_AUX_FLAG_COLLISION);
}

void vt_analyze_lost(VtAnalyze *a, gint32 tid, gboolean aux, guint64 flags, guint64 n)
{
	gpointer v = g_hash_table_lookup(a->tid_vcpu, GINT_TO_POINTER(tid));
	gint32 vcpu = v ? GPOINTER_TO_INT(v) - 1 : -1;

	if (a->o.vcpu >= 0 && vcpu != a->o.vcpu)
		return;
	lost_add(vcpu_health(a, vcpu), aux, flags, n);
}

static void ctx_advance(VtAnalyze *a, Ctx *c, const VtDecodeEvent *e, guint64 insns)
{
	c->insns += insns;
	c->now = a->o.timed ? MAX(e->time, c->now) : c->insns;
	if (!c->started) {
		/* the instructions up to the first branch ran in its mode (the
		 * instruction clock starts before them) */
		c->started = TRUE;
		c->first = a->o.timed ? c->now : c->now - insns;
		c->mode_start = c->first;
		c->mode_insns = c->insns - insns;
		c->guest = e->b.kind == VT_BRANCH_ERROR ? FALSE
			   : e->b.from ? e->b.from_guest : e->b.to_guest;
		if (e->b.kind == VT_BRANCH_VMENTRY)
			c->guest = FALSE;
	}
}

/* A flow end's instructions ran after the context's last branch: they
 * count at its time (timeless: they move the clock). */
static void ctx_flow(VtAnalyze *a, Ctx *c, const VtDecodeEvent *e)
{
	if (!c->started) {
		ctx_advance(a, c, e, e->b.insns);
		return;
	}
	c->insns += e->b.insns;
	if (!a->o.timed)
		c->now = c->insns;
}

static void dispatch_kind(VtAnalyze *a, Ctx *c, const VtBranch *b, SymEntry *se)
{
	switch (b->kind) {
	case VT_BRANCH_CALL:
		if (b->from_guest == b->to_guest)
			on_call(a, c, b, se);
		break;
	case VT_BRANCH_RETURN:
		if (b->from_guest == b->to_guest)
			on_return(a, c, b);
		break;
	case VT_BRANCH_JUMP:
		if (b->from_guest == b->to_guest)
			on_jump(a, c, b, se);
		break;
	case VT_BRANCH_VMEXIT:
		on_vmexit(a, c, b);
		break;
	case VT_BRANCH_VMENTRY:
		on_vmentry(a, c);
		break;
	case VT_BRANCH_TRACE_END:
		on_break(a, c, b->from_guest, FALSE);
		break;
	case VT_BRANCH_ERROR:
		on_break(a, c, c->guest, TRUE);
		break;
	default:
		break;
	}
}

/* se: b's target's symbol entry (NULL: b has none - an error, a trace end) */
static void dispatch(VtAnalyze *a, Ctx *c, const VtBranch *b, SymEntry *se)
{
	if (!se && (b->kind == VT_BRANCH_CALL || b->kind == VT_BRANCH_JUMP))
		se = symbol_entry(a, b->to_guest, b->to);
	if (b->kind > VT_BRANCH_RETURN || b->from_guest != b->to_guest || !thunk_flow(a, c, b, se))
		dispatch_kind(a, c, b, se);
	if (b->to_guest && b->to && b->to == a->sys_entry && b->kind != VT_BRANCH_ERROR) {
		syscall_unnamed(a, c);
		c->sys_open = TRUE;
		c->sys = (VtAnalyzeSyscall){ .w = c->w, .start = c->now };
	}
}

/* Instructions come from the decoder (VtBranch.insns); a flow end (and a
 * power event) is no branch: it only brings the instructions and the OVFs
 * up to it (no instructions: nothing else - the flow end at a queue's
 * first PSB+ has no time). */
void vt_analyze_event(VtAnalyze *a, const VtDecodeEvent *e)
{
	Ctx *c;
	SymEntry *se;
	gboolean unresolved;

	if ((a->o.vcpu >= 0 && e->vcpu != a->o.vcpu) || vt_branch_is_overflow(&e->b) || vt_branch_is_lost(&e->b))
		return;                 /* (an OVF's line: its branch after it counts it; lost.c the AUX records) */
	if (e->b.kind >= VT_BRANCH_PSB) {
		if (e->b.overflows)                       /* those before it are its */
			vcpu_health(a, e->vcpu)->overflows += e->b.overflows;
		if (e->b.insns)
			ctx_flow(a, ctx_get(a, e), e);
		return;
	}
	c = ctx_get(a, e);
	/* the target's symbol (the call's or jump's; for the health's
	 * unresolved, elsewhere resolved() is enough) */
	se = NULL;
	if (!e->b.to || e->b.kind == VT_BRANCH_ERROR || e->b.kind == VT_BRANCH_TRACE_END)
		unresolved = FALSE;
	else if (e->b.kind == VT_BRANCH_CALL || e->b.kind == VT_BRANCH_JUMP)
		unresolved = !(se = symbol_entry(a, e->b.to_guest, e->b.to))->sym;
	else
		unresolved = !resolved(a, e->b.to_guest, e->b.to);
	health_add(c->health, e, unresolved);
	ctx_advance(a, c, e, e->b.insns);
	dispatch(a, c, &e->b, se);
}

void vt_analyze_finish(VtAnalyze *a)
{
	GHashTableIter it;
	gpointer k, v;

	g_hash_table_iter_init(&it, a->ctx);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		Ctx *c = v;

		if (!c->started)
			continue;
		frames_close_all(a, c, TRUE);
		frames_close_all(a, c, FALSE);
		syscall_unnamed(a, c);
		exit_end(a, c, FALSE);
		mode_end(a, c);
		c->started = FALSE;
	}
}

static void health_sum(VtAnalyzeHealth *to, const VtAnalyzeHealth *h)
{
	to->branches += h->branches;
	to->errors += h->errors;
	for (guint i = 0; i < G_N_ELEMENTS(h->error_codes); i++)
		to->error_codes[i] += h->error_codes[i];
	to->trace_breaks += h->trace_breaks;
	to->unresolved += h->unresolved;
	to->unknown_vcpu += h->unknown_vcpu;
	to->overflows += h->overflows;
	to->aux_records += h->aux_records;
	to->aux_truncated += h->aux_truncated;
	to->aux_collision += h->aux_collision;
	to->aux_partial += h->aux_partial;
	to->lost_records += h->lost_records;
}

/* every vCPU's (counted there only: one update per branch) */
const VtAnalyzeHealth *vt_analyze_health(VtAnalyze *a)
{
	memset(&a->health, 0, sizeof(a->health));
	for (guint i = 0; i < a->vhealth->len; i++) {
		const VtAnalyzeVcpuHealth *h = g_ptr_array_index(a->vhealth, i);

		if (h)
			health_sum(&a->health, &h->h);
	}
	a->health.unmatched_returns = a->unmatched_returns;
	return &a->health;
}

const GArray *vt_analyze_health_vcpus(VtAnalyze *a)
{
	g_array_set_size(a->vhealth_out, 0);
	for (guint i = 0; i < a->vhealth->len; i++) {
		const VtAnalyzeVcpuHealth *h = g_ptr_array_index(a->vhealth, i);

		if (h)
			g_array_append_val(a->vhealth_out, *h);
	}
	return a->vhealth_out;
}

VtAnalyze *vt_analyze_new(const VtAnalyzeOptions *opts, const VtAnalyzeVisitor *visitor)
{
	VtAnalyze *a = g_new0(VtAnalyze, 1);

	a->o = *opts;
	if (visitor)
		a->v = *visitor;
	a->ctx = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, ctx_free);
	a->vhealth = g_ptr_array_new_with_free_func(g_free);
	a->vhealth_out = g_array_new(FALSE, FALSE, sizeof(VtAnalyzeVcpuHealth));
	a->tid_vcpu = g_hash_table_new(g_direct_hash, g_direct_equal);
	a->syms = g_new0(SymEntry, SYM_CACHE);
	for (int i = 0; i < 2; i++)
		a->first_seen[i] = g_hash_table_new(g_direct_hash, g_direct_equal);
	if (a->o.guest)
		a->sys_entry = vt_decode_image_lookup(a->o.guest, "entry_SYSCALL_64");
	a->sym_min[0] = a->sym_min[1] = G_MAXUINT64;
	a->thunks[0] = thunks_find(a->o.host);
	a->thunks[1] = thunks_find(a->o.guest);
	thunk_lines_mark(a, FALSE);
	thunk_lines_mark(a, TRUE);
	return a;
}

void vt_analyze_free(VtAnalyze *a)
{
	if (!a)
		return;
	g_hash_table_destroy(a->ctx);
	g_ptr_array_free(a->vhealth, TRUE);
	g_array_free(a->vhealth_out, TRUE);
	g_hash_table_destroy(a->tid_vcpu);
	g_free(a->syms);
	for (int i = 0; i < 2; i++) {
		g_hash_table_destroy(a->first_seen[i]);
		g_array_free(a->thunks[i], TRUE);
	}
	g_free(a);
}
