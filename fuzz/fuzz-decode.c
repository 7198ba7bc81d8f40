/* fuzz-decode.c - libFuzzer target for the branch decoder (src/decode):
 * any bytes as one AUX queue, decoded against small host and guest images
 * that share their addresses (the NR switch runs), must end - no crash, no
 * hang, no sanitizer report - and every branch record must be well formed;
 * the first byte picks jumps dropped, IPC cycles counted, a CYC threshold
 * and (without cycles) decoding in ranges of 256 to 4096 bytes as several
 * threads decode a queue (vt_decode_queue_range).  vmtrace's own query
 * decoder runs beside libipt's (VMTRACE_QRY_CHECK): an answer that differs
 * aborts, so every input is a differential test of the two as well.
 *
 * Build: make fuzz (clang); without libFuzzer, link fuzz/standalone.c for a
 * main() that decodes the files named on the command line. */
#include "config.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "src/decode/decode.h"
#include "src/decode/internal.h"

static VtDecodeImage *host, *guest;
static char *tmpdir;

/* The image files live until the process ends (libipt maps them lazily). */
static void remove_tmpdir(void)
{
	static const char *const files[] = { "host/kcore", "host/kallsyms", "guest/kcore", "guest/kallsyms", "host",
					     "guest", "" };

	for (guint i = 0; tmpdir && i < G_N_ELEMENTS(files); i++) {
		g_autofree char *p = g_build_filename(tmpdir, files[i], NULL);

		g_remove(p);
	}
}

/* DIR/kcore (one executable PT_LOAD at 0x1000) + DIR/kallsyms. */
static VtDecodeImage *image(const char *dir, const guint8 *code, gsize len)
{
	g_autofree char *kcore = g_build_filename(dir, "kcore", NULL);
	g_autofree char *ks = g_build_filename(dir, "kallsyms", NULL);
	guint8 f[sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr) + 64] = { 0 };
	Elf64_Ehdr *eh = (Elf64_Ehdr *)(void *)f;
	Elf64_Phdr *ph = (Elf64_Phdr *)(void *)(f + sizeof(*eh));

	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_type = ET_CORE;
	eh->e_machine = EM_X86_64;
	eh->e_phoff = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 1;
	ph->p_type = PT_LOAD;
	ph->p_flags = PF_R | PF_X;
	ph->p_offset = sizeof(*eh) + sizeof(*ph);
	ph->p_vaddr = 0x1000;
	ph->p_filesz = ph->p_memsz = 64;
	memcpy(f + ph->p_offset, code, MIN(len, (gsize)64));
	g_mkdir_with_parents(dir, 0700);
	if (!g_file_set_contents(kcore, (char *)f, sizeof(f), NULL) ||
	    !g_file_set_contents(ks, "0000000000001000 T code\n", -1, NULL))
		abort();
	return vt_decode_image_load_dir(dir, "fuzz", NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* host: nop; vmresume; jmp back - guest: jmp; jz back; cpuid (tests/test-decode.c) */
	static const guint8 h[] = { 0x90, 0x0f, 0x01, 0xc3, 0xeb, 0xfa };
	guint8 g[32] = { 0xeb, 0x0e };
	const char *dir = tmpdir = g_dir_make_tmp("fuzz-decode-XXXXXX", NULL);
	g_autofree char *hd = g_build_filename(dir, "host", NULL), *gd = g_build_filename(dir, "guest", NULL);

	(void)argc;
	(void)argv;
	g_setenv("VMTRACE_QRY_CHECK", "1", FALSE);
	g[0x10] = 0x74;
	g[0x11] = 0xee;
	g[0x12] = 0x0f;
	g[0x13] = 0xa2;
	host = image(hd, h, sizeof(h));
	guest = image(gd, g, sizeof(g));
	if (!host || !guest)
		abort();
	atexit(remove_tmpdir);
	return 0;
}

/* The queue of proto in ranges of about `step` bytes, one after the other,
 * into out. */
static void decode_ranges(const VtDecodeQueue *proto, gsize size, guint64 step, GArray *out)
{
	VtDecodeQueue *d = vt_decode_queue_clone(proto, NULL);
	guint64 start = 0, end = 0;

	if (!d)
		abort();
	for (guint64 k = 1; end < size; k++, start = end) {
		if (!vt_decode_queue_boundary(d, k * step, &end, NULL) || end < start ||
		    !vt_decode_queue_range(d, start, end, NULL))
			abort();
		while (vt_decode_queue_next(d, out, G_MAXUINT))
			;
	}
	vt_decode_queue_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	VtDecodeCpu cpu = { .cpuid_15_eax = 2, .cpuid_15_ebx = 168, .mtc_freq = 3, .nom_freq = 30,
			    .family = 6, .model = 85, .stepping = 4 };
	GArray *out = g_array_new(FALSE, FALSE, sizeof(VtBranch));
	/* the first byte's low bits: jumps dropped (the walker joins blocks),
	 * cycles counted (cycles.c reads the packets again), a CYC threshold;
	 * bits 4-5 the range size (with bit 3: ranges), bit 6 power events
	 * (perf's psb and cbr: --itrace=p) */
	guint8 how = size ? data[0] : 0;
	VtDecodeQueue *q;

	cpu.cyc_thresh = (how & 4) ? 3 : 0;
	q = vt_decode_queue_new(data, size, &cpu, host, guest, NULL);
	if (!q)
		abort();
	vt_decode_queue_set_drop_jumps(q, (how & 1) != 0);
	vt_decode_queue_set_cycles(q, (how & 2) != 0);
	vt_decode_queue_set_power(q, (how & 64) != 0);
	if ((how & 8) && vt_decode_queue_splits(q))
		decode_ranges(q, size, 256u << ((how >> 4) & 3), out);
	else
		while (vt_decode_queue_next(q, out, G_MAXUINT))
			;
	vt_decode_queue_free(q);
	for (guint i = 0; i < out->len; i++) {
		const VtBranch *b = &g_array_index(out, VtBranch, i);

		gboolean power = b->kind == VT_BRANCH_PSB || b->kind == VT_BRANCH_CBR;

		if ((b->kind > VT_BRANCH_ERROR && !(power && (how & 64))) ||
		    (b->kind == VT_BRANCH_ERROR && b->code <= 0) ||
		    b->offset > size || (b->ipc && !(how & 2)) || ((how & 1) && b->kind == VT_BRANCH_JUMP))
			abort();
	}
	g_array_free(out, TRUE);
	return 0;
}
