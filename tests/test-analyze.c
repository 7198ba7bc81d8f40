/* test-analyze.c - unit tests of src/analyze/ (GTest): a hand-made branch
 * stream over two tiny images (guest: entry_SYSCALL_64, __x64_sys_read,
 * helper; host: vmx_vmexit, kvm_handle) checks the definitions of
 * analyze.h - mode time, a VM exit's latency, handler and first call, an
 * exit never re-entered, self time without the host's time, a return that
 * matches no call, a system call named by its handler - through the
 * summary visitor; first entries by tail calls (jumps). */
#include "config.h"

#include <elf.h>
#include <malloc.h>
#include <string.h>
#include <glib/gstdio.h>

#include "src/analyze/analyze.h"

#define G 0xffffffff81000000ULL     /* both kernels at one address, as in life */
#define H 0xffffffff81000000ULL

/* DIR/kcore (one executable PT_LOAD of nops at base) and DIR/kallsyms. */
static VtDecodeImage *image(const char *dir, const char *kallsyms)
{
	static guint8 code[4096];
	Elf64_Ehdr eh = { 0 };
	Elf64_Phdr ph = { .p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_offset = sizeof(eh) + sizeof(ph),
			  .p_vaddr = G, .p_filesz = sizeof(code), .p_memsz = sizeof(code) };
	g_autoptr(GByteArray) f = g_byte_array_new();
	g_autofree char *core = g_build_filename(dir, "kcore", NULL);
	g_autofree char *ks = g_build_filename(dir, "kallsyms", NULL);
	g_autoptr(GError) err = NULL;
	VtDecodeImage *img;

	memset(code, 0x90, sizeof(code));
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_CORE;
	eh.e_machine = EM_X86_64;
	eh.e_phoff = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = 1;
	g_byte_array_append(f, (guint8 *)&eh, sizeof(eh));
	g_byte_array_append(f, (guint8 *)&ph, sizeof(ph));
	g_byte_array_append(f, code, sizeof(code));
	g_assert_true(g_file_set_contents(core, (char *)f->data, f->len, NULL));
	g_assert_true(g_file_set_contents(ks, kallsyms, -1, NULL));
	img = vt_decode_image_load_dir(dir, "test", &err);
	g_assert_no_error(err);
	return img;
}

/* One branch of thread 100 (vCPU 0) at time t. */
static void ev(VtAnalyze *a, guint64 t, VtBranchKind kind, gboolean from_guest, guint64 from, gboolean to_guest,
	       guint64 to, guint8 len)
{
	VtDecodeEvent e = { .b = { .from = from, .to = to, .tsc = t, .kind = kind, .from_guest = from_guest,
				   .to_guest = to_guest, .insn_len = len, .async = kind == VT_BRANCH_VMEXIT },
			    .cpu = -1, .pid = 99, .tid = 100, .vcpu = 0, .comm = "CPU 0/KVM", .time = t };

	vt_analyze_event(a, &e);
}

static const VtAnalyzeFunction *func(VtAnalyzeSummary *s, const char *name, gint vcpu)
{
	const GArray *f = vt_analyze_summary_functions(s);

	for (guint i = 0; i < f->len; i++)
		if (!g_strcmp0(g_array_index(f, VtAnalyzeFunction, i).sym, name) &&
		    g_array_index(f, VtAnalyzeFunction, i).vcpu == vcpu)
			return &g_array_index(f, VtAnalyzeFunction, i);
	g_assert_not_reached();
	return NULL;
}

/* The stream of test_stream: a syscall whose helper is interrupted by a
 * VM exit, a return matching no call, an exit never re-entered. */
static void feed(VtAnalyze *a)
{
	ev(a, 1000, VT_BRANCH_VMENTRY, FALSE, H + 0x10, TRUE, G + 0x300, 3);
	ev(a, 1100, VT_BRANCH_SYSCALL, TRUE, G + 0x310, TRUE, G + 0x000, 2);        /* into entry_SYSCALL_64 */
	ev(a, 1200, VT_BRANCH_CALL, TRUE, G + 0x010, TRUE, G + 0x100, 5);           /* names the syscall */
	ev(a, 1300, VT_BRANCH_CALL, TRUE, G + 0x110, TRUE, G + 0x200, 5);
	ev(a, 1400, VT_BRANCH_VMEXIT, TRUE, G + 0x220, FALSE, H + 0x000, 0);
	ev(a, 1450, VT_BRANCH_CALL, FALSE, H + 0x010, FALSE, H + 0x100, 5);
	ev(a, 1500, VT_BRANCH_RETURN, FALSE, H + 0x120, FALSE, H + 0x015, 1);
	ev(a, 1600, VT_BRANCH_VMENTRY, FALSE, H + 0x020, TRUE, G + 0x220, 3);
	ev(a, 1700, VT_BRANCH_RETURN, TRUE, G + 0x230, TRUE, G + 0x115, 1);         /* helper returns */
	ev(a, 1800, VT_BRANCH_RETURN, TRUE, G + 0x130, TRUE, G + 0x015, 1);         /* the handler returns */
	ev(a, 1900, VT_BRANCH_RETURN, TRUE, G + 0x040, TRUE, G + 0x3f0, 1);         /* matches no call */
	ev(a, 2000, VT_BRANCH_VMEXIT, TRUE, G + 0x050, FALSE, H + 0x000, 0);        /* never re-entered */
}

static void test_stream(void)
{
	g_autofree char *gdir = g_dir_make_tmp("test-analyze-g-XXXXXX", NULL);
	g_autofree char *hdir = g_dir_make_tmp("test-analyze-h-XXXXXX", NULL);
	g_autoptr(VtDecodeImage) guest = image(gdir, "ffffffff81000000 T entry_SYSCALL_64\n"
						     "ffffffff81000100 T __x64_sys_read\n"
						     "ffffffff81000200 t helper\n"
						     "ffffffff81000300 T fn_a\n");
	g_autoptr(VtDecodeImage) host = image(hdir, "ffffffff81000000 T vmx_vmexit\n"
						    "ffffffff81000100 T kvm_handle\n");
	VtAnalyzeSummaryOptions so = { .timed = TRUE };
	g_autoptr(VtAnalyzeSummary) s = vt_analyze_summary_new(&so);
	VtAnalyzeVisitor v = vt_analyze_summary_visitor(s);
	VtAnalyzeOptions ao = { .host = host, .guest = guest, .timed = TRUE, .vcpu = -1 };
	g_autoptr(VtAnalyze) a = vt_analyze_new(&ao, &v);
	const GArray *vcpus, *groups, *first, *sys;
	const VtAnalyzeVcpu *vc;
	const VtAnalyzeExitGroup *grp;

	feed(a);
	vt_analyze_finish(a);

	vcpus = vt_analyze_summary_vcpus(s);
	g_assert_cmpuint(vcpus->len, ==, 1);
	vc = &g_array_index(vcpus, VtAnalyzeVcpu, 0);
	g_assert_cmpint(vc->vcpu, ==, 0);
	g_assert_cmpuint(vc->last - vc->first, ==, 1000);
	g_assert_cmpuint(vc->guest, ==, 800);
	g_assert_cmpuint(vc->host, ==, 200);
	g_assert_cmpuint(vc->exits, ==, 2);
	g_assert_cmpuint(vc->latency.count, ==, 1);
	g_assert_cmpuint(vc->latency.max, ==, 200);
	g_assert_cmpuint(vc->latency.p50, ==, 200);
	g_assert_cmpuint(vc->longest->len, ==, 1);
	g_assert_cmpuint(g_array_index(vc->longest, VtAnalyzeExit, 0).exit_ip, ==, G + 0x220);

	groups = vt_analyze_summary_exit_groups(s);
	grp = &g_array_index(groups, VtAnalyzeExitGroup, 0);
	g_assert_cmpint(grp->vcpu, ==, -1);
	g_assert_cmpstr(grp->handler, ==, "vmx_vmexit");
	g_assert_cmpstr(grp->first_call, ==, "kvm_handle");

	/* helper: 1300..1700, the exit's 200 ns are the host's */
	g_assert_cmpuint(func(s, "helper", -1)->inclusive, ==, 400);
	g_assert_cmpuint(func(s, "helper", -1)->self, ==, 200);
	g_assert_cmpuint(func(s, "__x64_sys_read", 0)->inclusive, ==, 600);
	g_assert_cmpuint(func(s, "__x64_sys_read", 0)->self, ==, 200);
	g_assert_cmpuint(func(s, "kvm_handle", -1)->self, ==, 50);
	g_assert_false(func(s, "kvm_handle", -1)->guest);
	g_assert_cmpuint(vt_analyze_health(a)->unmatched_returns, ==, 1);

	first = vt_analyze_summary_first_calls(s);
	g_assert_cmpuint(first->len, ==, 3);
	g_assert_cmpstr(g_array_index(first, VtAnalyzeFirstCall, 0).sym, ==, "__x64_sys_read");
	g_assert_cmpuint(g_array_index(first, VtAnalyzeFirstCall, 0).time, ==, 1200);
	g_assert_cmpstr(g_array_index(first, VtAnalyzeFirstCall, 1).sym, ==, "helper");
	g_assert_cmpstr(g_array_index(first, VtAnalyzeFirstCall, 2).sym, ==, "kvm_handle");
	g_assert_false(g_array_index(first, VtAnalyzeFirstCall, 2).guest);

	sys = vt_analyze_summary_syscalls(s);
	g_assert_cmpuint(sys->len, ==, 1);
	g_assert_cmpstr(g_array_index(sys, VtAnalyzeSyscallStats, 0).name, ==, "__x64_sys_read");
	g_assert_cmpuint(g_array_index(sys, VtAnalyzeSyscallStats, 0).count, ==, 1);
	g_assert_cmpuint(g_array_index(sys, VtAnalyzeSyscallStats, 0).complete, ==, 1);
	g_assert_cmpuint(g_array_index(sys, VtAnalyzeSyscallStats, 0).total, ==, 700);   /* 1100..1800 */
	for (const char *d = gdir; d; d = d == gdir ? hdir : NULL) {
		g_autofree char *k = g_build_filename(d, "kcore", NULL);
		g_autofree char *s2 = g_build_filename(d, "kallsyms", NULL);

		g_unlink(k);
		g_unlink(s2);
		g_rmdir(d);
	}
}

/* The begin callbacks: every item announced at its start, in time order,
 * nesting with its end (slices by depth; an exit before the next). */
static void log_begin(const VtAnalyzeSlice *x, gpointer user)
{
	g_string_append_printf(user, "B%c%u %s %" G_GUINT64_FORMAT ";", x->guest ? 'g' : 'h', x->depth, x->sym,
			       x->start);
}

static void log_slice(const VtAnalyzeSlice *x, gpointer user)
{
	g_string_append_printf(user, "E%c%u %s %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT "%s;", x->guest ? 'g' : 'h',
			       x->depth, x->sym, x->start, x->end, x->complete ? "" : " cut");
}

static void log_exit_begin(const VtAnalyzeExit *x, gpointer user)
{
	g_string_append_printf(user, "X %s %" G_GUINT64_FORMAT ";", x->handler, x->exit_time);
	g_assert_null(x->first_call);
	g_assert_false(x->reentered);
}

static void log_exit(const VtAnalyzeExit *x, gpointer user)
{
	g_string_append_printf(user, "x %s %" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT "%s;",
			       x->first_call ? x->first_call : "-",
			       x->exit_time, x->end, x->reentered ? "" : " cut");
	g_assert_cmpuint(x->end, ==, x->reentered ? x->entry_time : x->end);
}

static void test_begin(void)
{
	g_autofree char *gdir = g_dir_make_tmp("test-analyze-g-XXXXXX", NULL);
	g_autofree char *hdir = g_dir_make_tmp("test-analyze-h-XXXXXX", NULL);
	g_autoptr(VtDecodeImage) guest = image(gdir, "ffffffff81000000 T entry_SYSCALL_64\n"
						     "ffffffff81000100 T __x64_sys_read\n"
						     "ffffffff81000200 t helper\n"
						     "ffffffff81000300 T fn_a\n");
	g_autoptr(VtDecodeImage) host = image(hdir, "ffffffff81000000 T vmx_vmexit\n"
						    "ffffffff81000100 T kvm_handle\n");
	g_autoptr(GString) log = g_string_new(NULL);
	VtAnalyzeVisitor v = { .slice = log_slice, .slice_begin = log_begin, .exit = log_exit,
			       .exit_begin = log_exit_begin, .user = log };
	VtAnalyzeOptions ao = { .host = host, .guest = guest, .timed = TRUE, .vcpu = -1 };
	g_autoptr(VtAnalyze) a = vt_analyze_new(&ao, &v);

	feed(a);
	g_assert_cmpstr(log->str, ==, "Bg0 __x64_sys_read 1200;Bg1 helper 1300;X vmx_vmexit 1400;"
			"Bh0 kvm_handle 1450;Eh0 kvm_handle 1450-1500;x kvm_handle 1400-1600;"
			"Eg1 helper 1300-1700;Eg0 __x64_sys_read 1200-1800;X vmx_vmexit 2000;");
	g_string_truncate(log, 0);
	vt_analyze_finish(a);
	g_assert_cmpstr(log->str, ==, "x - 2000-2000 cut;");
	/* a full stack: 1025 calls; the 1025th closes the outer 512 (511..0),
	 * the inner ones renumber from 0, then it begins at depth 512 */
	g_string_truncate(log, 0);
	ev(a, 3000, VT_BRANCH_VMENTRY, FALSE, H + 0x10, TRUE, G + 0x300, 3);
	for (guint i = 0; i < 1025; i++)
		ev(a, 3001 + i, VT_BRANCH_CALL, TRUE, G + 0x210, TRUE, G + 0x200, 5);
	{
		g_auto(GStrv) items = g_strsplit(log->str, ";", -1);

		g_assert_cmpuint(g_strv_length(items), ==, 1024 + 512 + 1 + 1);
		g_assert_cmpstr(items[1023], ==, "Bg1023 helper 4024");
		g_assert_cmpstr(items[1024], ==, "Eg511 helper 3512-4025 cut");
		g_assert_cmpstr(items[1024 + 511], ==, "Eg0 helper 3001-4025 cut");
		g_assert_cmpstr(items[1024 + 512], ==, "Bg512 helper 4025");
	}
	for (const char *d = gdir; d; d = d == gdir ? hdir : NULL) {
		g_autofree char *k = g_build_filename(d, "kcore", NULL);
		g_autofree char *s2 = g_build_filename(d, "kallsyms", NULL);

		g_unlink(k);
		g_unlink(s2);
		g_rmdir(d);
	}
}

static void log_first(const VtAnalyzeFirstCall *f, gpointer user)
{
	g_string_append_printf(user, "%s %" G_GUINT64_FORMAT " %u;", f->sym, f->time, f->index);
}

/* First entries: a call, or a jump to a function's first instruction from
 * another function (a tail call: `jmp start_kernel`); not a jump within a
 * function to its own start, nor one into a function's middle.  A tail
 * call opens no slice. */
static void test_tail_call(void)
{
	g_autofree char *gdir = g_dir_make_tmp("test-analyze-g-XXXXXX", NULL);
	g_autoptr(VtDecodeImage) guest = image(gdir, "ffffffff81000000 T entry_SYSCALL_64\n"
						     "ffffffff81000100 T __x64_sys_read\n"
						     "ffffffff81000200 t helper\n"
						     "ffffffff81000300 T fn_a\n");
	g_autoptr(GString) log = g_string_new(NULL);
	VtAnalyzeVisitor v = { .first_call = log_first, .slice_begin = log_begin, .user = log };
	VtAnalyzeOptions ao = { .host = guest, .guest = guest, .timed = TRUE, .vcpu = -1 };
	g_autoptr(VtAnalyze) a = vt_analyze_new(&ao, &v);

	ev(a, 1000, VT_BRANCH_VMENTRY, FALSE, H + 0x10, TRUE, G + 0x300, 3);
	ev(a, 1100, VT_BRANCH_JUMP, TRUE, G + 0x320, TRUE, G + 0x340, 2);           /* within fn_a */
	ev(a, 1200, VT_BRANCH_JUMP, TRUE, G + 0x350, TRUE, G + 0x300, 2);           /* to fn_a's own start */
	ev(a, 1300, VT_BRANCH_JUMP, TRUE, G + 0x360, TRUE, G + 0x108, 2);           /* into __x64_sys_read's middle */
	ev(a, 1400, VT_BRANCH_JUMP, TRUE, G + 0x110, TRUE, G + 0x200, 2);           /* tail call: helper */
	ev(a, 1500, VT_BRANCH_JUMP, TRUE, G + 0x210, TRUE, G + 0x200, 2);           /* helper to its own start */
	ev(a, 1600, VT_BRANCH_CALL, TRUE, G + 0x220, TRUE, G + 0x100, 5);
	ev(a, 1700, VT_BRANCH_JUMP, TRUE, G + 0x120, TRUE, G + 0x200, 2);           /* helper again */
	ev(a, 1800, VT_BRANCH_JUMP, TRUE, G + 0x230, TRUE, G + 0x300, 2);           /* tail call: fn_a */
	vt_analyze_finish(a);
	g_assert_cmpstr(log->str, ==, "helper 1400 0;Bg0 __x64_sys_read 1600;__x64_sys_read 1600 1;fn_a 1800 2;");
	{
		g_autofree char *k = g_build_filename(gdir, "kcore", NULL);
		g_autofree char *s2 = g_build_filename(gdir, "kallsyms", NULL);

		g_unlink(k);
		g_unlink(s2);
		g_rmdir(gdir);
	}
}

/* Percentiles by nearest rank, exact below VT_ANALYZE_EXACT values. */
static void test_percentiles(void)
{
	VtAnalyzeSummaryOptions so = { .timed = TRUE };
	g_autoptr(VtAnalyzeSummary) s = vt_analyze_summary_new(&so);
	VtAnalyzeVisitor v = vt_analyze_summary_visitor(s);
	const VtAnalyzeVcpu *vc;

	for (guint i = 1; i <= 1000; i++) {
		VtAnalyzeExit x = { .w = { .vcpu = 3, .tid = 7 }, .exit_time = i * 10000, .entry_time = i * 10000 + i,
				    .reentered = TRUE, .latency = i, .handler = "h" };

		v.exit(&x, v.user);
	}
	vc = &g_array_index(vt_analyze_summary_vcpus(s), VtAnalyzeVcpu, 0);
	g_assert_cmpuint(vc->latency.count, ==, 1000);
	g_assert_cmpuint(vc->latency.p50, ==, 500);
	g_assert_cmpuint(vc->latency.p90, ==, 900);
	g_assert_cmpuint(vc->latency.p99, ==, 990);
	g_assert_cmpuint(vc->latency.max, ==, 1000);
	g_assert_cmpuint(vc->latency.min, ==, 1);
	g_assert_cmpuint(vc->longest->len, ==, 10);
	g_assert_cmpuint(g_array_index(vc->longest, VtAnalyzeExit, 0).latency, ==, 1000);
}

/* The overall rows (vcpu -1) count every slice and exit once - also those
 * of threads that are no vCPU (their own vcpu is -1 too). */
static void test_overall_once(void)
{
	VtAnalyzeSummaryOptions so = { .timed = TRUE };
	g_autoptr(VtAnalyzeSummary) s = vt_analyze_summary_new(&so);
	VtAnalyzeVisitor v = vt_analyze_summary_visitor(s);
	const GArray *groups;

	for (gint vcpu = -1; vcpu <= 0; vcpu++) {
		VtAnalyzeSlice sl = { .w = { .vcpu = vcpu, .tid = 7 + vcpu }, .guest = FALSE, .func = H + 0x100,
				      .sym = "kvm_handle", .start = 100, .end = 150, .self = 50, .complete = TRUE };
		VtAnalyzeExit x = { .w = sl.w, .exit_time = 100, .entry_time = 150, .reentered = TRUE,
				    .latency = 50, .handler = "vmx_vmexit" };

		v.slice(&sl, v.user);
		v.exit(&x, v.user);
	}
	g_assert_cmpuint(func(s, "kvm_handle", -1)->calls, ==, 2);
	g_assert_cmpuint(func(s, "kvm_handle", -1)->self, ==, 100);
	g_assert_cmpuint(func(s, "kvm_handle", 0)->calls, ==, 1);
	groups = vt_analyze_summary_exit_groups(s);
	g_assert_cmpuint(groups->len, ==, 2);           /* all, vCPU 0 */
	g_assert_cmpint(g_array_index(groups, VtAnalyzeExitGroup, 0).vcpu, ==, -1);
	g_assert_cmpuint(g_array_index(groups, VtAnalyzeExitGroup, 0).latency.count, ==, 2);
	g_assert_cmpuint(g_array_index(groups, VtAnalyzeExitGroup, 1).latency.count, ==, 1);
}

/* Memory flat in the number of exits: many exit groups (handler x first
 * call: synth's random walks make tens of thousands) fed 40 times more
 * exits hold at most 8 MiB more heap (each group kept every latency:
 * 8 bytes per exit and group, 2 groups per exit - 22 MiB more here);
 * the groups' percentiles stay within the histograms' resolution, and
 * every count, min and max exact. */
static gint cmp_u64(gconstpointer a, gconstpointer b)
{
	guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;

	return x < y ? -1 : x > y;
}

static guint64 heap_used(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
}

#define MANY_GROUPS 20000
#define LATENCY(i) (100 + ((i) * 0x9e3779b97f4a7c15ULL >> 40) % 100000)

static void feed_exits(VtAnalyzeVisitor *v, char **names, guint64 from, guint64 to)
{
	for (guint64 i = from; i < to; i++) {
		guint g = (guint)((i * 2654435761u) % MANY_GROUPS);
		guint64 lat = LATENCY(i);
		VtAnalyzeExit x = { .w = { .vcpu = 0, .tid = 7 }, .exit_time = i * 1000000, .reentered = TRUE,
				    .entry_time = i * 1000000 + lat, .latency = lat, .handler = names[g],
				    .first_call = "kvm_handle" };

		v->exit(&x, v->user);
	}
}

static void test_memory_flat(void)
{
	VtAnalyzeSummaryOptions so = { .timed = TRUE };
	g_autoptr(VtAnalyzeSummary) s = vt_analyze_summary_new(&so);
	VtAnalyzeVisitor v = vt_analyze_summary_visitor(s);
	char **names = g_new0(char *, MANY_GROUPS + 1);
	g_autoptr(GArray) lat0 = g_array_new(FALSE, FALSE, sizeof(guint64));
	const GArray *groups;
	guint64 before, after, n = 1500000;

	for (guint g = 0; g < MANY_GROUPS; g++)
		names[g] = g_strdup_printf("handler_%u", g);
	feed_exits(&v, names, 0, n / 40);
	before = heap_used();
	feed_exits(&v, names, n / 40, n);
	after = heap_used();
	g_test_message("heap %" G_GUINT64_FORMAT " -> %" G_GUINT64_FORMAT " bytes", before, after);
	g_assert_cmpuint(after, <=, before + (8u << 20));
	for (guint64 i = 0; i < n; i++)     /* group 0's latencies, as fed */
		if ((i * 2654435761u) % MANY_GROUPS == 0)
			g_array_append_val(lat0, ((guint64){ LATENCY(i) }));
	g_array_sort(lat0, cmp_u64);
	groups = vt_analyze_summary_exit_groups(s);
	g_assert_cmpuint(groups->len, ==, 2 * MANY_GROUPS);
	for (guint i = 0; i < groups->len; i++) {
		const VtAnalyzeExitGroup *g = &g_array_index(groups, VtAnalyzeExitGroup, i);
		const guint64 want[] = { g_array_index(lat0, guint64, (lat0->len * 50 + 99) / 100 - 1),
					 g_array_index(lat0, guint64, (lat0->len * 90 + 99) / 100 - 1),
					 g_array_index(lat0, guint64, (lat0->len * 99 + 99) / 100 - 1) };
		const guint64 got[] = { g->latency.p50, g->latency.p90, g->latency.p99 };

		if (g_strcmp0(g->handler, names[0]))
			continue;
		g_assert_cmpuint(g->latency.count, ==, lat0->len);
		g_assert_cmpuint(g->latency.min, ==, g_array_index(lat0, guint64, 0));
		g_assert_cmpuint(g->latency.max, ==, g_array_index(lat0, guint64, lat0->len - 1));
		for (guint k = 0; k < G_N_ELEMENTS(want); k++) {   /* a bucket's low end: coarsest, its octave's */
			g_assert_cmpuint(got[k], <=, want[k]);
			g_assert_cmpuint(got[k], >=, want[k] / 2);
		}
	}
	g_strfreev(names);
}

/* A few big exit groups (as in life: a handful of handlers), more
 * latencies than are kept exactly: percentiles from the histograms at
 * full resolution, at most 1/128 below the exact ones. */
static void test_group_resolution(void)
{
	VtAnalyzeSummaryOptions so = { .timed = TRUE };
	g_autoptr(VtAnalyzeSummary) s = vt_analyze_summary_new(&so);
	VtAnalyzeVisitor v = vt_analyze_summary_visitor(s);
	g_autoptr(GArray) all = g_array_new(FALSE, FALSE, sizeof(guint64));
	const GArray *groups;
	guint64 n = 3 * VT_ANALYZE_GROUP_EXACT / 2;

	for (guint64 i = 0; i < n; i++) {
		VtAnalyzeExit x = { .w = { .vcpu = (gint32)(i % 2), .tid = 7 + (gint32)(i % 2) },
				    .exit_time = i * 1000000, .reentered = TRUE, .latency = LATENCY(i),
				    .handler = "vmx_vmexit", .first_call = "vmx_handle_exit" };

		x.entry_time = x.exit_time + x.latency;
		v.exit(&x, v.user);
		g_array_append_val(all, x.latency);
	}
	g_array_sort(all, cmp_u64);
	groups = vt_analyze_summary_exit_groups(s);
	g_assert_cmpuint(groups->len, ==, 3);
	g_assert_cmpint(g_array_index(groups, VtAnalyzeExitGroup, 0).vcpu, ==, -1);
	for (guint k = 0; k < 3; k++) {
		const guint pct[] = { 50, 90, 99 };
		const VtAnalyzeStats *st = &g_array_index(groups, VtAnalyzeExitGroup, 0).latency;
		guint64 want = g_array_index(all, guint64, (n * pct[k] + 99) / 100 - 1);
		guint64 got = k == 0 ? st->p50 : k == 1 ? st->p90 : st->p99;

		g_assert_cmpuint(st->count, ==, n);
		g_assert_cmpuint(got, <=, want);
		g_assert_cmpuint(got, >=, want - want / 128);
	}
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/analyze/stream", test_stream);
	g_test_add_func("/analyze/percentiles", test_percentiles);
	g_test_add_func("/analyze/begin", test_begin);
	g_test_add_func("/analyze/tail-call", test_tail_call);
	g_test_add_func("/analyze/overall-once", test_overall_once);
	g_test_add_func("/analyze/memory-flat", test_memory_flat);
	g_test_add_func("/analyze/group-resolution", test_group_resolution);
	return g_test_run();
}
