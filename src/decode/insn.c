/* insn.c - what one instruction does to control flow, with Zydis. */
#include "config.h"

#include <Zydis/Zydis.h>

#include "src/decode/internal.h"

VtInsnKind vt_decode_insn_kind(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op)
{
	gboolean direct = in->operand_count_visible > 0 && op[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
			  op[0].imm.is_relative;

	if (vt_decode_mnemonic_is_cond(in->mnemonic))
		return VT_INSN_COND;
	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_JMP:
		if (in->meta.branch_type == ZYDIS_BRANCH_TYPE_FAR)
			return VT_INSN_FAR;
		return direct ? VT_INSN_JUMP : VT_INSN_JUMP_IND;
	case ZYDIS_MNEMONIC_CALL:
		if (in->meta.branch_type == ZYDIS_BRANCH_TYPE_FAR)
			return VT_INSN_FAR;
		return direct ? VT_INSN_CALL : VT_INSN_CALL_IND;
	case ZYDIS_MNEMONIC_RET:
		return in->meta.branch_type == ZYDIS_BRANCH_TYPE_FAR ? VT_INSN_FAR : VT_INSN_RETURN;
	case ZYDIS_MNEMONIC_SYSCALL: case ZYDIS_MNEMONIC_SYSENTER:
		return VT_INSN_SYSCALL;
	case ZYDIS_MNEMONIC_SYSRET: case ZYDIS_MNEMONIC_SYSEXIT:
		return VT_INSN_SYSRET;
	case ZYDIS_MNEMONIC_IRET: case ZYDIS_MNEMONIC_IRETD: case ZYDIS_MNEMONIC_IRETQ:
		return VT_INSN_IRET;
	case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INT1: case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INTO:
		return VT_INSN_INT;
	case ZYDIS_MNEMONIC_VMLAUNCH: case ZYDIS_MNEMONIC_VMRESUME:
		return VT_INSN_VMENTRY;
	case ZYDIS_MNEMONIC_VMCALL: case ZYDIS_MNEMONIC_VMMCALL:
		return VT_INSN_FAR;          /* libipt: a far call (it leaves a guest) */
	case ZYDIS_MNEMONIC_CPUID: case ZYDIS_MNEMONIC_IN: case ZYDIS_MNEMONIC_OUT:
	case ZYDIS_MNEMONIC_INSB: case ZYDIS_MNEMONIC_INSW: case ZYDIS_MNEMONIC_INSD:
	case ZYDIS_MNEMONIC_OUTSB: case ZYDIS_MNEMONIC_OUTSW: case ZYDIS_MNEMONIC_OUTSD:
	case ZYDIS_MNEMONIC_RDMSR: case ZYDIS_MNEMONIC_WRMSR: case ZYDIS_MNEMONIC_XSETBV:
	case ZYDIS_MNEMONIC_RDPMC: case ZYDIS_MNEMONIC_INVD: case ZYDIS_MNEMONIC_WBINVD:
	case ZYDIS_MNEMONIC_MONITOR: case ZYDIS_MNEMONIC_MWAIT: case ZYDIS_MNEMONIC_GETSEC:
		return VT_INSN_VMEXIT;
	case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1: case ZYDIS_MNEMONIC_UD2: case ZYDIS_MNEMONIC_HLT:
		return VT_INSN_STOP;
	default:
		return VT_INSN_OTHER;
	}
}

gboolean vt_decode_insn(const VtDecodeImage *img, guint64 ip, VtInsn *insn)
{
	gsize avail;
	const guint8 *code = vt_decode_image_code(img, ip, &avail);

	return vt_decode_insn_bytes_mode(code, avail, ip, VT_MODE_64, insn);
}

gboolean vt_decode_insn_mode(const VtDecodeImage *img, guint64 ip, guint8 mode, VtInsn *insn)
{
	gsize avail;
	const guint8 *code = vt_decode_image_code(img, ip, &avail);

	return vt_decode_insn_bytes_mode(code, avail, ip, mode, insn);
}

gboolean vt_decode_insn_bytes(const guint8 *code, gsize avail, guint64 ip, VtInsn *insn)
{
	return vt_decode_insn_bytes_mode(code, avail, ip, VT_MODE_64, insn);
}

/* A Zydis decoder for mode (VT_MODE_*). */
void vt_decode_zydis_init(ZydisDecoder *dec, guint8 mode)
{
	if (mode == VT_MODE_16)
		ZydisDecoderInit(dec, ZYDIS_MACHINE_MODE_LEGACY_16, ZYDIS_STACK_WIDTH_16);
	else if (mode == VT_MODE_32)
		ZydisDecoderInit(dec, ZYDIS_MACHINE_MODE_LEGACY_32, ZYDIS_STACK_WIDTH_32);
	else
		ZydisDecoderInit(dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
}

gboolean vt_decode_insn_bytes_mode(const guint8 *code, gsize avail, guint64 ip, guint8 mode, VtInsn *insn)
{
	ZydisDecoder dec;
	ZydisDecoderContext ctx;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT_VISIBLE];

	insn->len = 0;
	insn->kind = VT_INSN_BAD;
	insn->target = 0;
	insn->writes_stack_top = FALSE;
	if (!code)
		return FALSE;
	vt_decode_zydis_init(&dec, mode);
	/* the visible operands only: all that is looked at (hidden ones cost as much) */
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, &ctx, code, MIN(avail, (gsize)ZYDIS_MAX_INSTRUCTION_LENGTH),
							&in)) ||
	    !ZYAN_SUCCESS(ZydisDecoderDecodeOperands(&dec, &ctx, &in, op, in.operand_count_visible)))
		return FALSE;
	insn->len = in.length;
	insn->kind = vt_decode_insn_kind(&in, op);
	if (insn->kind == VT_INSN_COND || insn->kind == VT_INSN_JUMP || insn->kind == VT_INSN_CALL) {
		ZyanU64 t;

		if (mode == VT_MODE_16 || mode == VT_MODE_32)   /* linear IPs: no 16/32-bit wrap (libipt's rule) */
			insn->target = ip + in.length + (guint64)op[0].imm.value.s;
		else if (ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &op[0], ip, &t)))
			insn->target = t;
	}
	insn->writes_stack_top = vt_decode_insn_writes_stack_top(&in, op);
	return TRUE;
}

gboolean vt_decode_insn_writes_stack_top(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op)
{
	/* mov REG, (%rsp): the retpoline thunks' way to return elsewhere */
	return in->mnemonic == ZYDIS_MNEMONIC_MOV && in->operand_count_visible == 2 &&
	       op[0].type == ZYDIS_OPERAND_TYPE_MEMORY && op[0].mem.base == ZYDIS_REGISTER_RSP &&
	       op[0].mem.index == ZYDIS_REGISTER_NONE && !op[0].mem.disp.has_displacement &&
	       op[1].type == ZYDIS_OPERAND_TYPE_REGISTER;
}

const char *vt_branch_kind_name(VtBranchKind k)
{
	static const char *const names[] = {
		[VT_BRANCH_JUMP] = "jump", [VT_BRANCH_CALL] = "call", [VT_BRANCH_RETURN] = "return",
		[VT_BRANCH_SYSCALL] = "syscall", [VT_BRANCH_SYSRET] = "sysret", [VT_BRANCH_IRET] = "iret",
		[VT_BRANCH_INT] = "int", [VT_BRANCH_ASYNC] = "async", [VT_BRANCH_VMENTRY] = "vmentry",
		[VT_BRANCH_VMEXIT] = "vmexit", [VT_BRANCH_TRACE_BEGIN] = "trace-begin",
		[VT_BRANCH_TRACE_END] = "trace-end", [VT_BRANCH_ERROR] = "error", [VT_BRANCH_PSB] = "psb",
		[VT_BRANCH_CBR] = "cbr", [VT_BRANCH_FLOW_END] = "flow-end",
	};

	return (guint)k < G_N_ELEMENTS(names) && names[k] ? names[k] : "?";
}

/* perf's kinds (intel-pt-decoder's INTEL_PT_ERR_*, 1-11) and which of
 * libipt's errors is which: what the error means for the walk, as perf's
 * own decoder meets the same trouble (a failed read of the code -EILSEQ,
 * trace that does not fit the code -ENOENT, a packet it cannot parse or
 * place -EBADMSG). */
guint vt_decode_perf_error(int code, const char **message)
{
	static const char *const perf[] = {
		[1] = "Memory allocation failed", [2] = "Internal error", [3] = "Bad packet",
		[4] = "No more data", [5] = "Failed to get instruction",
		[6] = "Trace doesn't match instruction", [7] = "Overflow packet", [8] = "Lost trace data",
		[9] = "Unknown error!", [10] = "Never-ending loop (refer perf config intel-pt.max-loops)",
		[11] = "Broken emulated ptwrite",
	};
	guint k;

	switch (code) {
	case pte_nomem: k = 1; break;
	case pte_internal: case pte_invalid: case pte_bad_config: case pte_bad_image: case pte_bad_lock:
		k = 2;
		break;
	case pte_bad_opc: case pte_bad_packet: case pte_bad_context: case pte_bad_status_update: k = 3; break;
	case pte_eos: k = 4; break;
	case pte_nomap: case pte_bad_insn: k = 5; break;
	case pte_bad_query: case pte_bad_retcomp: case pte_retstack_empty: case pte_noip: case pte_ip_suppressed:
	case pte_no_enable: case pte_event_ignored:
		k = 6;
		break;
	case pte_overflow: case VT_DECODE_ERR_OVERFLOW: k = 7; break;
	case VT_DECODE_ERR_LOST: k = 8; break;
	case VT_DECODE_ERR_LOOP: k = 10; break;
	default: k = 9; break;
	}
	if (message)
		*message = perf[k];
	return k;
}

const char *vt_decode_error_detail(int code)
{
	if (code == VT_DECODE_ERR_OVERFLOW)
		return "overflow: the processor lost trace data";
	if (code == VT_DECODE_ERR_LOST)
		return "a PERF_RECORD_AUX flagged TRUNCATED: the AUX buffer was full, trace data lost";
	return code == VT_DECODE_ERR_LOOP ? "no progress: the walk loops without reading trace" : pt_errstr(code);
}

/* The length of a ModRM operand (ModRM, SIB, displacement) at m. */
static guint modrm_len(const guint8 *m, gsize avail)
{
	guint mod = m[0] >> 6, rm = m[0] & 7, n = 1;

	if (mod == 3)
		return 1;
	if (rm == 4) {                   /* SIB */
		if (avail < 2)
			return 0;
		n++;
		if (mod == 0 && (m[1] & 7) == 5)
			return n + 4;
	} else if (mod == 0 && rm == 5) {
		return n + 4;            /* RIP-relative */
	}
	return n + (mod == 1 ? 1 : mod == 2 ? 4 : 0);
}

gboolean vt_decode_insn_branch(const guint8 *code, gsize avail, guint8 *kind, guint8 *len)
{
	gsize p = 0, n;
	guint8 k;

	while (p < avail && p < 4 && (code[p] == 0x2e || code[p] == 0x3e || (code[p] & 0xf0) == 0x40))
		p++;                     /* cs/ds (branch hints, notrack), REX */
	if (p >= avail || p == 4)
		return FALSE;
	if ((code[p] == 0x0f || code[p] == 0xff) && p + 2 > avail)
		return FALSE;
	switch (code[p]) {
	case 0x70 ... 0x7f: case 0xe0 ... 0xe3:
		k = VT_INSN_COND, n = 2;
		break;
	case 0x0f:
		if ((code[p + 1] & 0xf0) != 0x80)
			return FALSE;
		k = VT_INSN_COND, n = 6;
		break;
	case 0xe8:
		k = VT_INSN_CALL, n = 5;
		break;
	case 0xe9:
		k = VT_INSN_JUMP, n = 5;
		break;
	case 0xeb:
		k = VT_INSN_JUMP, n = 2;
		break;
	case 0xc3:
		k = VT_INSN_RETURN, n = 1;
		break;
	case 0xc2:
		k = VT_INSN_RETURN, n = 3;
		break;
	case 0xff:
		if (((code[p + 1] >> 3) & 7) != 2 && ((code[p + 1] >> 3) & 7) != 4)
			return FALSE;
		k = ((code[p + 1] >> 3) & 7) == 2 ? VT_INSN_CALL_IND : VT_INSN_JUMP_IND;
		n = 1 + modrm_len(code + p + 1, avail - p - 1);
		if (n == 1)
			return FALSE;
		break;
	default:
		return FALSE;
	}
	if (p + n > avail)
		return FALSE;
	*kind = k;
	*len = (guint8)(p + n);
	return TRUE;
}
