/* script.c - `vmtrace script`: the branches of a host Intel PT recording of
 * KVM guests, host and guest code decoded (src/decode), printed as
 * `perf script --itrace=be -F comm,tid,cpu,time,ip,sym,symoff,dso,addr`
 * prints them, as its --call-trace and --call-ret-trace print calls, or as
 * JSON. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <intel-pt.h>

#include "src/cli/json.h"
#include "src/cmd/cmd.h"
#include "src/decode/decode.h"

typedef struct {
	char *rec;
	char *guest_dir, *guestkallsyms;   /* guest image: a snapshot dir, or perf's kallsyms path */
	char *kcore, *kallsyms;            /* host image (default REC/kcore_dir) */
	gboolean json, host_only, guest_only;
	gboolean call_trace, call_ret_trace, insn_trace;
	gint vcpu, tid, jobs;
} ScriptOptions;

typedef struct {
	VtDecodeImage *host, *guest;
	VtDecodeResult *result;
	VtJson *json;
	const ScriptOptions *o;
	VtDecodeStacks *stacks;            /* --call-trace, --call-ret-trace */
	guint32 show_flags;                /* their branches: perf's flags shown */
	int spacing;                       /* perf's callindent column, as it goes */
	VtDecodeDisasm *disasm[2];         /* --insn-trace: host, guest */
	GArray *walk;                      /* --insn-trace: per queue, where its code runs on (Walk) */
} Script;

/* --insn-trace: a queue's flow between branches runs on from `ip`. */
typedef struct {
	guint64 ip;
	gboolean guest, valid;
} Walk;

/* ---------------------------------------------------------------- parse */
static gboolean parse(int *argc, char ***argv, ScriptOptions *o, GError **error)
{
	GOptionEntry entries[] = {
		{ "guest", 'g', 0, G_OPTION_ARG_FILENAME, &o->guest_dir, "Guest kernel: a `vmtrace guest fetch` snapshot directory (kcore + kallsyms)", "DIR" },
		{ "guestkallsyms", 0, 0, G_OPTION_ARG_FILENAME, &o->guestkallsyms, "Guest kernel as perf names it: FILE, with kcore next to it", "FILE" },
		{ "kcore", 0, 0, G_OPTION_ARG_FILENAME, &o->kcore, "Host kernel code (default: REC/kcore_dir/kcore); needs --kallsyms", "FILE" },
		{ "kallsyms", 0, 0, G_OPTION_ARG_FILENAME, &o->kallsyms, "Host kernel symbols (default: REC/kcore_dir/kallsyms)", "FILE" },
		{ "call-trace", 0, 0, G_OPTION_ARG_NONE, &o->call_trace, "Calls with their call depth (perf script --call-trace)", NULL },
		{ "call-ret-trace", 0, 0, G_OPTION_ARG_NONE, &o->call_ret_trace, "Calls and returns with their call depth and flags (perf script --call-ret-trace)", NULL },
		{ "insn-trace", 0, 0, G_OPTION_ARG_NONE, &o->insn_trace, "Every instruction, its bytes and its disassembly (perf script --insn-trace)", NULL },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &o->json, "One JSON object per branch (and per decode error)", NULL },
		{ "host-only", 0, 0, G_OPTION_ARG_NONE, &o->host_only, "Only branches in host code", NULL },
		{ "guest-only", 0, 0, G_OPTION_ARG_NONE, &o->guest_only, "Only branches in guest code", NULL },
		{ "vcpu", 0, 0, G_OPTION_ARG_INT, &o->vcpu, "Only the vCPU thread \"CPU N/KVM\"", "N" },
		{ "tid", 0, 0, G_OPTION_ARG_INT, &o->tid, "Only thread TID", "TID" },
		{ "jobs", 0, 0, G_OPTION_ARG_INT, &o->jobs, "Decoding threads (default: one per CPU)", "N" },
		G_OPTION_ENTRY_NULL
	};
	g_autoptr(GOptionContext) ctx = g_option_context_new("REC - the branches of a host Intel PT recording of KVM guests");

	g_option_context_set_summary(ctx,
		"Decodes host and guest kernel code (libipt's block decoder; host and guest\n"
		"images swapped at every VM entry and exit) and prints every branch the way\n"
		"`perf script --itrace=be -F comm,tid,cpu,time,ip,sym,symoff,dso,addr\n"
		"--guestkallsyms GUEST/kallsyms` prints it: VM entries and exits as two lines\n"
		"each, guest lines with the comm \":TID\" and [guest.kernel.kallsyms].  REC is a\n"
		"perf.data file or directory; the host kernel comes from REC/kcore_dir.");
	g_option_context_set_description(ctx,
		"Examples:\n"
		"  vmtrace script vm.data --guest ~/.debug/[kernel.kcore]/BUILDID/TIMESTAMP\n"
		"  vmtrace script vm.data --guestkallsyms GUEST/kallsyms --guest-only --vcpu 1\n"
		"  vmtrace script vm.data --guest SNAP --json\n\n"
		"--call-trace and --call-ret-trace print calls (and returns) the way perf script\n"
		"does with those options: flags, call depth (perf's thread stack) and padding;\n"
		"perf's psb/cbr power-event lines are left out.  --insn-trace prints every\n"
		"instruction as perf script --insn-trace does, then its AT&T disassembly.\n\n"
		"Decode errors print as perf's --itrace=e lines (libipt's codes and messages);\n"
		"decoding resumes at the next PSB.  Timed recordings come in time order over\n"
		"all queues (correct guest time first: vmtrace correlate), timeless ones queue\n"
		"by queue in trace order.\n\n"
		"Exit status: 0 ok; 1 failure; 2 usage error (also: a kernel image missing);\n"
		"3 bad input (unreadable recording or image, or decode errors in the trace).\n");
	g_option_context_add_main_entries(ctx, entries, NULL);
	if (!g_option_context_parse(ctx, argc, argv, error))
		return FALSE;
	if (*argc != 2) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, *argc < 2 ? "REC (a recording) is required"
			    : "unexpected argument '%s'", (*argv)[MIN(*argc - 1, 2)]);
		return FALSE;
	}
	o->rec = g_strdup((*argv)[1]);
	return TRUE;
}

static gboolean validate(const ScriptOptions *o, GError **error)
{
	const char *bad = NULL;

	if (o->host_only && o->guest_only)
		bad = "--host-only and --guest-only exclude each other";
	else if (o->guest_dir && o->guestkallsyms)
		bad = "--guest and --guestkallsyms exclude each other";
	else if (!o->kcore != !o->kallsyms)
		bad = "--kcore and --kallsyms go together";
	else if (o->call_trace + o->call_ret_trace + o->insn_trace > 1)
		bad = "--call-trace, --call-ret-trace and --insn-trace exclude each other";
	else if (o->insn_trace && o->json)
		bad = "--insn-trace prints text only (no --json)";
	else if (o->jobs < 0 || o->jobs > 1024)
		bad = "--jobs must be 0..1024";
	if (bad)
		g_set_error_literal(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, bad);
	return !bad;
}

/* ----------------------------------------------------------------- open */
/* The host image: --kcore/--kallsyms or REC/kcore_dir; the guest image:
 * --guest or --guestkallsyms.  *usage: the image was not given. */
static gboolean open_images(Script *s, gboolean *usage, GError **error)
{
	const ScriptOptions *o = s->o;
	g_autofree char *kcore_dir = vt_decode_recording_kcore_dir(o->rec);
	g_autofree char *gdir = o->guest_dir ? g_strdup(o->guest_dir)
				: o->guestkallsyms ? g_path_get_dirname(o->guestkallsyms) : NULL;

	*usage = TRUE;
	if (!o->kcore && !kcore_dir) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE,
			    "%s has no kcore_dir/ with the host kernel's code (`vmtrace record --kcore` writes it); "
			    "give --kcore FILE --kallsyms FILE", o->rec);
		return FALSE;
	}
	if (!gdir) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE,
			    "no guest kernel image: give --guest DIR (`vmtrace guest fetch` prints it) or "
			    "--guestkallsyms FILE (with kcore beside it)");
		return FALSE;
	}
	{
		g_autofree char *gkcore = g_build_filename(gdir, "kcore", NULL);

		if (!g_file_test(gkcore, G_FILE_TEST_EXISTS)) {
			g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE,
				    "%s is missing: the guest kernel's code (`vmtrace guest fetch` copies it, unless "
				    "given --no-kcore)", gkcore);
			return FALSE;
		}
	}
	*usage = FALSE;
	s->host = o->kcore ? vt_decode_image_load(o->kcore, o->kallsyms, "host", error)
			   : vt_decode_image_load_dir(kcore_dir, "host", error);
	if (!s->host)
		return FALSE;
	if (o->guestkallsyms) {
		g_autofree char *kcore = g_build_filename(gdir, "kcore", NULL);

		s->guest = vt_decode_image_load(kcore, o->guestkallsyms, "guest", error);
	} else {
		s->guest = vt_decode_image_load_dir(gdir, "guest", error);
	}
	return s->guest != NULL;
}

/* -------------------------------------------------------------- report */
/* One side of a branch as perf prints it: "ADDR SYM+0xOFF (DSO)". */
static void side(GString *l, const Script *s, guint64 addr, gboolean guest)
{
	const VtDecodeImage *img = guest ? s->guest : s->host;
	const char *sym = NULL;
	guint64 off = 0;
	gsize avail;

	g_string_append_printf(l, "%16" G_GINT64_MODIFIER "x", addr);
	if (addr && vt_decode_image_code(img, addr, &avail))
		sym = vt_decode_image_symbol(img, addr, &off);
	if (sym)
		g_string_append_printf(l, " %s+0x%" G_GINT64_MODIFIER "x (%s)", sym, off,
				       guest ? "[guest.kernel.kallsyms]" : "[kernel.kallsyms]");
	else
		g_string_append(l, " [unknown] ([unknown])");
}

static void line_start(GString *l, const Script *s, const VtDecodeEvent *e, gboolean guest)
{
	char name[24];

	/* perf names a guest thread it has no sideband for ":TID" */
	g_snprintf(name, sizeof(name), ":%d", e->tid);
	g_string_printf(l, "%16s %5d [%03d] ", guest || !e->comm ? name : e->comm, e->tid, e->cpu);
	if (vt_decode_result_timed(s->result))
		g_string_append_printf(l, "%5" G_GUINT64_FORMAT ".%06" G_GUINT64_FORMAT ": ", e->time / 1000000000,
				       e->time % 1000000000 / 1000);
	g_string_append_c(l, ' ');
}

static gboolean wanted(const Script *s, gboolean guest)
{
	return !(s->o->host_only && guest) && !(s->o->guest_only && !guest);
}

/* A branch is one line - VM entries and exits two, each half in its own
 * machine, as perf prints them. */
static void print_text(const Script *s, const VtDecodeEvent *e, GString *l)
{
	const VtBranch *b = &e->b;
	gboolean split = b->kind == VT_BRANCH_VMENTRY || b->kind == VT_BRANCH_VMEXIT;

	if (b->kind == VT_BRANCH_ERROR) {
		g_string_printf(l, " instruction trace error type 1 time ");
		if (vt_decode_result_timed(s->result))
			g_string_append_printf(l, "%" G_GUINT64_FORMAT ".%09" G_GUINT64_FORMAT, e->time / 1000000000,
					       e->time % 1000000000);
		else
			g_string_append(l, "0");
		g_string_append_printf(l, " cpu %d pid %d tid %d ip %#" G_GINT64_MODIFIER "x code %d: %s", e->cpu,
				       e->pid, e->tid, b->from, b->code, pt_errstr(b->code));
		puts(l->str);
		return;
	}
	if (split && wanted(s, b->from_guest)) {
		line_start(l, s, e, b->from_guest);
		side(l, s, b->from, b->from_guest);
		g_string_append(l, " => ");
		side(l, s, 0, b->from_guest);
		puts(l->str);
	}
	if (split) {
		if (!wanted(s, b->to_guest))
			return;
		line_start(l, s, e, b->to_guest);
		side(l, s, 0, b->to_guest);
	} else {
		gboolean guest = b->from ? b->from_guest : b->to_guest;

		if (!wanted(s, guest))
			return;
		line_start(l, s, e, guest);
		side(l, s, b->from, b->from_guest);
	}
	g_string_append(l, " => ");
	side(l, s, b->to, b->to_guest);
	puts(l->str);
}

/* ----------------------------------------------------- call traces */
/* perf's line start for call traces: nanosecond times, the CPU only in
 * per-CPU recordings, the flags with --call-ret-trace. */
static void call_start(GString *l, const Script *s, const VtDecodeEvent *e, gboolean guest, guint32 flags)
{
	char name[24];

	g_snprintf(name, sizeof(name), ":%d", e->tid);
	g_string_printf(l, "%16s %5d ", guest || !e->comm ? name : e->comm, e->tid);
	if (vt_decode_result_per_cpu(s->result))
		g_string_append_printf(l, "[%03d] ", e->cpu);
	if (vt_decode_result_timed(s->result))
		g_string_append_printf(l, "%5" G_GUINT64_FORMAT ".%09" G_GUINT64_FORMAT ": ", e->time / 1000000000,
				       e->time % 1000000000);
	if (s->o->call_ret_trace) {
		char f[32];

		vt_decode_perf_flags_name(flags, f);
		g_string_append_printf(l, "  %-21s ", f);
	}
}

/* perf's callindent field for one sample (ip => addr in one machine):
 * "(DSO)\t", the depth's indentation, the called function (calls, trace
 * begins) or the returning one (returns, trace ends), padded to a column
 * that follows the longest recent name. */
static void call_indent(GString *l, Script *s, guint64 ip, guint64 addr, gboolean guest, guint32 flags, guint depth)
{
	const VtDecodeImage *img = guest ? s->guest : s->host;
	guint64 at = (flags & (VT_PERF_FLAG_CALL | VT_PERF_FLAG_TRACE_BEGIN)) ? addr
		     : (flags & (VT_PERF_FLAG_RETURN | VT_PERF_FLAG_TRACE_END)) ? ip : 0;
	const char *dso = guest ? "[guest.kernel.kallsyms]" : "[kernel.kallsyms]";
	const char *sym = NULL;
	guint64 off;
	gsize avail, start;
	int len = 0;

	if (!ip || !vt_decode_image_code(img, ip, &avail))
		dso = "[unknown]";
	g_string_append_printf(l, s->o->call_trace ? "(%-50s)\t" : "(%s)\t", dso);
	start = l->len;
	if (at && vt_decode_image_code(img, at, &avail))
		sym = vt_decode_image_symbol(img, at, &off);
	if (sym)
		g_string_append_printf(l, "%*s%s", (int)depth * 4, "", sym);
	else if (at)
		g_string_append_printf(l, "%*s%16" G_GINT64_MODIFIER "x", (int)depth * 4, "", at);
	len = (int)(l->len - start);
	if (len > s->spacing || (len && len < s->spacing - 52))
		s->spacing = (len + 4 + 31) / 32 * 32;
	if (len < s->spacing)
		g_string_append_printf(l, "%*s", s->spacing - len, "");
}

/* One half of a branch (a VM entry or exit is two, each in its machine). */
static void call_half(Script *s, const VtDecodeEvent *e, GString *l, guint64 ip, guint64 addr, gboolean guest,
		      guint32 flags)
{
	/* perf keeps a stack for the host thread only: guest lines show none */
	guint depth = guest ? 0 : vt_decode_stacks_depth(s->stacks, e->tid, e->cpu, &e->b);

	if (!wanted(s, guest))
		return;
	call_start(l, s, e, guest, flags);
	call_indent(l, s, ip, addr, guest, flags, depth);
	puts(l->str);
}

static void print_call(Script *s, const VtDecodeEvent *e, GString *l)
{
	const VtBranch *b = &e->b;
	guint32 flags = vt_decode_perf_flags(b);

	if (b->kind == VT_BRANCH_ERROR) {
		print_text(s, e, l);
		return;
	}
	if (b->kind == VT_BRANCH_VMENTRY || b->kind == VT_BRANCH_VMEXIT) {
		call_half(s, e, l, b->from, 0, b->from_guest, flags);
		call_half(s, e, l, 0, b->to, b->to_guest, flags);
	} else {
		call_half(s, e, l, b->from, b->to, b->from ? b->from_guest : b->to_guest, flags);
	}
}

/* ---------------------------------------------------- instruction trace */
/* Instructions run straight on between two branches: from where the
 * queue's last branch went up to the next branch's source (a synchronous
 * branch's instruction runs; the IP of an interrupt, VM exit or
 * asynchronous trace end does not). */
#define MAX_STRAIGHT 100000

static void insn_line(Script *s, const VtDecodeEvent *e, GString *l, const VtDisasmInsn *in, gboolean guest)
{
	const VtDecodeImage *img = guest ? s->guest : s->host;
	guint64 off = 0;
	const char *sym = vt_decode_image_symbol(img, in->ip, &off);
	char name[24];

	g_snprintf(name, sizeof(name), ":%d", e->tid);
	g_string_printf(l, "%16s %5d ", guest || !e->comm ? name : e->comm, e->tid);
	if (vt_decode_result_per_cpu(s->result))
		g_string_append_printf(l, "[%03d] ", e->cpu);
	if (vt_decode_result_timed(s->result))
		g_string_append_printf(l, "%5" G_GUINT64_FORMAT ".%09" G_GUINT64_FORMAT ": ", e->time / 1000000000,
				       e->time % 1000000000);
	g_string_append_printf(l, " %16" G_GINT64_MODIFIER "x ", in->ip);
	if (sym)
		g_string_append_printf(l, "%s+0x%" G_GINT64_MODIFIER "x (%s)", sym, off,
				       guest ? "[guest.kernel.kallsyms]" : "[kernel.kallsyms]");
	else
		g_string_append(l, "[unknown] ([unknown])");
	g_string_append(l, " insn:");
	for (guint i = 0; i < in->len; i++)
		g_string_append_printf(l, " %02x", in->bytes[i]);
	g_string_append_printf(l, "\t\t%s", in->text);
	puts(l->str);
}

static void insn_walk(Script *s, const VtDecodeEvent *e, GString *l, const Walk *w, guint64 to, gboolean inclusive)
{
	VtDecodeDisasm *d = s->disasm[w->guest ? 1 : 0];
	guint64 ip = w->ip;

	for (guint n = 0; n < MAX_STRAIGHT && (ip < to || (inclusive && ip == to)); n++) {
		const VtDisasmInsn *in = vt_decode_disasm_at(d, ip);

		if (!in->len)
			return;
		if (wanted(s, w->guest))
			insn_line(s, e, l, in, w->guest);
		ip += in->len;
	}
}

static void print_insns(Script *s, const VtDecodeEvent *e, GString *l)
{
	const VtBranch *b = &e->b;
	Walk *w;

	if (s->walk->len <= e->queue)
		g_array_set_size(s->walk, e->queue + 1);
	w = &g_array_index(s->walk, Walk, e->queue);
	if (b->kind == VT_BRANCH_ERROR) {
		print_text(s, e, l);
		w->valid = FALSE;
		return;
	}
	if (!w->valid && b->from && !b->async) {
		/* the first branch after a PSB: the flow from the PSB's IP is
		 * not known here, the branch's instruction is */
		w->ip = b->from;
		w->guest = b->from_guest;
		w->valid = TRUE;
	}
	if (w->valid && b->from && b->from_guest == w->guest)
		insn_walk(s, e, l, w, b->from, !b->async);
	w->valid = b->to != 0;
	w->ip = b->to;
	w->guest = b->to_guest;
}

static void json_side(VtJson *j, const Script *s, const char *key, guint64 addr, gboolean guest)
{
	const VtDecodeImage *img = guest ? s->guest : s->host;
	const char *sym = NULL;
	guint64 off = 0;
	gsize avail;

	vt_json_key(j, key);
	vt_json_begin_object(j);
	vt_json_kv_hex(j, "ip", addr);
	vt_json_kv_bool(j, "guest", guest);
	if (addr && vt_decode_image_code(img, addr, &avail))
		sym = vt_decode_image_symbol(img, addr, &off);
	if (sym) {
		vt_json_kv_string(j, "sym", sym);
		vt_json_kv_uint(j, "symoff", off);
	}
	vt_json_end_object(j);
}

static void print_json(const Script *s, const VtDecodeEvent *e)
{
	VtJson *j = s->json;
	const VtBranch *b = &e->b;

	vt_json_begin_object(j);
	vt_json_kv_string(j, "kind", vt_branch_kind_name(b->kind));
	if (vt_decode_result_timed(s->result))
		vt_json_kv_uint(j, "time", e->time);
	vt_json_kv_int(j, "cpu", e->cpu);
	vt_json_kv_int(j, "pid", e->pid);
	vt_json_kv_int(j, "tid", e->tid);
	vt_json_kv_string(j, "comm", e->comm);
	if (e->vcpu >= 0)
		vt_json_kv_int(j, "vcpu", e->vcpu);
	if (b->vmcs)
		vt_json_kv_hex(j, "vmcs", b->vmcs);
	if (s->stacks && b->kind != VT_BRANCH_ERROR)
		vt_json_kv_uint(j, "depth", vt_decode_stacks_depth(s->stacks, e->tid, e->cpu, b));
	if (b->kind == VT_BRANCH_ERROR) {
		vt_json_kv_hex(j, "ip", b->from);
		vt_json_kv_int(j, "code", b->code);
		vt_json_kv_string(j, "message", pt_errstr(b->code));
	} else {
		json_side(j, s, "from", b->from, b->from_guest);
		json_side(j, s, "to", b->to, b->to_guest);
	}
	vt_json_kv_hex(j, "aux_offset", b->offset);
	vt_json_end_object(j);
}

static gboolean selected(const Script *s, const VtDecodeEvent *e)
{
	const VtBranch *b = &e->b;

	if (s->o->tid >= 0 && e->tid != s->o->tid)
		return FALSE;
	if (s->o->vcpu >= 0 && e->vcpu != s->o->vcpu)
		return FALSE;
	if (s->o->json && b->kind != VT_BRANCH_ERROR)
		return wanted(s, b->from_guest) || wanted(s, b->to_guest);
	return TRUE;
}

static void report(Script *s)
{
	g_autoptr(GString) l = g_string_new(NULL);
	gsize n = vt_decode_result_len(s->result);

	if (s->o->json)
		s->json = vt_json_new(stdout);
	if (s->o->call_trace || s->o->call_ret_trace)
		s->stacks = vt_decode_stacks_new();
	if (s->o->insn_trace) {
		s->walk = g_array_new(FALSE, TRUE, sizeof(Walk));
		s->disasm[0] = vt_decode_disasm_new(s->host);
		s->disasm[1] = vt_decode_disasm_new(s->guest);
	}
	s->show_flags = VT_PERF_FLAG_CALL | VT_PERF_FLAG_ASYNC | VT_PERF_FLAG_TRACE_END;
	if (s->o->call_ret_trace)
		s->show_flags |= VT_PERF_FLAG_RETURN | VT_PERF_FLAG_TRACE_BEGIN;
	for (gsize i = 0; i < n; i++) {
		const VtDecodeEvent *e = vt_decode_result_event(s->result, i);

		if (s->stacks) {
			/* every branch moves perf's stack; only some are shown */
			vt_decode_stacks_event(s->stacks, e->tid, e->cpu, e->queue + 1, &e->b);
			if (e->b.kind != VT_BRANCH_ERROR && !(vt_decode_perf_flags(&e->b) & s->show_flags))
				continue;
		}
		if (!selected(s, e))
			continue;
		if (s->json)
			print_json(s, e);
		else if (s->stacks)
			print_call(s, e, l);
		else if (s->walk)
			print_insns(s, e, l);
		else
			print_text(s, e, l);
	}
	if (s->json)
		vt_json_free(s->json);
	s->json = NULL;
	vt_decode_stacks_free(s->stacks);
	s->stacks = NULL;
	if (s->walk)
		g_array_free(s->walk, TRUE);
	s->walk = NULL;
	for (int i = 0; i < 2; i++) {
		vt_decode_disasm_free(s->disasm[i]);
		s->disasm[i] = NULL;
	}
}

/* ------------------------------------------------------------- command */
static void options_clear(ScriptOptions *o)
{
	g_free(o->rec);
	g_free(o->guest_dir);
	g_free(o->guestkallsyms);
	g_free(o->kcore);
	g_free(o->kallsyms);
}

int cmd_script(int argc, char **argv)
{
	ScriptOptions o = { .vcpu = -1, .tid = -1 };
	Script s = { .o = &o };
	g_autoptr(GError) err = NULL;
	gboolean usage = FALSE;
	int rc = VT_EXIT_USAGE;

	if (!parse(&argc, &argv, &o, &err) || !validate(&o, &err)) {
		vt_err("script", "%s (see vmtrace script --help)", err->message);
		goto out;
	}
	vt_cli_set_json(o.json);
	if (!open_images(&s, &usage, &err)) {
		vt_err("script", "%s", err->message);
		rc = usage ? VT_EXIT_USAGE : VT_EXIT_BAD_INPUT;
		goto out;
	}
	s.result = vt_decode_recording(&(VtDecodeOptions){ o.rec, s.host, s.guest, (guint)o.jobs }, &err);
	if (!s.result) {
		vt_err("script", "%s", err->message);
		rc = err->domain == VT_DECODE_ERROR && err->code == VT_DECODE_ERROR_FAILED ? VT_EXIT_FAILURE
											  : VT_EXIT_BAD_INPUT;
		goto out;
	}
	setvbuf(stdout, NULL, _IOFBF, 1 << 20);
	report(&s);
	rc = vt_decode_result_n_errors(s.result) ? VT_EXIT_BAD_INPUT : VT_EXIT_OK;
	if (rc)
		vt_err("script", "%s: %u decode errors (decoding resumed at the next PSB each time)", o.rec,
		       vt_decode_result_n_errors(s.result));
out:
	vt_decode_result_free(s.result);
	vt_decode_image_free(s.host);
	vt_decode_image_free(s.guest);
	options_clear(&o);
	return rc;
}
