/* test-decode.c - unit tests of src/decode/ (GTest): kernel images (ELF
 * core code segments, kallsyms with perf's rules, bad files), and the
 * host/guest image switch on the NR bit (strategy D) on a trace written
 * with libipt's encoder where host and guest code share their addresses. */
#include "config.h"

#include <elf.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <intel-pt.h>
#include <glib/gstdio.h>

#include "src/decode/decode.h"
#include "src/decode/fastinsn.h"
#include "src/decode/internal.h"

typedef struct {
	guint64 vaddr;
	guint32 flags;
	const guint8 *bytes;
	gsize len;
} Seg;

/* An ELF64 core with one PT_LOAD per segment. */
static char *write_core(const char *dir, const char *name, const Seg *segs, guint n, gboolean truncate)
{
	GByteArray *f = g_byte_array_new();
	Elf64_Ehdr eh = { 0 };
	gsize off = sizeof(eh) + n * sizeof(Elf64_Phdr);
	char *path = g_build_filename(dir, name, NULL);

	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_CORE;
	eh.e_machine = EM_X86_64;
	eh.e_phoff = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = n;
	g_byte_array_append(f, (guint8 *)&eh, sizeof(eh));
	for (guint i = 0; i < n; i++) {
		Elf64_Phdr ph = { .p_type = PT_LOAD, .p_flags = segs[i].flags, .p_offset = off, .p_vaddr = segs[i].vaddr,
				  .p_filesz = segs[i].len, .p_memsz = segs[i].len };

		g_byte_array_append(f, (guint8 *)&ph, sizeof(ph));
		off += segs[i].len;
	}
	for (guint i = 0; i < n; i++)
		g_byte_array_append(f, segs[i].bytes, segs[i].len);
	/* truncated: the file ends 10 bytes into the first segment */
	g_assert_true(g_file_set_contents(path, (char *)f->data,
					  truncate ? sizeof(eh) + n * sizeof(Elf64_Phdr) + 10 : f->len, NULL));
	g_byte_array_free(f, TRUE);
	return path;
}

static char *write_text(const char *dir, const char *name, const char *text)
{
	char *path = g_build_filename(dir, name, NULL);

	g_assert_true(g_file_set_contents(path, text, -1, NULL));
	return path;
}

/* kallsyms addresses as perf reads them (upper case, 0x, leading zeros
 * missing), sorted files as they are (the last name at an address wins),
 * unsorted ones sorted */
static void test_kallsyms_forms(void)
{
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	static const guint8 text[64] = { 0x90, 0xc3 };
	const Seg segs[] = { { 0xffffffff81000000ULL, PF_R | PF_X, text, sizeof(text) } };
	g_autofree char *core = write_core(dir, "kcore", segs, 1, FALSE);
	const char *files[] = {
		"ffffffff81000000 T first\nFFFFFFFF81000000 T second\n0xffffffff81000010 t third\n"
		"ffffffff81000020 T fourth\n",
		"ffffffff81000020 T fourth\nffffffff81000000 T first\nffffffff81000010 t third\n"
		"ffffffff81000000 T second\n",
	};

	(void)core;     /* written for its side effect: the file */
	for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
		g_autofree char *ks = write_text(dir, "kallsyms", files[i]);
		g_autoptr(GError) err = NULL;

		(void)ks;       /* written for its side effect: the file */
		g_autoptr(VtDecodeImage) img = vt_decode_image_load_dir(dir, "host", &err);
		guint64 off;

		g_assert_no_error(err);
		g_assert_cmpstr(vt_decode_image_symbol(img, 0xffffffff81000004ULL, &off), ==, "second");
		g_assert_cmpuint(off, ==, 4);
		g_assert_cmpstr(vt_decode_image_symbol(img, 0xffffffff81000011ULL, &off), ==, "third");
		g_assert_cmpstr(vt_decode_image_symbol(img, 0xffffffff81000030ULL, &off), ==, "fourth");
		g_assert_cmpuint(off, ==, 0x10);
	}
	/* 16 digits of either case in both halves, blank lines, a module's tab,
	 * the last line without its newline */
	{
		g_autofree char *ks = write_text(dir, "kallsyms", "FfFfFfFf8100000A T ten\n\nffffffff8100001b t mod\t[m]\n"
						 "fFfFfFfF810000C0 T twelve");
		g_autoptr(GError) err = NULL;
		g_autoptr(VtDecodeImage) img = vt_decode_image_load_dir(dir, "host", &err);
		guint64 off;

		(void)ks;
		g_assert_no_error(err);
		g_assert_cmpstr(vt_decode_image_symbol(img, 0xffffffff8100000aULL, &off), ==, "ten");
		g_assert_cmpstr(vt_decode_image_symbol(img, 0xffffffff8100001bULL, &off), ==, "mod");
		g_assert_cmpstr(vt_decode_image_symbol(img, 0xffffffff810000c1ULL, &off), ==, "twelve");
		g_assert_cmpuint(off, ==, 1);
	}
	/* short lines (addresses of a few digits, names of two or three
	 * letters, ~12 bytes a line): more symbols than the room made for a
	 * 64-bit kernel's lines of 20 bytes or more, which then grows; the last
	 * of two at one address names it (kept in place) */
	{
		GString *t = g_string_new(NULL);
		g_autoptr(GError) err = NULL;
		g_autofree char *ks = NULL;
		VtDecodeImage *img;
		guint64 off;

		for (guint i = 0; i < 5000; i++)
			g_string_append_printf(t, "%x T s%u\n", 0x1000 + 16 * i, i);
		g_string_append(t, "1010 t again\n");
		ks = write_text(dir, "kallsyms", t->str);
		g_assert_cmpuint(t->len / 20, <, 5000);
		g_string_free(t, TRUE);
		img = vt_decode_image_load_dir(dir, "host", &err);
		g_assert_no_error(err);
		for (guint i = 0; i < 5000; i++) {
			g_autofree char *want = i == 1 ? g_strdup("again") : g_strdup_printf("s%u", i);

			g_assert_cmpstr(vt_decode_image_symbol(img, 0x1000 + 16 * i + 5, &off), ==, want);
			g_assert_cmpuint(off, ==, 5);
		}
		g_assert_cmphex(vt_decode_image_lookup(img, "s4999"), ==, 0x1000 + 16 * 4999);
		g_assert_cmphex(vt_decode_image_lookup(img, "s1"), ==, 0x1010);   /* shadowed, still found by name */
		vt_decode_image_free(img);
	}
	/* long names (most of each line: more than the half of the file the
	 * names' room is made for, which then grows) */
	{
		GString *t = g_string_new(NULL);
		g_autoptr(GError) err = NULL;
		g_autofree char *ks = NULL, *pad = g_strnfill(300, 'n');
		VtDecodeImage *img;
		guint64 off;

		for (guint i = 0; i < 3000; i++)
			g_string_append_printf(t, "ffffffff%08x T %s%u\n", 0x81000000 + 32 * i, pad, i);
		ks = write_text(dir, "kallsyms", t->str);
		g_string_free(t, TRUE);
		img = vt_decode_image_load_dir(dir, "host", &err);
		g_assert_no_error(err);
		for (guint i = 0; i < 3000; i += 7) {
			g_autofree char *want = g_strdup_printf("%s%u", pad, i);

			g_assert_cmpstr(vt_decode_image_symbol(img, 0xffffffff81000000ULL + 32 * i + 3, &off), ==, want);
			g_assert_cmpuint(off, ==, 3);
		}
		vt_decode_image_free(img);
	}
	/* a byte next to the hex digits' ranges (or one that looks like a digit
	 * in another case) among 16: a malformed line, not a number */
	for (const char *c = "/:@G`g\x10\x16\xc6 "; *c; c++) {
		g_autofree char *line = g_strdup_printf("ffffffff8100%c000 T x\n", *c);
		g_autofree char *ks = write_text(dir, "kallsyms", line);
		g_autoptr(GError) err = NULL;
		VtDecodeImage *img = vt_decode_image_load_dir(dir, "host", &err);

		(void)ks;
		g_assert_null(img);
		g_assert_error(err, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE);
		g_assert_nonnull(strstr(err->message, "line 1 is malformed"));
	}
}

static void remove_dir(const char *dir);

/* Symbol lookups (the fence's search, then its run's, and the thread's
 * hint) against a search of every symbol: random symbols - several on a
 * page, pages without one, the first one past its page's start, a few far
 * above (modules) - and addresses in, between, before and after them. */
static void test_symbol_index(void)
{
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	static const guint8 text[64] = { 0x90, 0xc3 };
	const Seg segs[] = { { 0xffffffff81000000ULL, PF_R | PF_X, text, sizeof(text) } };
	g_autofree char *core = write_core(dir, "kcore", segs, 1, FALSE);
	GRand *rnd = g_rand_new_with_seed(27);
	GArray *addrs = g_array_new(FALSE, FALSE, sizeof(guint64));
	GString *t = g_string_new(NULL);
	g_autofree char *ks = NULL;
	g_autoptr(GError) err = NULL;
	VtDecodeImage *img;
	guint64 a = 0xffffffff81000123ULL;

	(void)core;
	for (guint i = 0; i < 6000; i++) {   /* (more than the room made at first for ~150 KB: it grows) */
		g_array_append_val(addrs, a);
		a += g_rand_boolean(rnd) ? (guint64)g_rand_int_range(rnd, 1, 600) : (guint64)g_rand_int_range(rnd, 1, 40000);
	}
	for (guint i = 0; i < 20; i++) {                  /* far above: modules */
		a = 0xffffffffc0000000ULL + (guint64)i * 0x5000 + (guint64)g_rand_int_range(rnd, 0, 0x4000);
		g_array_append_val(addrs, a);
	}
	for (guint i = 0; i < addrs->len; i++)
		g_string_append_printf(t, "%016" G_GINT64_MODIFIER "x t f%u\n", g_array_index(addrs, guint64, i), i);
	ks = write_text(dir, "kallsyms", t->str);
	img = vt_decode_image_load_dir(dir, "host", &err);
	g_assert_no_error(err);
	for (guint n = 0; n < 200000; n++) {
		guint64 q, off = 0, want_off = 0;
		const char *got;
		g_autofree char *want = NULL;
		guint k = g_rand_int_range(rnd, 0, (gint)addrs->len);

		q = g_array_index(addrs, guint64, k) + (guint64)g_rand_int_range(rnd, -700, 45000);
		for (guint i = addrs->len; i-- > 0;) {       /* the last at or below q */
			if (g_array_index(addrs, guint64, i) <= q) {
				want = g_strdup_printf("f%u", i);
				want_off = q - g_array_index(addrs, guint64, i);
				break;
			}
		}
		got = vt_decode_image_symbol(img, q, &off);
		g_assert_cmpstr(got, ==, want);
		if (want)
			g_assert_cmphex(off, ==, want_off);
	}
	vt_decode_image_free(img);
	g_string_free(t, TRUE);
	g_array_free(addrs, TRUE);
	g_rand_free(rnd);
	remove_dir(dir);
}

static void test_image(void)
{
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	static const guint8 text[64] = { 0x90, 0xc3 }, data[16] = { 1, 2, 3 };
	const Seg segs[] = { { 0xffffffff81000000ULL, PF_R | PF_X, text, sizeof(text) },
			     { 0xffffffff82000000ULL, PF_R | PF_W, data, sizeof(data) } };
	g_autofree char *core = write_core(dir, "kcore", segs, 2, FALSE);
	g_autofree char *ks = write_text(dir, "kallsyms",
		"ffffffff81000000 T _text\n"
		"ffffffff81000000 T startup_64\n"      /* same address: the last one wins (perf) */
		"ffffffff81000010 t helper\n"
		"ffffffff81000020 W weak_one\n"
		"ffffffff81000030 A absolute_sym\n"    /* not a symbol perf uses */
		"ffffffff82000000 D some_data\n"
		"ffffffff81000028 t mod_func\t[mymod]\n");
	g_autoptr(GError) err = NULL;
	g_autoptr(VtDecodeImage) img = vt_decode_image_load_dir(dir, "host", &err);
	gsize avail;
	guint64 off;
	const guint8 *code;
	const guint64 *funcs;
	guint n;
	VtInsn in;

	(void)core;     /* written for its side effect: the file */
	g_assert_no_error(err);
	g_assert_cmpuint(vt_decode_image_n_segments(img), ==, 1);     /* only PF_X is code */
	g_assert_cmpuint(vt_decode_image_n_symbols(img), ==, 7);
	code = vt_decode_image_code(img, 0xffffffff81000001ULL, &avail);
	g_assert_nonnull(code);
	g_assert_cmpuint(code[0], ==, 0xc3);
	g_assert_cmpuint(avail, ==, sizeof(text) - 1);
	g_assert_null(vt_decode_image_code(img, 0xffffffff82000000ULL, &avail));
	g_assert_null(vt_decode_image_code(img, 0xffffffff81000000ULL + sizeof(text), &avail));
	g_assert_cmpstr(vt_decode_image_symbol(img, 0xffffffff81000005ULL, &off), ==, "startup_64");
	g_assert_cmpuint(off, ==, 5);
	g_assert_cmpstr(vt_decode_image_symbol(img, 0xffffffff81000024ULL, &off), ==, "weak_one");
	g_assert_cmpstr(vt_decode_image_symbol(img, 0xffffffff81000031ULL, &off), ==, "mod_func");   /* not the A */
	g_assert_cmpuint(off, ==, 9);
	g_assert_null(vt_decode_image_symbol(img, 0xffffffff80000000ULL, &off));
	g_assert_cmpuint(vt_decode_image_lookup(img, "helper"), ==, 0xffffffff81000010ULL);
	g_assert_cmpuint(vt_decode_image_lookup(img, "nothing"), ==, 0);
	/* a name whose address a later symbol holds is still found by name */
	g_assert_cmpuint(vt_decode_image_lookup(img, "_text"), ==, 0xffffffff81000000ULL);
	g_assert_cmpuint(vt_decode_image_lookup(img, "startup_64"), ==, 0xffffffff81000000ULL);
	g_assert_cmpuint(vt_decode_image_text(img), ==, 0xffffffff81000000ULL);
	funcs = vt_decode_image_functions(img, &n);   /* T/t with 16 bytes of code */
	g_assert_cmpuint(n, ==, 3);
	g_assert_cmpuint(funcs[0], ==, 0xffffffff81000000ULL);
	g_assert_cmpuint(funcs[1], ==, 0xffffffff81000010ULL);
	g_assert_cmpuint(funcs[2], ==, 0xffffffff81000028ULL);
	g_assert_true(vt_decode_insn(img, 0xffffffff81000000ULL, &in));
	g_assert_cmpuint(in.kind, ==, VT_INSN_OTHER);
	g_assert_cmpuint(in.len, ==, 1);
	g_assert_true(vt_decode_insn(img, 0xffffffff81000001ULL, &in));
	g_assert_cmpuint(in.kind, ==, VT_INSN_RETURN);
	g_assert_false(vt_decode_insn(img, 0xffffffff82000000ULL, &in));
	vt_decode_image_free(g_steal_pointer(&img));

	/* bad files: each a clear error, none a crash */
	{
		g_autofree char *trunc = write_core(dir, "kcore", segs, 2, TRUE);
		VtDecodeImage *bad = vt_decode_image_load_dir(dir, "guest", &err);

		(void)trunc;    /* written for its side effect: the file */

		g_assert_null(bad);
		g_assert_error(err, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE);
		g_assert_nonnull(strstr(err->message, "guest kernel image"));
		g_clear_error(&err);
	}
	{
		g_autofree char *ok = write_core(dir, "kcore", segs, 1, FALSE);
		g_autofree char *bad_ks = write_text(dir, "kallsyms", "ffffffff81000000 T _text\nnot a line\n");

		g_assert_null(vt_decode_image_load_dir(dir, "host", &err));
		g_assert_error(err, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE);
		g_assert_nonnull(strstr(err->message, "line 2"));
		g_clear_error(&err);
		g_unlink(bad_ks);
		g_assert_null(vt_decode_image_load_dir(dir, "host", &err));     /* no kallsyms */
		g_assert_nonnull(err);
		g_clear_error(&err);
		g_unlink(ok);
	}
	g_unlink(ks);
	g_rmdir(dir);
}

/* ------------------------------------------------------- NR switching */
#define CODE 0x1000ULL
#define HOST_CR3 0x100000ULL
#define GUEST_CR3 0x200000ULL
#define VMCS_BASE 0xabcd000ULL

typedef struct {
	struct pt_encoder *enc;
	guint8 buf[4096];
} Enc;

/* The trace so far into out (cap bytes at most); the encoder freed. */
static gsize enc_finish(Enc *e, guint8 *out, gsize cap)
{
	uint64_t off = 0;

	g_assert_cmpint(pt_enc_get_offset(e->enc, &off), >=, 0);
	pt_free_encoder(e->enc);
	g_assert_cmpuint(off, <=, cap);
	memcpy(out, e->buf, off);
	return (gsize)off;
}

/* An encoder into e->buf. */
static void enc_start(Enc *e)
{
	struct pt_config cfg;

	pt_config_init(&cfg);
	cfg.begin = e->buf;
	cfg.end = e->buf + sizeof(e->buf);
	e->enc = pt_alloc_encoder(&cfg);
}

static void put(Enc *e, struct pt_packet p)
{
	g_assert_cmpint(pt_enc_next(e->enc, &p), >, 0);
}

static void put_ip(Enc *e, enum pt_packet_type t, guint64 ip)
{
	struct pt_packet p = { .type = t };

	p.payload.ip.ipc = pt_ipc_sext_48;
	p.payload.ip.ip = ip;
	put(e, p);
}

static void put_pip(Enc *e, guint64 cr3, gboolean nr)
{
	struct pt_packet p = { .type = ppt_pip };

	p.payload.pip.cr3 = cr3;
	p.payload.pip.nr = nr;
	put(e, p);
}

static void put_mode64(Enc *e)
{
	struct pt_packet p = { .type = ppt_mode };

	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec.csl = 1;
	put(e, p);
}

/* Host and guest code at the same address:
 *   host  0x1000: nop; vmresume; 0x1004: jmp 0x1000
 *   guest 0x1000: jmp 0x1010 ... 0x1010: jz 0x1000; 0x1012: cpuid
 * Trace: PSB+ in the host at 0x1000; VM entry to 0x1000 (guest); TNT
 * taken, not taken; VM exit at the cpuid (FUP 0x1012) to host 0x1004. */
/* ... tail: the trace ends after the TNT (no VM exit): the jz not taken
 * is the last thing it proves. */
static gsize write_trace_tail(guint8 *out, gsize cap, gboolean tail)
{
	Enc e;
	struct pt_packet tnt = { .type = ppt_tnt_8 }, vmcs = { .type = ppt_vmcs };

	enc_start(&e);
	put(&e, (struct pt_packet){ .type = ppt_psb });
	put_mode64(&e);
	vmcs.payload.vmcs.base = VMCS_BASE;
	put(&e, vmcs);
	put_pip(&e, HOST_CR3, FALSE);
	put_ip(&e, ppt_fup, CODE);
	put(&e, (struct pt_packet){ .type = ppt_psbend });
	put_pip(&e, GUEST_CR3, TRUE);                 /* VM entry at the vmresume */
	put_mode64(&e);
	put_ip(&e, ppt_tip, CODE);
	tnt.payload.tnt.bit_size = 2;                 /* jz taken, then not taken */
	tnt.payload.tnt.payload = 0x2;
	put(&e, tnt);
	if (!tail) {
		put_ip(&e, ppt_fup, CODE + 0x12);     /* VM exit at cpuid */
		put_pip(&e, HOST_CR3, FALSE);
		put_ip(&e, ppt_tip, CODE + 4);
	}
	return enc_finish(&e, out, cap);
}

static gsize write_trace(guint8 *out, gsize cap)
{
	return write_trace_tail(out, cap, FALSE);
}

static void remove_dir(const char *dir)
{
	GDir *d = g_dir_open(dir, 0, NULL);
	const char *e;

	while (d && (e = g_dir_read_name(d))) {
		g_autofree char *p = g_build_filename(dir, e, NULL);

		if (g_file_test(p, G_FILE_TEST_IS_DIR))
			remove_dir(p);
		else
			g_unlink(p);
	}
	if (d)
		g_dir_close(d);
	g_rmdir(dir);
}

/* vt_decode_pokes_code() through its memo as queue.c's walker reads
 * poked pages: the memo alone answers (vt_decode_pokes_code_memo) only for
 * its page, within its version's times and where the image has code on
 * the whole page - never on a page a segment ends in - and every answer
 * equals a fresh lookup's. */
static void test_poke_memo(void)
{
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	static guint8 whole[4096], part[100], mid[4096];
	/* pages: w whole, pp with code on its first 100 bytes, mp from
	 * 0x800 on (and the next page), w8 whole (the same slot of
	 * queue.c's 8 memos as w) */
	const guint64 w = 0xffffffff81000000ULL, pp = w + 0x1000, mp = w + 0x3000, w8 = w + 0x8000, t0 = 1000;
	const Seg segs[] = { { w, PF_R | PF_X, whole, sizeof(whole) }, { pp, PF_R | PF_X, part, sizeof(part) },
			     { mp + 0x800, PF_R | PF_X, mid, sizeof(mid) }, { w8, PF_R | PF_X, whole, sizeof(whole) } };
	g_autofree char *core = NULL, *ks = NULL;
	g_autoptr(GError) err = NULL;
	g_autoptr(VtDecodeImage) img = NULL;
	VtDecodePokes *p = vt_decode_pokes_new();
	const guint8 nop = 0x90, int3 = 0xcc;
	const struct {
		guint64 addr, tsc;
		gboolean from_memo;      /* the memo answers alone */
	} reads[] = {
		{ w + 1, t0 + 99, FALSE },      /* fills the memo: version 0 */
		{ w + 2, t0 + 50, TRUE },
		{ w, t0 + 99, TRUE },
		{ w + 4095, t0, TRUE },
		{ w + 1, t0 + 100, FALSE },     /* the next version's time */
		{ w + 3, t0 + 100, TRUE },      /* (its first) */
		{ w + 1, t0 + 150, TRUE },
		{ w + 1, t0 + 10, FALSE },      /* back in version 0 */
		{ pp + 1, t0 + 500, FALSE },    /* another page */
		{ pp + 2, t0 + 500, FALSE },    /* never alone: no code on most of it */
		{ w + 0x2000, t0 + 500, FALSE },   /* no code */
		{ w + 1, t0 + 500, FALSE },
		{ w + 7, t0 + 600, TRUE },
		{ w + 0x2000, t0 + 600, FALSE },   /* another page, its time in the memo's */
		{ w8 + 1, t0 + 600, FALSE },    /* another whole poked page */
		{ w8 + 2, t0 + 600, TRUE },
		{ w + 1, t0 + 600, FALSE },     /* not the memo's page */
		{ mp + 0x900, t0 + 600, FALSE },   /* a page whose code starts in it */
		{ mp + 0x901, t0 + 600, FALSE },
		{ mp + 0x10, t0 + 600, FALSE },
	};
	VtDecodePokeMemo memo = { .page = G_MAXUINT64 };
	const guint8 *code;
	gsize avail = 0;
	guint64 tag = 0;

	memset(whole, 0x90, sizeof(whole));
	memset(part, 0xc3, sizeof(part));
	memset(mid, 0x90, sizeof(mid));
	core = write_core(dir, "kcore", segs, G_N_ELEMENTS(segs), FALSE);
	ks = write_text(dir, "kallsyms", "ffffffff81000000 T code\n");
	img = vt_decode_image_load_dir(dir, "host", &err);
	g_assert_no_error(err);
	vt_decode_pokes_add(p, w + 1, &nop, &int3, 1, t0 + 100);
	vt_decode_pokes_add(p, pp + 1, &part[0], &int3, 1, t0 + 300);
	vt_decode_pokes_add(p, w8 + 1, &nop, &int3, 1, t0 + 300);
	vt_decode_pokes_add(p, mp + 0x900, &nop, &int3, 1, t0 + 300);
	g_assert_true(vt_decode_image_set_pokes(img, p, &err));
	g_assert_no_error(err);
	for (guint i = 0; i < G_N_ELEMENTS(reads); i++) {
		guint64 t_memo = 1, t_look = 3;
		gsize a_memo = 0, a_look = 0;
		VtDecodePokeMemo fresh = { .page = G_MAXUINT64 };
		const guint8 *m = vt_decode_pokes_code_memo(&memo, reads[i].addr, reads[i].tsc, &a_memo, &t_memo);
		const guint8 *c = vt_decode_pokes_code(p, img, reads[i].addr, reads[i].tsc, &avail, &tag, &memo);
		const guint8 *l = vt_decode_pokes_code(p, img, reads[i].addr, reads[i].tsc, &a_look, &t_look, &fresh);

		g_test_message("read %u at %#" G_GINT64_MODIFIER "x, time %" G_GUINT64_FORMAT, i, reads[i].addr,
			       reads[i].tsc);
		g_assert_cmpint(m != NULL, ==, reads[i].from_memo);
		g_assert_true(c == l);
		g_assert_cmpuint(avail, ==, a_look);
		g_assert_cmphex(tag, ==, t_look);
		if (m) {
			g_assert_true(m == c);
			g_assert_cmpuint(a_memo, ==, avail);
			g_assert_cmphex(t_memo, ==, tag);
		}
	}
	/* each version's bytes, through the memo; a page's code to its end */
	code = vt_decode_pokes_code(p, img, w + 1, t0 + 99, &avail, &tag, &memo);
	g_assert_nonnull(code);
	g_assert_cmphex(code[0], ==, 0x90);
	code = vt_decode_pokes_code_memo(&memo, w + 1, t0 + 98, &avail, &tag);
	g_assert_nonnull(code);
	g_assert_cmphex(code[0], ==, 0x90);
	g_assert_null(vt_decode_pokes_code_memo(&memo, w + 1, t0 + 100, &avail, &tag));
	code = vt_decode_pokes_code(p, img, w + 1, t0 + 100, &avail, &tag, &memo);
	g_assert_nonnull(code);
	g_assert_cmphex(code[0], ==, 0xcc);
	code = vt_decode_pokes_code_memo(&memo, w + 1, G_MAXUINT64 - 1, &avail, &tag);
	g_assert_nonnull(code);
	g_assert_cmphex(code[0], ==, 0xcc);
	g_assert_cmpuint(avail, ==, 4095);
	code = vt_decode_pokes_code(p, img, pp + 1, t0 + 300, &avail, &tag, &memo);
	g_assert_nonnull(code);
	g_assert_cmphex(code[0], ==, 0xcc);
	g_assert_cmpuint(avail, ==, 99);
	g_assert_null(vt_decode_pokes_code(p, img, mp + 0x10, t0 + 300, &avail, &tag, &memo));
	remove_dir(dir);
}

static VtDecodeImage *code_image(const char *dir, const char *name, const guint8 *code, gsize len)
{
	g_autofree char *sub = g_build_filename(dir, name, NULL);
	const Seg seg = { CODE, PF_R | PF_X, code, len };
	g_autofree char *core = NULL, *ks = NULL;
	g_autoptr(GError) err = NULL;
	VtDecodeImage *img;

	g_mkdir(sub, 0700);
	core = write_core(sub, "kcore", &seg, 1, FALSE);
	ks = write_text(sub, "kallsyms", "0000000000001000 T code\n");
	img = vt_decode_image_load_dir(sub, name, &err);   /* libipt reads the file later: keep it */
	g_assert_no_error(err);
	return img;
}

/* 16- and 32-bit code (a TCG recording from the reset vector) in its
 * block's mode: lengths, kinds, direct targets (IP + size + displacement,
 * libipt's arithmetic) and the disassembly; 64-bit reads other lengths. */
static void test_exec_modes(void)
{
	static const guint8 code[32] = {
		0xe9, 0xfd, 0x0f,                     /* 16: jmp rel16 (3 bytes); 64: rel32 (5) */
		0xea, 0x5b, 0xe0, 0x00, 0xf0,         /* 16: ljmp $0xf000:$0xe05b; 64: invalid */
		0x66, 0xbc, 0x00, 0x70, 0x00, 0x00,   /* 16: mov $0x7000, %esp (6); 64: %sp (4) */
		0x55,                                 /* 32: push %ebp; 64: push %rbp */
	};
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *img = code_image(dir, "m", code, sizeof(code));
	VtDecodeDisasm *d = vt_decode_disasm_new(img);
	VtInsn in;

	g_assert_true(vt_decode_insn_mode(img, CODE, VT_MODE_16, &in));
	g_assert_cmpuint(in.kind, ==, VT_INSN_JUMP);
	g_assert_cmpuint(in.len, ==, 3);
	g_assert_cmphex(in.target, ==, CODE + 3 + 0xffd);
	g_assert_true(vt_decode_insn(img, CODE, &in));
	g_assert_cmpuint(in.len, ==, 5);
	g_assert_true(vt_decode_insn_mode(img, CODE + 3, VT_MODE_16, &in));
	g_assert_cmpuint(in.kind, ==, VT_INSN_FAR);
	g_assert_cmpuint(in.len, ==, 5);
	g_assert_false(vt_decode_insn_mode(img, CODE + 3, VT_MODE_64, &in));
	g_assert_cmpuint(vt_decode_disasm_at_mode(d, CODE + 8, VT_MODE_16)->len, ==, 6);
	g_assert_cmpstr(vt_disasm_insn_text(vt_decode_disasm_at_mode(d, CODE + 8, VT_MODE_16)), ==, "mov $0x7000, %esp");
	g_assert_cmpuint(vt_decode_disasm_at_mode(d, CODE + 8, VT_MODE_64)->len, ==, 4);
	g_assert_cmpstr(vt_disasm_insn_text(vt_decode_disasm_at_mode(d, CODE + 14, VT_MODE_32)), ==, "push %ebp");
	g_assert_cmpstr(vt_disasm_insn_text(vt_decode_disasm_at(d, CODE + 14)), ==, "push %rbp");
	g_assert_cmpstr(vt_disasm_insn_text(vt_decode_disasm_at_mode(d, CODE + 8, VT_MODE_16)), ==, "mov $0x7000, %esp");
	/* a slot holds one decoding of its address: the mode last asked for */
	g_assert_cmpuint(vt_decode_disasm_size(d), ==, 2);
	vt_decode_disasm_free(d);
	vt_decode_image_free(img);
	remove_dir(dir);
}

static void test_nr_switch(void)
{
	static const guint8 host[32] = { 0x90, 0x0f, 0x01, 0xc3, 0xeb, 0xfa };
	guint8 guest[32] = { 0xeb, 0x0e };
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	guint8 trace[4096];
	gsize len;
	VtDecodeCpu cpu = { 0 };
	g_autoptr(GError) err = NULL;
	VtDecodeImage *h, *g;
	GArray *out = g_array_new(FALSE, FALSE, sizeof(VtBranch));
	static const struct {
		VtBranchKind kind;
		guint64 from, to;
		gboolean from_guest, to_guest;
	} want[] = {
		{ VT_BRANCH_VMENTRY, CODE + 1, CODE, FALSE, TRUE },
		{ VT_BRANCH_JUMP, CODE, CODE + 0x10, TRUE, TRUE },
		{ VT_BRANCH_JUMP, CODE + 0x10, CODE, TRUE, TRUE },     /* jz taken */
		{ VT_BRANCH_JUMP, CODE, CODE + 0x10, TRUE, TRUE },
		{ VT_BRANCH_VMEXIT, CODE + 0x12, CODE + 4, TRUE, FALSE },
	};

	guest[0x10] = 0x74;        /* jz 0x1000 */
	guest[0x11] = 0xee;
	guest[0x12] = 0x0f;        /* cpuid */
	guest[0x13] = 0xa2;
	h = code_image(dir, "host", host, sizeof(host));
	g = code_image(dir, "guest", guest, sizeof(guest));
	len = write_trace(trace, sizeof(trace));

	g_assert_true(vt_decode_buffer(trace, len, &cpu, h, g, out, &err));
	g_assert_no_error(err);
	for (guint i = 0; i < out->len && g_test_verbose(); i++) {
		const VtBranch *b = &g_array_index(out, VtBranch, i);

		g_test_message("%s %#" G_GINT64_MODIFIER "x -> %#" G_GINT64_MODIFIER "x code %d",
			       vt_branch_kind_name(b->kind), b->from, b->to, b->code);
	}
	g_assert_cmpuint(out->len, >=, G_N_ELEMENTS(want));
	for (guint i = 0; i < G_N_ELEMENTS(want); i++) {
		const VtBranch *b = &g_array_index(out, VtBranch, i);

		g_assert_cmpuint(b->kind, ==, want[i].kind);
		g_assert_cmphex(b->from, ==, want[i].from);
		g_assert_cmphex(b->to, ==, want[i].to);
		g_assert_cmpuint(b->from_guest, ==, want[i].from_guest);
		g_assert_cmpuint(b->to_guest, ==, want[i].to_guest);
		g_assert_cmphex(b->vmcs, ==, VMCS_BASE);
	}
	for (guint i = 0; i < out->len; i++)
		g_assert_cmpuint(g_array_index(out, VtBranch, i).kind, !=, VT_BRANCH_ERROR);

	/* the host's image for the guest too: its code at 0x1000 is the
	 * host's (nop; vmresume), so the trace does not fit - an error */
	g_array_set_size(out, 0);
	g_assert_true(vt_decode_buffer(trace, len, &cpu, h, h, out, &err));
	{
		gboolean error = FALSE;

		for (guint i = 0; i < out->len; i++)
			error |= g_array_index(out, VtBranch, i).kind == VT_BRANCH_ERROR;
		g_assert_true(error);
	}
	g_array_free(out, TRUE);
	vt_decode_image_free(h);
	vt_decode_image_free(g);
	remove_dir(dir);
}

/* VtBranch.insns on the trace of test_nr_switch: the host's nop and
 * vmresume from the PSB+'s IP on (2), each guest jump its own (1), the VM
 * exit the jz not taken before the cpuid (which does not run: 1); with the
 * trace ending after the TNT, the flow end counts that jz. */
static void test_insns(void)
{
	static const guint8 host[32] = { 0x90, 0x0f, 0x01, 0xc3, 0xeb, 0xfa };
	guint8 guest[32] = { 0xeb, 0x0e, [0x10] = 0x74, 0xee, 0x0f, 0xa2 };
	static const struct { VtBranchKind kind; guint32 insns; } want[2][5] = {
		{ { VT_BRANCH_VMENTRY, 2 }, { VT_BRANCH_JUMP, 1 }, { VT_BRANCH_JUMP, 1 }, { VT_BRANCH_JUMP, 1 },
		  { VT_BRANCH_VMEXIT, 1 } },
		{ { VT_BRANCH_VMENTRY, 2 }, { VT_BRANCH_JUMP, 1 }, { VT_BRANCH_JUMP, 1 }, { VT_BRANCH_JUMP, 1 },
		  { VT_BRANCH_FLOW_END, 1 } },
	};
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *h = code_image(dir, "host", host, sizeof(host));
	VtDecodeImage *g = code_image(dir, "guest", guest, sizeof(guest));
	VtDecodeCpu cpu = { 0 };
	GArray *out = g_array_new(FALSE, FALSE, sizeof(VtBranch));

	for (int tail = 0; tail < 2; tail++) {
		guint n = 0;
		guint8 trace[4096];
		gsize len = write_trace_tail(trace, sizeof(trace), tail);
		g_autoptr(GError) err = NULL;
		VtDecodeQueue *q = vt_decode_queue_new(trace, len, &cpu, h, g, &err);

		g_assert_no_error(err);
		vt_decode_queue_set_flow_end(q, TRUE);
		g_array_set_size(out, 0);
		while (vt_decode_queue_next(q, out, G_MAXUINT))
			;
		vt_decode_queue_free(q);
		for (guint i = 0; i < out->len; i++) {
			const VtBranch *b = &g_array_index(out, VtBranch, i);

			if (b->kind == VT_BRANCH_FLOW_END && !b->insns)
				continue;     /* the PSB+'s: nothing ran before it */
			g_assert_cmpuint(n, <, 5);
			g_assert_cmpuint(b->kind, ==, want[tail][n].kind);
			g_assert_cmpuint(b->insns, ==, want[tail][n].insns);
			n++;
		}
		g_assert_cmpuint(n, ==, 5);
	}
	g_array_free(out, TRUE);
	vt_decode_image_free(h);
	vt_decode_image_free(g);
	remove_dir(dir);
}

/* A PSB+ with a TSC (tsc 0: none), MODE.Exec 64-bit, a PIP (nr: in a
 * guest) and a FUP at fup - no CBR. */
static void put_psb_plus(Enc *e, guint64 tsc, gboolean nr, guint64 fup)
{
	put(e, (struct pt_packet){ .type = ppt_psb });
	if (tsc)
		put(e, (struct pt_packet){ .type = ppt_tsc, .payload.tsc.tsc = tsc });
	put_mode64(e);
	put_pip(e, HOST_CR3, nr);
	put_ip(e, ppt_fup, fup);
	put(e, (struct pt_packet){ .type = ppt_psbend });
}

/* Plain blocks of host and guest at one address, by turns - each walk
 * finds its own (the walker keeps the blocks it found last: keyed by
 * source too, or the guest's jnz would be the host's jz):
 *   host  0x1000: jz 0x1004; nop; nop; 0x1004: vmresume; 0x1007: jmp 0x1000
 *   guest 0x1000: jnz 0x1010 ... 0x1010: cpuid
 * Trace: the host's jz taken, VM entry, the guest's jnz taken, VM exit at
 * the cpuid to 0x1007, the host's jz not taken, VM entry, the guest's jnz
 * taken, VM exit. */
static void test_near_sources(void)
{
	static const guint8 host[16] = { 0x74, 0x02, 0x90, 0x90, 0x0f, 0x01, 0xc3, 0xeb, 0xf7 };
	guint8 guest[32] = { 0x75, 0x0e };
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	struct pt_packet tnt = { .type = ppt_tnt_8 };
	guint8 trace[4096];
	VtDecodeCpu cpu = { 0 };
	g_autoptr(GError) err = NULL;
	GArray *out = g_array_new(FALSE, FALSE, sizeof(VtBranch));
	guint host_jz = 0, guest_jnz = 0, exits = 0;
	VtDecodeImage *h, *g;
	Enc e;
	gsize len;

	guest[0x10] = 0x0f;        /* cpuid */
	guest[0x11] = 0xa2;
	h = code_image(dir, "host", host, sizeof(host));
	g = code_image(dir, "guest", guest, sizeof(guest));
	enc_start(&e);
	put_psb_plus(&e, 0, FALSE, CODE);
	tnt.payload.tnt.bit_size = 1;
	for (int round = 0; round < 2; round++) {
		tnt.payload.tnt.payload = round ? 0 : 1;   /* the host's jz: taken, then not */
		put(&e, tnt);
		put_pip(&e, GUEST_CR3, TRUE);             /* VM entry at the vmresume */
		put_mode64(&e);
		put_ip(&e, ppt_tip, CODE);
		tnt.payload.tnt.payload = 1;              /* the guest's jnz taken */
		put(&e, tnt);
		put_ip(&e, ppt_fup, CODE + 0x10);         /* VM exit at the cpuid */
		put_pip(&e, HOST_CR3, FALSE);
		put_ip(&e, ppt_tip, CODE + 7);
	}
	len = enc_finish(&e, trace, sizeof(trace));

	g_assert_true(vt_decode_buffer(trace, len, &cpu, h, g, out, &err));
	g_assert_no_error(err);
	for (guint i = 0; i < out->len; i++) {
		const VtBranch *b = &g_array_index(out, VtBranch, i);

		if (g_test_verbose())
			g_test_message("%s %#" G_GINT64_MODIFIER "x -> %#" G_GINT64_MODIFIER "x guest %d",
				       vt_branch_kind_name(b->kind), b->from, b->to, b->from_guest);
		g_assert_cmpuint(b->kind, !=, VT_BRANCH_ERROR);
		host_jz += b->kind == VT_BRANCH_JUMP && !b->from_guest && b->from == CODE && b->to == CODE + 4;
		guest_jnz += b->kind == VT_BRANCH_JUMP && b->from_guest && b->from == CODE && b->to == CODE + 0x10;
		exits += b->kind == VT_BRANCH_VMEXIT && b->from == CODE + 0x10 && b->to == CODE + 7;
	}
	g_assert_cmpuint(host_jz, ==, 1);
	g_assert_cmpuint(guest_jnz, ==, 2);
	g_assert_cmpuint(exits, ==, 2);
	g_array_free(out, TRUE);
	vt_decode_image_free(h);
	vt_decode_image_free(g);
	remove_dir(dir);
}

/* Blocks joined where jumps are dropped (call traces: the walker goes on
 * through conditional and direct jumps whose trace it has read, queue.c
 * does in one step what each jump did): the branches are those of a
 * decode that keeps the jumps, less the jumps - kind, ends, time, AUX
 * offset, source instruction, flow end, instruction counts (a dropped
 * jump's go to the next record) - on a loop
 *   0x1000: test; jz 0x1006; nop; nop; 0x1006: jmp 0x1008 (direct, to the
 *   next instruction); jnz 0x100d; 3 nops; call 0x1020; jmp 0x1000
 *   0x1020: jz 0x1023; nop; 0x1023: jnz 0x1026; nop; 0x1026: ret
 * walked 40 times from pseudo-random TNT bits (the ret compressed), in
 * TNT-8 and TNT-64 packets of random sizes with TSCs between some (some
 * earlier than the last).  The trace ends before the last ret, after g's
 * jz taken and jnz not taken, its last loop's bits in one packet: the
 * flow end counts both (the jz's jump dropped). */
static gsize write_join_trace_bits(guint8 *out, gsize cap, guint32 seed, guint64 tsc, gboolean whole, gboolean ovf,
				   guint bits_per_packet, gboolean tscs)
{
	Enc e;
	guint8 bits[40 * 5];
	guint nbits = whole ? 40 * 5 : 40 * 5 - 1;

	for (guint i = 0; i < nbits; i++) {   /* jz, jnz, jz and jnz in g, ret (taken) */
		seed = seed * 1103515245u + 12345u;
		bits[i] = i % 5 == 4 ? 1 : (seed >> 20) & 1;
	}
	if (!whole) {
		bits[nbits - 2] = 1;
		bits[nbits - 1] = 0;
	}
	enc_start(&e);
	if (ovf) {                        /* an overflow cuts the PSB+ short: no status event, no PSBEND */
		put(&e, (struct pt_packet){ .type = ppt_psb });
		put(&e, (struct pt_packet){ .type = ppt_tsc, .payload.tsc.tsc = tsc });
		put(&e, (struct pt_packet){ .type = ppt_ovf });
		put_ip(&e, ppt_fup, CODE);
	} else {
		put_psb_plus(&e, tsc, FALSE, CODE);
	}
	for (guint pos = 0; pos < nbits;) {
		guint n, left = nbits - pos;
		struct pt_packet tnt = { .type = ppt_tnt_8 };

		seed = seed * 1103515245u + 12345u;
		/* the last loop's bits in a packet of their own */
		n = left <= 4 ? left : MIN(1 + (seed >> 16) % ((seed >> 24) & 1 ? 47 : 6), left - 4);
		if (bits_per_packet)
			n = MIN(bits_per_packet, left);
		tnt.type = n > 6 ? ppt_tnt_64 : ppt_tnt_8;
		tnt.payload.tnt.bit_size = (uint8_t)n;
		for (guint k = 0; k < n; k++)           /* the oldest in the highest bit */
			tnt.payload.tnt.payload = tnt.payload.tnt.payload << 1 | bits[pos + k];
		put(&e, tnt);
		pos += n;
		if ((!bits_per_packet || tscs) && ((seed >> 8) & 1)) {   /* now and then back in time (a queue's times never go back) */
			tsc = (seed >> 9) & 3 ? tsc + 1000 : tsc - 1500;
			put(&e, (struct pt_packet){ .type = ppt_tsc, .payload.tsc.tsc = tsc });
		}
	}
	return enc_finish(&e, out, cap);
}

static gsize write_join_trace_at(guint8 *out, gsize cap, guint32 seed, guint64 tsc, gboolean whole, gboolean ovf)
{
	return write_join_trace_bits(out, cap, seed, tsc, whole, ovf, 0, TRUE);
}

static gsize write_join_trace(guint8 *out, gsize cap)
{
	return write_join_trace_at(out, cap, 12345, 1000000, FALSE, FALSE);
}

static GArray *decode_join(const guint8 *trace, gsize len, VtDecodeImage *img, gboolean drop, guint64 *joined)
{
	VtDecodeCpu cpu = { 0 };
	g_autoptr(GError) err = NULL;
	VtDecodeQueue *q = vt_decode_queue_new(trace, len, &cpu, img, img, &err);
	GArray *out = g_array_new(FALSE, FALSE, sizeof(VtBranch));

	g_assert_no_error(err);
	vt_decode_queue_set_flow_end(q, TRUE);
	vt_decode_queue_set_drop_jumps(q, drop);
	while (vt_decode_queue_next(q, out, G_MAXUINT))
		;
	*joined = vt_decode_queue_joined(q);
	vt_decode_queue_free(q);
	return out;
}

/* test_join's loop (above) */
static const guint8 join_code[0x30] = {
	0x85, 0xc0, 0x74, 0x02, 0x90, 0x90, 0xeb, 0x00, 0x75, 0x03, 0x90, 0x90, 0x90,
	0xe8, 0x0e, 0x00, 0x00, 0x00, 0xeb, 0xec,
	[0x20] = 0x74, 0x01, 0x90, 0x75, 0x01, 0x90, 0xc3,
};

/* Decodes trace (test_join's loop) keeping jumps and dropping them, and
 * checks that the branches are the same less the jumps; *joined: the
 * blocks joined. */
static void check_join(const guint8 *trace, gsize len, VtDecodeImage *img, guint64 *joined)
{
	guint64 joined_kept;
	GArray *kept = decode_join(trace, len, img, FALSE, &joined_kept);
	GArray *dropped = decode_join(trace, len, img, TRUE, joined);
	guint n = 0, calls = 0, errors = 0, ends = 0;
	guint32 carry = 0;

	g_assert_cmpuint(joined_kept, ==, 0);
	g_test_message("joined %" G_GUINT64_FORMAT, *joined);
	for (guint i = 0; i < kept->len; i++) {
		VtBranch want = g_array_index(kept, VtBranch, i), *a = &want;
		const VtBranch *b;

		if (a->kind == VT_BRANCH_JUMP) {
			carry += a->insns;       /* a dropped jump's count for the next record's */
			continue;
		}
		if (a->kind < VT_BRANCH_PSB || a->kind == VT_BRANCH_FLOW_END) {
			a->insns += carry;
			carry = 0;
		}
		g_assert_cmpuint(n, <, dropped->len);
		b = &g_array_index(dropped, VtBranch, n++);
		if (memcmp(a, b, sizeof(*a)))
			g_test_message("branch %u: %s %#" G_GINT64_MODIFIER "x -> %#" G_GINT64_MODIFIER "x tsc %"
				       G_GUINT64_FORMAT " insns %u kind %u/%u off %" G_GUINT64_FORMAT "; joined: %s %#"
				       G_GINT64_MODIFIER "x tsc %" G_GUINT64_FORMAT " insns %u kind %u/%u off %"
				       G_GUINT64_FORMAT, n, vt_branch_kind_name(a->kind), a->from, a->to, a->tsc, a->insns,
				       a->insn_kind, a->insn_len, a->offset, vt_branch_kind_name(b->kind), b->from, b->tsc,
				       b->insns, b->insn_kind, b->insn_len, b->offset);
		g_assert_cmpmem(a, sizeof(*a), b, sizeof(*b));
		calls += a->kind == VT_BRANCH_CALL;
		errors += a->kind == VT_BRANCH_ERROR;
		if (a->kind == VT_BRANCH_FLOW_END && a->insns) {
			g_assert_cmphex(a->from, ==, CODE + 0x25);
			g_assert_cmpuint(a->insns, ==, 2);    /* g's jz (its jump's), the jnz */
			ends++;
		}
	}
	g_assert_cmpuint(ends, ==, 1);
	g_assert_cmpuint(n, ==, dropped->len);
	g_assert_cmpuint(calls, ==, 40);
	g_assert_cmpuint(errors, ==, 0);
	g_array_free(kept, TRUE);
	g_array_free(dropped, TRUE);
}

static void test_join(void)
{
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *img = code_image(dir, "host", join_code, sizeof(join_code));
	guint8 trace[4096];
	gsize len = write_join_trace(trace, sizeof(trace));
	guint64 joined;

	check_join(trace, len, img, &joined);
	g_assert_cmpuint(joined, >, 40);             /* most loops' jumps joined */
	vt_decode_image_free(img);
	remove_dir(dir);
}

/* test_join's loop with one TNT bit a packet and no timing packet: the
 * walker joins blocks across packets that leave the time as it was - each
 * conditional jump's bit is a packet of its own, and within one packet it
 * would join only at the two direct jumps (at most 80) - and the branches
 * are the same, offsets included (a PSB+'s flow end has its own block's,
 * not the run's).  With TSCs between half the packets (on, and now and
 * then back) it joins fewer, and the branches are the same: a run that
 * went on where the time changed - on and then back in one run - gave
 * its dropped jumps the time before it, a later branch an earlier time. */
static void test_join_cross(void)
{
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *img = code_image(dir, "host", join_code, sizeof(join_code));
	guint8 trace[8192];
	gsize len = write_join_trace_bits(trace, sizeof(trace), 777, 1000000, FALSE, FALSE, 1, FALSE);
	guint64 joined, joined_timed;

	check_join(trace, len, img, &joined);
	g_assert_cmpuint(joined, >, 150);
	len = write_join_trace_bits(trace, sizeof(trace), 777, 1000000, FALSE, FALSE, 1, TRUE);
	check_join(trace, len, img, &joined_timed);
	g_assert_cmpuint(joined_timed, <, joined - 20);
	vt_decode_image_free(img);
	remove_dir(dir);
}

/* A not-taken jump a run joined across packets, at the trace's end: its
 * flow end (the conditional jumps not taken after the last branch) has
 * the AUX offset after that jump's packet, as without joins.
 *   0x1000: jz 0x1004; nop; nop; 0x1004: jnz 0x1008; nop; nop;
 *   0x1008: jz 0x3000 (rel32: outside the image)
 * One TNT bit a packet: the jz taken, the jnz not taken, the last jz
 * taken into no code - the walk ends there without a branch, the flow end
 * names the jnz's way on.  Decoded keeping the jumps first (the blocks
 * then in the image's table: a run joins only blocks the table has). */
static void test_join_flow_end(void)
{
	static const guint8 code[0x20] = { 0x74, 0x02, 0x90, 0x90, 0x75, 0x02, 0x90, 0x90,
					   0x0f, 0x84, 0xf2, 0x1f, 0x00, 0x00 };
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *img = code_image(dir, "host", code, sizeof(code));
	guint8 trace[256];
	gsize len;
	Enc e;
	VtBranch ends[2];
	guint64 joined[2];

	enc_start(&e);
	put_psb_plus(&e, 1000000, FALSE, CODE);
	for (int i = 0; i < 3; i++)
		put(&e, (struct pt_packet){ .type = ppt_tnt_8, .payload.tnt = { .bit_size = 1, .payload = i != 1 } });
	len = enc_finish(&e, trace, sizeof(trace));
	for (int k = 0; k < 2; k++) {     /* kept, dropped */
		GArray *out = decode_join(trace, len, img, k == 1, &joined[k]);
		guint n = 0;

		for (guint i = 0; i < out->len; i++) {
			const VtBranch *b = &g_array_index(out, VtBranch, i);

			g_test_message("%s: %s %#" G_GINT64_MODIFIER "x off %" G_GUINT64_FORMAT " insns %u",
				       k ? "dropped" : "kept", vt_branch_kind_name(b->kind), b->from, b->offset, b->insns);
			if (b->kind == VT_BRANCH_FLOW_END && b->from == CODE + 6) {
				ends[k] = *b;
				n++;
			}
		}
		g_assert_cmpuint(n, ==, 1);
		g_array_free(out, TRUE);
	}
	g_assert_cmpuint(joined[1], ==, 2);      /* the jnz's block and the last jz's, across two packets */
	g_assert_cmpuint(ends[1].offset, ==, ends[0].offset);
	g_assert_cmpuint(ends[1].tsc, ==, ends[0].tsc);
	vt_decode_image_free(img);
	remove_dir(dir);
}

/* An instruction that cannot be decoded after plain ones the walker
 * counts in one run (walk.c plain_run): three nops, then 0x06 (push es,
 * invalid in 64-bit code: Zydis refuses it; libipt's length decoder takes
 * it for an instruction).  The error is at the bad instruction, after 3
 * instructions, as the walk instruction by instruction (VMTRACE_WALK_CHECK
 * mode, without the run) gives it - the run leaves the block's end at its
 * last nop (session 36's first plain_run left it at 0: the error at 0). */
static void test_bad_insn_run(void)
{
	static const guint8 code[32] = { 0x90, 0x90, 0x90, 0x06 };
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *img = code_image(dir, "host", code, sizeof(code));
	guint8 trace[1024];
	gsize len;
	Enc e;

	enc_start(&e);
	put_psb_plus(&e, 1000000, FALSE, CODE);
	put(&e, (struct pt_packet){ .type = ppt_tnt_8, .payload.tnt = { .bit_size = 1, .payload = 1 } });
	len = enc_finish(&e, trace, sizeof(trace));
	for (int check = 0; check < 2; check++) {
		VtDecodeCpu cpu = { 0 };
		g_autoptr(GError) err = NULL;
		GArray *out = g_array_new(FALSE, FALSE, sizeof(VtBranch));
		guint errors = 0;

		if (check)
			g_setenv("VMTRACE_WALK_CHECK", "1", TRUE);
		g_assert_true(vt_decode_buffer(trace, len, &cpu, img, img, out, &err));
		g_unsetenv("VMTRACE_WALK_CHECK");
		g_assert_no_error(err);
		for (guint i = 0; i < out->len; i++) {
			const VtBranch *b = &g_array_index(out, VtBranch, i);

			if (b->kind != VT_BRANCH_ERROR)
				continue;
			g_test_message("%s: error %d at %#" G_GINT64_MODIFIER "x, %u instructions", check ? "checked" : "run",
				       b->code, b->from, b->insns);
			g_assert_cmpint(b->code, ==, pte_bad_insn);
			g_assert_cmphex(b->from, ==, CODE + 3);
			g_assert_cmpuint(b->insns, ==, 3);
			errors++;
		}
		g_assert_cmpuint(errors, ==, 1);
		g_array_free(out, TRUE);
	}
	vt_decode_image_free(img);
	remove_dir(dir);
}

/* A PSB+ inside test_join's loop, in each of its walks: after its jz
 * (not taken; its bit read with the walk before's ret), one nop on, with
 * its status packets - MODE.Exec, PIP (NR: host and guest by turns), FUP
 * at the second nop - and no CBR.  The PSB+'s events bind to the middle of
 * a block the table has; libipt hands them out but the last without
 * moving on in the trace: a joined run went on past such an event (the
 * walk without joins stops at its IP), and stops now - no output that
 * differed was found either way.  The same branches less the jumps,
 * every field but the instruction counts - the flow end's AUX offset too,
 * its block's, though the step after the PSB+ joins further (until
 * session 36 it was the run's) - and no error. */
static void test_join_psb(void)
{
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *img = code_image(dir, "host", join_code, sizeof(join_code));
	guint8 trace[4096];
	gsize len;
	guint64 joined_kept, joined;
	GArray *kept, *dropped;
	guint n = 0, errors = 0, rets = 0;
	Enc e;
	guint32 seed = 777;

	enc_start(&e);
	put_psb_plus(&e, 1000000, FALSE, CODE);
	for (guint walk = 0; walk < 8; walk++) {
		struct pt_packet tnt = { .type = ppt_tnt_8 }, rest = { .type = ppt_tnt_8 };

		/* the last walk's ret (compressed, taken) and this one's jz (not
		 * taken) in one packet: libipt reads on to the PSB+ at the ret */
		tnt.payload.tnt.bit_size = walk ? 2 : 1;
		tnt.payload.tnt.payload = walk ? 2 : 0;
		put(&e, tnt);
		put_psb_plus(&e, 0, walk % 2, CODE + 5);   /* (host, guest by turns: where the branches are) */
		rest.payload.tnt.bit_size = 3;   /* jnz; g: jz, jnz */
		for (guint k = 0; k < 3; k++) {
			seed = seed * 1103515245u + 12345u;
			rest.payload.tnt.payload = rest.payload.tnt.payload << 1 | ((seed >> 20) & 1);
		}
		put(&e, rest);
	}
	put(&e, (struct pt_packet){ .type = ppt_tnt_8, .payload.tnt = { .bit_size = 1, .payload = 1 } });   /* the ret */
	len = enc_finish(&e, trace, sizeof(trace));
	kept = decode_join(trace, len, img, FALSE, &joined_kept);
	dropped = decode_join(trace, len, img, TRUE, &joined);
	g_assert_cmpuint(joined, >, 8);
	for (guint i = 0; i < kept->len; i++) {
		VtBranch a = g_array_index(kept, VtBranch, i), b;

		if (a.kind == VT_BRANCH_JUMP)
			continue;
		g_assert_cmpuint(n, <, dropped->len);
		b = g_array_index(dropped, VtBranch, n++);
		g_test_message("branch %u: %s %#" G_GINT64_MODIFIER "x -> %#" G_GINT64_MODIFIER "x tsc %" G_GUINT64_FORMAT
			       " off %" G_GUINT64_FORMAT " kind %u/%u; joined: %s %#" G_GINT64_MODIFIER "x -> %#"
			       G_GINT64_MODIFIER "x tsc %" G_GUINT64_FORMAT " off %" G_GUINT64_FORMAT " kind %u/%u", i,
			       vt_branch_kind_name(a.kind), a.from, a.to, a.tsc, a.offset, a.insn_kind, a.insn_len,
			       vt_branch_kind_name(b.kind), b.from, b.to, b.tsc, b.offset, b.insn_kind, b.insn_len);
		a.insns = b.insns = 0;   /* (a dropped jump's go to the next record) */
		g_assert_cmpmem(&a, sizeof(a), &b, sizeof(b));
		errors += a.kind == VT_BRANCH_ERROR;
		rets += a.kind == VT_BRANCH_RETURN;
	}
	g_assert_cmpuint(n, ==, dropped->len);
	g_assert_cmpuint(errors, ==, 0);
	g_assert_cmpuint(rets, ==, 8);
	g_array_free(kept, TRUE);
	g_array_free(dropped, TRUE);
	vt_decode_image_free(img);
	remove_dir(dir);
}

/* A walk that never ends (a ring of three direct jumps after a PSB+,
 * nothing more in the trace) is perf's error 10 after NO_PROGRESS_LIMIT
 * blocks - at the same block, so the same ip, whether blocks are joined
 * or not, the block table cold or warm. */
static void join_loop_check(const guint8 *code, gsize size, gboolean crossed)
{
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *img = code_image(dir, "host", code, size);
	guint8 trace[256];
	gsize len;
	Enc e;
	guint64 ip[4] = { 0 }, insns[4] = { 0 };

	enc_start(&e);
	put_psb_plus(&e, 1000000, FALSE, CODE);
	if (crossed)                     /* the two jz's bits, a packet each */
		for (int i = 0; i < 2; i++)
			put(&e, (struct pt_packet){ .type = ppt_tnt_8, .payload.tnt = { .bit_size = 1, .payload = 1 } });
	put_ip(&e, ppt_tip, CODE);       /* (trace that the walk never asks for: not its end) */
	len = enc_finish(&e, trace, sizeof(trace));
	for (guint k = 0; k < 4; k++) {   /* kept, dropped (cold and warm), kept (warm) */
		guint64 joined;
		GArray *out = decode_join(trace, len, img, k == 1 || k == 2, &joined);
		guint errs = 0;

		for (guint i = 0; i < out->len; i++) {
			const VtBranch *b = &g_array_index(out, VtBranch, i);

			insns[k] += b->insns;
			if (b->kind != VT_BRANCH_ERROR)
				continue;
			g_assert_cmpint(b->code, ==, VT_DECODE_ERR_LOOP);
			ip[k] = b->from;
			errs++;
		}
		g_test_message("decode %u: error at %#" G_GINT64_MODIFIER "x after %" G_GUINT64_FORMAT
			       " instructions, %" G_GUINT64_FORMAT " blocks joined", k, ip[k], insns[k], joined);
		g_assert_cmpuint(errs, ==, 1);
		g_array_free(out, TRUE);
	}
	for (guint k = 1; k < 4; k++) {
		g_assert_cmphex(ip[k], ==, ip[0]);
		g_assert_cmpuint(insns[k], ==, insns[0]);   /* (a dropped jump's count goes to the next record) */
	}
	vt_decode_image_free(img);
	remove_dir(dir);
}

static void test_join_loop(void)
{
	static const guint8 ring[0x10] = { 0xeb, 0x00, 0xeb, 0x00, 0xeb, 0xfa };   /* 0x1000: jmp; 0x1002: jmp; 0x1004: jmp 0x1000 */
	/* 0x1000: jz 0x1004; nop; nop; 0x1004: jz 0x1008; nop; nop; then the
	 * ring at 0x1008: the run that enters it crossed two packets, and the
	 * blocks after the last count towards the loop (session 36's first
	 * crossing counted none: the error 254 blocks later) */
	static const guint8 crossed[0x20] = { 0x74, 0x02, 0x90, 0x90, 0x74, 0x02, 0x90, 0x90,
					      0xeb, 0x00, 0xeb, 0x00, 0xeb, 0xfa };

	join_loop_check(ring, sizeof(ring), FALSE);
	join_loop_check(crossed, sizeof(crossed), TRUE);
}

/* A queue decoded in ranges (vt_decode_queue_range: each range's decoder
 * warms up on the PSB segment before it, muted) gives what its decoder
 * from the start gives, branch for branch, every field - once the times
 * earlier than the latest of the ranges before are raised to it, as
 * recording.c's reader does; n: the ranges with branches.  The decode
 * errors among them. */
static guint ranges_compare(const guint8 *trace, gsize len, VtDecodeImage *host, VtDecodeImage *guest, guint64 size,
			    gboolean drop, gboolean power, guint *n)
{
	guint errors = 0;
	VtDecodeCpu cpu = { 0 };
	g_autoptr(GError) err = NULL;
	VtDecodeQueue *whole = vt_decode_queue_new(trace, len, &cpu, host, guest, &err), *d;
	GArray *a = g_array_new(FALSE, FALSE, sizeof(VtBranch)), *b = g_array_new(FALSE, FALSE, sizeof(VtBranch));
	GArray *part = g_array_new(FALSE, FALSE, sizeof(VtBranch));
	guint64 carry = 0, start = 0, end = 0;

	g_assert_no_error(err);
	vt_decode_queue_set_flow_end(whole, TRUE);
	vt_decode_queue_set_drop_jumps(whole, drop);
	vt_decode_queue_set_power(whole, power);
	g_assert_true(vt_decode_queue_splits(whole));
	d = vt_decode_queue_clone(whole, &err);
	g_assert_no_error(err);
	while (vt_decode_queue_next(whole, a, G_MAXUINT))
		;
	*n = 0;
	for (guint64 k = 0; end < len; k++, start = end) {
		g_assert_true(vt_decode_queue_boundary(d, (k + 1) * size, &end, &err));
		g_assert_cmpuint(end, >=, start);
		g_assert_true(vt_decode_queue_range(d, start, end, &err));
		g_array_set_size(part, 0);
		while (vt_decode_queue_next(d, part, G_MAXUINT))
			;
		g_assert_null(vt_decode_queue_error(d));
		for (guint i = 0; i < part->len; i++) {
			VtBranch *x = &g_array_index(part, VtBranch, i);

			x->tsc = MAX(x->tsc, carry);
		}
		*n += part->len > 0;
		g_array_append_vals(b, part->data, part->len);
		carry = MAX(carry, vt_decode_queue_last_time(d));
	}
	for (guint i = 0; i < MIN(a->len, b->len); i++) {
		const VtBranch *x = &g_array_index(a, VtBranch, i), *y = &g_array_index(b, VtBranch, i);

		if (memcmp(x, y, sizeof(*x)))
			g_test_message("branch %u of %u: whole %s %#" G_GINT64_MODIFIER "x -> %#" G_GINT64_MODIFIER
				       "x tsc %" G_GUINT64_FORMAT " insns %u; ranges %s %#" G_GINT64_MODIFIER "x -> %#"
				       G_GINT64_MODIFIER "x tsc %" G_GUINT64_FORMAT " insns %u", i, a->len,
				       vt_branch_kind_name(x->kind), x->from, x->to, x->tsc, x->insns,
				       vt_branch_kind_name(y->kind), y->from, y->to, y->tsc, y->insns);
		g_assert_cmpmem(x, sizeof(*x), y, sizeof(*y));
	}
	g_assert_cmpuint(a->len, ==, b->len);
	g_assert_cmpuint(a->len, >, 0);
	for (guint i = 0; i < a->len; i++)
		errors += g_array_index(a, VtBranch, i).kind == VT_BRANCH_ERROR;
	vt_decode_queue_free(d);
	vt_decode_queue_free(whole);
	g_array_free(a, TRUE);
	g_array_free(b, TRUE);
	g_array_free(part, TRUE);
	return errors;
}

static gboolean mem_read(gpointer ctx, guint64 off, guint8 *dst, gsize len, GError **error)
{
	(void)error;
	if (len)
		memcpy(dst, (const guint8 *)ctx + off, len);
	return TRUE;
}

/* The same branches, every field, with a window per PSB segment (queue.c
 * "Windows": a fresh libipt decoder at each seam) as in one window. */
static void windows_compare(const guint8 *trace, gsize len, VtDecodeImage *img)
{
	VtDecodeCpu cpu = { 0 };
	g_autoptr(GError) err = NULL;
	VtDecodeQueue *one = vt_decode_queue_new(trace, len, &cpu, img, img, &err);
	VtDecodeQueue *win = vt_decode_queue_new_reader(mem_read, g_memdup2(trace, len), g_free, len, 1, &cpu, img, img,
							&err);
	GArray *a = g_array_new(FALSE, FALSE, sizeof(VtBranch)), *b = g_array_new(FALSE, FALSE, sizeof(VtBranch));

	g_assert_no_error(err);
	vt_decode_queue_set_flow_end(one, TRUE);
	vt_decode_queue_set_flow_end(win, TRUE);
	while (vt_decode_queue_next(one, a, G_MAXUINT))
		;
	while (vt_decode_queue_next(win, b, G_MAXUINT))
		;
	g_assert_cmpuint(a->len, ==, b->len);
	g_assert_cmpmem(a->data, a->len * sizeof(VtBranch), b->data, b->len * sizeof(VtBranch));
	vt_decode_queue_free(one);
	vt_decode_queue_free(win);
	g_array_free(a, TRUE);
	g_array_free(b, TRUE);
}

/* Ranges on test_join's loop: 12 walks of it, one after the other (a PSB+
 * each; the walks' bits differ), each starting earlier in time than the
 * one before (the queue's first time stays the latest: the warm-up's
 * segment alone does not know it), jumps kept and dropped, power events,
 * cut at every PSB and at every third; with data: the sixth walk's PSB+
 * cut short by an OVF (no range starts there, nor at the next PSB, whose
 * warm-up would start there; no window's seam is there either: a window's
 * decoder stops at its seam's first status event, and went on to the
 * buffer's end); and on random bytes with good trace between
 * (errors, resyncs): ranges of 1 byte (one per PSB) to 32 KiB. */
static void test_ranges(gconstpointer data)
{
	static const guint8 host[32] = { 0x90, 0x0f, 0x01, 0xc3, 0xeb, 0xfa };
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *img = code_image(dir, "host", join_code, sizeof(join_code));
	VtDecodeImage *h = code_image(dir, "host2", host, sizeof(host));
	GRand *rng = g_rand_new_with_seed(7);
	guint8 trace[12 * 2048], good[4096], buf[64 * 1024];
	gsize len = 0, glen = write_trace(good, sizeof(good)), one = 0;
	gboolean ovf = GPOINTER_TO_INT(data);
	guint n;

	for (guint i = 0; i < 12; i++) {
		gsize k = write_join_trace_at(trace + len, sizeof(trace) - len, 100 + i, 9000000 - i * 100000, i < 11,
					      ovf && i == 5);

		one = one ? one : k;
		len += k;
	}
	windows_compare(trace, len, img);
	for (int drop = 0; drop < 2; drop++) {
		ranges_compare(trace, len, img, img, 1, drop, drop, &n);
		g_assert_cmpuint(n, ==, 12 - 2 * ovf);   /* (no range starts at or after the PSB+ an OVF cut short) */
		ranges_compare(trace, len, img, img, 3 * one, drop, FALSE, &n);
		g_assert_cmpuint(n, >=, 3);
	}
	for (int round = 0; round < 6; round++) {
		for (gsize i = 0; i < sizeof(buf); i++)
			buf[i] = (guint8)g_rand_int(rng);
		for (gsize at = 0; at + glen < sizeof(buf); at += 4096 + g_rand_int_range(rng, 0, 4096))
			memcpy(buf + at, good, glen);
		ranges_compare(buf, sizeof(buf), h, h, round ? 1024u << round : 1, round & 1, FALSE, &n);
		g_assert_cmpuint(n, >, 1);
	}
	g_rand_free(rng);
	vt_decode_image_free(img);
	vt_decode_image_free(h);
	remove_dir(dir);
}

/* A guest's user code traced with intel_pt//k: tracing off (TIP.PGD at
 * sysret), PSB+s without FUP and PIP meanwhile (CBR, VMCS), then back in
 * the guest kernel by TIP.PGE without a PIP (an interrupt delivered
 * without a VM exit): a range started at one of those PSBs would not know
 * it is in the guest (its warm-up's PSB+ does not say) and walk guest code
 * in the host's image.  No range starts there: a boundary's PSB+ and its
 * warm-up's have a FUP and a PIP - here a round's second PSB (in the guest
 * kernel), warmed up on its first; the branches are one decoder's, with
 * no decode error. */
static gsize write_user_gap_trace(guint8 *out, gsize cap)
{
	struct pt_packet vmcs = { .type = ppt_vmcs, .payload.vmcs.base = VMCS_BASE >> 12 };
	struct pt_packet cbr = { .type = ppt_cbr, .payload.cbr.ratio = 30 };
	Enc e;

	enc_start(&e);
	for (int round = 0; round < 3; round++) {
		put(&e, (struct pt_packet){ .type = ppt_psb });
		put(&e, cbr);
		put_mode64(&e);
		put(&e, vmcs);
		put_pip(&e, HOST_CR3, FALSE);
		put_ip(&e, ppt_fup, CODE);
		put(&e, (struct pt_packet){ .type = ppt_psbend });
		put_pip(&e, GUEST_CR3, TRUE);             /* VM entry at the vmresume (host 0x1001) */
		put_ip(&e, ppt_tip, CODE);
		put(&e, (struct pt_packet){ .type = ppt_psb });   /* in the guest kernel, at its jz */
		put(&e, cbr);
		put_mode64(&e);
		put(&e, vmcs);
		put_pip(&e, GUEST_CR3, TRUE);
		put_ip(&e, ppt_fup, CODE + 0x10);
		put(&e, (struct pt_packet){ .type = ppt_psbend });
		put(&e, (struct pt_packet){ .type = ppt_tnt_8, .payload.tnt = { .bit_size = 2, .payload = 2 } });
		put_ip(&e, ppt_tip_pgd, 0);               /* sysret into the guest's user code */
		for (int i = 0; i < 3; i++) {             /* PSB+s while tracing is off */
			put(&e, (struct pt_packet){ .type = ppt_psb });
			put(&e, cbr);
			put(&e, vmcs);
			put(&e, (struct pt_packet){ .type = ppt_psbend });
			for (int k = 0; k < 8; k++)
				put(&e, (struct pt_packet){ .type = ppt_pad });
		}
		put_mode64(&e);
		put_ip(&e, ppt_tip_pge, CODE);            /* the guest kernel again, no PIP */
		put(&e, (struct pt_packet){ .type = ppt_tnt_8, .payload.tnt = { .bit_size = 1, .payload = 0 } });
		put_ip(&e, ppt_fup, CODE + 0x12);         /* VM exit at the guest's cpuid */
		put_pip(&e, HOST_CR3, FALSE);
		put_ip(&e, ppt_tip, CODE + 4);            /* (host: jmp back to the vmresume) */
		put(&e, (struct pt_packet){ .type = ppt_pad });
	}
	return enc_finish(&e, out, cap);
}

static void test_ranges_user_gap(void)
{
	/* host: nop; vmresume; jmp -6 | guest: jz -0x12 at 0x10 (to 0), cpuid, sysret; 0: jmp 0x10 */
	static const guint8 host[32] = { 0x90, 0x0f, 0x01, 0xc3, 0xeb, 0xfa };
	static const guint8 guest[32] = { 0xeb, 0x0e, [0x10] = 0x74, 0xee, 0x0f, 0xa2, 0x48, 0x0f, 0x07 };
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *h = code_image(dir, "host", host, sizeof(host));
	VtDecodeImage *g = code_image(dir, "guest", guest, sizeof(guest));
	guint8 trace[4096];
	gsize len = write_user_gap_trace(trace, sizeof(trace));
	guint n;

	for (int power = 0; power < 2; power++) {
		g_assert_cmpuint(ranges_compare(trace, len, h, g, 1, FALSE, power, &n), ==, 0);
		g_assert_cmpuint(n, ==, 4);      /* the start, and a range per round: at its second PSB */
	}
	vt_decode_image_free(h);
	vt_decode_image_free(g);
	remove_dir(dir);
}

/* vt_decode_populate maps the pages wholly inside its range - no more -
 * without a write, and keeps errno; NULL and ranges of no whole page are
 * nothing to do.  Skipped where the kernel has no MADV_POPULATE_WRITE. */
static void test_populate(void)
{
	gsize page = (gsize)sysconf(_SC_PAGESIZE), n = 64;
	guint8 *p = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	guint8 *probe = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char in[64];

	g_assert_true(p != MAP_FAILED && probe != MAP_FAILED);
	if (madvise(probe, page, 23 /* MADV_POPULATE_WRITE */)) {
		g_test_skip("the kernel has no MADV_POPULATE_WRITE (Linux 5.14)");
		munmap(p, n * page);
		munmap(probe, page);
		return;
	}
	g_assert_cmpint(mincore(p, n * page, in), ==, 0);
	for (gsize i = 0; i < n; i++)
		g_assert_cmpint(in[i] & 1, ==, 0);            /* nothing mapped yet */
	vt_decode_populate(NULL, n * page);
	vt_decode_populate(p + 100, page - 200);          /* no whole page */
	errno = EDOM;
	vt_decode_populate(p + 100, n * page - 200);      /* pages 1 .. n - 2 */
	g_assert_cmpint(errno, ==, EDOM);
	g_assert_cmpint(mincore(p, n * page, in), ==, 0);
	g_assert_cmpint(in[0] & 1, ==, 0);
	g_assert_cmpint(in[n - 1] & 1, ==, 0);
	for (gsize i = 1; i + 1 < n; i++)
		g_assert_cmpint(in[i] & 1, ==, 1);
	for (gsize i = 0; i < n * page; i++)              /* zeroed, as any new page */
		g_assert_cmpint(p[i], ==, 0);
	munmap(p, n * page);
	munmap(probe, page);
}

/* The AnonHugePages of the mapping holding p (/proc/self/smaps), in KiB;
 * -1 if not found. */
static long huge_kib_at(const void *p)
{
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	gboolean in = FALSE;

	if (!g_file_get_contents("/proc/self/smaps", &text, NULL, NULL))
		return -1;
	lines = g_strsplit(text, "\n", -1);
	for (guint i = 0; lines[i]; i++) {
		guint64 lo, hi;

		if (sscanf(lines[i], "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x ", &lo, &hi) == 2 &&
		    strchr(lines[i], ' ') && strchr(lines[i], '-') < strchr(lines[i], ' '))
			in = (guintptr)p >= lo && (guintptr)p < hi;
		else if (in && g_str_has_prefix(lines[i], "AnonHugePages:"))
			return atol(lines[i] + strlen("AnonHugePages:"));
	}
	return -1;
}

/* vt_decode_buf_*: sizes are powers of two from 64 KiB to 2 MiB (larger:
 * as asked; under ASan or valgrind always as asked), all of a buffer's size
 * usable; a freed buffer is the next of its size; buffers held at once do
 * not overlap; renew keeps the text; and - where the kernel gives
 * transparent huge pages - a written buffer is in one. */
static void test_buf_pool(void)
{
	gsize sizes[] = { 1, 5000, 65536, 65537, 256 << 10, (1 << 20) + 16, 2 << 20, (2 << 20) + 1, 5 << 20 };
	guint8 *held[24];
	guint8 *p, *q;
	g_autofree char *thp = NULL;

	for (guint i = 0; i < G_N_ELEMENTS(sizes); i++) {
		gsize n = sizes[i], size = vt_decode_buf_size(n);

		if (vt_decode_memcheck())
			g_assert_cmpuint(size, ==, n);
		else if (n <= (2 << 20))
			g_assert_cmpuint(size, ==, MAX((gsize)65536, (gsize)1 << g_bit_storage(n - 1)));
		else
			g_assert_cmpuint(size, ==, n);
		p = vt_decode_buf_new(n);
		memset(p, 0xa5, size);                    /* all of it is ours */
		vt_decode_buf_free(p, n);
		q = vt_decode_buf_new(size);              /* the same size: the same buffer back */
		if (!vt_decode_memcheck() && n <= (2 << 20))
			g_assert_true(q == p);
		vt_decode_buf_free(q, size);
	}
	/* 24 buffers of 256 KiB (200 KiB asked) held at once: three huge pages' worth, none overlapping */
	for (guint i = 0; i < G_N_ELEMENTS(held); i++) {
		held[i] = vt_decode_buf_new(200 << 10);
		memset(held[i], (int)i, vt_decode_buf_size(200 << 10));
	}
	for (guint i = 0; i < G_N_ELEMENTS(held); i++) {
		for (gsize k = 0; k < vt_decode_buf_size(200 << 10); k += 4093)
			g_assert_cmpint(held[i][k], ==, (int)i);
	}
	if (!vt_decode_memcheck() && g_file_get_contents("/sys/kernel/mm/transparent_hugepage/enabled", &thp, NULL, NULL) &&
	    !strstr(thp, "[never]") && huge_kib_at(held[0]) < 2048)
		g_test_incomplete("the kernel gave no huge page for the pool's buffers (fragmented memory?)");
	for (guint i = 0; i < G_N_ELEMENTS(held); i++)
		vt_decode_buf_free(held[i], 200 << 10);
	/* grown: the text kept, up to the smaller size */
	p = vt_decode_buf_new(100);
	memcpy(p, "vmtrace", 8);
	p = vt_decode_buf_renew(p, 100, 3 << 20);
	g_assert_cmpstr((char *)p, ==, "vmtrace");
	p[(3 << 20) - 1] = 1;
	p = vt_decode_buf_renew(p, 3 << 20, 70000);
	g_assert_cmpstr((char *)p, ==, "vmtrace");
	vt_decode_buf_free(p, 70000);
	vt_decode_buf_free(NULL, 5);
	/* freed as larger than it is: refused (in the pool a 64 KiB piece at an
	 * odd 64 KiB is no 128 KiB piece; with exact sizes, its size says so) */
	{
		guint8 *four[4], *odd = NULL;

		for (guint i = 0; i < 4; i++) {   /* (of 4 pieces of a huge page's 32, one is at an odd 64 KiB) */
			four[i] = vt_decode_buf_new(65536);
			if (!odd && (vt_decode_memcheck() || ((guintptr)four[i] & 131071)))
				odd = four[i];
		}
		g_assert_nonnull(odd);
		g_test_expect_message(NULL, G_LOG_LEVEL_CRITICAL, "*vt_decode_buf_free*");
		vt_decode_buf_free(odd, 100000);
		g_test_assert_expected_messages();
		for (guint i = 0; i < 4; i++)
			vt_decode_buf_free(four[i], 65536);
	}
}

/* Bad data: random bytes with PSBs in between end with errors, never a
 * crash or a hang. */
static void test_garbage(void)
{
	static const guint8 host[32] = { 0x90, 0x0f, 0x01, 0xc3, 0xeb, 0xfa };
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *h = code_image(dir, "host", host, sizeof(host));
	GRand *rng = g_rand_new_with_seed(3);
	VtDecodeCpu cpu = { 0 };
	g_autoptr(GError) err = NULL;
	GArray *out = g_array_new(FALSE, FALSE, sizeof(VtBranch));
	guint8 good[4096], buf[64 * 1024];
	gsize glen = write_trace(good, sizeof(good));

	for (int round = 0; round < 20; round++) {
		for (gsize i = 0; i < sizeof(buf); i++)
			buf[i] = (guint8)g_rand_int(rng);
		for (gsize at = 0; at + glen < sizeof(buf); at += 4096 + g_rand_int_range(rng, 0, 4096))
			memcpy(buf + at, good, glen);     /* PSBs (and some good trace) to sync on */
		g_array_set_size(out, 0);
		g_assert_true(vt_decode_buffer(buf, sizeof(buf), &cpu, h, h, out, &err));
		g_assert_no_error(err);
	}
	g_array_free(out, TRUE);
	g_rand_free(rng);
	vt_decode_image_free(h);
	remove_dir(dir);
}

/* Every record's AUX offset lies within the buffer, also when libipt's
 * sync fails at the very end (found by fuzz-decode in CI: a PSB+ that ends
 * the buffer; libipt 2.0.5 left its position one byte past it). */
static void test_offsets_within(void)
{
	static const guint8 host[32] = { 0x90, 0x0f, 0x01, 0xc3, 0xeb, 0xfa };
	static const guint8 psb_end[] = {
		0x07, 0x0c, 0x02, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02,
		0x82, 0x02, 0x82, 0x02, 0x03, 0x1e, 0x00, 0x02, 0xc8, 0x40, 0x23, 0x01, 0x00, 0x26, 0x02, 0x43,
		0x01, 0x2b, 0x1a, 0x00, 0x23, 0x23, 0x02, 0xf3, 0xfb, 0x31, 0x00, 0x10, 0x00, 0x02, 0x73, 0x0e,
		0xfc, 0x1a, 0xfe, 0x1a,
	};
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *h = code_image(dir, "host", host, sizeof(host));
	VtDecodeCpu cpu = { .cpuid_15_eax = 2, .cpuid_15_ebx = 168, .mtc_freq = 3, .nom_freq = 30,
			    .family = 6, .model = 85, .stepping = 4 };
	g_autoptr(GError) err = NULL;
	GArray *out = g_array_new(FALSE, FALSE, sizeof(VtBranch));
	guint errors = 0;

	g_assert_true(vt_decode_buffer(psb_end, sizeof(psb_end), &cpu, h, h, out, &err));
	g_assert_no_error(err);
	for (guint i = 0; i < out->len; i++) {
		const VtBranch *b = &g_array_index(out, VtBranch, i);

		g_assert_cmpuint(b->offset, <=, sizeof(psb_end));
		errors += b->kind == VT_BRANCH_ERROR;
	}
	g_assert_cmpuint(errors, >, 0);       /* the case that went past the end */
	g_array_free(out, TRUE);
	vt_decode_image_free(h);
	remove_dir(dir);
}

/* A branch's AUX offset does not depend on libipt's block cache, which
 * decoders sharing an image (the queue threads) fill in whatever order
 * they run: where the cache is cold, a block ends where the filling met an
 * instruction already cached; where it is warm, the block runs on to the
 * next decision and reads that decision's trace.  Code (one image):
 *   0x1000: nop; nop; 0x1002: nop; 0x1003: jz 0x1000; 0x1005: jmp 0x1002
 * Trace: from 0x1005; TNT taken (jz to 0x1000), TNT not taken.  Decoded
 * twice with the same image (cold, then warm cache): the same branches at
 * the same offsets, and the taken jz's offset is where the decoder stood
 * after its TNT - the next TNT's. */
static gsize write_loop_trace(guint8 *out, gsize cap, guint64 *second_tnt)
{
	Enc e;
	struct pt_packet tnt = { .type = ppt_tnt_8 };
	uint64_t off = 0;

	enc_start(&e);
	put(&e, (struct pt_packet){ .type = ppt_psb });
	put_mode64(&e);
	put_ip(&e, ppt_fup, CODE + 5);
	put(&e, (struct pt_packet){ .type = ppt_psbend });
	tnt.payload.tnt.bit_size = 1;
	tnt.payload.tnt.payload = 1;                  /* jz taken */
	put(&e, tnt);
	g_assert_cmpint(pt_enc_get_offset(e.enc, &off), >=, 0);
	*second_tnt = off;
	tnt.payload.tnt.payload = 0;                  /* jz not taken */
	put(&e, tnt);
	g_assert_cmpint(pt_enc_get_offset(e.enc, &off), >=, 0);
	pt_free_encoder(e.enc);
	g_assert_cmpuint(off, <=, cap);
	memcpy(out, e.buf, off);
	return off;
}

static void test_offsets_cache(void)
{
	static const guint8 loop[32] = { 0x90, 0x90, 0x90, 0x74, 0xfb, 0xeb, 0xfb };
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *h = code_image(dir, "host", loop, sizeof(loop));
	VtDecodeCpu cpu = { 0 };
	g_autoptr(GError) err = NULL;
	GArray *out[2];
	guint8 trace[256];
	guint64 second_tnt;
	gsize len = write_loop_trace(trace, sizeof(trace), &second_tnt);
	gboolean taken = FALSE;

	for (int run = 0; run < 2; run++) {
		out[run] = g_array_new(FALSE, FALSE, sizeof(VtBranch));
		g_assert_true(vt_decode_buffer(trace, len, &cpu, h, h, out[run], &err));
		g_assert_no_error(err);
	}
	g_assert_cmpuint(out[0]->len, ==, out[1]->len);
	for (guint i = 0; i < out[0]->len; i++) {
		const VtBranch *a = &g_array_index(out[0], VtBranch, i), *b = &g_array_index(out[1], VtBranch, i);

		g_test_message("%s %#" G_GINT64_MODIFIER "x -> %#" G_GINT64_MODIFIER "x at %#" G_GINT64_MODIFIER
			       "x / %#" G_GINT64_MODIFIER "x", vt_branch_kind_name(a->kind), a->from, a->to,
			       a->offset, b->offset);
		g_assert_cmpuint(a->kind, ==, b->kind);
		g_assert_cmphex(a->from, ==, b->from);
		g_assert_cmphex(a->to, ==, b->to);
		g_assert_cmphex(a->offset, ==, b->offset);
		if (a->kind == VT_BRANCH_JUMP && a->from == CODE + 3) {
			g_assert_cmphex(a->to, ==, CODE);
			g_assert_cmphex(a->offset, ==, second_tnt);
			taken = TRUE;
		}
	}
	g_assert_true(taken);
	for (int run = 0; run < 2; run++)
		g_array_free(out[run], TRUE);
	vt_decode_image_free(h);
	remove_dir(dir);
}

/* vt_decode_image_symbol remembers the symbol it found last (per thread):
 * asked about another image, or about an image loaded where a freed one
 * was, or about an address outside that symbol, it answers for that. */
static void test_symbol_hint(void)
{
	g_autofree char *d1 = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	g_autofree char *d2 = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	static const guint8 text[64] = { 0x90 };
	const Seg seg = { 0xffffffff81000000ULL, PF_R | PF_X, text, sizeof(text) };
	g_autofree char *c1 = write_core(d1, "kcore", &seg, 1, FALSE);
	g_autofree char *c2 = write_core(d2, "kcore", &seg, 1, FALSE);
	g_autofree char *k1 = write_text(d1, "kallsyms", "ffffffff81000000 T one_a\nffffffff81000020 T one_b\n");
	g_autofree char *k2 = write_text(d2, "kallsyms", "ffffffff81000000 T two_a\nffffffff81000010 T two_b\n");
	VtDecodeImage *i1 = vt_decode_image_load_dir(d1, "host", NULL), *i2 = vt_decode_image_load_dir(d2, "guest", NULL);
	guint64 off;

	(void)c1, (void)c2, (void)k1, (void)k2;
	g_assert_nonnull(i1);
	g_assert_nonnull(i2);
	g_assert_cmpstr(vt_decode_image_symbol(i1, 0xffffffff81000008ULL, &off), ==, "one_a");
	g_assert_cmpstr(vt_decode_image_symbol(i1, 0xffffffff81000018ULL, &off), ==, "one_a");
	g_assert_cmpuint(off, ==, 0x18);
	g_assert_cmpstr(vt_decode_image_symbol(i2, 0xffffffff81000018ULL, &off), ==, "two_b");
	g_assert_cmpuint(off, ==, 8);
	g_assert_cmpstr(vt_decode_image_symbol(i1, 0xffffffff81000028ULL, &off), ==, "one_b");
	g_assert_cmpstr(vt_decode_image_symbol(i1, 0xffffffff81000002ULL, &off), ==, "one_a");
	g_assert_null(vt_decode_image_symbol(i1, 0xffffffff80fffff0ULL, &off));
	g_assert_cmpstr(vt_decode_image_symbol(i1, 0xffffffff81000004ULL, &off), ==, "one_a");
	vt_decode_image_free(i1);
	i1 = vt_decode_image_load_dir(d2, "host", NULL);       /* maybe where the freed one was */
	g_assert_cmpstr(vt_decode_image_symbol(i1, 0xffffffff81000004ULL, &off), ==, "two_a");
	vt_decode_image_free(i1);
	vt_decode_image_free(i2);
}

/* vt_decode_image_code remembers the segment it found last (per thread):
 * another image's code at the same address is that image's. */
static void test_segment_hint(void)
{
	g_autofree char *d1 = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	g_autofree char *d2 = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	static const guint8 t1[32] = { 0x90 }, t2[16] = { 0xc3 };
	const Seg s1 = { 0xffffffff81000000ULL, PF_R | PF_X, t1, sizeof(t1) };
	const Seg s2 = { 0xffffffff81000000ULL, PF_R | PF_X, t2, sizeof(t2) };
	g_autofree char *c1 = write_core(d1, "kcore", &s1, 1, FALSE);
	g_autofree char *c2 = write_core(d2, "kcore", &s2, 1, FALSE);
	g_autofree char *k1 = write_text(d1, "kallsyms", "ffffffff81000000 T a\n");
	g_autofree char *k2 = write_text(d2, "kallsyms", "ffffffff81000000 T b\n");
	g_autoptr(VtDecodeImage) i1 = vt_decode_image_load_dir(d1, "host", NULL);
	g_autoptr(VtDecodeImage) i2 = vt_decode_image_load_dir(d2, "guest", NULL);
	gsize avail;

	(void)c1, (void)c2, (void)k1, (void)k2;
	g_assert_cmpuint(vt_decode_image_code(i1, 0xffffffff81000000ULL, &avail)[0], ==, 0x90);
	g_assert_cmpuint(avail, ==, 32);
	g_assert_cmpuint(vt_decode_image_code(i2, 0xffffffff81000000ULL, &avail)[0], ==, 0xc3);
	g_assert_cmpuint(avail, ==, 16);
	g_assert_null(vt_decode_image_code(i2, 0xffffffff81000010ULL, &avail));
	g_assert_cmpuint(avail, ==, 0);
	g_assert_nonnull(vt_decode_image_code(i1, 0xffffffff81000010ULL, &avail));
	g_assert_cmpuint(avail, ==, 16);
	g_assert_null(vt_decode_image_code(i1, 0xffffffff80fffff0ULL, &avail));
}

/* Overlapping code segments: the last one starting at or below an address
 * gives its bytes, so a segment's *avail ends where the next one starts -
 * for every address a piece covers, looking it up gives the same byte
 * (walk.c decodes a block out of one piece). */
static void test_segment_overlap(void)
{
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	static const guint8 t1[64] = { [0 ... 63] = 0x90 }, t2[16] = { [0 ... 15] = 0xc3 };
	const Seg segs[2] = { { CODE, PF_R | PF_X, t1, sizeof(t1) }, { CODE + 32, PF_R | PF_X, t2, sizeof(t2) } };
	g_autofree char *core = write_core(dir, "kcore", segs, 2, FALSE);
	g_autofree char *syms = write_text(dir, "kallsyms", "0000000000001000 T a\n");
	g_autoptr(VtDecodeImage) img = vt_decode_image_load_dir(dir, "guest", NULL);
	gsize avail;

	(void)core, (void)syms;
	g_assert_nonnull(img);
	g_assert_cmpuint(vt_decode_image_code(img, CODE, &avail)[0], ==, 0x90);
	g_assert_cmpuint(avail, ==, 32);                 /* not 64: the second starts there */
	g_assert_cmpuint(vt_decode_image_code(img, CODE + 40, &avail)[0], ==, 0xc3);
	g_assert_cmpuint(avail, ==, 8);
	g_assert_null(vt_decode_image_code(img, CODE + 48, &avail));   /* the second's end */
	for (guint64 a = CODE; a < CODE + 64; a++) {
		const guint8 *p = vt_decode_image_code(img, a, &avail);
		gsize n = avail;

		for (gsize k = 0; p && k < n; k++)
			g_assert_cmpuint(vt_decode_image_code(img, a + k, &avail)[0], ==, p[k]);
	}
}

/* The symbol cache: host and guest images with code at one address and
 * different symbols; lookups alternate between them, and between addresses
 * that share a slot - each answer is its own image's, never a stale one,
 * also where only its code was asked for first. */
static void test_symcache(void)
{
	static const guint8 code[64] = { 0x90 };
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *img[2];
	VtDecodeSymCache *c = vt_decode_symcache_new(1);   /* 2 slots: collisions */
	static const char *const names[2] = { "host", "guest" };

	for (int i = 0; i < 2; i++) {
		g_autofree char *sub = g_build_filename(dir, names[i], NULL);
		const Seg seg = { CODE, PF_R | PF_X, code, sizeof(code) };
		g_autofree char *core = NULL, *ks = NULL;
		g_autoptr(GError) err = NULL;

		g_mkdir(sub, 0700);
		core = write_core(sub, "kcore", &seg, 1, FALSE);
		ks = write_text(sub, "kallsyms", i ? "0000000000001000 T guest_a\n0000000000001010 T guest_b\n"
						   : "0000000000001000 T host_a\n0000000000001020 T host_b\n");
		img[i] = vt_decode_image_load_dir(sub, names[i], &err);
		g_assert_no_error(err);
	}
	for (int round = 0; round < 3; round++)
		for (guint64 a = CODE; a < CODE + sizeof(code) + 8; a += 4)
			for (int i = 0; i < 2; i++) {
				guint64 off = 0;
				gsize avail;
				const char *want = vt_decode_image_code(img[i], a, &avail)
							   ? vt_decode_image_symbol(img[i], a, &off) : NULL;
				const VtDecodeSym *y;

				/* in round 1 its code first (the symbol looked up later) */
				if (round == 1)
					g_assert_cmpint(vt_decode_symcache_code(c, img[i], a), ==, a < CODE + sizeof(code));
				y = vt_decode_symcache_lookup(c, img[i], a);

				g_assert_cmpstr(y->sym, ==, want);
				g_assert_true(y->img == img[i] && y->addr == a);
				g_assert_cmpint(y->code, ==, a < CODE + sizeof(code));
				if (want) {
					g_assert_cmpuint(y->sym_len, ==, strlen(want));
					g_assert_true(g_str_has_prefix(want, names[i]));
				}
			}
	g_assert_false(vt_decode_symcache_code(c, img[0], 0));
	g_assert_false(vt_decode_symcache_lookup(c, img[0], 0)->code);
	g_assert_null(vt_decode_symcache_lookup(c, NULL, CODE)->sym);
	vt_decode_symcache_free(c);
	for (int i = 0; i < 2; i++)
		vt_decode_image_free(img[i]);
	remove_dir(dir);
}

/* One table, many threads (vt_decode_symcache_share, as script's
 * printers): 4 threads look up addresses of 300 symbols - one of them a
 * 70,000-character name (its length past the 16 bits kallsyms keeps) -
 * through a table of 8 slots, so that slots are rewritten all the time
 * by the others; every answer is the image's own symbol and length. */
typedef struct {
	VtDecodeSymCache *c;
	const VtDecodeImage *img;
	guint seed;
	gint bad;
} SymRun;

static gpointer sym_reader(gpointer data)
{
	SymRun *r = data;
	VtDecodeSymCache *c = vt_decode_symcache_share(r->c);
	GRand *rand = g_rand_new_with_seed(r->seed);

	for (int i = 0; i < 200000; i++) {
		guint64 a = CODE + (guint64)g_rand_int_range(rand, 0, 300 * 16), off;
		const char *want = vt_decode_image_symbol(r->img, a, &off);
		const VtDecodeSym *y = vt_decode_symcache_lookup(c, r->img, a);

		if (y->sym != want || y->sym_len != strlen(want) || !y->code || y->addr != a || y->img != r->img)
			g_atomic_int_inc(&r->bad);
	}
	g_rand_free(rand);
	vt_decode_symcache_free(c);
	return NULL;
}

static void test_symcache_threads(void)
{
	static guint8 code[300 * 16];
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	g_autofree char *core = NULL, *ks = NULL, *longname = g_strnfill(70000, 'x');
	GString *text = g_string_new(NULL);
	const Seg seg = { CODE, PF_R | PF_X, code, sizeof(code) };
	g_autoptr(GError) err = NULL;
	VtDecodeImage *img;
	VtDecodeSymCache *c = vt_decode_symcache_new(3);
	SymRun r[4];
	GThread *th[4];
	guint64 off;
	gsize len = 0;

	for (int i = 0; i < 300; i++)
		g_string_append_printf(text, "%016" G_GINT64_MODIFIER "x T %s%d\n", (guint64)CODE + i * 16,
				       i == 7 ? longname : "f", i);
	core = write_core(dir, "kcore", &seg, 1, FALSE);
	ks = write_text(dir, "kallsyms", text->str);
	img = vt_decode_image_load_dir(dir, "m", &err);
	g_assert_no_error(err);
	g_assert_nonnull(vt_decode_image_symbol_len(img, CODE + 7 * 16 + 3, &off, &len));
	g_assert_cmpuint(len, ==, 70001);
	g_assert_cmpuint(off, ==, 3);
	g_assert_nonnull(vt_decode_image_symbol_len(img, CODE + 8 * 16, &off, &len));
	g_assert_cmpuint(len, ==, 2);
	for (guint i = 0; i < G_N_ELEMENTS(th); i++) {
		r[i] = (SymRun){ c, img, i + 1, 0 };
		th[i] = g_thread_new("symbols", sym_reader, &r[i]);
	}
	for (guint i = 0; i < G_N_ELEMENTS(th); i++) {
		g_thread_join(th[i]);
		g_assert_cmpint(r[i].bad, ==, 0);
	}
	vt_decode_symcache_free(c);   /* the table's last cache */
	vt_decode_image_free(img);
	g_string_free(text, TRUE);
	remove_dir(dir);
}

/* The decoder's quick classification of the branch that ends a block
 * (no Zydis) says what Zydis says - kind and length - whenever it answers,
 * and answers for the usual near branches; on random bytes after prefixes
 * and opcodes that branches have and that they do not. */
static void test_insn_branch(void)
{
	static const guint8 prefixes[] = { 0x2e, 0x3e, 0x40, 0x41, 0x48, 0x4c, 0x4f, 0x66, 0x67, 0xf2, 0xf3, 0xf0, 0x26, 0x64 };
	static const guint8 opcodes[] = { 0x70, 0x75, 0x7f, 0x0f, 0xe0, 0xe1, 0xe2, 0xe3, 0xe8, 0xe9, 0xeb, 0xc2, 0xc3,
					  0xff, 0xca, 0xcb, 0xcf, 0xea, 0x9a, 0xcc, 0xcd, 0x90, 0x8b, 0xc7 };
	static const guint8 common[][8] = {
		{ 2, 0x74, 0x05 }, { 6, 0x0f, 0x85, 1, 2, 3, 4 }, { 5, 0xe8, 1, 2, 3, 4 }, { 6, 0x2e, 0xe8, 1, 2, 3, 4 },
		{ 2, 0xeb, 0xfe }, { 5, 0xe9, 1, 2, 3, 4 }, { 1, 0xc3 }, { 3, 0xc2, 8, 0 }, { 2, 0xff, 0xd0 },
		{ 3, 0x41, 0xff, 0xe3 }, { 3, 0x3e, 0xff, 0xe0 }, { 7, 0xff, 0x14, 0xc5, 1, 2, 3, 4 },
		{ 6, 0xff, 0x25, 1, 2, 3, 4 }, { 3, 0xff, 0x60, 8 }, { 2, 0xe3, 0x10 },
	};
	GRand *rnd = g_rand_new_with_seed(12);
	guint answered = 0;

	for (gsize i = 0; i < G_N_ELEMENTS(common); i++) {
		guint8 kind, len;
		VtInsn in;

		g_assert_true(vt_decode_insn_branch(common[i] + 1, common[i][0], &kind, &len));
		g_assert_true(vt_decode_insn_bytes(common[i] + 1, common[i][0], 0x1000, &in));
		g_assert_cmpuint(kind, ==, in.kind);
		g_assert_cmpuint(len, ==, in.len);
		g_assert_cmpuint(len, ==, common[i][0]);
	}
	for (guint i = 0; i < 2000000; i++) {
		guint8 b[16], kind, len;
		guint np = g_rand_int_range(rnd, 0, 5), p = 0;
		gsize avail = (gsize)g_rand_int_range(rnd, 1, 16);
		VtInsn in;

		for (guint j = 0; j < sizeof(b); j++)
			b[j] = (guint8)g_rand_int(rnd);
		for (; p < np; p++)
			b[p] = g_rand_boolean(rnd) ? prefixes[g_rand_int_range(rnd, 0, G_N_ELEMENTS(prefixes))] : b[p];
		if (g_rand_int_range(rnd, 0, 4))
			b[p] = opcodes[g_rand_int_range(rnd, 0, G_N_ELEMENTS(opcodes))];
		if (b[p] == 0x0f && g_rand_boolean(rnd))
			b[p + 1] = (guint8)(0x80 | (b[p + 1] & 15));
		if (!vt_decode_insn_branch(b, avail, &kind, &len))
			continue;
		answered++;
		if (!vt_decode_insn_bytes(b, avail, 0x1000, &in) || kind != in.kind || len != in.len) {
			g_autofree char *hex = g_strdup_printf("%02x %02x %02x %02x %02x %02x %02x %02x (%zu bytes)", b[0],
							       b[1], b[2], b[3], b[4], b[5], b[6], b[7], avail);

			g_test_message("%s: quick %u/%u, Zydis %u/%u", hex, kind, len, in.kind, in.len);
			g_assert_not_reached();
		}
	}
	g_assert_cmpuint(answered, >, 100000);
	g_rand_free(rnd);
}

/* A 64-bit Zydis decoder as disasm.c's */
static const ZydisDecoder *zydis_dec(void)
{
	static ZydisDecoder dec;
	static gsize once;

	if (g_once_init_enter(&once)) {
		vt_decode_zydis_init(&dec, VT_MODE_64);
		g_once_init_leave(&once, 1);
	}
	return &dec;
}

/* Its decoding of the instruction at code: FALSE if none. */
static gboolean zydis_64(const guint8 *code, gsize avail, ZydisDecoderContext *ctx, ZydisDecodedInstruction *zi)
{
	return ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(zydis_dec(), ctx, code, MIN(avail, 15u), zi));
}

/* fastinsn.h's length decoder on random bytes around its opcodes: where
 * it answers and Zydis decodes, the same length, relative operands and
 * displacement (RIP-relative memory operands and relative branch
 * targets are relative, a SIB's absolute disp32 is not). */
static void test_fast_insn(void)
{
	static const guint8 prefixes[] = { 0x2e, 0x3e, 0x40, 0x41, 0x48, 0x4c, 0x4f, 0x66, 0x67, 0xf2, 0xf3, 0xf0, 0x65 };
	static const guint8 known[][10] = {   /* length, relative, bytes */
		{ 7, 1, 0x48, 0x8b, 0x05, 1, 2, 3, 4 },   /* mov 0x4030201(%rip), %rax */
		{ 8, 0, 0x48, 0x8b, 0x04, 0x25, 1, 2, 3, 4 },   /* mov 0x4030201, %rax */
		{ 6, 1, 0xff, 0x15, 1, 2, 3, 4 },         /* call *0x4030201(%rip) */
		{ 2, 0, 0xff, 0xd0 },                     /* call *%rax */
		{ 5, 1, 0xe8, 1, 2, 3, 4 },               /* call rel32 */
		{ 2, 1, 0x74, 5 },                        /* je rel8 */
		{ 1, 0, 0x55 },                           /* push %rbp */
		{ 4, 0, 0xf3, 0x0f, 0x1e, 0xfa },         /* endbr64 */
	};
	GRand *rnd = g_rand_new_with_seed(13);
	guint answered = 0, relative = 0;

	vt_fast_insn_init();
	for (gsize i = 0; i < G_N_ELEMENTS(known); i++) {
		VtFastInsn f = { 0 };

		g_assert_true(vt_fast_insn_decode(known[i] + 2, sizeof(known[i]) - 2, &f));
		g_assert_cmpuint(f.len, ==, known[i][0]);
		g_assert_cmpuint(f.relative, ==, known[i][1]);
	}
	for (guint i = 0; i < 1000000; i++) {
		guint8 b[16];
		guint np = g_rand_int_range(rnd, 0, 4), p = 0;
		gsize avail = (gsize)g_rand_int_range(rnd, 1, 16);
		ZydisDecodedInstruction zi;
		VtFastInsn f;

		for (guint j = 0; j < sizeof(b); j++)
			b[j] = (guint8)g_rand_int(rnd);
		for (; p < np; p++)
			b[p] = prefixes[g_rand_int_range(rnd, 0, G_N_ELEMENTS(prefixes))];
		if (g_rand_boolean(rnd))   /* ModRM mod 0, r/m 5: RIP-relative */
			b[p + 1] = (guint8)((b[p + 1] & 0x38) | 0x05);
		if (!vt_fast_insn_decode(b, avail, &f) || !zydis_64(b, avail, NULL, &zi))
			continue;
		answered++;
		relative += f.relative;
		if (!vt_fast_insn_agrees(&f, &zi)) {
			g_test_message("%02x %02x %02x %02x %02x (%zu bytes): fast %u/%u, Zydis %u", b[0], b[1], b[2],
				       b[3], b[4], avail, f.len, f.relative, zi.length);
			g_assert_not_reached();
		}
	}
	g_assert_cmpuint(answered, >, 100000);
	g_assert_cmpuint(relative, >, 10000);
	g_rand_free(rnd);
}

/* vt_decode_branch_text: every form it writes (jcc rel8 and rel32, jmp
 * rel8 and rel32, call rel32) at addresses low, high and where the
 * target wraps past 2^64, with displacements of every size, equal to
 * Zydis's AT&T text, length and kind; prefixed and REX forms, other
 * instructions and too few bytes are left to Zydis (FALSE). */
static void test_branch_text(void)
{
	static const guint64 ips[] = { 0, 0x10, 0x1000, 0x7ffffffff000ULL, 0xffffffff81000000ULL,
				       0xffffffffc0a00000ULL, 0xfffffffffffffff0ULL, 0xffffffffffffff80ULL };
	static const guint8 refused[][6] = {
		{ 0x2e, 0x74, 0x05 }, { 0x3e, 0x0f, 0x84, 1, 2, 3 }, { 0xf2, 0xe9, 1, 2, 3, 4 }, { 0x48, 0xe8, 1, 2, 3, 4 },
		{ 0x66, 0xe9, 1, 2, 3, 4 }, { 0xff, 0xd0 }, { 0x48, 0x8b, 0x05, 1, 2, 3 }, { 0x55 }, { 0xe3, 0x05 },
	};
	ZydisFormatter fmt;
	GRand *rnd = g_rand_new_with_seed(19);
	guint n = 0;
	guint8 len, kind;
	char buf[32];

	vt_fast_insn_init();
	ZydisFormatterInit(&fmt, ZYDIS_FORMATTER_STYLE_ATT);
	ZydisFormatterSetProperty(&fmt, ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, ZYAN_FALSE);
	for (guint form = 0; form < 36; form++) {
		for (gsize i = 0; i < G_N_ELEMENTS(ips); i++) {
			for (guint k = 0; k < 64; k++) {
				guint8 b[16] = { 0 };
				guint32 disp = k < 4 ? (guint32[]){ 0, 1, 0xffffffffu, 0x80000000u }[k] : g_rand_int(rnd);
				guint64 ip = ips[i] + (k & 8 ? g_rand_int_range(rnd, 0, 4096) : 0);
				gsize size;
				ZydisDecoderContext ctx;
				ZydisDecodedInstruction zi;
				ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT_VISIBLE];
				char want[256];

				if (form < 16) {                 /* jcc rel8 */
					b[0] = (guint8)(0x70 + form);
					size = 1;
				} else if (form < 32) {          /* jcc rel32 */
					b[0] = 0x0f;
					b[1] = (guint8)(0x80 + form - 16);
					size = 2;
				} else {                         /* jmp rel8, jmp rel32, call rel32 */
					b[0] = (guint8[]){ 0xeb, 0xe9, 0xe8, 0xe8 }[form - 32];
					size = 1;
				}
				if (b[0] == 0xeb || (b[0] & 0xf0) == 0x70) {
					b[size] = (guint8)disp;
					size += 1;
				} else {
					memcpy(b + size, &disp, 4);   /* little-endian */
					size += 4;
				}
				g_assert_true(vt_decode_branch_text(b, size, ip, &len, &kind, buf));
				g_assert_true(zydis_64(b, size, &ctx, &zi));
				g_assert_true(ZYAN_SUCCESS(ZydisDecoderDecodeOperands(zydis_dec(), &ctx, &zi, op,
										      zi.operand_count_visible)));
				g_assert_true(ZYAN_SUCCESS(ZydisFormatterFormatInstruction(
					&fmt, &zi, op, zi.operand_count_visible, want, sizeof(want), ip, NULL)));
				g_assert_cmpstr(buf, ==, want);
				g_assert_cmpuint(len, ==, zi.length);
				g_assert_cmpuint(kind, ==, vt_decode_insn_kind(&zi, op));
				g_assert_false(vt_decode_branch_text(b, size - 1, ip, &len, &kind, buf));
				n++;
			}
		}
	}
	for (gsize i = 0; i < G_N_ELEMENTS(refused); i++)
		g_assert_false(vt_decode_branch_text(refused[i], sizeof(refused[i]), 0xffffffff81000000ULL, &len, &kind,
						     buf));
	g_assert_cmpuint(n, ==, 36 * G_N_ELEMENTS(ips) * 64);
	g_rand_free(rnd);
}

/* The same on real kernel code (VT_TEST_CODE: a kcore directory, t0139
 * gives the Debian kernel's): every instruction of every function, swept
 * from its start; and every 8th function's text from the disassembly
 * table (texts by bytes included) equal to Zydis's own formatting at its
 * address. */
static void test_fast_insn_kernel(void)
{
	const char *dir = g_getenv("VT_TEST_CODE");
	ZydisFormatter fmt;
	g_autoptr(GError) err = NULL;
	g_autoptr(VtDecodeImage) img = NULL;
	VtDecodeDisasm *d;
	const guint64 *funcs;
	guint nf, n = 0, answered = 0, relative = 0, texts = 0, int3 = 0;

	if (!dir) {
		g_test_skip("VT_TEST_CODE (a kcore directory of real code) not set");
		return;
	}
	img = vt_decode_image_load_dir(dir, "guest", &err);
	g_assert_no_error(err);
	funcs = vt_decode_image_functions(img, &nf);
	d = vt_decode_disasm_new(img);
	ZydisFormatterInit(&fmt, ZYDIS_FORMATTER_STYLE_ATT);
	ZydisFormatterSetProperty(&fmt, ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, ZYAN_FALSE);
	vt_fast_insn_init();
	for (guint i = 0; i < nf; i++) {
		guint64 end = i + 1 < nf ? funcs[i + 1] : funcs[i] + 64;

		for (guint64 ip = funcs[i]; ip < end; n++) {
			gsize avail = 0;
			const guint8 *code = vt_decode_image_code(img, ip, &avail);
			ZydisDecoderContext ctx;
			ZydisDecodedInstruction zi;
			ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT_VISIBLE];
			VtFastInsn f;
			char want[256];

			if (!code || !zydis_64(code, avail, &ctx, &zi))
				break;
			int3 += code[0] == 0xcc;   /* (the padding between functions: Zydis's) */
			if (vt_fast_insn_decode(code, MIN(avail, 15u), &f)) {
				answered++;
				relative += f.relative;
				if (!vt_fast_insn_agrees(&f, &zi)) {
					g_test_message("%#" G_GINT64_MODIFIER "x: fast %u/%u, Zydis %u", ip, f.len,
						       f.relative, zi.length);
					g_assert_not_reached();
				}
			}
			if (i % 8 == 0) {
				const VtDisasmInsn *in = vt_decode_disasm_at(d, ip);

				g_assert_true(ZYAN_SUCCESS(ZydisDecoderDecodeOperands(zydis_dec(), &ctx, &zi, op,
										      zi.operand_count_visible)));
				g_assert_true(ZYAN_SUCCESS(ZydisFormatterFormatInstruction(
					&fmt, &zi, op, zi.operand_count_visible, want, sizeof(want), ip, NULL)));
				g_assert_cmpstr(vt_disasm_insn_text(in), ==, want);
				g_assert_cmpuint(in->len, ==, zi.length);
				texts++;
			}
			ip += zi.length;
		}
	}
	g_test_message("%u instructions (%u int3), %u fast (%u relative), %u texts", n, int3, answered, relative,
		       texts);
	g_assert_cmpuint(n - int3, >, 100000);
	g_assert_cmpuint(answered, >, (n - int3) / 10 * 9);
	g_assert_cmpuint(relative, >, answered / 20);
	vt_decode_disasm_free(d);
}

/* The disassembly cache is bounded: 2 slots, addresses that share them
 * looked up over and over - every answer is its own instruction's (text,
 * bytes, kind, symbol), as a cache without collisions gives it, a text too
 * long for its slot included, and no more than 2 are ever kept. */
static void test_disasm_bounded(void)
{
	static const guint8 code[32] = {
		0x90,                                                                   /* nop */
		0x48, 0xc7, 0x84, 0xd8, 0x78, 0x56, 0x34, 0x12, 0xff, 0xff, 0xff, 0xff, /* movq $-1, ... */
		0xc3,                                                                   /* ret */
		0x0f, 0x0b,                                                             /* ud2 */
	};
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	const Seg seg = { CODE, PF_R | PF_X, code, sizeof(code) };
	g_autofree char *core = write_core(dir, "kcore", &seg, 1, FALSE);
	g_autofree char *ks = write_text(dir, "kallsyms", "0000000000001000 T f_a\n000000000000100d T f_b\n");
	g_autoptr(GError) err = NULL;
	VtDecodeImage *img = vt_decode_image_load_dir(dir, "host", &err);
	VtDecodeDisasm *ref, *small;
	gboolean long_seen = FALSE;

	g_assert_nonnull(core);
	g_assert_nonnull(ks);
	g_assert_no_error(err);
	ref = vt_decode_disasm_new_sized(img, 12);
	small = vt_decode_disasm_new_sized(img, 1);
	for (int round = 0; round < 3; round++)
		for (guint64 a = CODE - 2; a < CODE + sizeof(code) + 2; a++) {
			const VtDisasmInsn *r = vt_decode_disasm_at(ref, a);
			VtDisasmInsn want = *r;
			g_autofree char *text = g_strdup(vt_disasm_insn_text(r));
			const VtDisasmInsn *in = vt_decode_disasm_at(small, a);
			gsize avail;

			g_assert_cmpuint(in->ip, ==, a);
			g_assert_cmpstr(vt_disasm_insn_text(in), ==, text);
			g_assert_cmpuint(in->text_len, ==, strlen(text));
			g_assert_cmpuint(in->len, ==, want.len);
			g_assert_cmpuint(in->kind, ==, want.kind);
			g_assert_cmpstr(in->sym, ==, want.sym);
			g_assert_cmpuint(in->sym_off, ==, want.sym_off);
			g_assert_true(in->code == vt_decode_image_code(img, a, &avail));
			g_assert_cmpuint(vt_decode_disasm_size(small), <=, 2);
			long_seen |= strlen(text) >= sizeof(in->text_in);
		}
	g_assert_true(long_seen);
	g_assert_cmpstr(vt_disasm_insn_text(vt_decode_disasm_at(small, CODE)), ==, "nop");
	g_assert_cmpstr(vt_decode_disasm_at(small, CODE)->sym, ==, "f_a");
	g_assert_cmpuint(vt_decode_disasm_at(small, CODE + 13)->kind, ==, VT_INSN_RETURN);
	g_assert_cmpstr(vt_decode_disasm_at(small, CODE + 13)->sym, ==, "f_b");
	g_assert_cmpuint(vt_decode_disasm_at(small, CODE + 14)->kind, ==, VT_INSN_STOP);
	g_assert_cmpstr(vt_disasm_insn_text(vt_decode_disasm_at(small, CODE - 1)), ==, "(unmapped)");
	g_assert_null(vt_decode_disasm_at(small, CODE - 1)->sym);
	g_assert_cmpuint(vt_decode_disasm_size(ref), >, 30);
	vt_decode_disasm_free(small);
	vt_decode_disasm_free(ref);
	vt_decode_image_free(img);
	remove_dir(dir);
}

/* Code whose texts fit in a slot or need the long texts' table (26 bytes
 * or more), and the same bytes whose text differs with their address. */
static const guint8 shared_code[] = {
	0x90,                                                                   /* nop */
	0x48, 0x8b, 0x8c, 0xd8, 0x78, 0x56, 0x34, 0x12,                         /* mov 0x12345678(%rax,%rbx,8), %rcx */
	0x62, 0x61, 0x8d, 0xd7, 0xd4, 0xac, 0xd8, 0x78, 0x56, 0x34, 0x12,       /* vpaddq 0x12345678(...) {1to8}, ... {z} */
	0xc3,                                                                   /* ret */
	0xe8, 0x00, 0x00, 0x00, 0x00, 0xe8, 0x00, 0x00, 0x00, 0x00,             /* call +0, twice */
};

/* Readers of one table share what each formatted: the second formats
 * nothing the first did, and answers the same; readers with tables of
 * their own format each instruction again. */
static void test_disasm_shared(void)
{
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *img = code_image(dir, "m", shared_code, sizeof(shared_code));
	VtDecodeDisasmTable *t = vt_decode_disasm_table_new(img, 12);
	VtDecodeDisasm *a = vt_decode_disasm_new_on(t), *b = vt_decode_disasm_new_on(t);
	VtDecodeDisasm *own = vt_decode_disasm_new_sized(img, 12);
	const guint64 ips[] = { CODE, CODE + 1, CODE + 9, CODE + 20, CODE - 1 };
	guint64 fills;

	for (guint i = 0; i < G_N_ELEMENTS(ips); i++)
		vt_decode_disasm_at(a, ips[i]);
	fills = vt_decode_disasm_fills(a);
	g_assert_cmpuint(fills, ==, G_N_ELEMENTS(ips));
	for (guint i = 0; i < G_N_ELEMENTS(ips); i++) {
		g_autofree char *text = g_strdup(vt_disasm_insn_text(vt_decode_disasm_at(own, ips[i])));
		const VtDisasmInsn *in = vt_decode_disasm_at(b, ips[i]);

		g_assert_cmpstr(vt_disasm_insn_text(in), ==, text);
		g_assert_cmpuint(in->text_len, ==, strlen(text));
		g_assert_cmpuint(in->len, ==, vt_decode_disasm_at(own, ips[i])->len);
	}
	g_assert_cmpstr(vt_disasm_insn_text(vt_decode_disasm_at(b, CODE + 1)), ==, "mov 0x12345678(%rax,%rbx,8), %rcx");
	g_assert_cmpstr(vt_disasm_insn_text(vt_decode_disasm_at(b, CODE + 9)), ==,
			"vpaddq 0x12345678(%rax,%rbx,8) {1to8}, %zmm30, %zmm29 {%k7} {z}");
	g_assert_cmpuint(vt_decode_disasm_at(b, CODE + 20)->kind, ==, VT_INSN_RETURN);
	g_assert_cmpstr(vt_disasm_insn_text(vt_decode_disasm_at(b, CODE - 1)), ==, "(unmapped)");
	/* a relative operand's text is its address's, not its bytes' */
	g_assert_cmpstr(vt_disasm_insn_text(vt_decode_disasm_at(b, CODE + 21)), ==, "call 0x000000000000101a");
	g_assert_cmpstr(vt_disasm_insn_text(vt_decode_disasm_at(b, CODE + 26)), ==, "call 0x000000000000101f");
	g_assert_cmpuint(vt_decode_disasm_fills(b), ==, 2);
	g_assert_cmpuint(vt_decode_disasm_fills(own), ==, G_N_ELEMENTS(ips));
	g_assert_cmpuint(vt_decode_disasm_size(b), ==, vt_decode_disasm_size(a));
	vt_decode_disasm_free(own);
	vt_decode_disasm_free(b);
	vt_decode_disasm_free(a);
	vt_decode_disasm_table_free(t);
	vt_decode_image_free(img);
	remove_dir(dir);
}

typedef struct {
	VtDecodeDisasmTable *t;
	char **want;                /* by offset in shared_code */
	guint bad;
} SharedRun;

/* Offsets in shared_code looked up at random, over and over, each
 * answer compared with the one of a table without other threads. */
static gpointer shared_reader(gpointer data)
{
	SharedRun *r = data;
	VtDecodeDisasm *d = vt_decode_disasm_new_on(r->t);
	GRand *rnd = g_rand_new_with_seed(GPOINTER_TO_UINT(g_thread_self()));
	guint bad = 0;

	for (guint n = 0; n < 200000; n++) {
		guint off = (guint)g_rand_int_range(rnd, 0, sizeof(shared_code));
		const VtDisasmInsn *in = vt_decode_disasm_at(d, CODE + off);

		bad += in->ip != CODE + off || strcmp(vt_disasm_insn_text(in), r->want[off]) ||
		       in->text_len != MIN(strlen(r->want[off]), 255u);
	}
	__atomic_add_fetch(&r->bad, bad, __ATOMIC_RELAXED);
	g_rand_free(rnd);
	vt_decode_disasm_free(d);
	return NULL;
}

/* Four threads on one small table (2^3 slots: 5 for the 31 offsets of
 * the code, 2 for the one long text both long instructions share, 1 for
 * the texts by bytes) replace each other's slots all the time: no answer
 * is torn or another's. */
static void test_disasm_threads(void)
{
	g_autofree char *dir = g_dir_make_tmp("test-decode-XXXXXX", NULL);
	VtDecodeImage *img = code_image(dir, "m", shared_code, sizeof(shared_code));
	VtDecodeDisasm *ref = vt_decode_disasm_new_sized(img, 12);
	SharedRun r = { vt_decode_disasm_table_new(img, 3), g_new0(char *, sizeof(shared_code)), 0 };
	GThread *th[4];

	for (guint off = 0; off < sizeof(shared_code); off++)
		r.want[off] = g_strdup(vt_disasm_insn_text(vt_decode_disasm_at(ref, CODE + off)));
	for (guint i = 0; i < G_N_ELEMENTS(th); i++)
		th[i] = g_thread_new("reader", shared_reader, &r);
	for (guint i = 0; i < G_N_ELEMENTS(th); i++)
		g_thread_join(th[i]);
	g_assert_cmpuint(r.bad, ==, 0);
	for (guint off = 0; off < sizeof(shared_code); off++)
		g_free(r.want[off]);
	g_free(r.want);
	vt_decode_disasm_table_free(r.t);
	vt_decode_disasm_free(ref);
	vt_decode_image_free(img);
	remove_dir(dir);
}

/* A branch's time is the time of the packet that decided it: a TIP after
 * a TSC gives the indirect jump the new time, with a MODE.Exec (an event
 * the walk reads first, bound to the branch) between them as without one
 * (the walker's time of branches before an event is the time before the
 * event's packets - not when a packet after the event decided it). */
static void test_branch_time(void)
{
	guint8 code[64] = { 0x74, 0x02, 0x90, 0x90, 0xff, 0xe0, [0x10] = 0x74, 0x00, 0xeb, 0xfc };
	g_autofree char *dir = g_dir_make_tmp("vmtrace-test-XXXXXX", NULL);
	VtDecodeImage *h = code_image(dir, "host", code, sizeof(code));

	for (int mode = 0; mode < 2; mode++) {
		struct pt_packet tnt = { .type = ppt_tnt_8, .payload.tnt = { .bit_size = 1, .payload = 1 } };
		VtDecodeCpu cpu = { 0 };
		g_autoptr(GError) err = NULL;
		GArray *out = g_array_new(FALSE, FALSE, sizeof(VtBranch));
		guint8 trace[4096];
		gboolean seen = FALSE;
		Enc e;
		gsize len;

		enc_start(&e);
		put(&e, (struct pt_packet){ .type = ppt_psb });
		put(&e, (struct pt_packet){ .type = ppt_tsc, .payload.tsc.tsc = 1000000 });
		put_mode64(&e);
		put_pip(&e, HOST_CR3, FALSE);
		put_ip(&e, ppt_fup, CODE);
		put(&e, (struct pt_packet){ .type = ppt_psbend });
		put(&e, tnt);                      /* jz taken */
		put(&e, (struct pt_packet){ .type = ppt_tsc, .payload.tsc.tsc = 2000000 });
		if (mode)
			put_mode64(&e);            /* MODE.Exec bound to the jmp's TIP */
		put_ip(&e, ppt_tip, CODE + 0x10);  /* jmp *%rax */
		put(&e, (struct pt_packet){ .type = ppt_tsc, .payload.tsc.tsc = 3000000 });
		put(&e, tnt);
		len = enc_finish(&e, trace, sizeof(trace));
		g_assert_true(vt_decode_buffer(trace, len, &cpu, h, h, out, &err));
		g_assert_no_error(err);
		for (guint i = 0; i < out->len; i++) {
			const VtBranch *b = &g_array_index(out, VtBranch, i);

			if (b->from == CODE + 4 && b->to == CODE + 0x10) {
				g_assert_cmpuint(b->tsc, ==, 2000000);
				seen = TRUE;
			} else if (b->from == CODE && b->to == CODE + 4) {
				g_assert_cmpuint(b->tsc, ==, 1000000);
			}
		}
		g_assert_true(seen);
		g_array_free(out, TRUE);
	}
	vt_decode_image_free(h);
	remove_dir(dir);
}

/* perf's module DSO names from module file paths (kmod_path__parse_name) */
static void test_module_name(void)
{
	static const char *const cases[][2] = {
		{ "/lib/modules/6.1.0-13-amd64/kernel/arch/x86/kvm/kvm-intel.ko", "[kvm_intel]" },
		{ "/lib/modules/6.1.0/kernel/drivers/net/virtio_net.ko.xz", "[virtio_net]" },
		{ "/lib/modules/6.1.0/kernel/fs/xfs/xfs.ko.gz", "[xfs]" },
		{ "/lib/modules/6.1.0/extra/snd-hda-codec.ko.zst", "snd-hda-codec.ko.zst" },   /* perf 6.1: no zstd */
		{ "kvm.ko", "[kvm]" },
		{ "/lib/modules/x/weird", "weird" },
		{ "[kvm_intel]", "[kvm_intel]" },
		{ "/lib/modules/x/a.b.ko", "[a.b]" },
	};

	for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_autofree char *name = vt_decode_module_name(cases[i][0]);

		g_assert_cmpstr(name, ==, cases[i][1]);
	}
}

/* libipt's errors as perf's kinds (perf's code and message) */
static void test_perf_error(void)
{
	static const struct {
		int code;
		guint perf;
		const char *msg;
	} cases[] = {
		{ pte_nomap, 5, "Failed to get instruction" }, { pte_bad_insn, 5, "Failed to get instruction" },
		{ pte_bad_query, 6, "Trace doesn't match instruction" },
		{ pte_bad_retcomp, 6, "Trace doesn't match instruction" }, { pte_bad_opc, 3, "Bad packet" },
		{ pte_bad_packet, 3, "Bad packet" }, { pte_overflow, 7, "Overflow packet" },
		{ pte_eos, 4, "No more data" }, { pte_nomem, 1, "Memory allocation failed" },
		{ pte_internal, 2, "Internal error" }, { 99, 9, "Unknown error!" },
		{ VT_DECODE_ERR_LOOP, 10, "Never-ending loop (refer perf config intel-pt.max-loops)" },
	};

	for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
		const char *msg = NULL;

		g_assert_cmpuint(vt_decode_perf_error(cases[i].code, &msg), ==, cases[i].perf);
		g_assert_cmpstr(msg, ==, cases[i].msg);
	}
	g_assert_cmpuint(vt_decode_perf_error(pte_nomap, NULL), ==, 5);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/decode/module-name", test_module_name);
	g_test_add_func("/decode/branch-time", test_branch_time);
	g_test_add_func("/decode/perf-error", test_perf_error);
	g_test_add_func("/decode/image", test_image);
	g_test_add_func("/decode/poke-memo", test_poke_memo);
	g_test_add_func("/decode/kallsyms-forms", test_kallsyms_forms);
	g_test_add_func("/decode/symbol-index", test_symbol_index);
	g_test_add_func("/decode/symbol-hint", test_symbol_hint);
	g_test_add_func("/decode/segment-hint", test_segment_hint);
	g_test_add_func("/decode/segment-overlap", test_segment_overlap);
	g_test_add_func("/decode/nr-switch", test_nr_switch);
	g_test_add_func("/decode/near-sources", test_near_sources);
	g_test_add_func("/decode/insns", test_insns);
	g_test_add_func("/decode/join", test_join);
	g_test_add_func("/decode/join-cross", test_join_cross);
	g_test_add_func("/decode/join-psb", test_join_psb);
	g_test_add_func("/decode/join-flow-end", test_join_flow_end);
	g_test_add_func("/decode/bad-insn-run", test_bad_insn_run);
	g_test_add_func("/decode/join-loop", test_join_loop);
	g_test_add_func("/decode/exec-modes", test_exec_modes);
	g_test_add_func("/decode/garbage", test_garbage);
	g_test_add_func("/decode/populate", test_populate);
	g_test_add_func("/decode/buf-pool", test_buf_pool);
	g_test_add_data_func("/decode/ranges", GINT_TO_POINTER(FALSE), test_ranges);
	g_test_add_data_func("/decode/ranges-ovf", GINT_TO_POINTER(TRUE), test_ranges);
	g_test_add_func("/decode/ranges-user-gap", test_ranges_user_gap);
	g_test_add_func("/decode/offsets-within", test_offsets_within);
	g_test_add_func("/decode/offsets-cache", test_offsets_cache);
	g_test_add_func("/decode/symcache", test_symcache);
	g_test_add_func("/decode/symcache-threads", test_symcache_threads);
	g_test_add_func("/decode/insn-branch", test_insn_branch);
	g_test_add_func("/decode/fast-insn", test_fast_insn);
	g_test_add_func("/decode/fast-insn-kernel", test_fast_insn_kernel);
	g_test_add_func("/decode/branch-text", test_branch_text);
	g_test_add_func("/decode/disasm-bounded", test_disasm_bounded);
	g_test_add_func("/decode/disasm-shared", test_disasm_shared);
	g_test_add_func("/decode/disasm-threads", test_disasm_threads);
	return g_test_run();
}
