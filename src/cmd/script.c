/* script.c - `vmtrace script`: the branches of a host Intel PT recording of
 * KVM guests, host and guest code decoded (src/decode), printed as
 * `perf script --itrace=be -F comm,tid,cpu,time,ip,sym,symoff,dso,addr`
 * prints them, as its --call-trace and --call-ret-trace print calls, or as
 * JSON. */
#include "config.h"

#include <malloc.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <intel-pt.h>

#include "src/cli/json.h"
#include "src/cli/textbuf.h"
#include "src/cmd/cmd.h"
#include "src/decode/decode.h"
#include "src/decode/seqlock.h"
#include "src/fs/fs.h"

typedef struct {
	char *rec;
	VtCmdImages img;                   /* --guest, --guestkallsyms, --guestvmlinux, --kcore, --kallsyms, --vmlinux */
	gboolean json, host_only, guest_only;
	gboolean call_trace, call_ret_trace, insn_trace;
	char *itrace, *fields, *time;
	gint vcpu, tid, jobs;
	/* what they make of it */
	gboolean branches, errors;         /* --itrace b/c/r, e */
	gboolean power;                    /* --itrace p: perf's psb and cbr events */
	gboolean nsecs;                    /* --insn-trace, --ns: times in nanoseconds, as perf's */
	gboolean ns;                       /* --ns */
	guint32 branch_flags;              /* --itrace c/r: perf flags shown (0: all) */
	guint field_mask;                  /* -F: F_* of branch lines */
	guint insn_mask, power_mask;       /* -F: of instruction and power event lines */
	gboolean cpu_auto;                 /* the CPU field when per CPU (instructions, power
					    * events; -F did not say) */
	gboolean have_time;
	guint64 time_start, time_end;      /* --time, ns */
	char *guestmount;                  /* guest user files: DIR/<machine pid>/<path> */
	gboolean progress;                 /* --progress */
} ScriptOptions;

/* -F fields, in perf's print order */
enum {
	F_COMM = 1 << 0, F_TID = 1 << 1, F_CPU = 1 << 2, F_TIME = 1 << 3, F_PERIOD = 1 << 4, F_EVENT = 1 << 5,
	F_FLAGS = 1 << 6, F_IP = 1 << 7, F_SYM = 1 << 8, F_SYMOFF = 1 << 9, F_DSO = 1 << 10, F_ADDR = 1 << 11,
	F_INSN = 1 << 12, F_DISASM = 1 << 13, F_MACHINE_PID = 1 << 14, F_VCPU = 1 << 15, F_SYNTH = 1 << 16,
	F_IPC = 1 << 17,
};
static const struct { const char *name; guint bit; } field_names[] = {
	{ "comm", F_COMM }, { "tid", F_TID }, { "cpu", F_CPU }, { "time", F_TIME }, { "period", F_PERIOD },
	{ "event", F_EVENT }, { "flags", F_FLAGS }, { "ip", F_IP }, { "sym", F_SYM }, { "symoff", F_SYMOFF },
	{ "dso", F_DSO }, { "addr", F_ADDR }, { "insn", F_INSN }, { "disasm", F_DISASM }, { "synth", F_SYNTH },
	{ "machine_pid", F_MACHINE_PID }, { "vcpu", F_VCPU }, { "ipc", F_IPC },
};
/* the defaults: perf's -F comm,tid,cpu,time,ip,sym,symoff,dso,addr for
 * branches; --insn-trace's fields for instructions */
#define F_BRANCH_DEFAULT (F_COMM | F_TID | F_CPU | F_TIME | F_IP | F_SYM | F_SYMOFF | F_DSO | F_ADDR)
#define F_INSN_DEFAULT (F_COMM | F_TID | F_TIME | F_IP | F_SYM | F_SYMOFF | F_DSO | F_INSN | F_DISASM)
/* power events: perf script --itrace=p's default */
#define F_POWER_DEFAULT (F_COMM | F_TID | F_TIME | F_EVENT | F_SYNTH | F_IP | F_SYM | F_SYMOFF | F_DSO)

typedef struct {
	VtDecodeImage *host, *guest;
	VtProgress progress;               /* a line on stderr (vt_cmd_progress) */
	VtDecodeGuestUser *guser;          /* the guest's user mappings (src/decode/guest-user.c) */
	gint32 guest_pid;                  /* the guest process of the line being printed (-1: unknown) */
	guint64 guest_time;                /* and its time (0: none) */
	VtDecodeResult *result;
	VtJson *json;
	VtTextBuf *out;                    /* text lines (stdout) */
	const ScriptOptions *o;
	VtDecodeStacks *stacks;            /* --call-trace, --call-ret-trace */
	guint32 flags;                     /* their event printed: its perf flags, */
	guint depth;                       /* its thread's call depth (vt_decode_stacks_event) */
	char call_dso[3][64];              /* their lines' "(DSO)\t": host, guest, [unknown] */
	guint8 call_dso_len[3];
	guint32 show_flags;                /* their branches: perf's flags shown */
	int spacing;                       /* perf's callindent column, as it goes */
	gboolean records;                  /* a printer of call lines for the main thread to pad (put_records): */
	gsize rec_spaces_at;               /* the indentation's place in the last call line (t->len), */
	guint32 rec_spaces;                /* its spaces (not written) */
	VtDecodeDisasm *disasm[2];         /* --insn-trace: host, guest */
	VtDecodeDisasmTable *tables[2];    /* the printers' (report_threads): freed after the result */
	GHashTable *user_disasm;           /* guest user file image -> its VtDecodeDisasm */
	int name_width;                    /* perf's event name column: the longest name */
	guint32 cbr_khz, max_nonturbo;     /* --itrace p: perf's frequency of a CBR */
	GArray *walk;                      /* --insn-trace: per queue, where its code runs on (Walk) */
	gboolean quiet;                    /* replaying (printer_replay): the walk goes on, no lines */
	GArray *last;                      /* per queue, its last branch's instruction (Walk) */
	GArray *next;                      /* per queue, where its last branch went (Walk) */
	const char *guest_dso;             /* perf's DSO of guest kernel code (guest_dso()) */
	gsize guest_dso_len;
	struct LineHead *head;             /* the last line's start (line_fields) */
	struct ThreadText *threads;        /* lines' thread fields (thread_part()) */
	struct SideText *sides;            /* kernel addresses' side text (side_cached()) */
	struct FlagsText *flags_text;      /* the flags fields' text (put_flags()) */
	VtDecodeSymCache *syms;            /* call traces: symbols by (image, address) */
	GArray *ipc;                       /* -F ipc: per queue, perf's counts (IpcQueue) */
	guint64 ipc_insns, ipc_cycles;     /* the line's IPC (ipc_cycles 0: none) */
} Script;

/* -F ipc: a queue's instructions so far and at its last IPC sample shown
 * with cycles, and those cycles (perf's last_br_insn_cnt, _cyc_cnt). */
typedef struct {
	guint64 insns, last_insns, last_cycles;
} IpcQueue;

/* What a line's thread fields are made of (compared whole: no padding). */
typedef struct {
	const char *comm, *guest_comm;
	gint32 tid, cpu, machine_pid, vcpu, guest_tid;
	guint f;
	gint32 guest, zero;
} ThreadKey;

G_STATIC_ASSERT(sizeof(ThreadKey) == 48);

/* A line's thread fields as thread_part() last formatted them (len 0: none). */
typedef struct ThreadText {
	ThreadKey k;
	guint8 len;
	char text[151];
} ThreadText;

#define THREADS_LOG2 6
#define THREADS (1u << THREADS_LOG2)

/* A kernel address's text "ADDR SYM+0xOFF (DSO)" as put_side() formatted
 * it for one machine and -F's sym/symoff/dso (key: valid, guest, f), in a
 * direct-mapped table: branch targets and sources repeat (tnt-dense, 256
 * KiB: 160,000 different sides in 1.2 M), and a copy costs a tenth of a
 * symbol search and three hex fields.  Longer texts are not kept.  One
 * table for all printers (the decoding threads): a slot is written under
 * its sequence number (odd while written; a writer that finds it odd or
 * loses the race skips) and a reader keeps the text it copied only if the
 * number was even and did not change meanwhile - a seqlock, as walk.c's
 * block table.  A slot's text depends on its key alone, never on the
 * printer. */
typedef struct SideText {
	guint32 seq;
	guint32 key;                       /* 0: empty */
	guint64 addr;
	guint8 len;
	char text[111];
} SideText;

G_STATIC_ASSERT(sizeof(SideText) == 128);

/* The flags field's text for some flags (len 0: none). */
typedef struct FlagsText {
	guint32 flags;
	guint8 len;
	char text[27];
} FlagsText;

#define FLAGS_TEXTS_LOG2 4
/* 2 MiB: one transparent huge page (its first write zeroes all of it: 0.1
 * to 3 ms a MiB on the test VM).  A table of 1 MiB per printer was 2 MiB
 * each (vt_decode_table_new rounds up) and missed more (1 MiB cyc
 * --itrace=b, 4 queues: 307,000 of 1,045,000 lookups; shared: 282,000). */
#define SIDES_LOG2 14
#define CHUNK_BYTES (256u << 10)       /* a decoding thread's text buffer, at first */

/* A line's start up to its flags, as line_fields() last formatted it:
 * the same for every line of one thread in one microsecond (nanosecond
 * with --insn-trace) - most lines (tnt-dense, 256 KiB: 24,000 different
 * starts in 612,000 lines) - so formatted once and copied. */
typedef struct LineHead {
	ThreadKey who;                     /* its thread */
	guint64 when;                      /* its time in the line's unit (head_when()) */
	const char *event;
	gsize len;                         /* 0: none */
	char text[240];
	/* put_time(): the seconds part last formatted */
	guint64 secs;
	gsize secs_len;
	char secs_text[24];
	/* call lines (call_start()): the whole time last formatted */
	guint64 time;
	gsize time_len;                    /* 0: none */
	char time_text[48];
} LineHead;

/* --insn-trace: a queue's flow between branches runs on from `ip`. */
typedef struct {
	guint64 ip;
	gboolean guest, valid;
} Walk;

/* ---------------------------------------------------------------- parse */
static gboolean parse(int *argc, char ***argv, ScriptOptions *o, GError **error)
{
	GOptionEntry entries[] = {
		VT_CMD_IMAGE_ENTRIES(&o->img),
		{ "call-trace", 0, 0, G_OPTION_ARG_NONE, &o->call_trace, "Calls with their call depth (perf script --call-trace)", NULL },
		{ "call-ret-trace", 0, 0, G_OPTION_ARG_NONE, &o->call_ret_trace, "Calls and returns with their call depth and flags (perf script --call-ret-trace)", NULL },
		{ "insn-trace", 0, 0, G_OPTION_ARG_NONE, &o->insn_trace, "Every instruction, its bytes and its disassembly (perf script --insn-trace)", NULL },
		{ "itrace", 0, 0, G_OPTION_ARG_STRING, &o->itrace, "What to print, perf's letters: b branches, c calls, r returns, i0ns every instruction, p power events (psb, cbr), e errors (default: be)", "OPTS" },
		{ "fields", 'F', 0, G_OPTION_ARG_STRING, &o->fields, "Fields of a line: comm,tid,cpu,time,period,event,flags,ip,sym,symoff,dso,addr,insn,disasm,synth,machine_pid,vcpu,ipc; +F/-F add to/remove from the default", "FIELDS" },
		{ "ns", 0, 0, G_OPTION_ARG_NONE, &o->ns, "Times with nanoseconds, 9 decimals (perf script --ns; --insn-trace and the call traces always)", NULL },
		{ "time", 0, 0, G_OPTION_ARG_STRING, &o->time, "Only events from START to END (perf time, seconds.nanoseconds; either may be empty)", "START,END" },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &o->json, "One JSON object per branch (and per decode error)", NULL },
		{ "host-only", 0, 0, G_OPTION_ARG_NONE, &o->host_only, "Only branches in host code", NULL },
		{ "guest-only", 0, 0, G_OPTION_ARG_NONE, &o->guest_only, "Only branches in guest code", NULL },
		{ "vcpu", 0, 0, G_OPTION_ARG_INT, &o->vcpu, "Only the vCPU thread \"CPU N/KVM\"", "N" },
		{ "tid", 0, 0, G_OPTION_ARG_INT, &o->tid, "Only thread TID", "TID" },
		{ "jobs", 0, 0, G_OPTION_ARG_INT, &o->jobs,
		  "Queues decoding at once (default: all, or the CPUs; twice the queues: each decoded ahead)", "N" },
		{ "guestmount", 0, 0, G_OPTION_ARG_FILENAME, &o->guestmount, "Guest user space files of an injected recording: DIR/<QEMU pid>/<path> (perf's --guestmount)", "DIR" },
		{ "progress", 0, 0, G_OPTION_ARG_NONE, &o->progress, "A progress line on stderr even when it is no terminal (by default: on a terminal, while the output goes elsewhere)", NULL },
		G_OPTION_ENTRY_NULL
	};
	g_autoptr(GOptionContext) ctx = g_option_context_new("REC - the branches of a host Intel PT recording of KVM guests");

	g_option_context_set_summary(ctx,
		"Decodes host and guest kernel code (libipt's block decoder; host and guest\n"
		"images swapped at every VM entry and exit) and prints every branch the way\n"
		"`perf script --itrace=be -F comm,tid,cpu,time,ip,sym,symoff,dso,addr\n"
		"--guestkallsyms GUEST/kallsyms` prints it: VM entries and exits as two lines\n"
		"each, guest lines with the comm \":TID\" and [guest.kernel.kallsyms].  REC is a\n"
		"perf.data file or directory; the host kernel comes from REC/kcore_dir (or\n"
		"--kcore and --kallsyms, or --vmlinux), the guest's from --guest,\n"
		"--guestkallsyms or --guestvmlinux.");
	g_option_context_set_description(ctx,
		"Examples:\n"
		"  vmtrace script vm.data --guest ~/.debug/[kernel.kcore]/BUILDID/TIMESTAMP\n"
		"  vmtrace script vm.data --guestkallsyms GUEST/kallsyms --guest-only --vcpu 1\n"
		"  vmtrace script vm.data --guest SNAP --json\n\n"
		"--call-trace and --call-ret-trace print calls (and returns) the way perf script\n"
		"does with those options: flags, call depth (perf's thread stack) and padding;\n"
		"perf's psb/cbr power-event lines are left out.  --insn-trace prints every\n"
		"instruction as perf script --insn-trace does, then its AT&T disassembly.\n\n"
		"Decode errors print as perf's --itrace=e lines (perf's codes and messages);\n"
		"decoding resumes at the next PSB.  Timed recordings come in time order over\n"
		"all queues (correct guest time first: vmtrace correlate), timeless ones queue\n"
		"by queue in trace order.\n\n"
		"Exit status: 0 ok; 1 failure; 2 usage error (also: a kernel image missing);\n"
		"3 bad input (unreadable recording or image, or decode errors in the trace;\n"
		"lost trace - perf's \"Overflow packet\" and \"Lost trace data\" lines - is none).\n");
	g_option_context_add_main_entries(ctx, entries, NULL);
	if (!g_option_context_parse(ctx, argc, argv, error))
		return FALSE;
	return vt_cmd_take_rec(*argc, *argv, &o->rec, error);
}

/* --itrace=OPTS: perf's letters b, c, r, e and i with a period that means
 * every instruction (i0ns, i1i). */
static const char *parse_itrace(ScriptOptions *o)
{
	const char *p = o->itrace;
	gboolean insns = FALSE;

	o->branches = o->errors = FALSE;
	o->branch_flags = 0;
	for (; *p; p++) {
		switch (*p) {
		case 'b': o->branches = TRUE; break;
		case 'c': o->branch_flags |= VT_PERF_FLAG_CALL | VT_PERF_FLAG_ASYNC | VT_PERF_FLAG_TRACE_END; break;
		case 'r': o->branch_flags |= VT_PERF_FLAG_RETURN | VT_PERF_FLAG_TRACE_BEGIN; break;
		case 'e': o->errors = TRUE; break;
		case 'p': o->power = TRUE; break;
		case 'i':
			if (g_str_has_prefix(p, "i0ns") || g_str_has_prefix(p, "i1i"))
				p += p[1] == '0' ? 3 : 2;
			else
				return "--itrace=i: perf samples every 100000 ns by default; vmtrace prints every "
				       "instruction: give i0ns (or i1i)";
			insns = TRUE;
			break;
		default:
			return "--itrace: only b, c, r, e, p and i0ns are supported";
		}
	}
	if (o->branch_flags)
		o->branches = TRUE;
	o->insn_trace |= insns;
	return NULL;
}

/* -F: a full list, or +FIELD/-FIELD changes of the default *mask (of
 * one kind of line). */
static const char *fields_apply(ScriptOptions *o, guint *mask_io)
{
	g_auto(GStrv) v = g_strsplit(o->fields, ",", -1);
	guint mask = *mask_io;
	gboolean relative = o->fields[0] == '+' || o->fields[0] == '-';

	if (!relative)
		mask = 0;
	for (guint i = 0; v[i]; i++) {
		const char *f = v[i];
		int sign = *f == '-' ? -1 : *f == '+' ? 1 : relative ? 1 : 0;
		guint bit = 0;

		f += *f == '-' || *f == '+';
		for (gsize k = 0; k < G_N_ELEMENTS(field_names); k++)
			if (!strcmp(f, field_names[k].name))
				bit = field_names[k].bit;
		if (bit == F_CPU || !relative)
			o->cpu_auto = FALSE;
		if (!bit)
			return "-F: unknown field (comm,tid,cpu,time,period,event,flags,ip,sym,symoff,dso,addr,insn,disasm,synth,machine_pid,vcpu,ipc)";
		mask = sign < 0 ? mask & ~bit : mask | bit;
	}
	if (!(mask & (F_IP | F_ADDR)) && (mask & (F_SYM | F_SYMOFF | F_DSO)))
		return "-F: sym, symoff and dso need ip or addr";
	*mask_io = mask;
	return NULL;
}

/* -F applies to every kind of line (as perf's -F without a type). */
static const char *parse_fields(ScriptOptions *o)
{
	const char *bad = fields_apply(o, &o->field_mask);

	if (!bad)
		bad = fields_apply(o, &o->insn_mask);
	return bad ? bad : fields_apply(o, &o->power_mask);
}

static const char *parse_time(ScriptOptions *o)
{
	const char *bad = vt_cmd_parse_time_range(o->time, &o->time_start, &o->time_end);

	o->have_time = !bad;
	return bad;
}

static const char *parse_selection(ScriptOptions *o)
{
	const char *bad = NULL;

	o->branches = !o->insn_trace;
	o->errors = TRUE;
	o->nsecs = o->insn_trace || o->ns;
	if (o->itrace && (o->call_trace || o->call_ret_trace || o->insn_trace))
		return "--itrace does not go with --call-trace, --call-ret-trace or --insn-trace";
	if (o->itrace)
		bad = parse_itrace(o);
	o->field_mask = F_BRANCH_DEFAULT;
	o->insn_mask = F_INSN_DEFAULT;
	o->power_mask = F_POWER_DEFAULT;
	o->cpu_auto = TRUE;
	if (!bad && o->fields && (o->call_trace || o->call_ret_trace || o->json) &&
	    (o->json || strcmp(o->fields, "+ipc")))
		bad = "-F does not go with --call-trace, --call-ret-trace (but -F +ipc) or --json";
	if (!bad && o->fields)
		bad = parse_fields(o);
	if (!bad && o->time)
		bad = parse_time(o);
	return bad;
}

static gboolean validate(ScriptOptions *o, GError **error)
{
	const char *bad = parse_selection(o);

	if (bad)
		;
	else if (o->host_only && o->guest_only)
		bad = "--host-only and --guest-only exclude each other";
	else if ((bad = vt_cmd_images_check(&o->img)))
		;
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
/* An injected recording's guest kernel, REC/kcore_dir__PID (vmtrace inject
 * and perf inject --guest-data copy the guest's kcore_dir there), when REC
 * has exactly one; NULL otherwise. */
static char *injected_guest_dir(const char *rec)
{
	g_autoptr(GDir) d = g_dir_open(rec, 0, NULL);
	const char *name;
	char *found = NULL;

	while (d && (name = g_dir_read_name(d))) {
		if (!g_str_has_prefix(name, "kcore_dir__"))
			continue;
		if (found) {
			g_free(found);
			return NULL;
		}
		found = g_build_filename(rec, name, NULL);
	}
	return found;
}

/* The host and guest images (src/cmd/images.c); the guest's by default
 * from an injected recording.  *usage: not given. */
static gboolean open_images(Script *s, ScriptOptions *o, gboolean *usage, GError **error)
{
	VtCmdImages *im = &o->img;

	if (!im->guest_dir && !im->guestkallsyms && !im->guestvmlinux)
		im->guest_dir = injected_guest_dir(o->rec);
	if (!vt_cmd_images_open(im, o->rec, &s->host, &s->guest, usage, error))
		return FALSE;
	/* guest user space: the guest's mappings, their code per guest process
	 * for the decoder, and in the guest image for disassembly */
	s->guser = s->guest ? vt_decode_guest_user_load(o->rec, o->guestmount, error) : NULL;
	return !s->guest || (s->guser && vt_decode_guest_user_prepare(s->guser, error) &&
			     vt_decode_guest_user_attach(s->guser, s->guest, error));
}

/* -------------------------------------------------------------- report */
/* The guest kernel's DSO as perf names it: with an injected guest sideband
 * the guest machine is the QEMU pid's (its kernel from REC/kcore_dir__PID),
 * named by the recording's build ids (vt_decode_result_guest_kernel_dso);
 * otherwise perf's default guest. */
static const char *guest_dso(const Script *s)
{
	const char *d = vt_decode_result_guest_kernel_dso(s->result);

	return d ? d : "[guest.kernel.kallsyms]";
}

static const char *dso_name(const Script *s, int dso)
{
	return dso == 0 ? "[kernel.kallsyms]" : dso == 1 ? s->guest_dso : "[unknown]";
}

/* Formatting without printf, into one output buffer (src/cli/textbuf.h):
 * printf's padding and field parsing, a GString and a puts per line were
 * most of the time of printing (callgrind, perf record). */
#define put_lit(t, lit) vt_textbuf_mem((t), "" lit, sizeof(lit) - 1)

/* n bytes of a kept text at src (cap bytes readable): copied as a whole
 * block of a constant size - no call, no loop - and n of them taken */
static inline void put_kept(VtTextBuf *t, const char *src, gsize n, gsize cap)
{
	if (cap <= 128 && n <= cap)
		memcpy(vt_textbuf_room(t, cap), src, cap);
	else if (n <= 64 && cap >= 64)
		memcpy(vt_textbuf_room(t, 64), src, 64);
	else
		memcpy(vt_textbuf_room(t, n), src, n);
	vt_textbuf_commit(t, n);
}

static void put_str(VtTextBuf *t, const char *str, int width)
{
	vt_textbuf_right(t, str, strlen(str), width);
}

/* v as printf's "%#llx": 0x and hex, but 0 alone */
static void put_hex_alt(VtTextBuf *t, guint64 v)
{
	if (v)
		put_lit(t, "0x");
	vt_textbuf_hex(t, v, 0);
}

/* ":TID", perf's comm of a thread it has no name for */
static const char *tid_name(gint32 tid, char name[24])
{
	guint32 u = tid < 0 ? -(guint32)tid : (guint32)tid;
	char d[12];
	int n = 0;
	char *p = name;

	*p++ = ':';
	if (tid < 0)
		*p++ = '-';
	do {
		d[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	while (n)
		*p++ = d[--n];
	*p = 0;
	return name;
}

/* One side of a branch as perf prints it: "ADDR SYM+0xOFF (DSO)", as far
 * as -F asks. */
/* A guest user address: "ADDR SYM+0xOFF (PATH)" of its mapping (perf:
 * "[unknown]" without the file or a symbol); FALSE: not mapped. */
static gboolean user_side(const Script *s, gint32 pid, guint64 addr, guint f)
{
	VtTextBuf *t = s->out;
	const char *dso, *sym;
	guint64 off = 0;

	if (!s->guser || addr >> 47)
		return FALSE;
	sym = vt_decode_guest_user_symbol(s->guser, pid, s->guest_time, addr, &off, &dso);
	if (!dso)
		return FALSE;
	vt_textbuf_hex16(t, addr);
	if (f & (F_SYM | F_SYMOFF)) {
		vt_textbuf_c(t, ' ');
		vt_textbuf_str(t, sym ? sym : "[unknown]");
	}
	if (sym && (f & F_SYMOFF)) {
		put_lit(t, "+0x");
		vt_textbuf_hex(t, off, 0);
	}
	if (f & F_DSO) {
		put_lit(t, " (");
		vt_textbuf_str(t, dso);
		vt_textbuf_c(t, ')');
	}
	return TRUE;
}

/* A kernel address: "ADDR SYM+0xOFF (DSO)" with its symbol (NULL: none,
 * "[unknown]"; the DSO then too, but in a vmlinux image's code - between
 * its symbols, as perf - where code says so), as far as -F asks: written into room taken once (every
 * branch line has one or two, every --insn-trace line one - a room check
 * and a call per part cost ~270 instructions a side), or part by part
 * when a name is longer than a piece of the buffer could hold. */
static void put_side(const Script *s, guint64 addr, gboolean guest, guint f, const char *sym, gsize sym_len,
		     guint64 off, gboolean code)
{
	VtTextBuf *t = s->out;
	const VtDecodeImage *img = guest ? s->guest : s->host;
	gboolean vmlinux = vt_decode_image_vmlinux(img);
	const char *suffix = vmlinux ? vt_decode_image_dso_suffix(img, addr) : "";
	gboolean known;
	const char *name, *dso, *module;
	gsize name_len, dso_len, suffix_len = suffix ? strlen(suffix) : 0;
	gsize most;
	char *p, *start;

	if (!suffix)                   /* in no section perf maps of a vmlinux: no name, no DSO */
		sym = NULL;
	known = sym || (code && vmlinux && suffix);
	suffix = suffix ? suffix : "";
	name = sym ? sym : "[unknown]";
	dso = !known ? "[unknown]" : guest ? s->guest_dso : "[kernel.kallsyms]";
	name_len = sym ? sym_len : 9;
	dso_len = !known ? 9 : guest ? s->guest_dso_len : 17;
	if (!known)
		suffix_len = 0;
	if (!known && vmlinux && (module = vt_decode_image_module(img, addr))) {
		dso = module;          /* a module perf maps from its MMAP record: "[unknown] ([kvm_intel])" */
		dso_len = strlen(module);
	}
	/* ADDR (and hex junk), " NAME", "+0x" OFF (and junk), " (DSO)" */
	most = 24 + 1 + name_len + 3 + 24 + 3 + dso_len + suffix_len;

	if (G_UNLIKELY(most > VT_TEXTBUF_PIECE)) {
		vt_textbuf_hex16(t, addr);
		if (f & (F_SYM | F_SYMOFF)) {
			vt_textbuf_c(t, ' ');
			vt_textbuf_mem(t, name, name_len);
		}
		if (sym && (f & F_SYMOFF)) {
			put_lit(t, "+0x");
			vt_textbuf_hex(t, off, 0);
		}
		if (f & F_DSO) {
			put_lit(t, " (");
			vt_textbuf_mem(t, dso, dso_len);
			vt_textbuf_mem(t, suffix, suffix_len);
			vt_textbuf_c(t, ')');
		}
		return;
	}
	p = start = vt_textbuf_room(t, most);
	vt_hex16_at(p, addr);
	p += 16;
	if (f & (F_SYM | F_SYMOFF)) {
		*p++ = ' ';
		memcpy(p, name, name_len);
		p += name_len;
	}
	if (sym && (f & F_SYMOFF)) {
		memcpy(p, "+0x", 3);
		p += 3;
		p += vt_hex_at(p, off);
	}
	if (f & F_DSO) {
		memcpy(p, " (", 2);
		memcpy(p + 2, dso, dso_len);
		memcpy(p + 2 + dso_len, suffix, suffix_len);
		p[2 + dso_len + suffix_len] = ')';
		p += 3 + dso_len + suffix_len;
	}
	vt_textbuf_commit(t, (gsize)(p - start));
}

/* The symbol holding a kernel address of img (NULL: none; only in code),
 * its length and the offset into it; *code: is addr in img's code.
 * Straight from the image: it remembers the last symbol's and code
 * segment's range, so a lookup in the function of the last one (most of
 * them) costs two compares - a table of addresses cost a cache miss per
 * line on a trace that runs much code (2^16 slots, 2.6 MB). */
static const char *kernel_sym(const VtDecodeImage *img, guint64 addr, gsize *len, guint64 *off, gboolean *code)
{
	gsize avail;
	const char *sym = NULL;

	*off = 0;
	*code = addr && img && vt_decode_image_code(img, addr, &avail);
	*len = 0;
	if (*code)
		sym = vt_decode_image_symbol_len(img, addr, off, len);
	if (!sym)
		*off = 0;
	return sym;
}

/* The slot of s->sides for a kernel address of one machine. */
static inline SideText *side_slot(const Script *s, guint64 addr, gboolean guest)
{
	return &s->sides[((addr ^ (guint64)guest) * 0x9e3779b97f4a7c15ULL) >> (64 - SIDES_LOG2)];
}

/* Copies slot x's text to t if x holds (addr, key) and no printer wrote
 * it meanwhile (else t is as it was). */
static inline gboolean side_get(const SideText *x, guint64 addr, guint32 key, VtTextBuf *t)
{
	guint32 seq = __atomic_load_n(&x->seq, __ATOMIC_ACQUIRE);
	gsize len;

	if ((seq & 1) || __atomic_load_n(&x->addr, __ATOMIC_RELAXED) != addr ||
	    __atomic_load_n(&x->key, __ATOMIC_RELAXED) != key)
		return FALSE;
	len = MIN(__atomic_load_n(&x->len, __ATOMIC_RELAXED), sizeof(x->text));
	put_kept(t, x->text, len, sizeof(x->text));
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (G_LIKELY(__atomic_load_n(&x->seq, __ATOMIC_RELAXED) == seq))
		return TRUE;
	t->len -= len;                     /* torn: a printer wrote it meanwhile */
	return FALSE;
}

/* Keeps the text of (addr, key) in slot x, unless a printer writes it now. */
static void side_put(SideText *x, guint64 addr, guint32 key, const char *text, gsize len)
{
	guint32 seq;

	if (!vt_seq_lock(&x->seq, &seq))
		return;
	x->addr = addr;
	x->key = key;
	x->len = (guint8)len;
	memcpy(x->text, text, len);
	vt_seq_unlock(&x->seq, seq);
}

/* put_side() of a kernel address through s->sides (SideText). */
static void side_cached(const Script *s, guint64 addr, gboolean guest, guint f)
{
	VtTextBuf *t = s->out;
	guint32 key = 1u | (guint32)(guest != 0) << 1 | (f & (F_SYM | F_SYMOFF | F_DSO));
	SideText *x = side_slot(s, addr, guest);
	const char *sym;
	gsize len;
	guint64 off, start;
	gboolean code;

	if (G_LIKELY(side_get(x, addr, key, t)))
		return;
	start = vt_textbuf_pos(t);
	sym = kernel_sym(guest ? s->guest : s->host, addr, &len, &off, &code);
	put_side(s, addr, guest, f, sym, len, off, code);
	len = (gsize)(vt_textbuf_pos(t) - start);
	if (len <= sizeof(x->text) && t->len >= len)
		side_put(x, addr, key, t->buf + t->len - len, len);
}

/* Guest user addresses of an injected recording are the line's process's
 * (user_side()); the rest are the kernel's, the same every time. */
static gboolean user_space(const Script *s, guint64 addr, gboolean guest)
{
	return guest && s->guser && !(addr >> 47);
}

static void side(const Script *s, guint64 addr, gboolean guest, guint f)
{
	const char *sym;
	gsize len;
	guint64 off;
	gboolean code;

	if (!user_space(s, addr, guest)) {
		side_cached(s, addr, guest, f);
		return;
	}
	if (user_side(s, s->guest_pid, addr, f))
		return;
	sym = kernel_sym(s->guest, addr, &len, &off, &code);
	put_side(s, addr, guest, f, sym, len, off, code);
}

/* The same for an instruction: its symbol is in the disassembly cache. */
static void insn_side(const Script *s, const VtDisasmInsn *in, gboolean guest, guint f)
{
	/* not through s->sides: an instruction's slot has its symbol, and
	 * --insn-trace's many addresses only thrash the table (CPU time
	 * 4.2-5.3 s -> 6.5-6.9 s, 1 MiB tnt-dense, with it) */
	if (!user_space(s, in->ip, guest) || !user_side(s, s->guest_pid, in->ip, f))
		put_side(s, in->ip, guest, f, in->sym, in->sym_len, in->sym_off, TRUE);   /* (decoded: code) */
}

/* The thread of one side of a branch: on the guest side the guest thread
 * the injected sideband names (perf: "VM: PID VCPU:NNN " before it with
 * -F machine_pid,vcpu; pid/tid -1 before the vCPU's first guest switch-in),
 * else the host thread - which perf names ":TID" in guest code. */
static const char *line_thread(const Script *s, const VtDecodeEvent *e, gboolean guest, gint32 *tid, char name[24])
{
	VtTextBuf *t = s->out;
	guint f = s->o->field_mask;
	const char *comm = guest ? NULL : e->comm;

	*tid = e->tid;
	if (guest && vt_decode_result_machine_pid(s->result)) {
		if (e->machine_pid && (f & F_MACHINE_PID)) {
			put_lit(t, "VM:");
			vt_textbuf_int(t, e->machine_pid, 5, ' ');
			vt_textbuf_c(t, ' ');
		}
		if (e->machine_pid && (f & F_VCPU)) {
			put_lit(t, "VCPU:");
			vt_textbuf_int(t, e->vcpu, 3, '0');
			vt_textbuf_c(t, ' ');
		}
		*tid = e->guest_tid;    /* -1 before the vCPU's first switch-in */
		comm = e->guest_comm;
	}
	return comm ? comm : tid_name(*tid, name);
}

/* "SECS.NSECS: " (nanoseconds: --insn-trace, call traces) or "SECS.USECS: " */
static void put_time(const Script *s, guint64 time, gboolean nsecs)
{
	VtTextBuf *t = s->out;
	LineHead *h = s->head;
	guint64 secs = time / 1000000000;

	/* the seconds change seldom: formatted when they do */
	if (h->secs_len && h->secs == secs) {
		vt_textbuf_mem(t, h->secs_text, h->secs_len);
	} else {
		guint64 start = vt_textbuf_pos(t);
		gsize len;

		vt_textbuf_int(t, (gint64)secs, 5, ' ');
		vt_textbuf_c(t, '.');
		len = (gsize)(vt_textbuf_pos(t) - start);
		h->secs_len = 0;
		if (t->len >= len) {
			h->secs = secs;
			h->secs_len = len;
			memcpy(h->secs_text, t->buf + t->len - len, len);
		}
	}
	if (nsecs)
		vt_textbuf_int(t, (gint64)(time % 1000000000), 9, '0');
	else
		vt_textbuf_int(t, (gint64)(time % 1000000000 / 1000), 6, '0');
	put_lit(t, ": ");
}

/* perf's flags field: "  NAME " with the name left-aligned in 21 (at
 * most 20 characters: vt_decode_perf_flags_name), kept per flags in a
 * table of FLAGS_TEXTS - formatting it (g_snprintf) on every line was 6%
 * of --call-ret-trace's CPU samples (1 MiB tnt-dense). */
static void put_flags(const Script *s, guint32 flags)
{
	FlagsText *x = &s->flags_text[(flags * 0x9e3779b1u) >> (32 - FLAGS_TEXTS_LOG2)];
	char fl[32];

	if (G_UNLIKELY(!x->len || x->flags != flags)) {
		vt_decode_perf_flags_name(flags, fl);
		x->flags = flags;
		x->len = (guint8)g_snprintf(x->text, sizeof(x->text), "  %-21s ", fl);
	}
	put_kept(s->out, x->text, x->len, sizeof(x->text));
}

/* perf's line start up to the flags: comm, tid, cpu, time (nanoseconds
 * with --insn-trace), period, event - those of f that -F asks for (event:
 * its name). */
static void thread_fields(const Script *s, const VtDecodeEvent *e, gboolean guest, guint f)
{
	VtTextBuf *t = s->out;
	char name[24];
	gint32 tid;
	const char *comm = line_thread(s, e, guest, &tid, name);

	if (f & F_COMM) {
		put_str(t, comm, 16);
		vt_textbuf_c(t, ' ');
	}
	if (f & F_TID) {
		vt_textbuf_int(t, tid, 5, ' ');
		vt_textbuf_c(t, ' ');
	}
	if (f & F_CPU) {
		vt_textbuf_c(t, '[');
		vt_textbuf_int(t, e->cpu, 3, '0');
		put_lit(t, "] ");
	}
}

static void thread_key(ThreadKey *k, const VtDecodeEvent *e, gboolean guest, guint f)
{
	*k = (ThreadKey){ e->comm, e->guest_comm, e->tid, e->cpu, e->machine_pid, e->vcpu, e->guest_tid, f, guest, 0 };
}

/* thread_fields() as last formatted for the same thread (a table of
 * THREADS, by tid, CPU and machine, Fibonacci-hashed: tid ^ cpu * 31 ^
 * guest * 7 mod 16 put the guest lines of thread 4010 in the slot of the
 * host lines of 4013 - 1 MiB cyc --call-trace formatted 20,662 of 137,110
 * lines' thread fields; now 8): the same for all lines of a thread */
static void thread_part(const Script *s, const VtDecodeEvent *e, const ThreadKey *key)
{
	VtTextBuf *t = s->out;
	guint h = ((guint)e->tid * 31u + (guint)e->cpu) * 31u + (guint)key->guest;
	ThreadText *x = &s->threads[(h * 0x9e3779b1u) >> (32 - THREADS_LOG2)];
	guint64 start;
	gsize len;

	if (x->len && !memcmp(&x->k, key, sizeof(*key))) {
		put_kept(t, x->text, x->len, sizeof(x->text));
		return;
	}
	start = vt_textbuf_pos(t);
	thread_fields(s, e, key->guest, key->f);
	len = (gsize)(vt_textbuf_pos(t) - start);
	x->len = 0;
	if (len && len < sizeof(x->text) && t->len >= len) {
		x->k = *key;
		x->len = (guint8)len;
		memcpy(x->text, t->buf + t->len - len, len);
	}
}

static void line_head(const Script *s, const VtDecodeEvent *e, const ThreadKey *key, const char *event)
{
	VtTextBuf *t = s->out;
	guint f = key->f;

	thread_part(s, e, key);
	if ((f & F_TIME) && vt_decode_result_timed(s->result))
		put_time(s, e->time, s->o->nsecs);
	if (f & F_PERIOD)
		put_lit(t, "         1 ");
	if (f & F_EVENT) {  /* perf pads event names to the longest in the file */
		put_str(t, event, s->name_width);
		put_lit(t, ": ");
	}
}

/* The time a line shows, in its unit (0: none). */
static guint64 head_when(const Script *s, const VtDecodeEvent *e, guint f)
{
	if (!(f & F_TIME) || !vt_decode_result_timed(s->result))
		return 0;
	return s->o->nsecs ? e->time : e->time / 1000;
}

/* perf's line start: line_head() (copied when it is the last line's), then
 * the flags if f asks for them (perf's sample flags). */
static void line_fields(const Script *s, const VtDecodeEvent *e, gboolean guest, guint f, const char *event,
			guint32 flags)
{
	VtTextBuf *t = s->out;
	LineHead *h = s->head;
	guint64 when = head_when(s, e, f);
	ThreadKey key;

	thread_key(&key, e, guest, f);
	if (h->len && h->when == when && h->event == event && !memcmp(&h->who, &key, sizeof(key))) {
		put_kept(t, h->text, h->len, sizeof(h->text));
	} else {
		guint64 start = vt_textbuf_pos(t);
		gsize len;

		line_head(s, e, &key, event);
		len = (gsize)(vt_textbuf_pos(t) - start);
		/* kept when it is in the buffer in one piece (no flush in between) */
		h->len = 0;
		if (len && len <= sizeof(h->text) && t->len >= len) {
			h->who = key;
			h->when = when;
			h->event = event;
			h->len = len;
			memcpy(h->text, t->buf + t->len - len, len);
		}
	}
	if (f & F_FLAGS)
		put_flags(s, flags);
}

/* A branch line's start, up to the space before its IP. */
static void line_start(const Script *s, const VtDecodeEvent *e, gboolean guest)
{
	line_fields(s, e, guest, s->o->field_mask, "branches:k", vt_decode_perf_flags(&e->b));
	vt_textbuf_c(s->out, ' ');
}

/* " insn: BYTES" of an instruction (NULL: none) */
static void insn_bytes_of(Script *s, const VtDisasmInsn *in)
{
	put_lit(s->out, " insn:");
	if (in && in->len)
		vt_textbuf_bytes(s->out, in->code, in->len);
}

static gint cmp_unresolved(gconstpointer a, gconstpointer b)
{
	gint32 x = ((const VtDecodeGuestUnresolved *)a)->pid, y = ((const VtDecodeGuestUnresolved *)b)->pid;

	return x < y ? -1 : x > y;
}

/* One line per guest process whose user code was not found (the decode
 * errors at its addresses say where): never another process's code. */
static void warn_unresolved(const Script *s)
{
	g_autoptr(GArray) u = vt_decode_guest_user_unresolved(s->guser);

	g_array_sort(u, cmp_unresolved);
	for (guint i = 0; i < u->len; i++) {
		const VtDecodeGuestUnresolved *x = &g_array_index(u, VtDecodeGuestUnresolved, i);

		if (x->pid < 0)
			vt_warn("script", "guest user code at %#" G_GINT64_MODIFIER "x before its vCPU's first guest "
				"switch-in (no process known): the guest's processes map different files there, "
				"not decoded", x->addr);
		else
			vt_warn("script", "guest process %d (%s): no code for %#" G_GINT64_MODIFIER "x - no mapping of "
				"its own there, no FORK from a known parent, and no process named like it maps one file "
				"there: not decoded", x->pid, x->comm ? x->comm : "no COMM", x->addr);
	}
}

/* The instruction at ip: in guest user space that of the line's guest
 * process (its mapping's file), else of the host or guest image - code a
 * TEXT_POKE changed as it was at tsc (the branch's time). */
static const VtDisasmInsn *disasm_at(Script *s, gboolean guest, guint64 ip, guint8 mode, guint64 tsc)
{
	const VtDecodeImage *img = guest && s->guser && !(ip >> 47) ?
		vt_decode_guest_user_image_at(s->guser, s->guest_pid, s->guest_time, ip) : NULL;
	VtDecodeDisasm *d = img ? g_hash_table_lookup(s->user_disasm, img) : s->disasm[guest ? 1 : 0];

	if (!d) {
		d = vt_decode_disasm_new(img);
		g_hash_table_insert(s->user_disasm, (gpointer)img, d);
	}
	return vt_decode_disasm_at_time(d, ip, mode, tsc);
}

/* " insn: BYTES" of the instruction at ip (in mode: VT_MODE_*) */
static void insn_bytes(Script *s, guint64 ip, gboolean guest, guint8 mode, guint64 tsc)
{
	insn_bytes_of(s, ip ? disasm_at(s, guest, ip, mode, tsc) : NULL);
}

/* The thread of one half of a branch, as perf's --tid sees it: in guest
 * code of an injected recording the guest thread (-1 before the vCPU's
 * first switch-in), else the host thread. */
static gint32 half_tid(const Script *s, const VtDecodeEvent *e, gboolean guest)
{
	return guest && vt_decode_result_machine_pid(s->result) ? e->guest_tid : e->tid;
}

static gboolean wanted(const Script *s, const VtDecodeEvent *e, gboolean guest)
{
	if (s->o->tid >= 0 && half_tid(s, e, guest) != s->o->tid)
		return FALSE;
	return !(s->o->host_only && guest) && !(s->o->guest_only && !guest);
}

static void print_error(const Script *s, const VtDecodeEvent *e)
{
	VtTextBuf *t = s->out;
	const VtBranch *b = &e->b;
	const char *msg;

	if (!s->o->errors)
		return;
	put_lit(t, " instruction trace error type 1 time ");
	if (vt_decode_result_timed(s->result) || (vt_branch_is_lost(b) && e->time)) {   /* (lost: its record's) */
		vt_textbuf_int(t, (gint64)(e->time / 1000000000), 0, ' ');
		vt_textbuf_c(t, '.');
		vt_textbuf_int(t, (gint64)(e->time % 1000000000), 9, '0');
	} else {
		vt_textbuf_c(t, '0');
	}
	put_lit(t, " cpu ");
	vt_textbuf_int(t, e->cpu, 0, ' ');
	put_lit(t, " pid ");
	vt_textbuf_int(t, e->pid, 0, ' ');
	put_lit(t, " tid ");
	vt_textbuf_int(t, e->tid, 0, ' ');
	put_lit(t, " ip ");
	put_hex_alt(t, b->from);
	put_lit(t, " code ");
	vt_textbuf_int(t, vt_decode_perf_error(b->code, &msg), 0, ' ');
	put_lit(t, ": ");
	vt_textbuf_str(t, msg);
	vt_textbuf_c(t, '\n');
}

/* One branch line, FROM => TO in one machine, with the fields -F asks for;
 * insn: the branch instruction (a VM entry's on both its lines; none from 0). */
/* -F ipc: perf's counts at every branch of a queue (its instructions, all
 * its records'), and its IPC sample where the branch is one perf shows
 * (the --itrace and call trace filters, --time; not --vcpu, --tid: perf
 * drops those lines later) and the decoder saw cycles for: the instructions
 * and cycles since the queue's last such sample, into s->ipc_insns and
 * s->ipc_cycles (0: no IPC on its line). */
static void ipc_event(Script *s, const VtDecodeEvent *e)
{
	IpcQueue *q;
	const VtBranch *b = &e->b;
	guint64 cycles;

	if (e->queue >= s->ipc->len)
		g_array_set_size(s->ipc, e->queue + 1);
	q = &g_array_index(s->ipc, IpcQueue, e->queue);
	q->insns += b->insns;
	s->ipc_cycles = 0;
	if (!b->ipc || b->kind >= VT_BRANCH_ERROR ||
	    (s->show_flags && !(vt_decode_perf_flags(b) & s->show_flags)) ||
	    (s->o->have_time && (e->time < s->o->time_start || e->time > s->o->time_end)))
		return;                  /* (perf makes no sample outside --time) */
	cycles = b->cycles - q->last_cycles;
	if (!cycles)
		return;
	s->ipc_insns = q->insns - q->last_insns;
	s->ipc_cycles = cycles;
	q->last_insns = q->insns;
	q->last_cycles = b->cycles;
}

/* perf's " \t IPC: 1.23 (insns/cycles) " where the line has one (and not
 * again: a VM entry's or exit's second line has none). */
static void put_ipc(Script *s)
{
	guint ipc;

	if (!s->ipc_cycles || !s->ipc_insns)
		return;
	ipc = (guint)(s->ipc_insns * 100 / s->ipc_cycles);
	put_lit(s->out, " \t IPC: ");
	vt_textbuf_int(s->out, ipc / 100, 0, ' ');
	vt_textbuf_c(s->out, '.');
	vt_textbuf_int(s->out, ipc % 100, 2, '0');
	put_lit(s->out, " (");
	vt_textbuf_int(s->out, (gint64)s->ipc_insns, 0, ' ');
	vt_textbuf_c(s->out, '/');
	vt_textbuf_int(s->out, (gint64)s->ipc_cycles, 0, ' ');
	put_lit(s->out, ") ");
	s->ipc_cycles = 0;
}

static void branch_line(Script *s, const VtDecodeEvent *e, gboolean guest, guint64 from, guint64 to)
{
	const VtBranch *b = &e->b;
	guint f = s->o->field_mask;

	if (!wanted(s, e, guest))
		return;
	line_start(s, e, guest);
	if (f & F_IP)
		side(s, from, guest, f);
	if (f & F_ADDR) {
		put_lit(s->out, " => ");
		side(s, to, guest, f);
	}
	put_ipc(s);
	if ((f & F_INSN) && b->kind == VT_BRANCH_VMENTRY)
		insn_bytes(s, b->from, b->from_guest, b->mode, b->tsc);
	else if ((f & F_INSN) && from)
		insn_bytes(s, from, guest, b->mode, b->tsc);
	vt_textbuf_c(s->out, '\n');
}

/* A branch is one line - VM entries and exits two, each half in its own
 * machine, as perf prints them. */
static void print_text(Script *s, const VtDecodeEvent *e)
{
	const VtBranch *b = &e->b;

	if (b->kind == VT_BRANCH_ERROR) {
		print_error(s, e);
	} else if (b->kind == VT_BRANCH_VMENTRY || b->kind == VT_BRANCH_VMEXIT) {
		branch_line(s, e, b->from_guest, b->from, 0);
		branch_line(s, e, b->to_guest, 0, b->to);
	} else {
		branch_line(s, e, b->from ? b->from_guest : b->to_guest, b->from, b->to);
	}
}

/* ------------------------------------------------------- power events */
#define MAX_STRAIGHT 100000   /* instructions between two branches, at most */

/* The queue's last instruction (for power events' insn field), or (next)
 * where its last branch went. */
static Walk *walk_of(GArray *a, guint32 queue)
{
	if (a->len <= queue)
		g_array_set_size(a, queue + 1);
	return &g_array_index(a, Walk, queue);
}

static Walk *last_of(Script *s, guint32 queue)
{
	return walk_of(s->last, queue);
}

/* Without instruction lines: perf's last instruction is the last it
 * stopped at - a conditional jump not taken on the way from where the last
 * branch went to ip, else that branch's. */
static Walk power_insn(Script *s, const VtDecodeEvent *e)
{
	const Walk *n = walk_of(s->next, e->queue);
	Walk found = *last_of(s, e->queue);
	guint64 ip = n->ip;

	if (s->walk || !n->valid || n->guest != e->b.from_guest)
		return found;
	for (guint k = 0; k < MAX_STRAIGHT && ip < e->b.from; k++) {
		const VtDisasmInsn *in = disasm_at(s, n->guest, ip, e->b.mode, e->b.tsc);

		if (!in->len)
			break;
		if (in->kind == VT_INSN_COND)
			found = (Walk){ ip, n->guest, TRUE };
		ip += in->len;
	}
	return found;
}

static gboolean is_power(const VtBranch *b)
{
	return b->kind == VT_BRANCH_PSB || b->kind == VT_BRANCH_CBR;
}

/* perf's synth field: the text, padded to 34 columns */
static void synth_text(const Script *s, const VtBranch *b)
{
	VtTextBuf *t = s->out;
	guint64 start = vt_textbuf_pos(t);
	guint64 len;

	if (b->kind == VT_BRANCH_PSB) {
		put_lit(t, " psb offs: ");
		put_hex_alt(t, b->offset);
	} else {
		guint cbr = (guint)b->to;

		put_lit(t, " cbr: ");
		vt_textbuf_int(t, cbr, 2, ' ');
		put_lit(t, " freq: ");
		vt_textbuf_int(t, (cbr * s->cbr_khz + 500) / 1000, 4, ' ');
		put_lit(t, " MHz ");
		if (s->max_nonturbo) {
			vt_textbuf_c(t, '(');
			vt_textbuf_int(t, (5 + 1000 * cbr / s->max_nonturbo) / 10, 3, ' ');
			put_lit(t, "%) ");
		}
	}
	len = vt_textbuf_pos(t) - start;
	if (len < 34)
		vt_textbuf_pad(t, 34 - len);
}

/* A psb or cbr event as perf script --itrace=p prints it. */
static void print_power(Script *s, const VtDecodeEvent *e)
{
	const VtBranch *b = &e->b;
	guint f = s->o->power_mask;
	Walk w = power_insn(s, e);
	guint32 flags = 0;

	if (!wanted(s, e, b->from_guest))
		return;
	if (b->kind == VT_BRANCH_CBR && w.valid) {
		/* perf: a cbr sample keeps the flags of the last instruction */
		const VtDisasmInsn *in = disasm_at(s, w.guest, w.ip, b->mode, b->tsc);
		VtBranch as = { .kind = VT_BRANCH_JUMP, .insn_kind = in->kind };

		flags = in->kind == VT_INSN_OTHER || !in->len ? 0 : vt_decode_perf_flags(&as);
	}
	line_fields(s, e, b->from_guest, f, b->kind == VT_BRANCH_PSB ? "psb" : "cbr", flags);
	if (f & F_SYNTH)
		synth_text(s, b);
	if (f & F_ADDR)
		vt_textbuf_hex(s->out, 0, 16);
	if (f & F_IP) {
		vt_textbuf_c(s->out, ' ');
		side(s, b->from, b->from_guest, f);
	}
	if (f & F_INSN)   /* perf: the last instruction decoded */
		insn_bytes(s, w.valid ? w.ip : b->from, w.valid ? w.guest : b->from_guest, b->mode, b->tsc);
	vt_textbuf_c(s->out, '\n');
}

/* ----------------------------------------------------- call traces */
/* put_time() in nanoseconds, copied while it stays the last line's (call
 * lines have no kept line start: their thread's stack depth varies). */
static void put_call_time(const Script *s, guint64 time)
{
	VtTextBuf *t = s->out;
	LineHead *h = s->head;
	guint64 start;
	gsize len;

	if (h->time_len && h->time == time) {
		put_kept(t, h->time_text, h->time_len, sizeof(h->time_text));
		return;
	}
	start = vt_textbuf_pos(t);
	put_time(s, time, TRUE);
	len = (gsize)(vt_textbuf_pos(t) - start);
	h->time_len = 0;
	if (len <= sizeof(h->time_text) && t->len >= len) {
		h->time = time;
		h->time_len = len;
		memcpy(h->time_text, t->buf + t->len - len, len);
	}
}

/* perf's line start for call traces: the thread's fields (comm, tid, the
 * CPU only in per-CPU recordings: thread_part(), copied as the thread's
 * last), nanosecond times, the flags with --call-ret-trace. */
static void call_start(const Script *s, const VtDecodeEvent *e, gboolean guest, guint32 flags)
{
	ThreadKey key;

	thread_key(&key, e, guest, F_COMM | F_TID | (vt_decode_result_per_cpu(s->result) ? F_CPU : 0));
	thread_part(s, e, &key);
	if (vt_decode_result_timed(s->result))
		put_call_time(s, e->time);
	if (s->o->call_ret_trace)
		put_flags(s, flags);
}

/* A call line's "(DSO)\t" as perf prints it: with --call-trace the DSO in
 * 50 columns, a longer name cut to 49 (perf's pad_output_len_dso). */
static char *call_dso_text(const Script *s, const char *name)
{
	return s->o->call_trace ? g_strdup_printf("(%-50.49s)\t", name) : g_strdup_printf("(%s)\t", name);
}

/* The "(DSO)\t" of a call line in a vmlinux section perf maps on its own
 * (suffix: its name), in none (NULL: [unknown]), or of a DSO too long for
 * call_dso_init's texts. */
static void call_dso_put(Script *s, int dso, const char *suffix)
{
	g_autofree char *name = suffix ? g_strconcat(dso_name(s, dso), suffix, NULL) : g_strdup("[unknown]");
	g_autofree char *text = call_dso_text(s, name);

	vt_textbuf_str(s->out, text);
}

/* perf's callindent field for one sample (ip => addr in one machine):
 * "(DSO)\t", the depth's indentation, the called function (calls, trace
 * begins) or the returning one (returns, trace ends); returns the length
 * of the indentation and name (call_pad pads to the column). */
static int call_indent(Script *s, guint64 ip, guint64 addr, gboolean guest, guint32 flags, guint depth)
{
	VtTextBuf *t = s->out;
	const VtDecodeImage *img = guest ? s->guest : s->host;
	guint64 at = (flags & (VT_PERF_FLAG_CALL | VT_PERF_FLAG_TRACE_BEGIN)) ? addr
		     : (flags & (VT_PERF_FLAG_RETURN | VT_PERF_FLAG_TRACE_END)) ? ip : 0;
	int dso = !vt_decode_symcache_code(s->syms, img, ip) ? 2 : guest ? 1 : 0;
	const char *suffix = dso < 2 && vt_decode_image_vmlinux(img) ? vt_decode_image_dso_suffix(img, ip) : "";
	const VtDecodeSym *y;
	const char *sym;              /* at's name: none in no section perf maps of a vmlinux */
	int len = 0;

	if (G_UNLIKELY(!suffix || *suffix || !s->call_dso_len[dso]))   /* a vmlinux's other section, no map, */
		call_dso_put(s, dso, suffix);                             /* a long name */
	else
		put_kept(t, s->call_dso[dso], s->call_dso_len[dso], sizeof(s->call_dso[dso]));
	y = vt_decode_symcache_lookup(s->syms, img, at);
	sym = y->sym && (dso == 2 || !vt_decode_image_vmlinux(img) || vt_decode_image_dso_suffix(img, at)) ? y->sym : NULL;
	s->rec_spaces_at = t->len;
	s->rec_spaces = 0;
	if (sym || at) {
		if (s->records)          /* the main thread writes them (put_records) */
			s->rec_spaces = depth * 4;
		else
			vt_textbuf_pad(t, (gsize)depth * 4);
	}
	if (sym) {
		vt_textbuf_mem(t, y->sym, y->sym_len);
		len = (int)(depth * 4 + y->sym_len);
	} else if (at) {
		vt_textbuf_hex(t, at, 16);
		len = (int)(depth * 4 + 16);
	}
	return len;
}

/* The padding after a callindent field of len: to a column that follows
 * the longest recent name over all lines in print order (perf's). */
static void call_pad(Script *s, int len)
{
	if (len > s->spacing || (len && len < s->spacing - 52))
		s->spacing = (len + 4 + 31) / 32 * 32;
	if (len < s->spacing)
		vt_textbuf_pad(s->out, (gsize)(s->spacing - len));
}

/* Call lines made in the decoding threads (Script.records) go to the main
 * thread as records - a head of four 32-bit numbers: the line's length
 * here, its callindent length (-1: the line is whole, no padding), where
 * its indentation goes and how many spaces that is; then the line without
 * indentation, padding and newline - and the main thread writes the spaces
 * and pads each line as it writes them in print order (put_records): the
 * padding is the one field that depends on the lines of all queues, and
 * the indentation, most of a deep call trace's bytes, is not copied.
 * record_open() makes room for the head and returns where the line starts. */
typedef struct {
	guint32 len;
	gint32 indent;
	guint32 spaces_at, spaces;
	guint32 tail;                      /* the line's last bytes, after the padding (IPC) */
} RecordHead;

static gsize record_open(Script *s)
{
	vt_textbuf_room(s->out, sizeof(RecordHead));
	vt_textbuf_commit(s->out, sizeof(RecordHead));
	s->rec_spaces = 0;
	return s->out->len;
}

static void record_close(Script *s, gsize start, gint32 indent, gsize tail)
{
	VtTextBuf *t = s->out;
	RecordHead h = { (guint32)(t->len - start), indent, 0, s->rec_spaces, (guint32)tail };

	if (h.spaces)
		h.spaces_at = (guint32)(s->rec_spaces_at - start);
	memcpy(t->buf + start - sizeof(h), &h, sizeof(h));
}

static void put_records(Script *s, const char *p, gsize n)
{
	const char *end = p + n;
	RecordHead h;

	while ((gsize)(end - p) >= sizeof(h)) {
		memcpy(&h, p, sizeof(h));
		p += sizeof(h);
		h.len = (guint32)MIN((gsize)h.len, (gsize)(end - p));
		h.tail = MIN(h.tail, h.len);
		h.spaces_at = MIN(h.spaces_at, h.len - h.tail);
		vt_textbuf_mem(s->out, p, h.spaces_at);
		vt_textbuf_pad(s->out, h.spaces);
		vt_textbuf_mem(s->out, p + h.spaces_at, h.len - h.tail - h.spaces_at);
		if (h.indent >= 0)
			call_pad(s, h.indent);
		vt_textbuf_mem(s->out, p + h.len - h.tail, h.tail);
		p += h.len;
		if (h.indent >= 0)
			vt_textbuf_c(s->out, '\n');
	}
}

/* call_indent()'s "(DSO)\t" of host and guest code and of no code
 * (call_dso_text) - the same few texts, formatted once (length 0: too long
 * to keep, call_dso_put formats it each time). */
static void call_dso_init(Script *s)
{
	for (int i = 0; i < 3; i++) {
		g_autofree char *text = call_dso_text(s, dso_name(s, i));
		gsize n = strlen(text);

		s->call_dso_len[i] = n < sizeof(s->call_dso[i]) ? (guint8)n : 0;
		if (s->call_dso_len[i])
			memcpy(s->call_dso[i], text, n + 1);
	}
}

/* One half of a branch (a VM entry or exit is two, each in its machine). */
static void call_half(Script *s, const VtDecodeEvent *e, guint64 ip, guint64 addr, gboolean guest, guint32 flags)
{
	/* perf keeps a stack for the host thread only: guest lines show none */
	guint depth = guest ? 0 : s->depth;
	gsize start;

	if (!wanted(s, e, guest))
		return;
	if (s->records) {
		int indent;
		gsize before;

		start = record_open(s);
		call_start(s, e, guest, flags);
		indent = call_indent(s, ip, addr, guest, flags, depth);
		before = s->out->len;
		put_ipc(s);
		record_close(s, start, indent, s->out->len - before);
		return;
	}
	call_start(s, e, guest, flags);
	call_pad(s, call_indent(s, ip, addr, guest, flags, depth));
	put_ipc(s);
	vt_textbuf_c(s->out, '\n');
}

/* The symbol slots of a branch CALL_AHEAD ahead in its queue on their way
 * to the cache while this one is printed: a call trace names a function
 * per line, and on a trace that runs much code the lookup missed to
 * memory (the main thread's costliest load). */
#define CALL_AHEAD 4
#define CALL_AHEAD_EVENT 16       /* the events themselves, written by another thread */
static void call_prefetch(const Script *s)
{
	const VtDecodeEvent *n = vt_decode_result_peek(s->result, CALL_AHEAD_EVENT);

	if (n) {
		__builtin_prefetch(n);
		__builtin_prefetch((const char *)(n + 1) - 1);
	}
	n = vt_decode_result_peek(s->result, CALL_AHEAD);

	if (!n || n->b.kind == VT_BRANCH_ERROR)
		return;
	if (n->b.from)
		vt_decode_symcache_prefetch(s->syms, n->b.from_guest ? s->guest : s->host, n->b.from);
	if (n->b.to)
		vt_decode_symcache_prefetch(s->syms, n->b.to_guest ? s->guest : s->host, n->b.to);
}

static void print_call(Script *s, const VtDecodeEvent *e)
{
	const VtBranch *b = &e->b;
	guint32 flags = s->flags;
	gsize start;

	if (!s->records)
		call_prefetch(s);        /* (the reader's queue: the main thread's) */
	if (b->kind == VT_BRANCH_ERROR) {
		if (!s->records) {
			print_text(s, e);
			return;
		}
		start = record_open(s);
		print_text(s, e);
		record_close(s, start, -1, 0);
		return;
	}
	if (b->kind == VT_BRANCH_VMENTRY || b->kind == VT_BRANCH_VMEXIT) {
		call_half(s, e, b->from, 0, b->from_guest, flags);
		call_half(s, e, 0, b->to, b->to_guest, flags);
	} else {
		call_half(s, e, b->from, b->to, b->from ? b->from_guest : b->to_guest, flags);
	}
}

/* ---------------------------------------------------- instruction trace */
/* Instructions run straight on between two branches: from where the
 * queue's last branch went up to the next branch's source (a synchronous
 * branch's instruction runs; the IP of an interrupt, VM exit or
 * asynchronous trace end does not). */

/* An instruction line's start: line_fields(), or (again: the last line
 * was the same walk's, so s->head holds this line's start if it was kept)
 * a copy of the last line's start without comparing its thread and time. */
static void insn_start(Script *s, const VtDecodeEvent *e, gboolean guest, guint f, guint32 flags, gboolean again)
{
	const LineHead *h = s->head;

	if (!again || !h->len) {
		line_fields(s, e, guest, f, "instructions:k", flags);
		return;
	}
	put_kept(s->out, h->text, h->len, sizeof(h->text));
	if (f & F_FLAGS)
		put_flags(s, flags);
}

/* An instruction's text kept apart from its slot (text_len: 255 at least) */
static void put_long_text(VtTextBuf *t, const VtDisasmInsn *in)
{
	const char *text = vt_disasm_insn_text(in);

	vt_textbuf_mem(t, text, in->text_len < 255 ? in->text_len : strlen(text));
}

/* One instruction line; a branch's own instruction (last: the branch)
 * carries its flags and target, as perf's instruction samples do (a
 * conditional jump not taken its flags only); again: as insn_start. */
static void insn_line(Script *s, const VtDecodeEvent *e, const VtDisasmInsn *in, gboolean guest, const VtBranch *last,
		      gboolean again)
{
	VtTextBuf *t = s->out;
	guint f = s->o->insn_mask;
	guint32 flags = !(f & F_FLAGS) ? 0 : last ? vt_decode_perf_flags(last)
			: in->kind == VT_INSN_COND ? VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CONDITIONAL : 0;

	insn_start(s, e, guest, f, flags, again);
	if (f & F_ADDR)
		vt_textbuf_hex(t, last ? last->to : 0, 16);
	if (f & F_IP) {
		vt_textbuf_c(t, ' ');
		insn_side(s, in, guest, f);
	}
	if (f & F_INSN)
		insn_bytes_of(s, in);
	if (f & F_DISASM) {
		put_lit(t, "\t\t");
		if (in->text_len < sizeof(in->text_in))   /* as a block of its slot's size: no rep movs */
			put_kept(t, in->text_in, in->text_len, sizeof(in->text_in));
		else
			put_long_text(t, in);
	}
	vt_textbuf_c(t, '\n');
}

/* The table of one side's kernel code when its image has no text pokes
 * (what disasm_at comes to there, without its tests per instruction);
 * NULL: through disasm_at. */
static VtDecodeDisasm *plain_disasm(const Script *s, gboolean guest)
{
	const VtDecodeImage *img = guest ? s->guest : s->host;

	return !img || !vt_decode_image_pokes(img) ? s->disasm[guest ? 1 : 0] : NULL;
}

/* The instructions from w's IP up to `to`; returns where the walk stopped. */
static guint64 insn_walk(Script *s, const VtDecodeEvent *e, const Walk *w, guint64 to, gboolean inclusive)
{
	gboolean show = !s->quiet && wanted(s, e, w->guest);
	VtDecodeDisasm *plain = plain_disasm(s, w->guest);
	guint64 ip = w->ip, last = 0;
	gboolean any = FALSE;

	for (guint n = 0; n < MAX_STRAIGHT && (ip < to || (inclusive && ip == to)); n++) {
		const VtDisasmInsn *in = plain && !user_space(s, ip, w->guest) ?
			vt_decode_disasm_at_mode(plain, ip, e->b.mode) : disasm_at(s, w->guest, ip, e->b.mode, e->b.tsc);

		if (!in->len)
			break;
		if (show)
			insn_line(s, e, in, w->guest, inclusive && ip == to ? &e->b : NULL, any);
		last = ip;
		any = TRUE;
		ip += in->len;
	}
	if (any)
		*last_of(s, e->queue) = (Walk){ last, w->guest, TRUE };
	return ip;
}

static void print_insns(Script *s, const VtDecodeEvent *e, gboolean show)
{
	const VtBranch *b = &e->b;
	Walk *w;

	if (s->walk->len <= e->queue)
		g_array_set_size(s->walk, e->queue + 1);
	w = &g_array_index(s->walk, Walk, e->queue);
	if (b->kind == VT_BRANCH_ERROR) {
		w->valid = FALSE;
		return;
	}
	if (b->kind == VT_BRANCH_PSB || b->kind == VT_BRANCH_CBR || b->kind == VT_BRANCH_FLOW_END) {
		/* a power event binds to an IP the flow runs through: the
		 * instructions before it come first (as perf's samples); a
		 * flow end: the instructions its last TNT bits ran */
		if (show && w->valid && b->from && b->from_guest == w->guest && b->from >= w->ip &&
		    insn_walk(s, e, w, b->from, FALSE) == b->from)
			w->ip = b->from;
		return;
	}
	if (!w->valid && b->from && !b->async) {
		/* the first branch after a PSB: the flow from the PSB's IP is
		 * not known here, the branch's instruction is */
		w->ip = b->from;
		w->guest = b->from_guest;
		w->valid = TRUE;
	}
	if (show && w->valid && b->from && b->from_guest == w->guest)
		insn_walk(s, e, w, b->from, !b->async);
	w->valid = b->to != 0;
	w->ip = b->to;
	w->guest = b->to_guest;
	/* the next walk starts there: its first instruction's slot on its
	 * way while the next branch is decoded (a cache miss per walk else) */
	if (show && w->valid && !user_space(s, w->ip, w->guest))
		vt_decode_disasm_prefetch(s->disasm[w->guest ? 1 : 0], w->ip);
}

static void json_side(VtJson *j, const Script *s, const char *key, guint64 addr, gboolean guest)
{
	gsize len;
	guint64 koff;
	gboolean code;
	const char *ksym = kernel_sym(guest ? s->guest : s->host, addr, &len, &koff, &code);

	vt_json_key(j, key);
	vt_json_begin_object(j);
	vt_json_kv_hex(j, "ip", addr);
	vt_json_kv_bool(j, "guest", guest);
	if (!ksym && guest && s->guser && !(addr >> 47)) {    /* guest user space */
		const char *dso = NULL, *sym;
		guint64 off = 0;

		sym = vt_decode_guest_user_symbol(s->guser, s->guest_pid, s->guest_time, addr, &off, &dso);
		if (dso)
			vt_json_kv_string(j, "dso", dso);
		if (sym) {
			vt_json_kv_string(j, "sym", sym);
			vt_json_kv_uint(j, "symoff", off);
		}
	}
	if (!ksym && !code && vt_decode_image_vmlinux(guest ? s->guest : s->host)) {
		const char *module = vt_decode_image_module(guest ? s->guest : s->host, addr);

		if (module)              /* a module's map (--vmlinux): its DSO, as perf names it */
			vt_json_kv_string(j, "dso", module);
	}
	if (ksym) {
		vt_json_kv_string(j, "sym", ksym);
		vt_json_kv_uint(j, "symoff", koff);
	}
	vt_json_end_object(j);
}

static void print_json(const Script *s, const VtDecodeEvent *e)
{
	VtJson *j = s->json;
	const VtBranch *b = &e->b;
	const char *msg;

	vt_json_begin_object(j);
	vt_json_kv_string(j, "kind", vt_branch_kind_name(b->kind));
	if (vt_decode_result_timed(s->result) || (vt_branch_is_lost(b) && e->time))
		vt_json_kv_uint(j, "time", e->time);
	vt_json_kv_int(j, "cpu", e->cpu);
	vt_json_kv_int(j, "pid", e->pid);
	vt_json_kv_int(j, "tid", e->tid);
	vt_json_kv_string(j, "comm", e->comm);
	if (e->vcpu >= 0)
		vt_json_kv_int(j, "vcpu", e->vcpu);
	if (e->machine_pid && b->kind != VT_BRANCH_ERROR && (b->from_guest || b->to_guest)) {
		/* the guest thread (injected guest sideband) */
		vt_json_kv_int(j, "machine_pid", e->machine_pid);
		vt_json_kv_int(j, "guest_pid", e->guest_pid);
		vt_json_kv_int(j, "guest_tid", e->guest_tid);
		vt_json_kv_string(j, "guest_comm", e->guest_comm);
	}
	if (b->vmcs)
		vt_json_kv_hex(j, "vmcs", b->vmcs);
	if (s->stacks && b->kind != VT_BRANCH_ERROR)
		vt_json_kv_uint(j, "depth", vt_decode_stacks_depth(s->stacks, e->tid, e->cpu, b));
	if (vt_branch_is_overflow(b) || vt_branch_is_lost(b)) {
		vt_json_kv_hex(j, "ip", b->from);
		vt_json_kv_int(j, "code", vt_decode_perf_error(b->code, &msg));
		vt_json_kv_string(j, "message", msg);
		/* trace lost, no decode error: by the processor, or the AUX buffer was full */
		vt_json_kv_bool(j, vt_branch_is_overflow(b) ? "overflow" : "truncated", TRUE);
	} else if (b->kind == VT_BRANCH_ERROR) {
		vt_json_kv_hex(j, "ip", b->from);
		vt_json_kv_int(j, "code", vt_decode_perf_error(b->code, &msg));
		vt_json_kv_string(j, "message", msg);
		vt_json_kv_string(j, "libipt", vt_decode_error_detail(b->code));
		vt_json_kv_int(j, "libipt_code", b->code);
	} else if (b->kind == VT_BRANCH_PSB || b->kind == VT_BRANCH_CBR) {
		json_side(j, s, "ip", b->from, b->from_guest);
		if (b->kind == VT_BRANCH_CBR)
			vt_json_kv_uint(j, "cbr", b->to);
	} else {
		json_side(j, s, "from", b->from, b->from_guest);
		json_side(j, s, "to", b->to, b->to_guest);
	}
	if (!vt_branch_is_lost(b))     /* (its record's data is no branch's) */
		vt_json_kv_hex(j, "aux_offset", b->offset);
	vt_json_end_object(j);
}

/* The queue's last branch instruction (for power events' insn field;
 * after an asynchronous branch: none). */
static void note_last(Script *s, const VtDecodeEvent *e)
{
	const VtBranch *b = &e->b;
	Walk *w = last_of(s, e->queue);

	*walk_of(s->next, e->queue) = (Walk){ b->to, b->to_guest, b->kind != VT_BRANCH_ERROR && b->to };
	if (b->kind == VT_BRANCH_ERROR || b->async)
		w->valid = FALSE;
	else if (!is_power(b) && b->from && !b->async)
		*w = (Walk){ b->from, b->from_guest, TRUE };
}

/* --tid, --vcpu, --time */
static gboolean in_range(const Script *s, const VtDecodeEvent *e)
{
	const VtBranch *b = &e->b;

	if (s->o->tid >= 0 && half_tid(s, e, b->from_guest) != s->o->tid && half_tid(s, e, b->to_guest) != s->o->tid)
		return FALSE;
	if (s->o->vcpu >= 0 && e->vcpu != s->o->vcpu)
		return FALSE;
	return !s->o->have_time || (e->time >= s->o->time_start && e->time <= s->o->time_end);
}

static gboolean selected(const Script *s, const VtDecodeEvent *e)
{
	const VtBranch *b = &e->b;

	if (!in_range(s, e))
		return FALSE;
	if (b->kind == VT_BRANCH_ERROR)
		return s->o->errors;
	if (is_power(b))
		return s->o->power;
	if (!s->o->branches)
		return FALSE;
	if (!s->stacks && s->show_flags && !(vt_decode_perf_flags(b) & s->show_flags))
		return FALSE;               /* --itrace c, r */
	if (s->o->json && b->kind != VT_BRANCH_ERROR)
		return wanted(s, e, b->from_guest) || wanted(s, e, b->to_guest);
	return TRUE;
}

/* What one event prints (every branch moves perf's stack and the
 * instruction walk; only some are shown). */
static void script_event(Script *s, const VtDecodeEvent *e)
{
	if (G_UNLIKELY(vt_branch_is_lost(&e->b))) {   /* as perf: printed, nothing else - no flow, stack or IPC */
		if (!selected(s, e))
			return;
		if (s->json)
			print_json(s, e);
		else if (s->stacks)
			print_call(s, e);
		else
			print_text(s, e);
		return;
	}
	if (s->o->field_mask & F_IPC)
		ipc_event(s, e);
	s->guest_pid = e->machine_pid ? e->guest_pid : -1;    /* whose user mappings a guest address is in */
	s->guest_time = e->time;
	if (s->stacks) {
		s->flags = vt_decode_perf_flags(&e->b);
		s->depth = vt_decode_stacks_event(s->stacks, e->tid, e->cpu, e->queue + 1, &e->b, s->flags);
		if (e->b.kind != VT_BRANCH_ERROR && !(s->flags & s->show_flags))
			return;
	}
	if (s->walk) {
		print_insns(s, e, in_range(s, e));   /* the flow goes on unseen */
		if (e->b.kind == VT_BRANCH_FLOW_END)
			return;
		if (!s->o->branches && e->b.kind != VT_BRANCH_ERROR && !is_power(&e->b))
			return;
	}
	if (s->o->power && !is_power(&e->b))
		note_last(s, e);
	if (!selected(s, e))
		return;
	if (s->json)
		print_json(s, e);
	else if (is_power(&e->b))
		print_power(s, e);
	else if (s->stacks)
		print_call(s, e);
	else
		print_text(s, e);
}

/* A printer's tables: the instruction walk, the last lines' parts, and
 * readers of the disassembly tables disasm (host, guest; borrowed: shared
 * by the printers; NULL: tables of its own); the kernel sides are all
 * printers' (report()). */
static void printer_init(Script *s, VtTextBuf *out, VtDecodeDisasmTable *const *disasm)
{
	s->out = out;
	s->walk = s->o->insn_trace ? g_array_new(FALSE, TRUE, sizeof(Walk)) : NULL;
	s->last = g_array_new(FALSE, TRUE, sizeof(Walk));
	s->next = g_array_new(FALSE, TRUE, sizeof(Walk));
	for (int i = 0; i < 2; i++)
		s->disasm[i] = disasm ? vt_decode_disasm_new_on(disasm[i]) : vt_decode_disasm_new(i ? s->guest : s->host);
	s->user_disasm = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
					       (GDestroyNotify)vt_decode_disasm_free);
	s->head = g_new0(LineHead, 1);
	s->threads = g_new0(ThreadText, THREADS);
	s->flags_text = g_new0(FlagsText, 1u << FLAGS_TEXTS_LOG2);
	s->ipc = g_array_new(FALSE, TRUE, sizeof(IpcQueue));
}

static void printer_clear(Script *s)
{
	if (s->walk)
		g_array_free(s->walk, TRUE);
	s->walk = NULL;
	g_array_free(s->last, TRUE);
	g_array_free(s->next, TRUE);
	s->last = s->next = NULL;
	for (int i = 0; i < 2; i++) {
		vt_decode_disasm_free(s->disasm[i]);
		s->disasm[i] = NULL;
	}
	g_clear_pointer(&s->user_disasm, g_hash_table_destroy);
	g_clear_pointer(&s->head, g_free);
	g_clear_pointer(&s->threads, g_free);
	g_clear_pointer(&s->flags_text, g_free);
	g_array_free(s->ipc, TRUE);
	s->ipc = NULL;
}

/* ---------------------------------------- printing in the decoding threads */
/* Each AUX queue's thread prints its own lines into text in memory with a
 * printer of its own (a copy of the Script: the shared parts - images,
 * options - are only read; a printer's tables are its own but for the
 * disassembly, one per image for all, which keeps any instruction's text
 * as formatted from the image's bytes, and the kernel sides' table, shared
 * as its SideText says), and the main thread only writes the merged text.
 * The lines are the same: a printer's other tables only keep text it made
 * (the sides': text that depends on its slot's key alone), and what a line
 * shows depends on its
 * event and its queue's earlier events alone - except perf's call stacks
 * (per thread over queues, and the call traces' padding follows the
 * previous line), JSON's writer and guest user code, which print in the
 * main thread as before (and VMTRACE_SCRIPT_SERIAL=1 for all). */
typedef struct {
	Script *main;
	VtDecodeDisasmTable *disasm[2];    /* host, guest: one per image for all printers */
} Printers;

static gpointer printer_open(gpointer data, guint queue)
{
	const Printers *p = data;
	Script *s = g_new(Script, 1);

	(void)queue;
	*s = *p->main;
	printer_init(s, vt_textbuf_new_mem(CHUNK_BYTES), p->disasm);
	if (s->records) {                /* call stacks per queue: per thread (call_keep_applies) */
		s->stacks = vt_decode_stacks_new();
		s->syms = vt_decode_symcache_share(p->main->syms);   /* one table for all */
	}
	return s;
}

static gsize printer_format(gpointer ctx, const VtDecodeEvent *e)
{
	Script *s = ctx;

	script_event(s, e);
	return s->out->len;
}

/* A printer that formats every n-th job of a queue (the decoder's
 * formers): its state after events e[0..n), printing nothing, from any
 * state before - where each queue's instruction walk goes on (branch
 * lines keep no state from one event to the next; call traces, IPC and
 * power events' instructions do, and have no replay). */
static void printer_replay(gpointer ctx, const VtDecodeEvent *e, guint n)
{
	Script *s = ctx;

	if (!s->walk)
		return;
	g_array_set_size(s->walk, 0);      /* every queue's flow unknown, as at its start */
	s->quiet = TRUE;
	for (guint i = 0; i < n; i++) {
		s->guest_pid = e[i].machine_pid ? e[i].guest_pid : -1;
		s->guest_time = e[i].time;
		print_insns(s, &e[i], in_range(s, &e[i]));
	}
	s->quiet = FALSE;
}

/* A branch's sides' slots, fetched into the cache a few events before its
 * line reads them: a slot is a cache miss nearly every time (2 MiB of
 * random lookups; cyc --itrace=b: 84% of side()'s CPU samples were
 * its first load).  Branch lines with ip or addr only (report_threads()):
 * --insn-trace's instructions have their sides from the disassembly. */
static void printer_ahead(gpointer ctx, const VtBranch *b)
{
	const Script *s = ctx;
	const char *from, *to;

	from = (const char *)side_slot(s, b->from, b->from_guest);
	to = (const char *)side_slot(s, b->to, b->to_guest);
	__builtin_prefetch(from);
	__builtin_prefetch(from + 64);   /* a slot is two cache lines */
	__builtin_prefetch(to);
	__builtin_prefetch(to + 64);
}

/* A call line's symbol slot (call_indent's: the called function, the
 * returning one) on its way into the cache a few branches ahead: the
 * printer's table is 2 MiB, a lookup a miss nearly every time it is a new
 * function (1 MiB exit-heavy --call-trace: 5-6% of the CPU samples were
 * that load) - the branch kinds as vt_decode_perf_flags gives them. */
static void printer_ahead_call(gpointer ctx, const VtBranch *b)
{
	const Script *s = ctx;

	if (b->to)
		vt_decode_symcache_prefetch(s->syms, b->to_guest ? s->guest : s->host, b->to);
	if (b->from)
		vt_decode_symcache_prefetch(s->syms, b->from_guest ? s->guest : s->host, b->from);
}

static char *printer_take(gpointer ctx, char *buf, gsize cap, gsize *len, gsize *old_cap)
{
	Script *s = ctx;

	return vt_textbuf_swap(s->out, buf, cap, len, old_cap);
}

static void printer_close(gpointer ctx)
{
	Script *s = ctx;

	if (s->records) {
		vt_decode_stacks_free(s->stacks);
		vt_decode_symcache_free(s->syms);
	}
	printer_clear(s);
	vt_textbuf_free(s->out);
	g_free(s);
}

/* Call traces: a branch that neither moves perf's call stacks nor shows
 * (jumps, conditional jumps, power events) is dropped in the decoding
 * threads - plain jumps (all VT_BRANCH_JUMP: their flags are BRANCH and
 * CONDITIONAL at most) are not even made (vt_decode_result_drop_jumps).
 * Exact only where each host thread's stack is one queue's: a stack is
 * emptied when another queue's branch of its thread comes. */
static gboolean call_keep(gpointer data, const VtBranch *b)
{
	const Script *s = data;

	return b->kind == VT_BRANCH_ERROR || ((s->o->field_mask & F_IPC) && b->insns) ||   /* IPC counts them */
	       (vt_decode_perf_flags(b) & (s->show_flags | VT_PERF_FLAG_CALL | VT_PERF_FLAG_RETURN |
					   VT_PERF_FLAG_TRACE_BEGIN));
}

static gboolean call_keep_applies(const Script *s)
{
	return s->stacks && !s->o->insn_trace && !s->o->power && !s->o->json &&
	       vt_decode_result_threads_apart(s->result);
}

/* Do no lines need plain jumps (VT_BRANCH_JUMP: flags BRANCH and
 * CONDITIONAL at most)?  --itrace=e, c, r and their mixes, with b or not
 * (b with c or r shows calls and returns only), print none, and nothing
 * else reads them there (instruction lines, IPC's counts and power
 * events' places do - IPC left out to be safe): the decoder then drops
 * them, joining the blocks between them - the real boot's --itrace=e
 * took more CPU than its call trace (730 vs 700 ms), every jump handed
 * to a formatter that printed nothing.  (Call traces drop them where
 * each thread is one queue's - call_keep_applies(): a thread's stack is
 * cut where its branches come from another queue, jumps too.) */
static gboolean jumps_unseen(const Script *s)
{
	const guint32 jump = VT_PERF_FLAG_BRANCH | VT_PERF_FLAG_CONDITIONAL;

	if (s->stacks || s->o->insn_trace || s->o->power || (s->o->field_mask & F_IPC))
		return FALSE;
	return !s->o->branches || (s->show_flags && !(s->show_flags & jump));
}

/* The branches that jumps_unseen()'s modes may print - errors with e
 * (the others are counted all the same) and those whose flags show: the
 * rest are not named nor formatted (the real boot's --itrace=e named and
 * looked ahead at every call and return it never printed). */
static gboolean unseen_keep(gpointer data, const VtBranch *b)
{
	const Script *s = data;

	if (b->kind == VT_BRANCH_ERROR)
		return s->o->errors;
	return (vt_decode_perf_flags(b) & s->show_flags) != 0;   /* (show_flags: 0 without b, c or r) */
}

/* Printing in the decoding threads, unless something prints across
 * queues (call traces can where each host thread is one queue's: its
 * stack is then the queue's printer's, and only the padding is left for
 * the main thread - records). */
static gboolean print_in_threads(const Script *s)
{
	const char *serial = g_getenv("VMTRACE_SCRIPT_SERIAL");

	if (serial && *serial && strcmp(serial, "0"))
		return FALSE;
	return !s->o->json && !vt_decode_guest_user_n_maps(s->guser, NULL) && (!s->stacks || call_keep_applies(s));
}

/* The merged text goes out as the threads made it: pieces (up to PIECES,
 * about OUT_BYTES) written at once with writev from the threads' chunks,
 * which wait meanwhile - the main thread copied each piece into its
 * output buffer before (on 1 MiB cyc --itrace=b, a piece is 700 bytes on
 * average, 5 KB on tnt-dense and exit-heavy). */
#define PIECES 1024
#define OUT_BYTES (1u << 20)
#define HELD 16                   /* chunks held, at most (small pieces: formers' jobs
				   * of a few lines each held a chunk each - 64 KiB
				   * exit-heavy, jobs of one event, --vcpu 3: 449 MB
				   * peak, 95 MB now; t0147 checks such a run) */

static void report_threads(Script *s)
{
	Printers p = { s, { NULL, NULL } };
	VtDecodeFormatter f = { printer_open, printer_format, printer_take, printer_close, &p, NULL, NULL };
	struct iovec iov[PIECES];
	const char *text;
	gsize len, bytes = 0;
	int n = 0;

	/* one disassembly table per image for all printers (2^18 slots, as
	 * one printer's alone - t0042): 2-4 queues walk the same kernel */
	for (int i = 0; i < 2; i++)
		p.disasm[i] = s->tables[i] = vt_decode_disasm_table_new(i ? s->guest : s->host, 18);

	if (!s->o->insn_trace && !s->records && (s->o->field_mask & (F_IP | F_ADDR)))
		f.ahead = printer_ahead;   /* branch lines with sides */
	/* a queue's instructions formatted in several threads: formatting is
	 * their work (branch lines are decoding's: the bench's tcg-boot
	 * --itrace=b took 1.10 s, 1.15 s with two formers beside the two
	 * threads that decode it ahead, on two CPUs) */
	if (s->o->insn_trace && !s->records && !s->o->power && !(s->o->field_mask & F_IPC))
		f.replay = printer_replay;
	if (s->records) {              /* call lines: padded here, in print order */
		f.ahead = printer_ahead_call;
		vt_decode_result_drop_jumps(s->result);
		vt_decode_result_start(s->result, &f);
		while ((text = vt_decode_result_next_text(s->result, &len))) {
			put_records(s, text, len);
			vt_cmd_progress(&s->progress, s->result, FALSE);
		}
		return;
	}
	vt_decode_result_hold_text(s->result);
	vt_decode_result_start(s->result, &f);
	while ((text = vt_decode_result_next_text(s->result, &len))) {
		if (n && (const char *)iov[n - 1].iov_base + iov[n - 1].iov_len == text)
			iov[n - 1].iov_len += len;   /* the same chunk's next piece */
		else
			iov[n++] = (struct iovec){ (void *)text, len };
		bytes += len;
		if (n == PIECES || bytes >= OUT_BYTES || vt_decode_result_n_held(s->result) >= HELD) {
			vt_textbuf_write_pieces(s->out, iov, n);
			vt_decode_result_release_text(s->result);
			n = 0;
			bytes = 0;
			vt_cmd_progress(&s->progress, s->result, FALSE);
		}
	}
	vt_textbuf_write_pieces(s->out, iov, n);
	vt_decode_result_release_text(s->result);
}

static void report(Script *s)
{
	const VtDecodeEvent *e;

	if (s->o->json)
		s->json = vt_json_new(stdout);
	if (s->o->call_trace || s->o->call_ret_trace) {
		s->stacks = vt_decode_stacks_new();
		s->syms = vt_decode_symcache_new(16);
	}
	s->guest_dso = guest_dso(s);
	s->sides = vt_decode_table_new(sizeof(SideText) << SIDES_LOG2);   /* untouched pages stay unmapped */
	s->guest_dso_len = strlen(s->guest_dso);
	call_dso_init(s);
	s->name_width = s->o->insn_trace ? 14 : 11;   /* instructions:k, else intel_pt//k */
	s->cbr_khz = vt_decode_result_cbr_khz(s->result, &s->max_nonturbo);
	s->show_flags = VT_PERF_FLAG_CALL | VT_PERF_FLAG_ASYNC | VT_PERF_FLAG_TRACE_END;
	if (s->o->call_ret_trace)
		s->show_flags |= VT_PERF_FLAG_RETURN | VT_PERF_FLAG_TRACE_BEGIN;
	else if (!s->stacks)
		s->show_flags = s->o->branch_flags;   /* --itrace c, r; 0: every branch */
	if (s->o->field_mask & F_IPC)
		vt_decode_result_cycles(s->result);
	if (s->o->insn_trace)         /* (formatting is the work: ranges cost more than they gave) */
		vt_decode_result_ahead_max(s->result, 1);
	if (jumps_unseen(s)) {
		vt_decode_result_drop_jumps(s->result);
		vt_decode_result_keep(s->result, unseen_keep, s);
	}
	if (print_in_threads(s)) {
		s->out = vt_textbuf_new(stdout, 1 << 20);
		s->records = s->stacks != NULL;
		report_threads(s);
	} else {
		printer_init(s, vt_textbuf_new(stdout, 1 << 20), NULL);
		if (call_keep_applies(s)) {
			vt_decode_result_keep(s->result, call_keep, s);
			vt_decode_result_drop_jumps(s->result);
		}
		vt_decode_result_start(s->result, NULL);
		for (guint i = 0; (e = vt_decode_result_next(s->result)); i++) {
			script_event(s, e);
			if (!(i & 4095))
				vt_cmd_progress(&s->progress, s->result, FALSE);
		}
		printer_clear(s);
	}
	vt_textbuf_free(s->out);      /* flushed: before any message that follows */
	s->out = NULL;
	vt_cmd_progress(&s->progress, s->result, TRUE);
	if (g_getenv("VMTRACE_RANGES_STATS")) {   /* (tests, tuning: vmtrace(1)) */
		VtDecodeApart a;
		guint64 own, lib;

		vt_decode_result_apart(s->result, &a);
		vt_warn("script", "%" G_GUINT64_FORMAT " ranges decoded apart, by at most %u threads a queue", a.ranges,
			a.decoders);
		vt_warn("script", "%" G_GUINT64_FORMAT " jobs formatted apart, by at most %u threads a queue", a.jobs,
			a.formers);
		vt_warn("script", "plain jumps %s", vt_decode_result_drops_jumps(s->result) ?
			"dropped in the decoders" : "made");
		vt_decode_query_decoders(&own, &lib);
		vt_warn("script", "query decoder: %s (%" G_GUINT64_FORMAT " ours, %" G_GUINT64_FORMAT " libipt's)",
			own && !lib ? "ours" : lib && !own ? "libipt's" : own ? "both" : "none", own, lib);
	}
	if (s->json)
		vt_json_free(s->json);
	s->json = NULL;
	vt_decode_stacks_free(s->stacks);
	s->stacks = NULL;
	g_clear_pointer(&s->syms, vt_decode_symcache_free);
	vt_decode_table_free(s->sides, sizeof(SideText) << SIDES_LOG2);
	s->sides = NULL;
}

/* ------------------------------------------------------------- command */
/* Free everything before exiting?  Not in a normal run: the process ends
 * right after, and the kernel takes its memory back whole (the frees were
 * 6-7 ms of a 150-250 ms run of the 1 MiB bench recordings, chunk by
 * chunk and table by table).  Under ASan (its leak check at exit) or
 * valgrind (vt_decode_memcheck), and with VMTRACE_FREE_AT_EXIT=1 (other
 * leak checkers), so that they see every free path run. */
static gboolean free_at_exit(void)
{
	return vt_decode_memcheck() || g_strcmp0(g_getenv("VMTRACE_FREE_AT_EXIT"), "1") == 0;
}

static void options_clear(ScriptOptions *o)
{
	g_free(o->rec);
	g_free(o->guestmount);
	vt_cmd_images_clear(&o->img);
	g_free(o->itrace);
	g_free(o->fields);
	g_free(o->time);
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
	if (!open_images(&s, &o, &usage, &err)) {
		vt_err("script", "%s", err->message);
		rc = usage ? VT_EXIT_USAGE : VT_EXIT_BAD_INPUT;
		goto out;
	}
	s.result = vt_decode_recording_open(&(VtDecodeOptions){ o.rec, s.host, s.guest, (guint)o.jobs, s.guser,
								     o.insn_trace }, o.power, &err);
	if (!s.result) {
		vt_err("script", "%s", err->message);
		rc = err->domain == VT_DECODE_ERROR && err->code == VT_DECODE_ERROR_FAILED ? VT_EXIT_FAILURE
											  : VT_EXIT_BAD_INPUT;
		goto out;
	}
	vt_cmd_images_warn("script", o.rec, s.host, s.guest);
	if (o.cpu_auto && vt_decode_result_per_cpu(s.result)) {
		o.insn_mask |= F_CPU;      /* as perf: the CPU when samples have one */
		o.power_mask |= F_CPU;
	}
	if (o.have_time && !vt_decode_result_timed(s.result)) {
		vt_err("script", "--time: %s is timeless (recorded with tsc=0), it has no times", o.rec);
		rc = VT_EXIT_USAGE;
		goto out;
	}
	setvbuf(stdout, NULL, _IOFBF, 1 << 20);
	vt_progress_init(&s.progress, "script", o.progress, TRUE);
#ifdef M_MMAP_THRESHOLD
	/* libipt's block caches (256 KiB a section) come and go with its
	 * section cache: from mmap, so they go back to the system and the
	 * threads' arenas do not keep them (a fixed threshold: glibc's
	 * sliding one moves above them after the first free) */
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
#endif
	report(&s);
	warn_unresolved(&s);
	rc = vt_decode_result_n_errors(s.result) ? VT_EXIT_BAD_INPUT : VT_EXIT_OK;
	if (!vt_decode_result_check(s.result, &err)) {
		vt_err("script", "%s", err->message);
		rc = VT_EXIT_BAD_INPUT;
	} else if (rc)
		vt_err("script", "%s: %u decode errors (decoding resumed at the next PSB each time)", o.rec,
		       vt_decode_result_n_errors(s.result));
out:
	if (!free_at_exit()) {             /* the process ends now: its memory goes back whole */
		vt_decode_result_join(s.result);
		return rc;
	}
	vt_decode_result_free(s.result);    /* the printers, which read the tables */
	vt_decode_disasm_table_free(s.tables[0]);
	vt_decode_disasm_table_free(s.tables[1]);
	vt_decode_image_free(s.host);
	vt_decode_image_free(s.guest);
	vt_decode_guest_user_free(s.guser);
	options_clear(&o);
	return rc;
}
