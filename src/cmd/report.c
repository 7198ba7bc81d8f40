/* report.c - `vmtrace report`: where each vCPU's time goes (guest/host,
 * VM exits by handler, longest exits), top guest and host functions by self
 * and inclusive time, the guest's first-call timeline, guest system calls
 * and decode health - src/analyze's summary of the decoded recording, as
 * tables or JSON. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <intel-pt.h>

#include "src/analyze/analyze.h"
#include "src/cli/json.h"
#include "src/cli/table.h"
#include "src/cmd/cmd.h"

#define DEFAULT_TOP 20

typedef struct {
	char *rec;
	VtCmdImages img;
	gboolean json, progress;
	gint vcpu, top, jobs;
	char *time;
	gboolean have_time;
	guint64 time_start, time_end;
} ReportOptions;

typedef struct {
	const ReportOptions *o;
	VtDecodeImage *host, *guest;
	VtDecodeResult *result;
	VtAnalyze *an;
	VtAnalyzeSummary *sum;
	gboolean timed;
	const char *unit;           /* "ns" or "insns" */
} Report;

/* ---------------------------------------------------------------- parse */
static const char report_summary[] =
	"Decodes the recording (as vmtrace script does) and answers: per vCPU the wall\n"
	"time, guest and host (root) mode time, VM exits and their exit-to-entry\n"
	"latency by host handler (the exit's target and the first function it calls)\n"
	"and the longest exits; the top guest and host kernel functions by self and\n"
	"inclusive time from call/return flow; the first call of each guest function\n"
	"in order; guest system calls (entry_SYSCALL_64 -> __x64_sys_*); decode health.\n"
	"Times are perf time in ns; timeless recordings count instructions instead.";

static const char report_description[] =
	"Examples:\n"
	"  vmtrace report vm.data --guest ~/.debug/[kernel.kcore]/BUILDID/TIMESTAMP\n"
	"  vmtrace report vm.data --guestkallsyms GUEST/kallsyms --vcpu 1 --top 10\n"
	"  vmtrace report vm.data --guest SNAP --json --time 1234.5,1234.6\n\n"
	"Self time of a guest function leaves out its callees and the time its vCPU\n"
	"spent in the host meanwhile (VM exits); a host function's, the guest's time.\n"
	"Exit latencies: exact percentiles (nearest rank) up to 65536 exits per vCPU and\n"
	"262144 in all exit groups together, then from histograms (memory stays flat).\n"
	"See vmtrace-report(1) for every definition.\n\n"
	"Exit status: 0 ok; 1 failure; 2 usage error (also: a kernel image missing);\n"
	"3 bad input (unreadable recording or image); 22 the trace has decode errors\n"
	"(the report covers what decoded; see its health section); 23 no vCPU in the\n"
	"recording (or not the one --vcpu names).\n";

static gboolean parse(int *argc, char ***argv, ReportOptions *o, GError **error)
{
	GOptionEntry entries[] = {
		VT_CMD_IMAGE_ENTRIES(&o->img),
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &o->json, "The same sections as one JSON object", NULL },
		{ "vcpu", 0, 0, G_OPTION_ARG_INT, &o->vcpu, "Only the vCPU thread \"CPU N/KVM\" (record --source tcg: \"CPU N/TCG\")", "N" },
		{ "time", 0, 0, G_OPTION_ARG_STRING, &o->time, "Only what starts from START to END (perf time, seconds.nanoseconds; either may be empty)", "START,END" },
		{ "top", 0, 0, G_OPTION_ARG_INT, &o->top, "Rows per function table, longest exits per vCPU (default 20)", "N" },
		{ "jobs", 0, 0, G_OPTION_ARG_INT, &o->jobs, "Queues decoding at once (default: all)", "N" },
		{ "progress", 0, 0, G_OPTION_ARG_NONE, &o->progress, "A progress line on stderr even when it is no terminal (by default: on a terminal, while the output goes elsewhere)", NULL },
		G_OPTION_ENTRY_NULL
	};

	if (!vt_cli_parse("REC - where a KVM guest's time goes: vCPUs, VM exits, functions, syscalls", report_summary,
			  report_description, entries, argc, argv, error))
		return FALSE;
	return vt_cmd_take_rec(*argc, *argv, &o->rec, error);
}

static gboolean validate(ReportOptions *o, GError **error)
{
	const char *bad = vt_cmd_images_check(&o->img);

	if (!bad && o->time) {
		bad = vt_cmd_parse_time_range(o->time, &o->time_start, &o->time_end);
		o->have_time = !bad;
	}
	if (!bad && (o->top < 1 || o->top > 1000000))
		bad = "--top must be 1..1000000";
	if (!bad && (o->jobs < 0 || o->jobs > 1024))
		bad = "--jobs must be 0..1024";
	if (!bad && o->vcpu < -1)
		bad = "--vcpu must be a vCPU number";
	if (bad)
		g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, bad);
	return !bad;
}

/* ------------------------------------------------------------------ run */
static void analyze(Report *r)
{
	VtAnalyzeSummaryOptions so = { .timed = r->timed, .have_range = r->o->have_time,
				       .range_start = r->o->time_start, .range_end = r->o->time_end,
				       .longest = (guint)MIN(r->o->top, 10) };
	VtAnalyzeOptions ao = { .host = r->host, .guest = r->guest, .timed = r->timed,
				.vcpu = r->o->vcpu };
	VtAnalyzeVisitor v;
	VtProgress p;
	const VtDecodeEvent *e;

	r->sum = vt_analyze_summary_new(&so);
	v = vt_analyze_summary_visitor(r->sum);
	r->an = vt_analyze_new(&ao, &v);
	vt_progress_init(&p, "report", r->o->progress, TRUE);
	for (guint i = 0; (e = vt_decode_result_next(r->result)); i++) {
		vt_analyze_event(r->an, e);
		if (!(i & 4095))
			vt_cmd_progress(&p, r->result, FALSE);
	}
	vt_analyze_finish(r->an);
	vt_cmd_progress(&p, r->result, TRUE);
}

/* --------------------------------------------------------------- tables */
static double pct(guint64 part, guint64 whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static const char *name_or(const char *s, const char *none)
{
	return s ? s : none;
}

static void title(const char *fmt, const char *unit)
{
	printf("\n");
	printf(fmt, unit);
	printf("\n");
}

static void text_vcpus(const Report *r, const GArray *vcpus)
{
	g_autoptr(VtTable) t = vt_table_new();
	static const char *const cols[] = { "VCPU", "TID", "WALL", "GUEST", "GUEST%", "HOST", "EXITS", "P50", "P90",
					    "P99", "MAX" };

	for (guint i = 0; i < G_N_ELEMENTS(cols); i++)
		vt_table_add_column(t, cols[i], 0, i > 0, 2);
	for (guint i = 0; i < vcpus->len; i++) {
		const VtAnalyzeVcpu *v = &g_array_index(vcpus, VtAnalyzeVcpu, i);

		vt_table_add_row(t);
		vt_table_cell(t, v->vcpu < 0 ? "-" : "%d", v->vcpu);
		vt_table_cell(t, "%d", v->tid);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, v->last - v->first);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, v->guest);
		vt_table_cell(t, "%.1f", pct(v->guest, v->guest + v->host));
		vt_table_cell(t, "%" G_GUINT64_FORMAT, v->host);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, v->exits);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, v->latency.p50);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, v->latency.p90);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, v->latency.p99);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, v->latency.max);
	}
	title("vCPUs (%s; latency: VM exit to re-entry)", r->unit);
	vt_table_print(t, stdout, TRUE);
}

static void text_groups(const Report *r, const GArray *groups)
{
	g_autoptr(VtTable) t = vt_table_new();
	static const char *const cols[] = { "VCPU", "HANDLER", "FIRST-CALL", "EXITS", "P50", "P90", "P99", "MAX" };

	for (guint i = 0; i < G_N_ELEMENTS(cols); i++)
		vt_table_add_column(t, cols[i], 0, i > 2, 2);
	for (guint i = 0, shown = 0; i < groups->len && shown < (guint)r->o->top; i++) {
		const VtAnalyzeExitGroup *g = &g_array_index(groups, VtAnalyzeExitGroup, i);

		if (g->vcpu != r->o->vcpu)     /* the overall groups, or --vcpu's */
			continue;
		shown++;
		vt_table_add_row(t);
		vt_table_cell(t, g->vcpu < 0 ? "all" : "%d", g->vcpu);
		vt_table_cell(t, "%s", name_or(g->handler, "[unknown]"));
		vt_table_cell(t, "%s", name_or(g->first_call, "-"));
		vt_table_cell(t, "%" G_GUINT64_FORMAT, g->latency.count);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, g->latency.p50);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, g->latency.p90);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, g->latency.p99);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, g->latency.max);
	}
	title("VM exits by host handler and first function called (%s; the most frequent)", r->unit);
	vt_table_print(t, stdout, TRUE);
}

static void text_longest(const Report *r, const GArray *vcpus)
{
	g_autoptr(VtTable) t = vt_table_new();
	static const char *const cols[] = { "VCPU", "EXIT-AT", "LATENCY", "EXIT-IP", "HANDLER", "FIRST-CALL" };

	for (guint i = 0; i < G_N_ELEMENTS(cols); i++)
		vt_table_add_column(t, cols[i], 0, i > 0 && i < 4, 2);
	for (guint i = 0; i < vcpus->len; i++) {
		const VtAnalyzeVcpu *v = &g_array_index(vcpus, VtAnalyzeVcpu, i);

		for (guint k = 0; k < v->longest->len; k++) {
			const VtAnalyzeExit *x = &g_array_index(v->longest, VtAnalyzeExit, k);

			vt_table_add_row(t);
			vt_table_cell(t, "%d", v->vcpu);
			if (r->timed)
				vt_table_cell(t, "%" G_GUINT64_FORMAT ".%09" G_GUINT64_FORMAT, x->exit_time / 1000000000,
					      x->exit_time % 1000000000);
			else
				vt_table_cell(t, "%" G_GUINT64_FORMAT, x->exit_time);
			vt_table_cell(t, "%" G_GUINT64_FORMAT, x->latency);
			vt_table_cell(t, "%#" G_GINT64_MODIFIER "x", x->exit_ip);
			vt_table_cell(t, "%s", name_or(x->handler, "[unknown]"));
			vt_table_cell(t, "%s", name_or(x->first_call, "-"));
		}
	}
	title("Longest VM exits (%s)", r->unit);
	vt_table_print(t, stdout, TRUE);
}

static void text_functions(const Report *r, const GArray *funcs, gboolean guest)
{
	g_autoptr(VtTable) t = vt_table_new();
	static const char *const cols[] = { "SELF", "SELF%", "INCLUSIVE", "CALLS", "FUNCTION" };
	gint want = r->o->vcpu;         /* -1: the overall rows */
	guint64 total = 0;
	gint shown = 0;

	for (guint i = 0; i < G_N_ELEMENTS(cols); i++)
		vt_table_add_column(t, cols[i], 0, i < 4, 2);
	for (guint i = 0; i < funcs->len; i++) {
		const VtAnalyzeFunction *f = &g_array_index(funcs, VtAnalyzeFunction, i);

		if (f->vcpu == want && f->guest == guest)
			total += f->self;
	}
	for (guint i = 0; i < funcs->len && shown < r->o->top; i++) {
		const VtAnalyzeFunction *f = &g_array_index(funcs, VtAnalyzeFunction, i);

		if (f->vcpu != want || f->guest != guest)
			continue;
		vt_table_add_row(t);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, f->self);
		vt_table_cell(t, "%.1f", pct(f->self, total));
		vt_table_cell(t, "%" G_GUINT64_FORMAT, f->inclusive);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, f->calls);
		vt_table_cell(t, "%s", name_or(f->sym, "[unknown]"));
		shown++;
	}
	title(guest ? "Top guest kernel functions by self time (%s)" : "Top host functions by self time (%s)",
	      r->unit);
	vt_table_print(t, stdout, TRUE);
}

static void text_first_calls(const Report *r, const GArray *first)
{
	g_autoptr(VtTable) t = vt_table_new();
	gint shown = 0;

	vt_table_add_column(t, "#", 0, TRUE, 2);
	vt_table_add_column(t, r->timed ? "TIME" : "INSNS", 0, TRUE, 2);
	vt_table_add_column(t, "VCPU", 0, TRUE, 2);
	vt_table_add_column(t, "FUNCTION", 0, FALSE, 2);
	for (guint i = 0; i < first->len && shown < r->o->top; i++) {
		const VtAnalyzeFirstCall *f = &g_array_index(first, VtAnalyzeFirstCall, i);

		if (!f->guest)
			break;
		vt_table_add_row(t);
		vt_table_cell(t, "%u", f->index);
		if (r->timed)
			vt_table_cell(t, "%" G_GUINT64_FORMAT ".%09" G_GUINT64_FORMAT, f->time / 1000000000,
				      f->time % 1000000000);
		else
			vt_table_cell(t, "%" G_GUINT64_FORMAT, f->time);
		vt_table_cell(t, "%d", f->w.vcpu);
		vt_table_cell(t, "%s", name_or(f->sym, "[unknown]"));
		shown++;
	}
	title("First calls of guest functions, in order (%s of the vCPU)", r->timed ? "perf time" : "instructions");
	vt_table_print(t, stdout, TRUE);
}

static void text_syscalls(const Report *r, const GArray *sys)
{
	g_autoptr(VtTable) t = vt_table_new();
	static const char *const cols[] = { "COUNT", "COMPLETE", "TOTAL", "FIRST", "LAST", "SYSCALL" };

	for (guint i = 0; i < G_N_ELEMENTS(cols); i++)
		vt_table_add_column(t, cols[i], 0, i < 5, 2);
	for (guint i = 0; i < sys->len; i++) {
		const VtAnalyzeSyscallStats *s = &g_array_index(sys, VtAnalyzeSyscallStats, i);

		vt_table_add_row(t);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, s->count);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, s->complete);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, s->total);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, s->first);
		vt_table_cell(t, "%" G_GUINT64_FORMAT, s->last);
		vt_table_cell(t, "%s", name_or(s->name, "[unnamed]"));
	}
	title("Guest system calls (%s)", r->unit);
	vt_table_print(t, stdout, TRUE);
}

/* lost data per vCPU: one row each (-1: threads that are no vCPU) */
static void text_health_vcpus(Report *r)
{
	const GArray *vh = vt_analyze_health_vcpus(r->an);
	g_autoptr(VtTable) t = vt_table_new();
	static const char *const cols[] = { "VCPU", "BRANCHES", "ERRORS", "BREAKS", "OVF", "AUX", "TRUNCATED",
					    "COLLISION", "PARTIAL", "LOST" };

	for (guint i = 0; i < G_N_ELEMENTS(cols); i++)
		vt_table_add_column(t, cols[i], 0, TRUE, 2);
	for (guint i = 0; i < vh->len; i++) {
		const VtAnalyzeVcpuHealth *v = &g_array_index(vh, VtAnalyzeVcpuHealth, i);
		const guint64 n[] = { v->h.branches, v->h.errors, v->h.trace_breaks, v->h.overflows, v->h.aux_records,
				      v->h.aux_truncated, v->h.aux_collision, v->h.aux_partial, v->h.lost_records };

		vt_table_add_row(t);
		vt_table_cell(t, "%d", v->vcpu);
		for (guint k = 0; k < G_N_ELEMENTS(n); k++)
			vt_table_cell(t, "%" G_GUINT64_FORMAT, n[k]);
	}
	printf("  per vCPU (OVF: overflow packets, trace lost; AUX: PERF_RECORD_AUX records, of them\n"
	       "  TRUNCATED/COLLISION/PARTIAL: AUX data lost; LOST: sideband records lost):\n");
	vt_table_print(t, stdout, TRUE);
}

static void text_health(Report *r)
{
	const VtAnalyzeHealth *h = vt_analyze_health(r->an);

	printf("\nDecode health\n");
	printf("  branches %" G_GUINT64_FORMAT ", decode errors %" G_GUINT64_FORMAT ", trace breaks %" G_GUINT64_FORMAT
	       ", unresolved targets %" G_GUINT64_FORMAT ", unmatched returns %" G_GUINT64_FORMAT
	       ", branches outside vCPU threads %" G_GUINT64_FORMAT "\n",
	       h->branches, h->errors, h->trace_breaks, h->unresolved, h->unmatched_returns, h->unknown_vcpu);
	printf("  lost data: %" G_GUINT64_FORMAT " overflow packets (OVF), %" G_GUINT64_FORMAT
	       " of %" G_GUINT64_FORMAT " AUX records truncated, %" G_GUINT64_FORMAT " collided, %" G_GUINT64_FORMAT
	       " partial, %" G_GUINT64_FORMAT " sideband records lost\n",
	       h->overflows, h->aux_truncated, h->aux_records, h->aux_collision, h->aux_partial, h->lost_records);
	for (guint i = 1; i < G_N_ELEMENTS(h->error_codes); i++)
		if (h->error_codes[i])
			printf("  %" G_GUINT64_FORMAT " x %s\n", h->error_codes[i],
			       i < 31 ? pt_errstr((enum pt_error_code)i) : "other errors");
	text_health_vcpus(r);
}

static void print_text(Report *r)
{
	const GArray *vcpus = vt_analyze_summary_vcpus(r->sum);
	const GArray *funcs = vt_analyze_summary_functions(r->sum);

	printf("%s: %s recording, %u vCPU%s%s\n", r->o->rec, r->timed ? "timed" : "timeless (instruction counts)",
	       vcpus->len, vcpus->len == 1 ? "" : "s", vt_decode_result_per_cpu(r->result) ? ", per CPU" : "");
	text_vcpus(r, vcpus);
	text_groups(r, vt_analyze_summary_exit_groups(r->sum));
	text_longest(r, vcpus);
	text_functions(r, funcs, TRUE);
	text_functions(r, funcs, FALSE);
	text_first_calls(r, vt_analyze_summary_first_calls(r->sum));
	text_syscalls(r, vt_analyze_summary_syscalls(r->sum));
	text_health(r);
}

/* ----------------------------------------------------------------- JSON */
static void json_stats(VtJson *j, const char *key, const VtAnalyzeStats *s)
{
	vt_json_key(j, key);
	vt_json_begin_object(j);
	vt_json_kv_uint(j, "count", s->count);
	vt_json_kv_uint(j, "total", s->total);
	vt_json_kv_uint(j, "min", s->min);
	vt_json_kv_uint(j, "p50", s->p50);
	vt_json_kv_uint(j, "p90", s->p90);
	vt_json_kv_uint(j, "p99", s->p99);
	vt_json_kv_uint(j, "max", s->max);
	vt_json_end_object(j);
}

static void json_exit(VtJson *j, const VtAnalyzeExit *x)
{
	vt_json_begin_object(j);
	vt_json_kv_uint(j, "exit_time", x->exit_time);
	vt_json_kv_uint(j, "entry_time", x->entry_time);
	vt_json_kv_uint(j, "latency", x->latency);
	vt_json_kv_uint(j, "host_insns", x->host_insns);
	vt_json_kv_hex(j, "exit_ip", x->exit_ip);
	vt_json_kv_hex(j, "handler_ip", x->handler_ip);
	vt_json_kv_string(j, "handler", x->handler);
	vt_json_kv_string(j, "first_call", x->first_call);
	vt_json_end_object(j);
}

static void json_vcpus(VtJson *j, const GArray *vcpus)
{
	vt_json_key(j, "vcpus");
	vt_json_begin_array(j);
	for (guint i = 0; i < vcpus->len; i++) {
		const VtAnalyzeVcpu *v = &g_array_index(vcpus, VtAnalyzeVcpu, i);

		vt_json_begin_object(j);
		vt_json_kv_int(j, "vcpu", v->vcpu);
		vt_json_kv_int(j, "tid", v->tid);
		vt_json_kv_uint(j, "first", v->first);
		vt_json_kv_uint(j, "wall", v->last - v->first);
		vt_json_kv_uint(j, "guest", v->guest);
		vt_json_kv_uint(j, "host", v->host);
		vt_json_kv_uint(j, "guest_insns", v->guest_insns);
		vt_json_kv_uint(j, "host_insns", v->host_insns);
		vt_json_kv_uint(j, "exits", v->exits);
		json_stats(j, "latency", &v->latency);
		vt_json_key(j, "longest");
		vt_json_begin_array(j);
		for (guint k = 0; k < v->longest->len; k++)
			json_exit(j, &g_array_index(v->longest, VtAnalyzeExit, k));
		vt_json_end_array(j);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
}

static void json_groups(VtJson *j, const GArray *groups)
{
	vt_json_key(j, "exit_handlers");
	vt_json_begin_array(j);
	for (guint i = 0; i < groups->len; i++) {
		const VtAnalyzeExitGroup *g = &g_array_index(groups, VtAnalyzeExitGroup, i);

		vt_json_begin_object(j);
		if (g->vcpu >= 0)
			vt_json_kv_int(j, "vcpu", g->vcpu);
		else
			vt_json_kv_null(j, "vcpu");
		vt_json_kv_string(j, "handler", g->handler);
		vt_json_kv_string(j, "first_call", g->first_call);
		json_stats(j, "latency", &g->latency);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
}

/* The top N of each (vCPU, machine) - the array is sorted that way. */
static void json_functions(VtJson *j, const GArray *funcs, gint top)
{
	gint shown = 0;

	vt_json_key(j, "functions");
	vt_json_begin_array(j);
	for (guint i = 0; i < funcs->len; i++) {
		const VtAnalyzeFunction *f = &g_array_index(funcs, VtAnalyzeFunction, i);
		const VtAnalyzeFunction *p = i ? &g_array_index(funcs, VtAnalyzeFunction, i - 1) : NULL;

		if (!p || p->vcpu != f->vcpu || p->guest != f->guest)
			shown = 0;
		if (shown++ >= top)
			continue;
		vt_json_begin_object(j);
		if (f->vcpu >= 0)
			vt_json_kv_int(j, "vcpu", f->vcpu);
		else
			vt_json_kv_null(j, "vcpu");
		vt_json_kv_bool(j, "guest", f->guest);
		vt_json_kv_string(j, "sym", f->sym);
		vt_json_kv_hex(j, "func", f->func);
		vt_json_kv_uint(j, "calls", f->calls);
		vt_json_kv_uint(j, "self", f->self);
		vt_json_kv_uint(j, "inclusive", f->inclusive);
		vt_json_kv_uint(j, "self_insns", f->self_insns);
		vt_json_kv_uint(j, "insns", f->insns);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
}

static void json_first_calls(VtJson *j, const GArray *first)
{
	vt_json_key(j, "first_calls");
	vt_json_begin_array(j);
	for (guint i = 0; i < first->len; i++) {
		const VtAnalyzeFirstCall *f = &g_array_index(first, VtAnalyzeFirstCall, i);

		vt_json_begin_object(j);
		vt_json_kv_bool(j, "guest", f->guest);
		vt_json_kv_uint(j, "index", f->index);
		vt_json_kv_uint(j, "time", f->time);
		vt_json_kv_int(j, "vcpu", f->w.vcpu);
		vt_json_kv_int(j, "tid", f->w.tid);
		vt_json_kv_string(j, "sym", f->sym);
		vt_json_kv_hex(j, "func", f->func);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
}

static void json_syscalls(VtJson *j, const GArray *sys)
{
	vt_json_key(j, "syscalls");
	vt_json_begin_array(j);
	for (guint i = 0; i < sys->len; i++) {
		const VtAnalyzeSyscallStats *s = &g_array_index(sys, VtAnalyzeSyscallStats, i);

		vt_json_begin_object(j);
		vt_json_kv_string(j, "name", s->name);
		vt_json_kv_uint(j, "count", s->count);
		vt_json_kv_uint(j, "complete", s->complete);
		vt_json_kv_uint(j, "total", s->total);
		vt_json_kv_uint(j, "first", s->first);
		vt_json_kv_uint(j, "last", s->last);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
}

static void json_health_fields(VtJson *j, const VtAnalyzeHealth *h)
{
	vt_json_kv_uint(j, "branches", h->branches);
	vt_json_kv_uint(j, "errors", h->errors);
	vt_json_key(j, "error_codes");
	vt_json_begin_object(j);
	for (guint i = 1; i < G_N_ELEMENTS(h->error_codes); i++)
		if (h->error_codes[i])
			vt_json_kv_uint(j, i < 31 ? pt_errstr((enum pt_error_code)i) : "other", h->error_codes[i]);
	vt_json_end_object(j);
	vt_json_kv_uint(j, "trace_breaks", h->trace_breaks);
	vt_json_kv_uint(j, "unresolved", h->unresolved);
	vt_json_kv_uint(j, "unmatched_returns", h->unmatched_returns);
	vt_json_kv_uint(j, "unknown_vcpu", h->unknown_vcpu);
	vt_json_kv_uint(j, "overflows", h->overflows);
	vt_json_kv_uint(j, "aux_records", h->aux_records);
	vt_json_kv_uint(j, "aux_truncated", h->aux_truncated);
	vt_json_kv_uint(j, "aux_collision", h->aux_collision);
	vt_json_kv_uint(j, "aux_partial", h->aux_partial);
	vt_json_kv_uint(j, "lost_records", h->lost_records);
}

static void json_health(VtJson *j, VtAnalyze *an)
{
	const GArray *vh = vt_analyze_health_vcpus(an);

	vt_json_key(j, "health");
	vt_json_begin_object(j);
	json_health_fields(j, vt_analyze_health(an));
	vt_json_key(j, "vcpus");
	vt_json_begin_array(j);
	for (guint i = 0; i < vh->len; i++) {
		const VtAnalyzeVcpuHealth *v = &g_array_index(vh, VtAnalyzeVcpuHealth, i);

		vt_json_begin_object(j);
		vt_json_kv_int(j, "vcpu", v->vcpu);
		json_health_fields(j, &v->h);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
	vt_json_end_object(j);
}

static void print_json(Report *r)
{
	g_autoptr(VtJson) j = vt_json_new(stdout);

	vt_json_begin_object(j);
	vt_json_kv_string(j, "recording", r->o->rec);
	vt_json_kv_bool(j, "timed", r->timed);
	vt_json_kv_bool(j, "per_cpu", vt_decode_result_per_cpu(r->result));
	vt_json_kv_string(j, "unit", r->unit);
	json_vcpus(j, vt_analyze_summary_vcpus(r->sum));
	json_groups(j, vt_analyze_summary_exit_groups(r->sum));
	json_functions(j, vt_analyze_summary_functions(r->sum), r->o->top);
	json_first_calls(j, vt_analyze_summary_first_calls(r->sum));
	json_syscalls(j, vt_analyze_summary_syscalls(r->sum));
	json_health(j, r->an);
	vt_json_end_object(j);
}

/* -------------------------------------------------------------- command */
static gboolean has_vcpu(Report *r)
{
	const GArray *v = vt_analyze_summary_vcpus(r->sum);

	for (guint i = 0; i < v->len; i++)
		if (g_array_index(v, VtAnalyzeVcpu, i).vcpu >= 0)
			return TRUE;
	return FALSE;
}

static int open_recording(Report *r, GError **err)
{
	const ReportOptions *o = r->o;
	gboolean usage = FALSE;

	if (!vt_cmd_images_open(&o->img, o->rec, &r->host, &r->guest, &usage, err))
		return usage ? VT_EXIT_USAGE : VT_EXIT_BAD_INPUT;
	/* the code as vmtrace script reads it (the walker's own block tables;
	 * libipt's sections and block caches, once asked for here, only ever
	 * served VMTRACE_DECODER=blk) */
	/* flow_end: the instructions after a queue's last branch that its TNT
	 * bits prove ran count too */
	r->result = vt_decode_recording(&(VtDecodeOptions){ o->rec, r->host, r->guest, (guint)o->jobs, NULL, TRUE }, err);
	if (!r->result)
		return (*err)->domain == VT_DECODE_ERROR && (*err)->code == VT_DECODE_ERROR_FAILED ? VT_EXIT_FAILURE
												      : VT_EXIT_BAD_INPUT;
	vt_cmd_images_warn("report", o->rec, r->host, r->guest);
	r->timed = vt_decode_result_timed(r->result);
	r->unit = r->timed ? "ns" : "insns";
	if (o->have_time && !r->timed) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    "--time: %s is timeless (recorded with tsc=0), it has no times", o->rec);
		return VT_EXIT_USAGE;
	}
	return VT_EXIT_OK;
}

static int run(Report *r)
{
	const ReportOptions *o = r->o;
	guint64 errors;
	g_autoptr(GError) err = NULL;

	setvbuf(stdout, NULL, _IOFBF, 1 << 20);
	analyze(r);
	if (!vt_analyze_read_lost(r->an, o->rec, &err)) {
		vt_err("report", "%s", err->message);
		return VT_EXIT_BAD_INPUT;
	}
	errors = vt_analyze_health(r->an)->errors;
	if (!has_vcpu(r)) {
		if (o->vcpu >= 0)
			vt_err("report", "%s: no vCPU thread \"CPU %d/KVM\" in the recording", o->rec, o->vcpu);
		else
			vt_err("report", "%s: no vCPU thread (\"CPU n/KVM\", or \"CPU n/TCG\" from record --source tcg) in the recording", o->rec);
		return VT_EXIT_REPORT_NO_VCPU;
	}
	if (o->json)
		print_json(r);
	else
		print_text(r);
	if (!errors)
		return VT_EXIT_OK;
	/* a warning: under --json the report is the one document on stdout */
	vt_warn("report", "%s: %" G_GUINT64_FORMAT " decode errors (decoding resumed at the next PSB each time; "
	       "the report covers what decoded)", o->rec, errors);
	return VT_EXIT_REPORT_ERRORS;
}

static void options_clear(ReportOptions *o)
{
	g_free(o->rec);
	vt_cmd_images_clear(&o->img);
	g_free(o->time);
}

int cmd_report(int argc, char **argv)
{
	ReportOptions o = { .vcpu = -1, .top = DEFAULT_TOP };
	Report r = { .o = &o };
	g_autoptr(GError) err = NULL;
	int rc = VT_EXIT_USAGE;

	if (!parse(&argc, &argv, &o, &err) || !validate(&o, &err)) {
		vt_err("report", "%s (see vmtrace report --help)", err->message);
		goto out;
	}
	vt_cli_set_json(o.json);
	rc = open_recording(&r, &err);
	if (rc != VT_EXIT_OK) {
		vt_err("report", "%s", err->message);
		goto out;
	}
	rc = vt_cli_close_stdout("report", run(&r));
out:
	vt_analyze_free(r.an);
	vt_analyze_summary_free(r.sum);
	vt_decode_result_free(r.result);
	vt_decode_image_free(r.host);
	vt_decode_image_free(r.guest);
	options_clear(&o);
	return rc;
}
