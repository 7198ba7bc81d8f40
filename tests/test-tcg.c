/* test-tcg.c - unit tests of src/tcg/convert.c (GTest): a plugin directory
 * written by hand becomes a recording whose code image holds the first
 * bytes in one segment per address half (holes filled), counts the code
 * that changed, and whose perf.data has the vCPU's AUX stream and sideband
 * with a PERF_RECORD_TEXT_POKE (old and new bytes, the translation's time)
 * per translation that changed kernel code. */
#include "config.h"

#include <elf.h>
#include <glib/gstdio.h>
#include <string.h>

#include "src/decode/internal.h"
#include "src/perf/perf-data.h"
#include "src/tcg/tcg-format.h"
#include "src/tcg/tcg.h"

#define KTEXT 0xffffffff81000000ULL

static void code_rec(GByteArray *a, guint64 vaddr, const char *bytes, guint32 len)
{
	VtTcgCodeHeader h = { .vaddr = vaddr, .len = len, .tsc = VT_TCG_T0 + a->len };

	g_byte_array_append(a, (const guint8 *)&h, sizeof(h));
	g_byte_array_append(a, (const guint8 *)bytes, len);
}

/* A plugin directory: three kernel translations (one rewrites a byte), one
 * user one, a 64-byte packet stream; extra: more meta lines. */
static char *plugin_dir(const char *extra, gboolean with_vcpu)
{
	char *dir = g_dir_make_tmp("test-tcg.XXXXXX", NULL);
	g_autofree char *meta = g_build_filename(dir, "meta", NULL);
	g_autofree char *code = g_build_filename(dir, "code", NULL);
	g_autofree char *pt = g_build_filename(dir, "vcpu0.pt", NULL);
	g_autofree char *m = g_strdup_printf("format 1\napi 1\nvcpus 1\nfilter all\nmttcg 0\nstarted 100\nbefore 10\n%s%s",
					     with_vcpu ? "vcpu 0 tid 123 bytes 64 packets 5 retired 80 async 1 faults 0 rep 10 "
							 "unresolved 0 filtered 0 final 0 inflight 0\n" : "", extra);
	GByteArray *a = g_byte_array_new();
	guint8 buf[64] = { 0 };

	code_rec(a, KTEXT, "\x90\x90\xc3", 3);
	code_rec(a, KTEXT + 1, "\xcc", 1);            /* patched at run time */
	code_rec(a, KTEXT + 0x10000, "\xc3", 1);       /* 15 pages further: same segment */
	code_rec(a, 0x400000, "\x90", 1);              /* user space: its own segment */
	g_assert_true(g_file_set_contents(code, (const char *)a->data, a->len, NULL));
	g_assert_true(g_file_set_contents(meta, m, -1, NULL));
	for (int i = 0; i < 16; i += 2) {
		buf[i] = 0x02;
		buf[i + 1] = 0x82;                     /* a PSB, then PADs */
	}
	g_assert_true(g_file_set_contents(pt, (const char *)buf, sizeof(buf), NULL));
	g_byte_array_unref(a);
	return dir;
}

static void rm_rf(const char *dir)
{
	g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", dir);

	g_assert_cmpint(system(cmd), ==, 0);
}

static VtTcgStats convert(const char *in, char **out, GError **error, gboolean *ok)
{
	VtTcgStats st;
	VtTcgConvertOptions o = { .in_dir = in, .qemu_pid = 4242 };

	*out = g_dir_make_tmp("test-tcg-out.XXXXXX", NULL);
	o.out_dir = *out;
	*ok = vt_tcg_convert(&o, &st, error);
	return st;
}

/* in converted, which must succeed: the output directory (stats: the
 * converter's counts, when asked). */
static char *converted(const char *in, VtTcgStats *stats)
{
	g_autoptr(GError) err = NULL;
	char *out = NULL;
	gboolean ok;
	VtTcgStats st = convert(in, &out, &err, &ok);

	g_assert_no_error(err);
	g_assert_true(ok);
	if (stats)
		*stats = st;
	return out;
}

static guint phnum(const char *kcore)
{
	g_autofree char *data = NULL;
	gsize len;
	const Elf64_Ehdr *eh;

	g_assert_true(g_file_get_contents(kcore, &data, &len, NULL));
	g_assert_cmpuint(len, >=, sizeof(*eh));
	eh = (const Elf64_Ehdr *)data;
	g_assert_cmpint(eh->e_type, ==, ET_CORE);
	return eh->e_phnum;
}

static void test_image(void)
{
	g_autofree char *in = plugin_dir("", TRUE);
	VtTcgStats st;
	g_autofree char *out = converted(in, &st);
	g_autofree char *gdir = NULL;
	g_autofree char *kcore = NULL;
	g_autoptr(GError) err = NULL;
	g_autoptr(VtDecodeImage) img = NULL;
	gsize avail = 0;
	const guint8 *c;

	g_assert_cmpuint(st.smc_translations, ==, 1);
	g_assert_cmpuint(st.smc_bytes, ==, 1);
	g_assert_cmpuint(st.code_bytes, ==, 5);
	g_assert_cmpuint(st.code_pages, ==, 3);
	g_assert_cmpuint(st.retired, ==, 80);
	gdir = g_build_filename(out, "guest", NULL);
	kcore = g_build_filename(gdir, "kcore", NULL);
	/* kernel half: one segment over the hole (perf keeps only the one
	 * holding _stext); user half: another */
	g_assert_cmpuint(phnum(kcore), ==, 2);
	img = vt_decode_image_load_dir(gdir, "guest", &err);
	g_assert_no_error(err);
	c = vt_decode_image_code(img, KTEXT, &avail);
	g_assert_nonnull(c);
	g_assert_cmpuint(avail, >=, 0x11000);
	g_assert_cmpuint(c[0], ==, 0x90);
	g_assert_cmpuint(c[1], ==, 0x90);           /* the first bytes (the poke: a TEXT_POKE) */
	g_assert_cmpuint(c[2], ==, 0xc3);
	g_assert_cmpuint(c[0x8000], ==, 0);         /* never executed */
	g_assert_cmpuint(c[0x10000], ==, 0xc3);
	g_assert_cmphex(vt_decode_image_text(img), ==, KTEXT);
	rm_rf(in);
	rm_rf(out);
}

/* Code of the boot (flagged VT_TCG_CODE_POKE: firmware that rewrites
 * itself) that changes is a TEXT_POKE like the kernel's; other user-half
 * code that changes (another process's) is not.  The mode counts of meta. */
static void test_boot_pokes(void)
{
	g_autofree char *in = plugin_dir("mode_changes 3\nmode_resyncs 1\nmode_ambiguous 7\n", TRUE);
	g_autofree char *code = g_build_filename(in, "code", NULL);
	g_autofree char *out = NULL;
	GByteArray *a = g_byte_array_new();
	VtTcgStats st;
	VtTcgCodeHeader h = { .vaddr = 0xfe05b, .len = 2, .flags = VT_TCG_CODE_POKE, .tsc = VT_TCG_T0 };

	code_rec(a, KTEXT, "\x90\xc3", 2);
	g_byte_array_append(a, (const guint8 *)&h, sizeof(h));
	g_byte_array_append(a, (const guint8 *)"\x31\xd2", 2);
	h.tsc += 100;
	g_byte_array_append(a, (const guint8 *)&h, sizeof(h));
	g_byte_array_append(a, (const guint8 *)"\x31\xc0", 2);   /* rewritten: a poke */
	code_rec(a, 0x400000, "\x90", 1);
	code_rec(a, 0x400000, "\xcc", 1);                        /* another process: no poke */
	g_assert_true(g_file_set_contents(code, (const char *)a->data, a->len, NULL));
	g_byte_array_unref(a);
	out = converted(in, &st);
	g_assert_cmpuint(st.smc_bytes, ==, 2);
	g_assert_cmpuint(st.smc_translations, ==, 1);
	g_assert_cmpuint(st.mode_changes, ==, 3);
	g_assert_cmpuint(st.mode_resyncs, ==, 1);
	g_assert_cmpuint(st.mode_ambiguous, ==, 7);
	rm_rf(in);
	rm_rf(out);
}

static void test_perf_data(void)
{
	g_autofree char *in = plugin_dir("", TRUE);
	g_autofree char *out = converted(in, NULL);
	g_autoptr(GError) err = NULL;
	g_autofree VtPerfFileSection *idx = NULL;
	VtPerfFile *f;
	VtPerfIter it;
	VtPerfRecord rec;
	gboolean comm = FALSE, mmap = FALSE;
	guint n = 0, pokes = 0;

	f = vt_perf_file_open(out, VT_PERF_OPEN_RDONLY, &err);
	g_assert_no_error(err);
	g_assert_cmpuint(vt_perf_file_n_attrs(f), ==, 2);
	idx = vt_perf_file_auxtrace_index(f, &n, &err);
	g_assert_no_error(err);
	g_assert_cmpuint(n, ==, 1);
	vt_perf_iter_init(&it, f);
	while (vt_perf_iter_next(&it, &rec, &err) == 1) {
		VtPerfComm cm;

		if (rec.type == PERF_RECORD_COMM && vt_perf_record_comm(&rec, &cm, NULL) && !strcmp(cm.comm, "CPU 0/TCG"))
			comm = cm.pid == 0 && cm.tid == 123;
		if (rec.type == PERF_RECORD_MMAP && rec.misc == PERF_RECORD_MISC_GUEST_KERNEL) {
			const guint64 *p = (const guint64 *)(rec.data + 16);

			mmap = p[0] == KTEXT && p[2] == KTEXT;   /* start, len, pgoff = _text */
		}
		if (rec.type == PERF_RECORD_TEXT_POKE) {
			guint64 addr;
			guint16 len[2];
			VtPerfSampleId sid;

			memcpy(&addr, rec.data + 8, 8);
			memcpy(len, rec.data + 16, 4);
			g_assert_cmphex(addr, ==, KTEXT + 1);
			g_assert_cmpuint(len[0], ==, 1);
			g_assert_cmpuint(len[1], ==, 1);
			g_assert_cmphex(rec.data[20], ==, 0x90);      /* old */
			g_assert_cmphex(rec.data[21], ==, 0xcc);      /* new */
			g_assert_cmpuint(rec.misc, ==, PERF_RECORD_MISC_GUEST_KERNEL);
			g_assert_true(vt_perf_record_sample_id(f, &rec, &sid));
			g_assert_cmpuint(sid.time, ==, VT_TCG_T0 + sizeof(VtTcgCodeHeader) + 3);   /* its translation's */
			pokes++;
		}
	}
	g_assert_no_error(err);
	g_assert_cmpuint(pokes, ==, 1);
	g_assert_true(comm);
	g_assert_true(mmap);
	vt_perf_file_close(f);
	rm_rf(in);
	rm_rf(out);
}

/* thread=single: both vCPUs ran in one thread; each stream gets a tid */
static void test_one_thread(void)
{
	g_autofree char *in = plugin_dir("vcpu 1 tid 123 bytes 64 packets 5 retired 0 async 0 faults 0 rep 0 unresolved 0 "
					 "filtered 0 final 0 inflight 0\n", TRUE);
	g_autofree char *pt0 = g_build_filename(in, "vcpu0.pt", NULL);
	g_autofree char *pt1 = g_build_filename(in, "vcpu1.pt", NULL);
	g_autofree char *data = NULL;
	g_autofree char *out = NULL;
	g_autoptr(GError) err = NULL;
	VtPerfFile *f;
	VtPerfIter it;
	VtPerfRecord rec;
	gsize len;
	guint tids = 0;

	g_assert_true(g_file_get_contents(pt0, &data, &len, NULL));
	g_assert_true(g_file_set_contents(pt1, data, (gssize)len, NULL));
	out = converted(in, NULL);
	f = vt_perf_file_open(out, VT_PERF_OPEN_RDONLY, &err);
	g_assert_no_error(err);
	vt_perf_iter_init(&it, f);
	while (vt_perf_iter_next(&it, &rec, &err) == 1) {
		VtPerfComm cm;

		if (rec.type == PERF_RECORD_COMM && vt_perf_record_comm(&rec, &cm, NULL) &&
		    ((!strcmp(cm.comm, "CPU 0/TCG") && cm.tid == 123) || (!strcmp(cm.comm, "CPU 1/TCG") && cm.tid == 124)))
			tids++;
	}
	g_assert_cmpuint(tids, ==, 2);
	vt_perf_file_close(f);
	rm_rf(in);
	rm_rf(out);
}

static void test_refusals(void)
{
	g_autofree char *in1 = plugin_dir("write_errors 2\n", TRUE);
	g_autofree char *in2 = plugin_dir("", FALSE);
	g_autofree char *out1 = NULL;
	g_autofree char *out2 = NULL;
	g_autoptr(GError) e1 = NULL;
	g_autoptr(GError) e2 = NULL;
	gboolean ok;

	convert(in1, &out1, &e1, &ok);
	g_assert_false(ok);
	g_assert_error(e1, VT_TCG_ERROR, VT_TCG_ERROR_IO);
	convert(in2, &out2, &e2, &ok);
	g_assert_false(ok);
	g_assert_error(e2, VT_TCG_ERROR, VT_TCG_ERROR_NO_TRACE);
	rm_rf(in1);
	rm_rf(in2);
	rm_rf(out1);
	rm_rf(out2);
}

/* vmtrace script's instructions between branches (--insn-trace, i0ns):
 * poked code as it was at the branch's time, not the image's first bytes
 * (these gave t0120's instruction count gap: a 5-byte NOP the kernel wrote
 * over five 1-byte ones walked as five). */
static void disasm_in_time(const VtDecodeImage *img)
{
	g_autoptr(VtDecodeDisasm) d = vt_decode_disasm_new(img);
	static const struct { guint64 ip, tsc; const char *text; } want[] = {
		{ KTEXT + 1, VT_TCG_T0 + 99, "nop" },  { KTEXT + 1, VT_TCG_T0 + 100, "int3" },
		{ KTEXT + 2, VT_TCG_T0 + 150, "ret" },  { KTEXT + 2, VT_TCG_T0 + 200, "nop" },
		{ KTEXT + 1, VT_TCG_T0 + 99, "nop" },  { KTEXT + 2, 0, "ret" },   /* back in time: the cache keys on it */
		{ KTEXT + 0x10000, VT_TCG_T0 + 200, "ret" },   /* a page never poked */
	};

	for (guint i = 0; i < G_N_ELEMENTS(want); i++) {
		const VtDisasmInsn *in = vt_decode_disasm_at_time(d, want[i].ip, VT_MODE_64, want[i].tsc);

		g_assert_cmpstr(vt_disasm_insn_text(in), ==, want[i].text);
		g_assert_cmpuint(in->len, ==, 1);
		g_assert_cmphex(in->code[0], ==, want[i].text[0] == 'i' ? 0xcc : want[i].text[0] == 'r' ? 0xc3 : 0x90);
	}
	g_assert_cmpstr(vt_disasm_insn_text(vt_decode_disasm_at(d, KTEXT + 1)), ==, "nop");   /* no time: the first bytes */
}

/* The converted recording decoded as perf would: its TEXT_POKE applied to
 * the image (first bytes) from the poke's time on (src/decode/textpoke.c). */
static void test_pokes(void)
{
	g_autofree char *in = plugin_dir("", TRUE);
	g_autofree char *out = converted(in, NULL);
	g_autofree char *gdir = NULL;
	g_autoptr(GError) err = NULL;
	g_autoptr(VtDecodeImage) img = NULL;
	VtDecodePokes *p = vt_decode_pokes_new();
	const guint8 old = 0x90, new = 0xcc;
	guint8 b[3];

	gdir = g_build_filename(out, "guest", NULL);
	img = vt_decode_image_load_dir(gdir, "guest", &err);
	g_assert_no_error(err);
	vt_decode_pokes_add(p, KTEXT + 1, &old, &new, 1, VT_TCG_T0 + 100);
	vt_decode_pokes_add(p, KTEXT + 2, &new, &old, 1, VT_TCG_T0 + 200);   /* a second version of the page */
	g_assert_true(vt_decode_image_set_pokes(img, p, &err));
	g_assert_no_error(err);
	g_assert_true(vt_decode_pokes_page(vt_decode_image_pokes(img), KTEXT >> 12));
	g_assert_false(vt_decode_pokes_page(vt_decode_image_pokes(img), (KTEXT >> 12) + 1));
	/* the first poked page in a range of pages */
	g_assert_cmphex(vt_decode_pokes_next_page(p, 0, G_MAXUINT64), ==, KTEXT >> 12);
	g_assert_cmphex(vt_decode_pokes_next_page(p, KTEXT >> 12, KTEXT >> 12), ==, KTEXT >> 12);
	g_assert_cmphex(vt_decode_pokes_next_page(p, (KTEXT >> 12) - 70, (KTEXT >> 12) - 1), ==, G_MAXUINT64);
	g_assert_cmphex(vt_decode_pokes_next_page(p, (KTEXT >> 12) + 1, G_MAXUINT64), ==, G_MAXUINT64);
	g_assert_cmpuint(vt_decode_pokes_read(p, img, KTEXT, VT_TCG_T0 + 99, b, 3), ==, 3);
	g_assert_cmphex(b[1], ==, 0x90);
	g_assert_cmpuint(vt_decode_pokes_read(p, img, KTEXT, VT_TCG_T0 + 100, b, 3), ==, 3);
	g_assert_cmphex(b[0], ==, 0x90);
	g_assert_cmphex(b[1], ==, 0xcc);
	g_assert_cmphex(b[2], ==, 0xc3);
	g_assert_cmpuint(vt_decode_pokes_read(p, img, KTEXT, VT_TCG_T0 + 200, b, 3), ==, 3);
	g_assert_cmphex(b[1], ==, 0xcc);           /* the first poke stays */
	g_assert_cmphex(b[2], ==, 0x90);
	g_assert_cmpuint(vt_decode_pokes_count(p), ==, 2);
	disasm_in_time(img);
	rm_rf(in);
	rm_rf(out);
}

/* ------------------------------------------- poked code after a PSB+ */
/* PSB+ as the plugin writes it (psb_plus()): TSC, TMA, CBR, PIP (NR=1),
 * MODE.Exec 64-bit, FUP (ip != 0, full IP), PSBEND. */
static void put_psb(GByteArray *a, guint64 tsc, guint64 fup)
{
	guint64 ctc = tsc * VT_TCG_CTC_D / VT_TCG_CTC_N, fc = tsc - ctc * VT_TCG_CTC_N / VT_TCG_CTC_D;
	guint8 t[8] = { 0x19 }, tma[7] = { 2, 0x73, (guint8)ctc, (guint8)(ctc >> 8), 0, (guint8)fc, (guint8)((fc >> 8) & 1) };
	static const guint8 rest[] = { 2, 0x03, VT_TCG_CBR, 0, 2, 0x43, 1, 0, 0, 0, 0, 0, 0x99, 0x01 };

	for (int i = 0; i < 8; i++)
		g_byte_array_append(a, (const guint8 *)"\x02\x82", 2);
	for (int i = 0; i < 7; i++)
		t[1 + i] = (guint8)(tsc >> (8 * i));
	g_byte_array_append(a, t, sizeof(t));
	g_byte_array_append(a, tma, sizeof(tma));
	g_byte_array_append(a, rest, sizeof(rest));
	if (fup) {
		guint8 f = 0xdd;                      /* FUP, full IP */

		g_byte_array_append(a, &f, 1);
		g_byte_array_append(a, (const guint8 *)&fup, 8);
	}
	g_byte_array_append(a, (const guint8 *)"\x02\x23", 2);
}

static void put_ip(GByteArray *a, guint8 op, guint64 ip)
{
	op |= 6 << 5;                                 /* full IP */
	g_byte_array_append(a, &op, 1);
	g_byte_array_append(a, (const guint8 *)&ip, 8);
}

/* The instructions from ip up to `to` (exclusive) read as vmtrace script
 * walks them (vt_decode_disasm_at_time at the record's time). */
static guint walk_count(VtDecodeDisasm *d, guint64 ip, guint64 to, guint64 tsc)
{
	guint n = 0;

	for (; ip < to && n < 100; n++) {
		const VtDisasmInsn *in = vt_decode_disasm_at_time(d, ip, VT_MODE_64, tsc);

		g_assert_cmpuint(in->len, >, 0);
		ip += in->len;
	}
	g_assert_cmphex(ip, ==, to);
	return n;
}

/* vt_decode_result_peek(r, k) is what vt_decode_result_next returns k
 * calls later - the very event (one queue: nothing comes between) - or
 * NULL (past the batch in hand, k 0, after the last). */
static void check_peek(const VtDecodeOptions *o)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(VtDecodeResult) r = vt_decode_recording(o, &err);
	typedef struct { guint at; const VtDecodeEvent *e; } Want;
	g_autoptr(GArray) want = g_array_new(FALSE, FALSE, sizeof(Want));
	const VtDecodeEvent *e;
	guint n = 0, peeked = 0;

	g_assert_no_error(err);
	g_assert_null(vt_decode_result_peek(r, 1));    /* none read yet */
	while ((e = vt_decode_result_next(r))) {
		for (guint i = 0; i < want->len; i++)
			if (g_array_index(want, Want, i).at == n)
				g_assert_true(g_array_index(want, Want, i).e == e);
		g_assert_null(vt_decode_result_peek(r, 0));
		for (guint k = 1; k <= 3; k++) {
			const VtDecodeEvent *p = vt_decode_result_peek(r, k);

			if (p) {
				g_array_append_val(want, ((Want){ n + k, p }));
				peeked++;
			}
		}
		n++;
	}
	for (guint i = 0; i < want->len; i++)
		g_assert_cmpuint(g_array_index(want, Want, i).at, <, n);   /* nothing peeked past the end */
	g_assert_cmpuint(n, >=, 4);
	g_assert_cmpuint(peeked, >=, n - 1);
}

/* A plugin directory in `in` from code records a (VtTcgCodeHeader and
 * bytes each) and vCPU 0's trace pt, which retires `retired` instructions
 * of `started`, converted; its images into *host and *guest, and o set to
 * decode it (one job).  Returns the converted recording's directory.
 * (Frees a and pt.) */
static char *handmade(const char *in, GByteArray *a, GByteArray *pt, guint retired, guint started,
		      VtDecodeImage **host, VtDecodeImage **guest, VtDecodeOptions *o)
{
	g_autofree char *code = g_build_filename(in, "code", NULL);
	g_autofree char *meta = g_build_filename(in, "meta", NULL);
	g_autofree char *ptf = g_build_filename(in, "vcpu0.pt", NULL);
	g_autofree char *m = NULL, *gdir = NULL, *hdir = NULL;
	g_autoptr(GError) err = NULL;
	char *out;

	g_assert_true(g_file_set_contents(code, (const char *)a->data, a->len, NULL));
	g_assert_true(g_file_set_contents(ptf, (const char *)pt->data, pt->len, NULL));
	m = g_strdup_printf("format 1\napi 1\nvcpus 1\nfilter all\nmttcg 0\nstarted %u\nbefore 1000\n"
			    "vcpu 0 tid 123 bytes %u packets 20 retired %u async 0 faults 0 rep 0 unresolved 0 "
			    "filtered 0 final 0 inflight 0\n", started, pt->len, retired);
	g_assert_true(g_file_set_contents(meta, m, -1, NULL));
	g_byte_array_unref(a);
	g_byte_array_unref(pt);
	out = converted(in, NULL);
	gdir = g_build_filename(out, "guest", NULL);
	hdir = g_build_filename(out, "kcore_dir", NULL);
	*guest = vt_decode_image_load_dir(gdir, "guest", &err);
	g_assert_no_error(err);
	*host = vt_decode_image_load_dir(hdir, "host", &err);
	g_assert_no_error(err);
	*o = (VtDecodeOptions){ .path = out, .host = *host, .guest = *guest, .jobs = 1 };
	return out;
}

/* Code poked (a paravirt call became "mov %rdi, %rax; nop") runs after
 * the plugin's PSB+ (T2, at the poke) and then another PSB+ (T3) comes
 * with no branch in between: the instructions between the two ran after
 * T2, so the record that counts them (the FLOW_END at the second PSB+'s
 * IP) has a time at or past T2 - with the last branch's time (T1) script
 * walked the old 6-byte call as one instruction where the decoder had
 * counted two (t0122: vCPU counts 1-5 short). */
static void test_poke_after_psb(void)
{
	static const guint8 code0[] = { 0x90, 0x90, 0xff, 0x15, 0, 0, 0, 0, 0x90, 0xc3 };
	static const guint8 poked[] = { 0x48, 0x89, 0xf8, 0x0f, 0x1f, 0x00 };
	const guint64 t1 = VT_TCG_T0 + 1000, t2 = VT_TCG_T0 + 2000, t3 = VT_TCG_T0 + 2100;
	g_autofree char *in = g_dir_make_tmp("test-tcg.XXXXXX", NULL);
	g_autofree char *out = NULL;
	g_autoptr(GError) err = NULL;
	g_autoptr(VtDecodeImage) host = NULL, guest = NULL;
	g_autoptr(VtDecodeResult) r = NULL;
	g_autoptr(VtDecodeDisasm) d = NULL;
	GByteArray *a = g_byte_array_new(), *pt = g_byte_array_new();
	VtTcgCodeHeader h = { .vaddr = KTEXT, .len = sizeof(code0), .tsc = VT_TCG_T0 };
	VtDecodeOptions o = { 0 };
	const VtDecodeEvent *e;
	guint64 ip = 0;
	guint flow_ends = 0, total = 0;

	g_byte_array_append(a, (const guint8 *)&h, sizeof(h));
	g_byte_array_append(a, code0, sizeof(code0));
	h = (VtTcgCodeHeader){ .vaddr = KTEXT + 2, .len = sizeof(poked), .tsc = t2 };
	g_byte_array_append(a, (const guint8 *)&h, sizeof(h));
	g_byte_array_append(a, poked, sizeof(poked));
	put_psb(pt, t1, 0);
	put_ip(pt, 0x11, KTEXT);                      /* TIP.PGE: nop, nop, */
	put_psb(pt, t2, KTEXT + 2);                   /* the poked code: mov, nop, */
	put_psb(pt, t3, KTEXT + 8);                   /* nop, ret */
	put_ip(pt, 0x0d, KTEXT + 8);                  /* TIP: nop, ret */
	g_byte_array_append(pt, (const guint8 *)"\x01", 1);   /* TIP.PGD */
	out = handmade(in, a, pt, 8, 2200, &host, &guest, &o);
	o.flow_end = TRUE;
	r = vt_decode_recording(&o, &err);
	g_assert_no_error(err);
	d = vt_decode_disasm_new(guest);
	while ((e = vt_decode_result_next(r))) {
		const VtBranch *b = &e->b;
		gboolean sync = b->kind < VT_BRANCH_TRACE_BEGIN || b->kind == VT_BRANCH_TRACE_END;

		g_assert_cmpint(b->kind, !=, VT_BRANCH_ERROR);
		if (b->kind == VT_BRANCH_TRACE_BEGIN) {
			ip = b->to;
			continue;
		}
		if (b->kind != VT_BRANCH_FLOW_END && !sync)
			continue;
		/* script's walk: up to `from`, the branch itself too */
		g_assert_cmpuint(walk_count(d, ip, b->from, b->tsc) + (b->kind != VT_BRANCH_FLOW_END), ==, b->insns);
		total += b->insns;
		flow_ends += b->kind == VT_BRANCH_FLOW_END && b->insns;
		if (b->kind == VT_BRANCH_FLOW_END && b->from == KTEXT + 8)
			g_assert_cmpuint(b->tsc, ==, t2);   /* the poked code's PSB+'s */
		ip = b->kind == VT_BRANCH_FLOW_END ? b->from : b->to;
	}
	g_assert_cmpuint(vt_decode_result_n_errors(r), ==, 0);
	g_assert_cmpuint(flow_ends, ==, 2);
	g_assert_cmpuint(total, ==, 8);            /* nop nop | mov nop | nop ret | nop ret */
	check_peek(&o);
	rm_rf(in);
	rm_rf(out);
}

/* Code on a page never poked running on into a poked one: the walker
 * takes the first page's bytes at any time (no version to ask for) but
 * the second's by time - a block from 0xff8 (8 nops on the first page,
 * then "nop; nop; ret" on the second) returns from 0x1002 before the
 * poke at T2 and, once the poke made 0x1000 a ret, from 0x1000: walked
 * again, not kept with the old bytes (the image's bytes given as one
 * piece past the first page's end would keep them).  The block at 0x1000
 * itself is kept per version of its page. */
static void test_poke_next_page(void)
{
	static const guint8 code0[] = { 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3 };
	static const guint8 poked[] = { 0xc3 };
	const guint64 t1 = VT_TCG_T0 + 1000, t2 = VT_TCG_T0 + 2000, t3 = VT_TCG_T0 + 3000;
	const guint64 start = KTEXT + 0xff8, page = KTEXT + 0x1000;
	g_autofree char *in = g_dir_make_tmp("test-tcg.XXXXXX", NULL);
	g_autofree char *out = NULL;
	g_autoptr(GError) err = NULL;
	g_autoptr(VtDecodeImage) host = NULL, guest = NULL;
	g_autoptr(VtDecodeResult) r = NULL;
	GByteArray *a = g_byte_array_new(), *pt = g_byte_array_new();
	VtTcgCodeHeader h = { .vaddr = start, .len = sizeof(code0), .tsc = VT_TCG_T0 };
	VtDecodeOptions o = { 0 };
	const VtDecodeEvent *e;
	/* the returns: from, to, instructions since the last branch */
	static const struct { guint64 from, to; guint insns; } want[] = {
		{ 0x1002, 0x1000, 11 }, { 0x1002, 0x1000, 3 }, { 0x1002, 0xff8, 3 }, { 0x1000, 0x1000, 9 },
	};
	guint n = 0;

	g_byte_array_append(a, (const guint8 *)&h, sizeof(h));
	g_byte_array_append(a, code0, sizeof(code0));
	h = (VtTcgCodeHeader){ .vaddr = page, .len = sizeof(poked), .tsc = t2 };
	g_byte_array_append(a, (const guint8 *)&h, sizeof(h));
	g_byte_array_append(a, poked, sizeof(poked));
	put_psb(pt, t1, 0);
	put_ip(pt, 0x11, start);                      /* TIP.PGE: 8 nops, nop, nop, ret */
	put_ip(pt, 0x0d, page);                       /* nop, nop, ret (kept) */
	put_ip(pt, 0x0d, page);                       /* nop, nop, ret (the kept block) */
	put_ip(pt, 0x0d, start);
	put_psb(pt, t3, start);                       /* past the poke: 8 nops, ret */
	put_ip(pt, 0x0d, page);                       /* ret */
	g_byte_array_append(pt, (const guint8 *)"\x01", 1);   /* TIP.PGD */
	out = handmade(in, a, pt, 27, 3200, &host, &guest, &o);
	r = vt_decode_recording(&o, &err);
	g_assert_no_error(err);
	g_assert_true(vt_decode_pokes_page(vt_decode_image_pokes(guest), page >> 12));   /* (the recording's) */
	g_assert_false(vt_decode_pokes_page(vt_decode_image_pokes(guest), start >> 12));
	while ((e = vt_decode_result_next(r))) {
		const VtBranch *b = &e->b;

		g_assert_cmpint(b->kind, !=, VT_BRANCH_ERROR);
		if (b->kind != VT_BRANCH_RETURN)
			continue;
		g_assert_cmpuint(n, <, G_N_ELEMENTS(want));
		g_assert_cmphex(b->from, ==, KTEXT + want[n].from);
		g_assert_cmphex(b->to, ==, KTEXT + want[n].to);
		g_assert_cmpuint(b->insns, ==, want[n].insns);
		n++;
	}
	g_assert_cmpuint(n, ==, G_N_ELEMENTS(want));
	g_assert_cmpuint(vt_decode_result_n_errors(r), ==, 0);
	rm_rf(in);
	rm_rf(out);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/tcg/image", test_image);
	g_test_add_func("/tcg/boot-pokes", test_boot_pokes);
	g_test_add_func("/tcg/perf-data", test_perf_data);
	g_test_add_func("/tcg/one-thread", test_one_thread);
	g_test_add_func("/tcg/pokes", test_pokes);
	g_test_add_func("/tcg/refusals", test_refusals);
	g_test_add_func("/tcg/poke-after-psb", test_poke_after_psb);
	g_test_add_func("/tcg/poke-next-page", test_poke_next_page);
	return g_test_run();
}
