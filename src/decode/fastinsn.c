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

/* Opcodes first..last are of class cls. */
typedef struct {
	guint8 first, last, cls;
} Range;

static const Range map0_ranges[] = {
	{ 0x50, 0x5f, VT_FL_N }, { 0x63, 0x63, VT_FL_M }, { 0x68, 0x68, VT_FL_IZ }, { 0x69, 0x69, VT_FL_MZ },
	{ 0x6a, 0x6a, VT_FL_I1 }, { 0x6b, 0x6b, VT_FL_M1 }, { 0x70, 0x7f, VT_FL_JCC8 }, { 0x80, 0x80, VT_FL_M1 },
	{ 0x81, 0x81, VT_FL_MZ }, { 0x83, 0x83, VT_FL_M1 }, { 0x84, 0x8f, VT_FL_M }, { 0x90, 0x99, VT_FL_N },
	{ 0x9c, 0x9d, VT_FL_N }, { 0xa8, 0xa8, VT_FL_I1 }, { 0xa9, 0xa9, VT_FL_IZ }, { 0xb0, 0xb7, VT_FL_I1 },
	{ 0xb8, 0xbf, VT_FL_MOVI }, { 0xc0, 0xc1, VT_FL_M1 }, { 0xc2, 0xc2, VT_FL_RET16 }, { 0xc3, 0xc3, VT_FL_RET },
	{ 0xc6, 0xc6, VT_FL_M1 }, { 0xc7, 0xc7, VT_FL_MZ }, { 0xd0, 0xd3, VT_FL_M }, { 0xe8, 0xe8, VT_FL_CALL },
	{ 0xe9, 0xe9, VT_FL_JMP32 }, { 0xeb, 0xeb, VT_FL_JMP8 }, { 0xf6, 0xf6, VT_FL_F6 }, { 0xf7, 0xf7, VT_FL_F7 },
	{ 0xfe, 0xfe, VT_FL_M }, { 0xff, 0xff, VT_FL_FF },
};

static const Range map1_ranges[] = {
	{ 0x0b, 0x0b, VT_FL_N },                  /* ud2 */
	{ 0x18, 0x1f, VT_FL_M },                  /* hints, nops, endbr64 */
	{ 0x31, 0x31, VT_FL_N },                  /* rdtsc */
	{ 0x40, 0x4f, VT_FL_M },                  /* cmovcc */
	{ 0x80, 0x8f, VT_FL_JCC32 }, { 0x90, 0x9f, VT_FL_M },   /* jcc, setcc */
	{ 0xa2, 0xa2, VT_FL_N },                  /* cpuid */
	{ 0xa3, 0xa3, VT_FL_M }, { 0xa4, 0xa4, VT_FL_M1 }, { 0xa5, 0xa5, VT_FL_M }, { 0xab, 0xab, VT_FL_M },
	{ 0xac, 0xac, VT_FL_M1 }, { 0xad, 0xad, VT_FL_M }, { 0xaf, 0xb1, VT_FL_M }, { 0xb3, 0xb3, VT_FL_M },
	{ 0xb6, 0xb8, VT_FL_M }, { 0xba, 0xba, VT_FL_M1 }, { 0xbb, 0xbf, VT_FL_M }, { 0xc0, 0xc1, VT_FL_M },
	{ 0xc8, 0xcf, VT_FL_N },                  /* bswap */
};

static void ranges_set(guint8 *m, const Range *r, gsize n)
{
	for (gsize i = 0; i < n; i++)
		for (guint op = r[i].first; op <= r[i].last; op++)
			m[op] = r[i].cls;
}

static void map0_init(void)
{
	static const guint8 alu[] = { 0x00, 0x08, 0x10, 0x18, 0x20, 0x28, 0x30, 0x38 };
	guint8 *m = vt_fast_insn_map0;

	for (guint i = 0; i < G_N_ELEMENTS(alu); i++) {
		for (guint k = 0; k < 4; k++)
			m[alu[i] + k] = VT_FL_M;
		m[alu[i] + 4] = VT_FL_I1;
		m[alu[i] + 5] = VT_FL_IZ;
	}
	ranges_set(m, map0_ranges, G_N_ELEMENTS(map0_ranges));
}

void vt_fast_insn_init(void)
{
	static gsize done;

	if (g_once_init_enter(&done)) {
		prefixes_init();
		map0_init();
		ranges_set(vt_fast_insn_map1, map1_ranges, G_N_ELEMENTS(map1_ranges));
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
