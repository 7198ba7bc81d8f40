/* tcg-count.c - a QEMU TCG plugin for the tests: counts the instructions
 * QEMU starts (an inline add before each one: QEMU's own count, rep
 * iterations and restarted instructions included), independently of
 * vmtrace-tcg.so, and writes "insns N\n" and "first_tb 0xADDR\n" (the
 * first block QEMU translated, i.e. ran) to the file given as out=FILE at
 * exit. */
#include <stdio.h>
#include <string.h>

#include "src/tcg/qemu-plugin-api.h"

VT_QEMU_PLUGIN_EXPORT int qemu_plugin_version = VT_QEMU_PLUGIN_API;

static uint64_t insns, first_tb;
static int have_first;
static const char *out;

static void trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	if (!have_first) {
		first_tb = qemu_plugin_tb_vaddr(tb);
		have_first = 1;
	}
	for (size_t i = 0; i < qemu_plugin_tb_n_insns(tb); i++)
		qemu_plugin_register_vcpu_insn_exec_inline(qemu_plugin_tb_get_insn(tb, i), QEMU_PLUGIN_INLINE_ADD_U64,
							   &insns, 1);
}

static void done(qemu_plugin_id_t id, void *p)
{
	FILE *f = fopen(out, "w");

	(void)id;
	(void)p;
	if (f) {
		fprintf(f, "insns %llu\nfirst_tb %#llx\n", (unsigned long long)insns, (unsigned long long)first_tb);
		fclose(f);
	}
}

VT_QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	(void)info;
	if (argc != 1 || strncmp(argv[0], "out=", 4))
		return -1;
	out = argv[0] + 4;
	qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
	qemu_plugin_register_atexit_cb(id, done, NULL);
	return 0;
}
