/* tcg-format.h - what the plugin (vmtrace-tcg.so) writes and the converter
 * (convert.c) reads: the directory's files and the instruction clock. */
#ifndef VT_TCG_FORMAT_H
#define VT_TCG_FORMAT_H

#include <stdint.h>

#define VT_TCG_FORMAT 1

/* The instruction clock: TSC = T0 + instructions started, one tick each;
 * CTC = TSC * D / N (CPUID.15H: EAX = D, EBX = N); MTC every 2^period CTC;
 * CBR and the nominal ratio are constant.  perf time (ns) = TSC (1 GHz). */
#define VT_TCG_T0 0x10000000ULL
#define VT_TCG_CTC_N 88
#define VT_TCG_CTC_D 2
#define VT_TCG_MTC_PERIOD 3
#define VT_TCG_CBR 10

/* DIR/code: one record per translation, then `len` bytes of code. */
typedef struct {
	uint64_t vaddr;
	uint32_t len;
	uint32_t flags;          /* VT_TCG_CODE_* */
	uint64_t tsc;
} VtTcgCodeHeader;

/* Bytes that differ from earlier ones at the same address are the same
 * code changed (a TEXT_POKE), not another process's: kernel code, and
 * code that ran before the first kernel-half instruction or outside
 * 64-bit mode (firmware that copies itself, the boot's early stages). */
#define VT_TCG_CODE_POKE 1u

#endif
