/* fastinsn.c - the tables of fastinsn.h's length decoder: which opcodes
 * of the one-byte and 0x0f maps it knows (the common ones of 64-bit
 * kernel code) and how many bytes follow each. */
#include "config.h"

#include "src/decode/fastinsn.h"

guint8 vt_fast_insn_map0[256], vt_fast_insn_map1[256], vt_fast_insn_prefix[256];

static void prefixes_init(void)
{
	static const guint8 other[] = { 0x67, 0xf2, 0xf3, 0xf0, 0x26, 0x36, 0x64, 0x65 };

	vt_fast_insn_prefix[0x2e] = vt_fast_insn_prefix[0x3e] = VT_FP_IGNORED;   /* (branch hints) */
	vt_fast_insn_prefix[0x66] = VT_FP_OSZ;
	for (guint i = 0; i < G_N_ELEMENTS(other); i++)
		vt_fast_insn_prefix[other[i]] = VT_FP_OTHER;
}

/* m[first..last] = cls */
static void set_range(guint8 *m, guint first, guint last, guint8 cls)
{
	for (guint i = first; i <= last; i++)
		m[i] = cls;
}

static void map0_init(void)
{
	static const guint8 alu[] = { 0x00, 0x08, 0x10, 0x18, 0x20, 0x28, 0x30, 0x38 };
	guint8 *m = vt_fast_insn_map0;

	for (guint i = 0; i < G_N_ELEMENTS(alu); i++) {
		set_range(m, alu[i], alu[i] + 3, VT_FL_M);
		m[alu[i] + 4] = VT_FL_I1;
		m[alu[i] + 5] = VT_FL_IZ;
	}
	set_range(m, 0x50, 0x5f, VT_FL_N);
	m[0x63] = VT_FL_M;
	m[0x68] = VT_FL_IZ;
	m[0x69] = VT_FL_MZ;
	m[0x6a] = VT_FL_I1;
	m[0x6b] = VT_FL_M1;
	set_range(m, 0x70, 0x7f, VT_FL_JCC8);
	m[0x80] = m[0x83] = VT_FL_M1;
	m[0x81] = VT_FL_MZ;
	set_range(m, 0x84, 0x8f, VT_FL_M);
	set_range(m, 0x90, 0x99, VT_FL_N);
	m[0x9c] = m[0x9d] = VT_FL_N;
	m[0xa8] = VT_FL_I1;
	m[0xa9] = VT_FL_IZ;
	set_range(m, 0xb0, 0xb7, VT_FL_I1);
	set_range(m, 0xb8, 0xbf, VT_FL_MOVI);
	m[0xc0] = m[0xc1] = m[0xc6] = VT_FL_M1;
	m[0xc7] = VT_FL_MZ;
	m[0xc2] = VT_FL_RET16;
	m[0xc3] = VT_FL_RET;
	set_range(m, 0xd0, 0xd3, VT_FL_M);
	m[0xe8] = VT_FL_CALL;
	m[0xe9] = VT_FL_JMP32;
	m[0xeb] = VT_FL_JMP8;
	m[0xf6] = VT_FL_F6;
	m[0xf7] = VT_FL_F7;
	m[0xfe] = VT_FL_M;
	m[0xff] = VT_FL_FF;
}

static void map1_init(void)
{
	guint8 *m = vt_fast_insn_map1;

	set_range(m, 0x18, 0x1f, VT_FL_M);        /* hints, nops, endbr64 */
	set_range(m, 0x40, 0x4f, VT_FL_M);        /* cmovcc */
	set_range(m, 0x80, 0x8f, VT_FL_JCC32);
	set_range(m, 0x90, 0x9f, VT_FL_M);        /* setcc */
	m[0xa2] = m[0x31] = m[0x0b] = VT_FL_N;    /* cpuid, rdtsc, ud2 */
	m[0xa3] = m[0xab] = m[0xb3] = m[0xbb] = VT_FL_M;
	m[0xa4] = m[0xac] = m[0xba] = VT_FL_M1;
	m[0xa5] = m[0xad] = m[0xaf] = VT_FL_M;
	m[0xb0] = m[0xb1] = m[0xc0] = m[0xc1] = VT_FL_M;
	m[0xb6] = m[0xb7] = m[0xbe] = m[0xbf] = VT_FL_M;
	m[0xb8] = m[0xbc] = m[0xbd] = VT_FL_M;
	set_range(m, 0xc8, 0xcf, VT_FL_N);        /* bswap */
}

void vt_fast_insn_init(void)
{
	static gsize done;

	if (g_once_init_enter(&done)) {
		prefixes_init();
		map0_init();
		map1_init();
		g_once_init_leave(&done, 1);
	}
}

gboolean vt_fast_insn_agrees(const VtFastInsn *in, const ZydisDecodedInstruction *zi)
{
	gboolean relative = (zi->attributes & ZYDIS_ATTRIB_IS_RELATIVE) != 0;
	gboolean has_disp = in->direct || in->iclass == ptic_cond_jump;

	return in->len == zi->length && in->relative == relative &&
	       (!has_disp || (zi->raw.imm[0].is_relative && in->disp == zi->raw.imm[0].value.s));
}
