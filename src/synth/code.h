/* code.h - walking real x86-64 kernel code for `vmtrace synth --host-code
 * --guest-code` (internal to src/synth).
 *
 * The walker decides where the code goes - it decodes instructions with
 * Zydis (through src/decode's image and instruction helpers), chooses the
 * direction of every conditional branch and the target of every indirect
 * branch (a real function start), keeps a call stack for returns and the
 * return-compression stack Intel PT keeps - and tells the generator which
 * packet that decision needs (a TNT bit or a TIP); the generator writes the
 * packets, the time and the PSBs.  Every branch taken goes to a callback
 * (the ground truth). */
#ifndef VT_SYNTH_CODE_H
#define VT_SYNTH_CODE_H

#include <glib.h>

#include "src/decode/decode.h"

typedef struct VtSynthCode VtSynthCode;   /* one image + its decode caches */

typedef struct {
	guint64 ip;               /* next instruction */
	GArray *stack;            /* guint64: return addresses (the program's stack) */
	GArray *comp;             /* guint64: what a compressed RET may return to */
	gboolean top_replaced;    /* mov REG,(%rsp) replaced the top return address */
	guint64 insns;            /* instructions executed so far (an exiting or stuck one is not) */
	gboolean hurry;           /* towards a return without calls, as at the depth limit (a host past its budget) */
	guint64 next_indirect;    /* the next indirect call or jump's target (0: a random function) */
} VtSynthCtx;

typedef enum {
	VT_WALK_TNT,              /* a conditional branch or compressed RET: one TNT bit */
	VT_WALK_TIP,              /* an indirect branch or uncompressed RET: TIP(tip) */
	VT_WALK_VMENTRY,          /* at VMLAUNCH/VMRESUME (ip stays there) */
	VT_WALK_EXIT,             /* guest: an instruction that exits to the host (ip at it) */
	VT_WALK_STUCK,            /* control cannot go on from ip (ud2, hlt, int3, sysret, bad code) */
} VtWalkWhat;

typedef struct {
	VtWalkWhat what;
	gboolean taken;           /* TNT */
	guint64 tip;              /* TIP */
	guint64 resume;           /* EXIT: where the guest goes on after the exit is handled */
} VtWalkStep;

typedef void (*VtSynthBranchFn)(VtBranchKind kind, guint64 from, guint64 to, gpointer user);

VtSynthCode *vt_synth_code_new(VtDecodeImage *img);
/* A shallow call stack (--call-depth): the walk avoids code that calls
 * functions that never return (panic(), __stack_chk_fail(): their frames
 * would stay on perf's call stack), and from call depth `depth` on its
 * conditional branches take the side that reaches a return without a call
 * when only one does (or does sooner). */
void vt_synth_code_bound_depth(VtSynthCode *c, guint depth);
void vt_synth_code_free(VtSynthCode *c);

/* Function start f is never a random pick (an indirect branch's target, a
 * replaced return's): FALSE when no more can be excluded (4). */
gboolean vt_synth_code_exclude(VtSynthCode *c, guint64 f);
/* The return address of the call at ip (0: no call there). */
guint64 vt_synth_code_after_call(VtSynthCode *c, guint64 ip);
void vt_synth_ctx_init(VtSynthCtx *ctx, guint64 ip);
void vt_synth_ctx_clear(VtSynthCtx *ctx);
/* Forget what compressed returns may use (PSB, VM entry and exit). */
void vt_synth_ctx_flush_comp(VtSynthCtx *ctx);

/* A random function start of the image. */
guint64 vt_synth_code_pick(VtSynthCode *c, GRand *rng);
/* A random function start from which a return without calls is at most
 * `insns` instructions away (else the nearest of the tries). */
guint64 vt_synth_code_pick_short(VtSynthCode *c, GRand *rng, guint insns);

/* Walk from ctx->ip to the next decision that needs trace and make it.
 * `bias` (0..1): how strongly conditional branches lean towards the
 * nearest return (to unwind deep call chains); `guest`: instructions
 * that exit a guest (cpuid, hlt, ...) stop the walk. */
void vt_synth_walk(VtSynthCode *c, VtSynthCtx *ctx, GRand *rng, double bias, gboolean guest, VtWalkStep *step,
		   VtSynthBranchFn fn, gpointer user);

#endif
