/* tcg-count.c - a QEMU TCG plugin for the tests: counts the instructions
 * QEMU starts (an inline add before each one: QEMU's own count, rep
 * iterations and restarted instructions included), independently of
 * vmtrace-tcg.so, and writes "insns N\n" and "first_tb 0xADDR\n" (the
 * first block QEMU translated, i.e. ran) to the file given as out=FILE at
 * exit.  With percpu=1 it also counts per vCPU, by a callback before each
 * instruction (it gets the vCPU's index: exact with one TCG thread or
 * several), and writes "vcpu I insns N first 0xADDR" (the first block vCPU
 * I ran) and "kernel_at K" (QEMU's total count, 1-based, when it first
 * ran kernel-half code; 0: never) for each vCPU that ran. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/tcg/qemu-plugin-api.h"

VT_QEMU_PLUGIN_EXPORT int qemu_plugin_version = VT_QEMU_PLUGIN_API;

typedef struct {
	uint64_t insns, first;
	uint64_t kernel_at;            /* the total count when it first ran kernel-half code (+1; 0: never) */
	int ran;
} PerVcpu;

static uint64_t insns, first_tb;
static int have_first, percpu;
static unsigned nvcpus;
static PerVcpu *per;
static const char *out;

static void insn_exec(unsigned int vi, void *udata)
{
	if (vi >= nvcpus)
		return;
	if (!per[vi].ran) {
		per[vi].ran = 1;
		per[vi].first = (uint64_t)(uintptr_t)udata;
	}
	per[vi].insns++;
	if (!per[vi].kernel_at && ((uint64_t)(uintptr_t)udata >> 63))
		per[vi].kernel_at = insns + 1;
}

static void trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	if (!have_first) {
		first_tb = qemu_plugin_tb_vaddr(tb);
		have_first = 1;
	}
	for (size_t i = 0; i < qemu_plugin_tb_n_insns(tb); i++) {
		struct qemu_plugin_insn *in = qemu_plugin_tb_get_insn(tb, i);

		qemu_plugin_register_vcpu_insn_exec_inline(in, QEMU_PLUGIN_INLINE_ADD_U64, &insns, 1);
		if (percpu)
			qemu_plugin_register_vcpu_insn_exec_cb(in, insn_exec, QEMU_PLUGIN_CB_NO_REGS,
							       (void *)(uintptr_t)qemu_plugin_insn_vaddr(in));
	}
}

static void done(qemu_plugin_id_t id, void *p)
{
	FILE *f = fopen(out, "w");

	(void)id;
	(void)p;
	if (!f)
		return;
	fprintf(f, "insns %llu\nfirst_tb %#llx\n", (unsigned long long)insns, (unsigned long long)first_tb);
	for (unsigned i = 0; percpu && i < nvcpus; i++)
		if (per[i].ran)
			fprintf(f, "vcpu %u insns %llu first %#llx kernel_at %llu\n", i, (unsigned long long)per[i].insns,
				(unsigned long long)per[i].first, (unsigned long long)per[i].kernel_at);
	fclose(f);
}

VT_QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4))
			out = argv[i] + 4;
		else if (!strcmp(argv[i], "percpu=1"))
			percpu = 1;
		else
			return -1;
	}
	if (!out)
		return -1;
	nvcpus = info->system.max_vcpus > 0 ? (unsigned)info->system.max_vcpus : 1;
	per = calloc(nvcpus, sizeof(*per));
	if (!per)
		return -1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
	qemu_plugin_register_atexit_cb(id, done, NULL);
	return 0;
}
