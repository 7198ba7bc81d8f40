/* test-tcg-plugin.c - unit tests of the TCG plugin's mode tracker
 * (src/tcg/vmtrace-tcg.c, included: its functions are static) on
 * hand-made blocks, without QEMU (the few API functions it calls are
 * stubs here).
 *
 * A change of execution mode between two blocks in straight flow, with no
 * TIP to carry its MODE.Exec, cannot happen on x86: CS.D/CS.L change only
 * when CS is loaded - far jmp/call/ret, IRET, interrupts and exceptions,
 * SYSCALL/SYSRET/SYSENTER/SYSEXIT, SMI/RSM, INIT/SIPI - and each of those is
 * a TIP (or FUP + TIP) in the plugin's stream; `mov cr0` (PE, PG) ends
 * QEMU's block but leaves CS.D/CS.L as they were (still 16-bit after PE is
 * set, 32-bit compatibility mode after PG enables IA-32e) until the far
 * jump that follows.  So the plugin's fallback (a TIP.PGD/TIP.PGE pair at
 * the block, MODE.Exec before the TIP.PGE: meta mode_resyncs) runs only
 * when its own guess was wrong: a block that decodes alike in 16- and
 * 32-bit mode, its placeholder settled by a PSB+ before a later block told
 * which it was, followed in straight flow by a block that is 16-bit only.
 * None happened on the test boots (t0128, t0122: 0 resyncs); here it is
 * made to happen, and libipt's block decoder, given the stream and the
 * code, decodes the block after it in 16-bit mode. */
#include "src/tcg/vmtrace-tcg.c"

#include <glib/gstdio.h>
#include <intel-pt.h>

/* ------------------------------------------------- QEMU's API: stubs */
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb) { (void)tb; return 0; }
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb) { (void)tb; return 0; }
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t i) { (void)tb; (void)i; return NULL; }
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *in) { (void)in; return NULL; }
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *in) { (void)in; return 0; }
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *in) { (void)in; return 0; }
char *qemu_plugin_insn_disas(const struct qemu_plugin_insn *in) { (void)in; return NULL; }
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *in, enum qemu_plugin_op op, void *p,
						uint64_t imm) { (void)in; (void)op; (void)p; (void)imm; }
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
					  enum qemu_plugin_cb_flags f, void *u) { (void)tb; (void)cb; (void)f; (void)u; }
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb) { (void)id; (void)cb; }
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *u) { (void)id; (void)cb; (void)u; }

/* ------------------------------------------------------------ blocks */
/* The code: A (32-bit) far-jumps to B, B is a NOP (16- or 32-bit alike),
 * C right after it is 16-bit only (mov $imm16, %ax: 3 bytes; 5 in 32-bit),
 * then D. */
#define A 0x1000u
#define B 0x2000u
#define C 0x2001u
#define D 0x2004u
static const uint8_t code_a[] = { 0xea, 0x00, 0x20, 0x00, 0x00, 0x08, 0x00 };   /* ljmp $0x8, $0x2000 */
static const uint8_t code_b[] = { 0x90, 0xb8, 0x34, 0x12, 0x90 };                /* nop; mov $0x1234, %ax; nop */

static Tb *tb_new(uint64_t pc, uint8_t len, uint8_t modes, uint8_t kind, uint64_t target)
{
	Tb *t = g_malloc0(sizeof(Tb) + sizeof(uint16_t));

	t->pc = t->last_ip = pc;
	t->n = 1;
	t->last_len = len;
	t->modes = modes;
	t->mode = mode_pick(M32, modes);
	t->kind = kind;
	t->target = target;
	return t;
}

/* The vCPU runs cur after v->prev (its d instructions all started). */
static void run(Vcpu *v, Tb *cur)
{
	g.started += v->prev ? v->prev->n : 0;
	v->prev_d = v->prev ? v->prev->n : 0;
	step(v, cur);
	v->prev = cur;
}

static int read_code(uint8_t *buf, size_t size, const struct pt_asid *asid, uint64_t ip, void *ctx)
{
	const uint8_t *src = ip >= A && ip < A + sizeof(code_a) ? code_a + (ip - A) :
			     ip >= B && ip < B + sizeof(code_b) ? code_b + (ip - B) : NULL;
	size_t avail = ip >= B ? B + sizeof(code_b) - ip : A + sizeof(code_a) - ip;

	(void)asid;
	(void)ctx;
	if (!src)
		return -pte_nomap;
	size = MIN(size, avail);
	memcpy(buf, src, size);
	return (int)size;
}

/* The blocks libipt's block decoder walks in the stream: their first IP and
 * execution mode, up to n of them. */
static unsigned blocks_of(const uint8_t *pt, size_t len, uint64_t *ip, enum pt_exec_mode *mode, unsigned n)
{
	struct pt_config cfg;
	struct pt_block_decoder *dec;
	struct pt_image *img = pt_image_alloc(NULL);
	unsigned k = 0;
	int st;

	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)pt;
	cfg.end = (uint8_t *)pt + len;
	dec = pt_blk_alloc_decoder(&cfg);
	g_assert_nonnull(dec);
	pt_image_set_callback(img, read_code, NULL);
	g_assert_cmpint(pt_blk_set_image(dec, img), >=, 0);
	for (st = pt_blk_sync_forward(dec); st >= 0 && k < n;) {
		struct pt_block blk;

		while (st & pts_event_pending) {
			struct pt_event ev;

			st = pt_blk_event(dec, &ev, sizeof(ev));
			if (st < 0)
				break;
		}
		if (st < 0)
			break;
		st = pt_blk_next(dec, &blk, sizeof(blk));
		if (blk.ninsn) {
			ip[k] = blk.ip;
			mode[k++] = blk.mode;
		}
	}
	g_assert_true(st == -pte_eos || k == n);
	pt_blk_free_decoder(dec);
	pt_image_free(img);
	return k;
}

static void test_mode_without_tip(void)
{
	g_autofree char *dir = g_dir_make_tmp("test-tcg-plugin-XXXXXX", NULL);
	g_autofree char *path = g_build_filename(dir, "vcpu0.pt", NULL);
	g_autofree Tb *a = tb_new(A, sizeof(code_a), M32, K_FAR, 0);
	g_autofree Tb *b = tb_new(B, 1, M16 | M32, K_OTHER, 0);     /* ambiguous */
	g_autofree Tb *c = tb_new(C, 3, M16, K_OTHER, 0);           /* 16-bit only */
	g_autofree Tb *d = tb_new(D, 1, M16 | M32, K_OTHER, 0);
	g_autofree uint8_t *pt = NULL;
	gsize len = 0;
	uint64_t ip[8];
	enum pt_exec_mode mode[8];
	unsigned n;
	Vcpu *v;

	g.nvcpus = 1;
	g.v = g_new0(Vcpu, 1);
	g.psb_bytes = 1u << 20;
	v = &g.v[0];
	v->fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	g_assert_cmpint(v->fd, >=, 0);
	v->buf = g_malloc(OUT_BUF);
	v->started = 1;
	v->mode = M32;
	psb_plus(v, 0, 0);
	ip_pkt(v, 0x11, A, 0);                 /* trace begins at A, 32-bit */
	v->enabled = 1;
	v->prev = a;
	run(v, b);                             /* far jump to B: TIP, mode open (PAD PAD) */
	g_assert_cmpuint(v->undecided, ==, M16 | M32);
	psb_plus(v, B, 1);                     /* a PSB+ settles it: 32-bit, the nearest (a wrong guess) */
	g_assert_cmpuint(v->mode, ==, M32);
	g_assert_cmpuint(g.mode_picked, ==, 1);
	run(v, c);                             /* straight on into 16-bit code: no TIP */
	g_assert_cmpuint(g.mode_resyncs, ==, 1);
	g_assert_cmpuint(v->mode, ==, M16);
	run(v, d);
	v->prev_d = 0;
	trace_end(v);
	tnt_flush(v);
	out_flush(v);
	close(v->fd);
	g_assert_true(g_file_get_contents(path, (char **)&pt, &len, NULL));

	/* libipt: B (32-bit as settled), then C and D in 16-bit mode - the
	 * MODE.Exec before the TIP.PGE at C */
	n = blocks_of(pt, len, ip, mode, G_N_ELEMENTS(ip));
	g_assert_cmpuint(n, >=, 3);
	g_assert_cmphex(ip[0], ==, A);
	g_assert_cmpint(mode[0], ==, ptem_32bit);
	g_assert_cmphex(ip[1], ==, B);
	g_assert_cmpint(mode[1], ==, ptem_32bit);
	g_assert_cmphex(ip[2], ==, C);
	g_assert_cmpint(mode[2], ==, ptem_16bit);
	for (unsigned i = 3; i < n; i++)
		g_assert_cmpint(mode[i], ==, ptem_16bit);
	g_free(v->buf);
	g_free(g.v);
	g_unlink(path);
	g_rmdir(dir);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/tcg-plugin/mode-without-tip", test_mode_without_tip);
	return g_test_run();
}
