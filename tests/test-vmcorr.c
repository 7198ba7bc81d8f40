/* test-vmcorr.c - the command-line grammars of VM time correlation
 * (--offset OFF[:VMCS[,VMCS...]], --tsc-scale RATIO[/FRAC][:VMCS,...] and
 * perf's --vm-time-correlation="[dry-run] [OFF[:VMCS[,VMCS]...]]...",
 * vmcorr/offsets.c): what each accepts and every way each refuses; the
 * split of a VMCS's offset estimates into epochs (vmcorr_segment_epochs);
 * and the AUX read path: windowed reads give what whole-buffer reads give,
 * and a file that shrinks under the decoder is an error, not SIGBUS. */
#include "config.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "src/synth/synth.h"
#include "vmcorr/session.h"
#include "vmcorr/vmcorr.h"

typedef struct {
	VmcorrOptions opt;
} Fixture;

static void fx_setup(Fixture *f, gconstpointer data)
{
	(void)data;
	vmcorr_options_init(&f->opt);
}

static void fx_teardown(Fixture *f, gconstpointer data)
{
	(void)data;
	if (f->opt.offsets)
		g_array_free(f->opt.offsets, TRUE);
	if (f->opt.scales)
		g_array_free(f->opt.scales, TRUE);
}

static const VmcorrOffset *offset_at(const Fixture *f, guint i)
{
	g_assert_nonnull(f->opt.offsets);
	g_assert_cmpuint(i, <, f->opt.offsets->len);
	return &g_array_index(f->opt.offsets, VmcorrOffset, i);
}

static const VmcorrScale *scale_at(const Fixture *f, guint i)
{
	g_assert_nonnull(f->opt.scales);
	g_assert_cmpuint(i, <, f->opt.scales->len);
	return &g_array_index(f->opt.scales, VmcorrScale, i);
}

/* ------------------------------------------------------------ --offset */

static void test_offset_default(Fixture *f, gconstpointer data)
{
	GError *err = NULL;

	(void)data;
	g_assert_true(vmcorr_parse_offset_token("0xfffffe3c8291b532", &f->opt, &err));
	g_assert_no_error(err);
	g_assert_true(f->opt.have_default);
	g_assert_cmphex(f->opt.default_offset, ==, 0xfffffe3c8291b532ULL);
	g_assert_null(f->opt.offsets);
	/* the last default wins; numbers are C literals: decimal, 0x hex, 0 octal */
	g_assert_true(vmcorr_parse_offset_token("1234", &f->opt, &err));
	g_assert_cmpuint(f->opt.default_offset, ==, 1234);
	g_assert_true(vmcorr_parse_offset_token("010", &f->opt, &err));
	g_assert_cmpuint(f->opt.default_offset, ==, 8);
	g_assert_true(vmcorr_parse_offset_token("0", &f->opt, &err));
	g_assert_cmpuint(f->opt.default_offset, ==, 0);
	g_assert_true(vmcorr_parse_offset_token("0XFF", &f->opt, &err));
	g_assert_cmpuint(f->opt.default_offset, ==, 255);
	g_assert_true(vmcorr_parse_offset_token("18446744073709551615", &f->opt, &err));
	g_assert_cmphex(f->opt.default_offset, ==, G_MAXUINT64);
	g_assert_null(f->opt.offsets);
}

static void test_offset_vmcs(Fixture *f, gconstpointer data)
{
	GError *err = NULL;

	(void)data;
	g_assert_true(vmcorr_parse_offset_token("0x100:0x12340,0x12451", &f->opt, &err));
	g_assert_no_error(err);
	g_assert_false(f->opt.have_default);
	g_assert_cmpuint(f->opt.offsets->len, ==, 2);
	g_assert_cmphex(offset_at(f, 0)->vmcs, ==, 0x12340);
	g_assert_cmphex(offset_at(f, 0)->offset, ==, 0x100);
	g_assert_cmphex(offset_at(f, 1)->vmcs, ==, 0x12451);
	/* a VMCS given again: the later offset wins (perf), no second entry */
	g_assert_true(vmcorr_parse_offset_token("0x200:0x12340", &f->opt, &err));
	g_assert_cmpuint(f->opt.offsets->len, ==, 2);
	g_assert_cmphex(offset_at(f, 0)->offset, ==, 0x200);
	g_assert_cmphex(offset_at(f, 1)->offset, ==, 0x100);
	/* the VMCS range: 1 .. the largest 40-bit payload below "no VMCS" */
	g_assert_true(vmcorr_parse_offset_token("1:1,0xfffffffffe", &f->opt, &err));
	g_assert_cmpuint(f->opt.offsets->len, ==, 4);
	g_assert_cmphex(offset_at(f, 3)->vmcs, ==, VMCORR_NO_VMCS - 1);
}

/* Each refused token: an error of VMCORR_ERROR_BAD_OFFSET whose message
 * contains `what`, and nothing set. */
static void refuse_offset(const char *tok, const char *what)
{
	VmcorrOptions opt;
	GError *err = NULL;

	vmcorr_options_init(&opt);
	g_assert_false(vmcorr_parse_offset_token(tok, &opt, &err));
	g_assert_error(err, VMCORR_ERROR, VMCORR_ERROR_BAD_OFFSET);
	if (!strstr(err->message, what))
		g_error("'%s': message '%s' does not say '%s'", tok, err->message, what);
	g_assert_false(opt.have_default);
	g_assert_true(!opt.offsets || opt.offsets->len == 0);
	if (opt.offsets)
		g_array_free(opt.offsets, TRUE);
	g_error_free(err);
}

static void test_offset_errors(void)
{
	/* issue #11 item 7: "" crashed (g_strsplit("") is an empty vector) */
	refuse_offset("", "empty");
	refuse_offset("zz", "'zz' is not a TSC offset");
	refuse_offset("-1", "'-1' is not a TSC offset");       /* no sign */
	refuse_offset("+1", "'+1' is not a TSC offset");
	refuse_offset(" 1", "' 1' is not a TSC offset");       /* no blank */
	refuse_offset("1 ", "'1 ' is not a TSC offset");
	refuse_offset("0x", "'0x' is not a TSC offset");       /* prefix without digits */
	refuse_offset("0xg", "'0xg' is not a TSC offset");
	refuse_offset("08", "'08' is not a TSC offset");       /* not octal */
	refuse_offset("12abc", "'12abc' is not a TSC offset");
	refuse_offset("18446744073709551616", "is not a TSC offset");   /* 2^64 */
	refuse_offset(":0x12340", "'' is not a TSC offset");
	refuse_offset("1:", "':' must be followed by one or more VMCS");
	refuse_offset("1:zz", "'zz' is not a VMCS");
	refuse_offset("1:0x12340,", "'' is not a VMCS");
	refuse_offset("1:,0x12340", "'' is not a VMCS");
	refuse_offset("1:-5", "'-5' is not a VMCS");
	refuse_offset("1:0x12340:5", "'0x12340:5' is not a VMCS");
	refuse_offset("1:0", "VMCS 0 is out of range");
	refuse_offset("1:0xffffffffff", "VMCS 0xffffffffff is out of range");
	refuse_offset("1:0x10000000000", "out of range");
}

/* ------------------------------------------------------------ --tsc-scale */

static void test_scale(Fixture *f, gconstpointer data)
{
	GError *err = NULL;

	(void)data;
	g_assert_true(vmcorr_parse_scale_token("0x1400000000000", &f->opt, &err));
	g_assert_no_error(err);
	g_assert_cmpuint(f->opt.scales->len, ==, 1);
	g_assert_cmphex(scale_at(f, 0)->vmcs, ==, 0);              /* every VMCS */
	g_assert_cmphex(scale_at(f, 0)->ratio, ==, 0x1400000000000ULL);
	g_assert_cmpuint(scale_at(f, 0)->frac, ==, 48);            /* VMX's default */
	g_assert_true(vmcorr_parse_scale_token("5/2:0x12340,0x12451", &f->opt, &err));
	g_assert_cmpuint(f->opt.scales->len, ==, 3);
	g_assert_cmphex(scale_at(f, 1)->vmcs, ==, 0x12340);
	g_assert_cmphex(scale_at(f, 2)->vmcs, ==, 0x12451);
	g_assert_cmpuint(scale_at(f, 2)->ratio, ==, 5);
	g_assert_cmpuint(scale_at(f, 2)->frac, ==, 2);
	g_assert_true(vmcorr_parse_scale_token("1/0", &f->opt, &err));
	g_assert_cmpuint(scale_at(f, 3)->frac, ==, 0);
	g_assert_true(vmcorr_parse_scale_token("1/63:0xfffffffffe", &f->opt, &err));
	g_assert_cmpuint(scale_at(f, 4)->frac, ==, 63);
	g_assert_cmphex(scale_at(f, 4)->vmcs, ==, VMCORR_NO_VMCS - 1);
	g_assert_false(f->opt.have_default);
	g_assert_null(f->opt.offsets);
}

static void refuse_scale(const char *tok, const char *what)
{
	VmcorrOptions opt;
	GError *err = NULL;

	vmcorr_options_init(&opt);
	g_assert_false(vmcorr_parse_scale_token(tok, &opt, &err));
	g_assert_error(err, VMCORR_ERROR, VMCORR_ERROR_BAD_OFFSET);
	if (!strstr(err->message, what))
		g_error("'%s': message '%s' does not say '%s'", tok, err->message, what);
	g_assert_true(!opt.scales || opt.scales->len == 0);
	if (opt.scales)
		g_array_free(opt.scales, TRUE);
	g_error_free(err);
}

static void test_scale_errors(void)
{
	const char *form = "expected RATIO[/FRAC_BITS]";

	refuse_scale("", "empty");           /* issue #11 item 7: crashed */
	refuse_scale("0", form);             /* a zero ratio */
	refuse_scale("0/48", form);
	refuse_scale("zz", form);
	refuse_scale("-1", form);
	refuse_scale("/48", form);
	refuse_scale("1/", form);
	refuse_scale("1/zz", form);
	refuse_scale("1/64", form);          /* at most 63 fraction bits */
	refuse_scale("1/2/3", form);
	refuse_scale(":0x12340", form);
	refuse_scale("1:", "':' must be followed by one or more VMCS");
	refuse_scale("1:zz", "'zz' is not a VMCS");
	refuse_scale("1:0", "VMCS 0 is out of range");
	refuse_scale("1:0xffffffffff", "VMCS 0xffffffffff is out of range");
	refuse_scale("1:0x12340,", "'' is not a VMCS");
}

/* ------------------------------------------------------------ --vm-time-correlation */

static void test_perf_arg(Fixture *f, gconstpointer data)
{
	GError *err = NULL;
	gboolean dry = TRUE;

	(void)data;
	g_assert_true(vmcorr_parse_perf_arg("", &dry, &f->opt, &err));   /* nothing: not a dry run */
	g_assert_no_error(err);
	g_assert_false(dry);
	g_assert_false(f->opt.have_default);
	g_assert_null(f->opt.offsets);
	g_assert_true(vmcorr_parse_perf_arg("dry-run", &dry, &f->opt, &err));
	g_assert_true(dry);
	g_assert_true(vmcorr_parse_perf_arg(" \tdry-run  ", &dry, &f->opt, &err));
	g_assert_true(dry);
	g_assert_true(vmcorr_parse_perf_arg("0x10", &dry, &f->opt, &err));
	g_assert_false(dry);
	g_assert_true(f->opt.have_default);
	g_assert_cmphex(f->opt.default_offset, ==, 0x10);
	g_assert_true(vmcorr_parse_perf_arg("dry-run  0x20:0x12340,0x12451\t0x30:0x12562 0x40", &dry, &f->opt, &err));
	g_assert_true(dry);
	g_assert_cmphex(f->opt.default_offset, ==, 0x40);
	g_assert_cmpuint(f->opt.offsets->len, ==, 3);
	g_assert_cmphex(offset_at(f, 1)->vmcs, ==, 0x12451);
	g_assert_cmphex(offset_at(f, 1)->offset, ==, 0x20);
	g_assert_cmphex(offset_at(f, 2)->vmcs, ==, 0x12562);
	g_assert_cmphex(offset_at(f, 2)->offset, ==, 0x30);
}

static void refuse_perf_arg(const char *arg, const char *what)
{
	VmcorrOptions opt;
	GError *err = NULL;
	gboolean dry;

	vmcorr_options_init(&opt);
	g_assert_false(vmcorr_parse_perf_arg(arg, &dry, &opt, &err));
	g_assert_error(err, VMCORR_ERROR, VMCORR_ERROR_BAD_OFFSET);
	if (!strstr(err->message, what))
		g_error("'%s': message '%s' does not say '%s'", arg, err->message, what);
	if (opt.offsets)
		g_array_free(opt.offsets, TRUE);
	g_error_free(err);
}

static void test_perf_arg_errors(void)
{
	refuse_perf_arg("0x10 dry-run", "'dry-run' must come first in '0x10 dry-run'");
	refuse_perf_arg("dry-run dry-run", "'dry-run' must come first");
	refuse_perf_arg("dryrun", "'dryrun' is not a TSC offset");
	refuse_perf_arg("DRY-RUN", "'DRY-RUN' is not a TSC offset");
	refuse_perf_arg("dry-run zz", "'zz' is not a TSC offset");   /* perf loops forever here */
	refuse_perf_arg("0x10:", "':' must be followed");
	refuse_perf_arg("0x10 : 0x12340", "'' is not a TSC offset");
	refuse_perf_arg("0x10:0x12340, 0x12451", "'' is not a VMCS");
	refuse_perf_arg("0x10:0", "out of range");
	refuse_perf_arg("dry-run,0x10", "is not a TSC offset");
}

/* ------------------------------------------------------------ epochs */

/* Estimates at host times 1000, 2000, ... with these offsets. */
static GArray *ests_of(const uint64_t *est, guint n)
{
	GArray *a = g_array_new(FALSE, FALSE, sizeof(VmcorrEst));

	for (guint i = 0; i < n; i++)
		g_array_append_val(a, ((VmcorrEst){ 1000 * (i + 1), est[i] }));
	return a;
}

static GArray *segment(const uint64_t *est, guint n, uint64_t tol)
{
	g_autoptr(GArray) a = ests_of(est, n);

	return vmcorr_segment_epochs(a, tol);
}

static void assert_epoch(const GArray *ep, guint k, uint64_t offset, uint64_t first, uint64_t last, uint64_t n,
			 int64_t spread)
{
	const VmcorrEpoch *e;

	g_assert_cmpuint(k, <, ep->len);
	e = &g_array_index(ep, VmcorrEpoch, k);
	g_assert_cmphex(e->offset, ==, offset);
	g_assert_cmpuint(e->t_first, ==, first);
	g_assert_cmpuint(e->t_last, ==, last);
	g_assert_cmpuint(e->n, ==, n);
	g_assert_cmpint(e->spread, ==, spread);
}

static void test_epochs_none_and_one(void)
{
	static const uint64_t one[] = { 0x500 };
	static const uint64_t same[] = { 0x500, 0x500, 0x500, 0x500 };
	static const uint64_t jitter[] = { 0x500, 0x503, 0x4fe, 0x505, 0x500 };
	g_autoptr(GArray) a = segment(NULL, 0, 10);
	g_autoptr(GArray) b = segment(one, 1, 10);
	g_autoptr(GArray) c = segment(same, 4, 0);
	g_autoptr(GArray) d = segment(jitter, 5, 5);

	g_assert_cmpuint(a->len, ==, 0);
	g_assert_cmpuint(b->len, ==, 1);
	assert_epoch(b, 0, 0x500, 1000, 1000, 1, 0);
	g_assert_cmpuint(c->len, ==, 1);
	assert_epoch(c, 0, 0x500, 1000, 4000, 4, 0);
	/* within the tolerance of the first estimate: one epoch; spread max - min */
	g_assert_cmpuint(d->len, ==, 1);
	assert_epoch(d, 0, 0x500, 1000, 5000, 5, 0x505 - 0x4fe);
}

static void test_epochs_change(void)
{
	static const uint64_t change[] = { 0x500, 0x501, 0x500, 0x9000, 0x9001, 0x9000 };
	static const uint64_t back[] = { 0x500, 0x500, 0x9000, 0x9000, 0x500, 0x500 };
	static const uint64_t edge[] = { 0x500, 0x505, 0x506 };   /* tolerance is inclusive */
	g_autoptr(GArray) a = segment(change, 6, 4);
	g_autoptr(GArray) b = segment(back, 6, 4);
	g_autoptr(GArray) c = segment(edge, 3, 5);

	g_assert_cmpuint(a->len, ==, 2);
	assert_epoch(a, 0, 0x500, 1000, 3000, 3, 1);
	assert_epoch(a, 1, 0x9000, 4000, 6000, 3, 1);
	/* going back to an earlier offset is a third epoch, not the first again */
	g_assert_cmpuint(b->len, ==, 3);
	assert_epoch(b, 0, 0x500, 1000, 2000, 2, 0);
	assert_epoch(b, 1, 0x9000, 3000, 4000, 2, 0);
	assert_epoch(b, 2, 0x500, 5000, 6000, 2, 0);
	g_assert_cmpuint(c->len, ==, 2);
	assert_epoch(c, 0, 0x500, 1000, 2000, 2, 5);
	assert_epoch(c, 1, 0x506, 3000, 3000, 1, 0);
}

static void test_epochs_outliers(void)
{
	/* one estimate off, then back: an outlier of the epoch, in its spread */
	static const uint64_t outlier[] = { 0x500, 0x500, 0x9000, 0x500, 0x500 };
	/* off at the very end: nothing follows, so it starts an epoch */
	static const uint64_t last[] = { 0x500, 0x500, 0x9000 };
	/* off twice in a row at different values: each starts an epoch */
	static const uint64_t wander[] = { 0x500, 0x9000, 0x20000, 0x20000 };
	/* the next is back within tol of the epoch but also within tol of the
	 * departing one: a change, not an outlier */
	static const uint64_t near[] = { 0x500, 0x50a, 0x505 };
	g_autoptr(GArray) a = segment(outlier, 5, 4);
	g_autoptr(GArray) b = segment(last, 3, 4);
	g_autoptr(GArray) c = segment(wander, 4, 4);
	g_autoptr(GArray) d = segment(near, 3, 5);

	g_assert_cmpuint(a->len, ==, 1);
	assert_epoch(a, 0, 0x500, 1000, 5000, 5, 0x9000 - 0x500);
	g_assert_cmpuint(b->len, ==, 2);
	assert_epoch(b, 0, 0x500, 1000, 2000, 2, 0);
	assert_epoch(b, 1, 0x9000, 3000, 3000, 1, 0);
	g_assert_cmpuint(c->len, ==, 3);
	assert_epoch(c, 1, 0x9000, 2000, 2000, 1, 0);
	assert_epoch(c, 2, 0x20000, 3000, 4000, 2, 0);
	g_assert_cmpuint(d->len, ==, 2);
	assert_epoch(d, 0, 0x500, 1000, 1000, 1, 0);
	assert_epoch(d, 1, 0x50a, 2000, 3000, 2, 5);
}

static void test_epochs_believed(void)
{
	/* a change seen once at the very end (or the very start) is believed */
	static const uint64_t last[] = { 0x500, 0x500, 0x500, 0x9000 };
	static const uint64_t first[] = { 0x9000, 0x500, 0x500, 0x500 };
	/* one estimate between two epochs: never */
	static const uint64_t middle[] = { 0x500, 0x500, 0x9000, 0x20000, 0x20000 };
	/* seen twice in the middle: three epochs, believed */
	static const uint64_t twice[] = { 0x500, 0x500, 0x9000, 0x9000, 0x20000 };
	/* an outlier inside an epoch makes its spread too wide */
	static const uint64_t outlier[] = { 0x500, 0x500, 0x9000, 0x500, 0x20000, 0x20000 };
	g_autoptr(GArray) a = segment(last, 4, 4);
	g_autoptr(GArray) b = segment(first, 4, 4);
	g_autoptr(GArray) c = segment(middle, 5, 4);
	g_autoptr(GArray) d = segment(twice, 5, 4);
	g_autoptr(GArray) e = segment(outlier, 6, 4);

	g_assert_cmpuint(a->len, ==, 2);
	g_assert_true(vmcorr_epochs_believed(a, 4));
	g_assert_cmpuint(b->len, ==, 2);
	g_assert_true(vmcorr_epochs_believed(b, 4));
	g_assert_cmpuint(c->len, ==, 3);
	g_assert_false(vmcorr_epochs_believed(c, 4));
	g_assert_cmpuint(d->len, ==, 3);
	g_assert_true(vmcorr_epochs_believed(d, 4));
	g_assert_cmpuint(e->len, ==, 2);
	g_assert_false(vmcorr_epochs_believed(e, 4));
}

static void test_epochs_seven_bytes(void)
{
	/* TSC packets have 7 bytes: offsets are compared as 56-bit differences,
	 * so the top byte does not matter and the difference wraps at 2^56 */
	static const uint64_t top[] = { 0xfffffe0000000010, 0x00fffe0000000011, 0x12fffe0000000012 };
	static const uint64_t wrap[] = { 0x00ffffffffffffff, 0x0000000000000001, 0x00fffffffffffffd };
	static const uint64_t neg[] = { 0x10, 0x00ffffffffffff10 };   /* -0x100 in 56 bits */
	g_autoptr(GArray) a = segment(top, 3, 4);
	g_autoptr(GArray) b = segment(wrap, 3, 4);
	g_autoptr(GArray) c = segment(neg, 2, 0xff);
	g_autoptr(GArray) d = segment(neg, 2, 0x100);

	g_assert_cmpuint(a->len, ==, 1);
	assert_epoch(a, 0, 0xfffffe0000000010, 1000, 3000, 3, 2);
	g_assert_cmpuint(b->len, ==, 1);
	assert_epoch(b, 0, 0x00ffffffffffffff, 1000, 3000, 3, 4);
	g_assert_cmpuint(c->len, ==, 2);
	g_assert_cmpuint(d->len, ==, 1);
	assert_epoch(d, 0, 0x10, 1000, 2000, 2, 0x100);
}

/* ------------------------------------------------------ the AUX read path */

static char *synth_file(const char *name, gboolean per_cpu, gboolean cyc, guint mtc_period, guint psb_period,
			guint64 buffer_size)
{
	char *dir = g_dir_make_tmp("test-vmcorr-XXXXXX", NULL);
	char *path = g_build_filename(dir, name, NULL);
	VtSynthConfig cfg;
	GError *err = NULL;

	g_assert_nonnull(dir);
	vt_synth_config_init(&cfg);
	cfg.nvcpus = 4;
	cfg.per_cpu = per_cpu;
	cfg.ncpus = per_cpu ? 2 : 0;
	cfg.cyc = cyc;
	cfg.mtc_period = mtc_period;
	cfg.psb_period = psb_period;
	cfg.size = 3u << 20;
	cfg.buffer_size = buffer_size;
	g_assert_true(vt_synth_generate(&cfg, path, FALSE, NULL, NULL, &err));
	g_assert_no_error(err);
	g_free(dir);
	return path;
}

static void remove_synth(char *path)
{
	char *dir = g_path_get_dirname(path);

	g_unlink(path);
	g_rmdir(dir);
	g_free(dir);
	g_free(path);
}

/* Damage the AUX data: junk, stray PSB pattern runs and PAD runs, so that
 * the decoder resynchronises and its lookaheads run long. */
static void damage(const char *path, guint seed)
{
	GError *err = NULL;
	VtPerfFile *f = vt_perf_file_open(path, VT_PERF_OPEN_RDONLY, &err);
	guint n = 0;
	VtPerfFileSection *idx;
	GRand *r = g_rand_new_with_seed(seed);
	int fd = open(path, O_WRONLY);

	g_assert_no_error(err);
	idx = vt_perf_file_auxtrace_index(f, &n, &err);
	g_assert_no_error(err);
	g_assert_cmpuint(n, >, 0);
	g_assert_cmpint(fd, >=, 0);
	for (guint i = 0; i < n; i++) {
		uint64_t payload = idx[i].offset + idx[i].size, len;
		guint8 hdr[16];

		g_assert_true(vt_perf_file_read(f, idx[i].offset, hdr, sizeof(hdr), &err));
		memcpy(&len, hdr + 8, 8);
		for (guint k = 0; k < 32 && len > 64 << 10; k++) {
			guint8 junk[1200];
			uint64_t at = payload + g_rand_int_range(r, 0, (gint32)(len - sizeof(junk)));
			guint kind = g_rand_int_range(r, 0, 4), sz = g_rand_int_range(r, 1, 600);

			for (guint b = 0; b < sz; b++)
				junk[b] = kind == 0 ? (guint8)g_rand_int(r) : kind == 1 ? (b % 2 ? 0x82 : 0x02) : 0;
			if (kind == 3) {
				/* PSB, a long run of PADs, TSC, TMA, PSBEND: a PSB+ whose
				 * lookahead reads far */
				static const guint8 tail[] = { 0x19, 1, 2, 3, 4, 5, 6, 0, 0x02, 0x73, 0x10, 0, 0, 5, 0,
							       0x02, 0x23 };

				sz = 16 + 700 + sizeof(tail);
				for (guint b = 0; b < 16; b++)
					junk[b] = b % 2 ? 0x82 : 0x02;
				memset(junk + 16, 0, 700);
				memcpy(junk + 716, tail, sizeof(tail));
			}
			g_assert_cmpint(pwrite(fd, junk, sz, (off_t)at), ==, (ssize_t)sz);
		}
	}
	close(fd);
	g_rand_free(r);
	g_free(idx);
	vt_perf_file_close(f);
}

static VmcorrResult *dry_run_window(const char *path, gsize window)
{
	VmcorrOptions o;
	GError *err = NULL;
	VmcorrResult *r;

	vmcorr_options_init(&o);
	o.collect_patches = TRUE;
	o.aux_window = window;
	o.jobs = 2;
	r = vmcorr_dry_run(path, &o, &err);
	g_assert_no_error(err);
	g_assert_nonnull(r);
	return r;
}

static void assert_strings_equal(const GPtrArray *a, const GPtrArray *b)
{
	g_assert_cmpuint(a->len, ==, b->len);
	for (guint i = 0; i < a->len; i++)
		g_assert_cmpstr(a->pdata[i], ==, b->pdata[i]);
}

static void assert_results_equal(const VmcorrResult *a, const VmcorrResult *b)
{
	assert_strings_equal(a->perf_lines, b->perf_lines);
	assert_strings_equal(a->perf_errors, b->perf_errors);
	g_assert_cmpuint(a->n_tsc, ==, b->n_tsc);
	g_assert_cmpuint(a->n_guest_tsc, ==, b->n_guest_tsc);
	g_assert_cmpuint(a->n_host_tsc, ==, b->n_host_tsc);
	g_assert_cmpuint(a->n_bad_packets, ==, b->n_bad_packets);
	g_assert_cmpuint(a->first_bad_offset, ==, b->first_bad_offset);
	g_assert_cmpuint(a->vmcs->len, ==, b->vmcs->len);
	for (guint i = 0; i < a->vmcs->len; i++) {
		const VmcorrVmcs *x = &g_array_index(a->vmcs, VmcorrVmcs, i);
		const VmcorrVmcs *y = &g_array_index(b->vmcs, VmcorrVmcs, i);

		g_assert_cmphex(x->vmcs, ==, y->vmcs);
		g_assert_cmphex(x->offset, ==, y->offset);
		g_assert_cmpint(x->status, ==, y->status);
		g_assert_cmpuint(x->n_est, ==, y->n_est);
		g_assert_cmpint(x->spread, ==, y->spread);
	}
	g_assert_cmpuint(a->patches->len, ==, b->patches->len);
	g_assert_cmpint(memcmp(a->patches->data, b->patches->data, a->patches->len * sizeof(VmcorrPatch)), ==, 0);
}

/* AUX buffers (256 KiB) read 256 bytes (and odd sizes) at a time give the
 * result of reading each whole (lookaheads and PSB searches cross window
 * ends): on clean traces of several mixes and on
 * damaged ones (resynchronisation, long PAD runs in lookaheads). */
static void test_window_same_result(void)
{
	static const struct { gboolean per_cpu, cyc; guint mtc, psb; guint seed; } mix[] = {
		{ FALSE, FALSE, 3, 3, 0 },
		{ TRUE, TRUE, 0, 0, 0 },
		{ FALSE, TRUE, 0, 1, 7 },
		{ TRUE, FALSE, 3, 3, 11 },
	};
	static const gsize windows[] = { 256, 301, 4099, 65536 + 333 };

	for (guint m = 0; m < G_N_ELEMENTS(mix); m++) {
		char *path = synth_file("w.data", mix[m].per_cpu, mix[m].cyc, mix[m].mtc, mix[m].psb, 256 << 10);
		VmcorrResult *whole;

		if (mix[m].seed)
			damage(path, mix[m].seed);
		whole = dry_run_window(path, 0);
		g_assert_cmpuint(whole->n_tsc, >, 100);
		if (mix[m].seed)
			g_assert_cmpuint(whole->n_bad_packets, >, 0);
		for (guint w = 0; w < G_N_ELEMENTS(windows); w++) {
			VmcorrResult *part = dry_run_window(path, windows[w]);

			assert_results_equal(whole, part);
			vmcorr_result_free(part);
		}
		vmcorr_result_free(whole);
		remove_synth(path);
	}
}

/* SRC with every AUX buffer cut into `piece`-byte buffers of the same
 * queue (the same stream, many tiny AUXTRACE records). */
static char *rechunk(const char *src, guint piece)
{
	char *out = g_strconcat(src, ".chunked", NULL);
	GError *err = NULL;
	VtPerfFile *f = vt_perf_file_open(src, VT_PERF_OPEN_RDONLY, &err);
	VtPerfWriter *w = vt_perf_writer_new(out, FALSE, &err);
	VtPerfIter *it = g_new(VtPerfIter, 1);
	VtPerfRecord rec;
	int r;

	g_assert_no_error(err);
	for (guint i = 0; i < vt_perf_file_n_attrs(f); i++) {
		const VtPerfAttr *a = vt_perf_file_attr(f, i);

		g_assert_true(vt_perf_writer_add_attr(w, &a->attr, a->ids, a->nr_ids, &err));
	}
	vt_perf_iter_init(it, f);
	while ((r = vt_perf_iter_next(it, &rec, &err)) > 0) {
		VtPerfAuxtrace aux;
		guint8 *payload;

		if (rec.type != VT_PERF_RECORD_AUXTRACE) {
			g_assert_true(vt_perf_writer_write_record(w, rec.data, &err));
			continue;
		}
		g_assert_true(vt_perf_record_auxtrace(&rec, &aux, &err));
		payload = g_malloc(aux.size);
		g_assert_true(vt_perf_file_read(f, aux.payload_file_offset, payload, aux.size, &err));
		for (uint64_t k = 0; k < aux.size; k += piece) {
			VtPerfAuxtrace a = aux;

			a.size = MIN(piece, aux.size - k);
			a.offset = aux.offset + k;
			g_assert_true(vt_perf_writer_write_auxtrace(w, &a, payload + k, a.size, NULL, &err));
		}
		g_free(payload);
	}
	g_assert_no_error(err);
	g_assert_true(vt_perf_writer_finish(w, &err));
	vt_perf_writer_free(w);
	vt_perf_file_close(f);
	g_free(it);
	return out;
}

/* Tiny AUX buffers (256 bytes) are read through the workers' small-read
 * cache; reading them one by one (as a set window does) gives the same. */
static void test_tiny_buffers(void)
{
	char *path = synth_file("c.data", FALSE, TRUE, 0, 1, 64 << 10);
	char *chunked = rechunk(path, 256);
	VmcorrResult *cached = dry_run_window(chunked, 0), *direct = dry_run_window(chunked, 4096);

	g_assert_cmpuint(cached->n_tsc, >, 100);
	assert_results_equal(cached, direct);
	vmcorr_result_free(cached);
	vmcorr_result_free(direct);
	g_unlink(chunked);
	g_free(chunked);
	remove_synth(path);
}

/* The file shrinks between indexing and decoding: an error naming the
 * file ("changed size while being read"), not SIGBUS. */
static void test_truncated_while_read(void)
{
	char *path = synth_file("t.data", FALSE, FALSE, 3, 3, 256 << 10);
	VmcorrOptions o;
	GError *err = NULL;
	VmcorrSession *s = vmcorr_session_open(path, VT_PERF_OPEN_RDONLY, &err);
	VmcorrResult *r;

	g_assert_no_error(err);
	g_assert_cmpint(truncate(path, 1 << 20), ==, 0);
	vmcorr_options_init(&o);
	r = vmcorr_run_session(s, &o, &err);
	g_assert_null(r);
	g_assert_error(err, VT_PERF_ERROR, VT_PERF_ERROR_CHANGED);
	g_assert_nonnull(strstr(err->message, path));
	g_assert_nonnull(strstr(err->message, "changed size while being read"));
	g_clear_error(&err);
	vmcorr_session_free(s);
	remove_synth(path);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add("/vmcorr/offset/default", Fixture, NULL, fx_setup, test_offset_default, fx_teardown);
	g_test_add("/vmcorr/offset/vmcs", Fixture, NULL, fx_setup, test_offset_vmcs, fx_teardown);
	g_test_add_func("/vmcorr/offset/errors", test_offset_errors);
	g_test_add("/vmcorr/scale/accepted", Fixture, NULL, fx_setup, test_scale, fx_teardown);
	g_test_add_func("/vmcorr/scale/errors", test_scale_errors);
	g_test_add("/vmcorr/perf-arg/accepted", Fixture, NULL, fx_setup, test_perf_arg, fx_teardown);
	g_test_add_func("/vmcorr/perf-arg/errors", test_perf_arg_errors);
	g_test_add_func("/vmcorr/epochs/none-and-one", test_epochs_none_and_one);
	g_test_add_func("/vmcorr/epochs/change", test_epochs_change);
	g_test_add_func("/vmcorr/epochs/outliers", test_epochs_outliers);
	g_test_add_func("/vmcorr/epochs/believed", test_epochs_believed);
	g_test_add_func("/vmcorr/epochs/seven-bytes", test_epochs_seven_bytes);
	g_test_add_func("/vmcorr/read/window-same-result", test_window_same_result);
	g_test_add_func("/vmcorr/read/tiny-buffers", test_tiny_buffers);
	g_test_add_func("/vmcorr/read/truncated-while-read", test_truncated_while_read);
	return g_test_run();
}
