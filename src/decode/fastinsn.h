/* fastinsn.h - the common 64-bit instructions without Zydis: their length,
 * libipt's class and, for the relative branches, their displacement, from
 * a prefix table, two opcode tables (one-byte and 0x0f maps) and one
 * switch.  walk.c walks blocks with it; disasm.c keys its texts by bytes
 * with it (its length, and whether the instruction's text depends on its
 * address).  Inline (the walk's per-instruction path); the tables are
 * fastinsn.c's, made by vt_fast_insn_init().  VMTRACE_WALK_CHECK=1 makes
 * both callers compare each answer with Zydis's (and abort on a
 * difference); test-decode's fast-insn compares them on random bytes and
 * (t0139) on the Debian kernel's code, swept from each function's start
 * (instruction boundaries, not every byte offset). */
#ifndef VT_DECODE_FASTINSN_H
#define VT_DECODE_FASTINSN_H

#include <glib.h>
#include <intel-pt.h>
#include <Zydis/Zydis.h>

/* One instruction as vt_fast_insn_decode() knows it. */
typedef struct {
	guint8 len;         /* its bytes, prefixes to immediate (1..15) */
	guint8 iclass;      /* libipt's (pt_ild's) class: ptic_other, _cond_jump, _jump, _call, _return */
	guint8 direct;      /* a jmp/call with a rel8/rel32 target */
	guint8 relative;    /* its meaning depends on its address: a relative target, a RIP-relative operand */
	gint32 disp;        /* the rel8/rel32 (cond_jump, direct): target = ip + len + disp */
} VtFastInsn;

/* Makes the tables (once; any thread): before the first decode. */
void vt_fast_insn_init(void);

/* Does Zydis's decoding zi (64-bit) of the same bytes give in's length,
 * relative operands (ZYDIS_ATTRIB_IS_RELATIVE) and displacement?  (The
 * debug checks and tests; the class is walk.c's to compare.) */
gboolean vt_fast_insn_agrees(const VtFastInsn *in, const ZydisDecodedInstruction *zi);

/* What each opcode byte is (one-byte map, 0x0f map): 0 ask Zydis, else a
 * length class; what each byte is as a legacy prefix (0 none). */
enum { VT_FL_ASK, VT_FL_N, VT_FL_M, VT_FL_M1, VT_FL_MZ, VT_FL_I1, VT_FL_IZ, VT_FL_MOVI, VT_FL_F6, VT_FL_F7,
       VT_FL_JCC8, VT_FL_JCC32, VT_FL_CALL, VT_FL_JMP32, VT_FL_JMP8, VT_FL_RET, VT_FL_RET16, VT_FL_FF };
enum { VT_FP_IGNORED = 1, VT_FP_OSZ = 2, VT_FP_OTHER = 4 };
extern guint8 vt_fast_insn_map0[256], vt_fast_insn_map1[256], vt_fast_insn_prefix[256];

/* ModRM, SIB and displacement bytes at m (0: not enough bytes). */
static inline guint vt_fast_insn_modrm(const guint8 *m, gsize avail)
{
	guint mod = m[0] >> 6, rm = m[0] & 7, n = 1;

	if (!avail)
		return 0;
	if (mod == 3)
		return 1;
	if (rm == 4) {
		if (avail < 2)
			return 0;
		n = 2;
		if (mod == 0 && (m[1] & 7) == 5)
			return n + 4;
	} else if (mod == 0 && rm == 5) {
		return n + 4;
	}
	return n + (mod == 1 ? 1 : mod == 2 ? 4 : 0);
}

/* An Iz immediate's bytes (REX.W wins over 0x66) */
#define VT_FAST_IZ(osz, rexw) ((osz) && !(rexw) ? 2u : 4u)

/* The 64-bit instruction at code (avail bytes of it, at most 15 read):
 * TRUE and *in if it is one of the common ones, with the length, class
 * and relative operands Zydis gives it; FALSE: ask Zydis (anything else,
 * branches with prefixes, far and invalid ones, too few bytes).  Not for
 * 16- or 32-bit code.  Bytes Zydis refuses as an instruction (a lock
 * prefix where none may be) can still get an answer. */
static inline __attribute__((always_inline)) gboolean vt_fast_insn_decode(const guint8 *code, gsize avail, VtFastInsn *in)
{
	gsize p = 0, n;
	gboolean osz, rexw = FALSE, other_prefix, modrm = FALSE;
	guint8 op, cls, prefixes = 0, iclass = ptic_other, direct = 0;

	for (; p < avail && p < 5 && vt_fast_insn_prefix[code[p]]; p++)
		prefixes |= vt_fast_insn_prefix[code[p]];
	osz = (prefixes & VT_FP_OSZ) != 0;
	other_prefix = (prefixes & VT_FP_OTHER) != 0;
	if (p < avail && (code[p] & 0xf0) == 0x40)
		rexw = (code[p++] & 8) != 0;
	if (p + 1 >= avail || p >= 5)
		return FALSE;
	op = code[p++];
	cls = op == 0x0f ? vt_fast_insn_map1[code[p++]] : vt_fast_insn_map0[op];
	if (cls >= VT_FL_JCC8 && (osz || other_prefix) && cls != VT_FL_FF)
		return FALSE;            /* prefixed branches: Zydis */
	switch (cls) {               /* the bytes after the opcode, the class */
	case VT_FL_N: n = 0; break;
	case VT_FL_M: n = vt_fast_insn_modrm(code + p, avail - p); modrm = TRUE; break;
	case VT_FL_M1: n = vt_fast_insn_modrm(code + p, avail - p); n = n ? n + 1 : 0; modrm = TRUE; break;
	case VT_FL_MZ:
		n = vt_fast_insn_modrm(code + p, avail - p);
		n = n ? n + VT_FAST_IZ(osz, rexw) : 0;
		modrm = TRUE;
		break;
	case VT_FL_I1: n = 1; break;
	case VT_FL_IZ: n = VT_FAST_IZ(osz, rexw); break;
	case VT_FL_MOVI: n = rexw ? 8 : osz ? 2 : 4; break;
	case VT_FL_F6: case VT_FL_F7:
		n = vt_fast_insn_modrm(code + p, avail - p);
		if (n && ((code[p] >> 3) & 7) < 2)   /* test r/m, imm */
			n += cls == VT_FL_F6 ? 1 : VT_FAST_IZ(osz, rexw);
		modrm = TRUE;
		break;
	case VT_FL_JCC8: n = 1; iclass = ptic_cond_jump; break;
	case VT_FL_JCC32: n = 4; iclass = ptic_cond_jump; break;
	case VT_FL_JMP8: n = 1; iclass = ptic_jump; direct = 1; break;
	case VT_FL_JMP32: n = 4; iclass = ptic_jump; direct = 1; break;
	case VT_FL_CALL: n = 4; iclass = ptic_call; direct = 1; break;
	case VT_FL_RET: n = 0; iclass = ptic_return; break;
	case VT_FL_RET16: n = 2; iclass = ptic_return; break;
	case VT_FL_FF: {
		guint reg = p < avail ? (code[p] >> 3) & 7 : 7;

		if (reg == 3 || reg == 5 || reg == 7 || ((reg == 2 || reg == 4) && (osz || other_prefix)))
			return FALSE;    /* far, invalid, prefixed branches: Zydis */
		n = vt_fast_insn_modrm(code + p, avail - p);
		modrm = TRUE;
		iclass = reg == 2 ? ptic_call : reg == 4 ? ptic_jump : ptic_other;
		break;
	}
	default:
		return FALSE;
	}
	if ((modrm && !n) || p + n > avail || p + n > 15)
		return FALSE;
	in->len = (guint8)(p + n);
	in->iclass = iclass;
	in->direct = direct;
	in->disp = 0;
	/* ModRM mod 0, r/m 5 (no SIB): RIP-relative in 64-bit code; c7 f8:
	 * xbegin rel32 (rel16) */
	in->relative = (modrm && (code[p] & 0xc7) == 0x05) || direct || iclass == ptic_cond_jump ||
		       (op == 0xc7 && code[p] == 0xf8);
	if (direct || iclass == ptic_cond_jump)   /* rel8 or rel32 */
		in->disp = n == 1 ? (gint8)code[p] :
			(gint32)((guint32)code[p] | (guint32)code[p + 1] << 8 | (guint32)code[p + 2] << 16 |
				 (guint32)code[p + 3] << 24);
	return TRUE;
}

#endif
