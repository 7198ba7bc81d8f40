/* recording.c - every AUX queue of a recording decoded, the branches named
 * (thread, vCPU, time) and streamed in order: each queue is decoded by its
 * own thread a few batches ahead of the reader (at most --jobs decoding at
 * once), and the reader merges the queues' batches (timed: by time over all
 * queues; timeless: queue after queue).  Memory holds a window of AUX
 * data (read with pread, see queue.c) and a few batches per queue, never
 * the whole AUX data or the branches of the whole trace. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "src/decode/internal.h"
#include "vmcorr/session.h"

#define BATCH 4096                /* branches per batch */
#define BATCH_ROOM 256            /* asked for: BATCH - this, so that the branches of the
				   * last step fit (past BATCH a batch doubled: 256 KiB more
				   * for good, in batch after batch - memory grew with the
				   * recording's length up to every batch doubled) */
#define AHEAD 4                   /* batches a queue's thread decodes ahead */
#define WINDOW (2u << 20)         /* AUX bytes a queue's decoder reads at a time */
#define CHUNK_TEXT (224u << 10)   /* formatting in threads: text per chunk, about - pushed
				   * before it fills script's 256 KiB buffer (CHUNK_BYTES):
				   * at 256 KiB every buffer doubled, and ~32 chunks in
				   * flight (4 queues) held 16 MiB of memory, half unused */
#define CHUNK_MARKS 4096          /* and events with text, at most (a 224 KiB chunk of
				   * branch lines has ~1,600) */
#define FORMAT_AHEAD 4            /* the formatter's ahead(): this many branches ahead */

/* Formatting in threads: one event's text ends at `end` of its chunk. */
typedef struct {
	guint64 tsc;
	gsize end;
} Mark;

/* A queue's text: its events' in order, each marked with its time. */
typedef struct {
	char *text;
	gsize len, cap;
	Mark *marks;              /* CHUNK_MARKS (no append call per event) */
	guint nmarks;
	gboolean last;            /* the queue's end (no marks) */
	gboolean job_end;         /* a former's job ends with it (formatting a queue in threads) */
} Chunk;

/* A thread that hands its work to the reader, at most AHEAD pieces ahead
 * (r->lock): it waits on a condition of its own (waiter_wait). */
typedef struct {
	gint ahead;               /* pieces handed and not yet read */
	GCond wake;               /* it waits here, */
	gboolean waits;           /* and does now */
} Waiter;

typedef struct Former Former;

/* The code hook's context (guest_user_code): a decoder's own (it keeps
 * the process it found last). */
typedef struct {
	const struct Queue *q;
	guint64 tsc;
	gint32 pid;
} CodeCtx;

/* A PERF_RECORD_AUX flagged TRUNCATED: perf's "Lost trace data" line
 * (VT_DECODE_ERR_LOST) with its sample's time, CPU, pid and tid. */
typedef struct {
	guint64 time;             /* perf time (0: none) */
	guint64 tsc;              /* for the merge of a timed recording */
	gint32 cpu, pid, tid;
} Lost;

/* A queue: what its decoding thread writes and what the reader (the main
 * thread) writes are on cache lines of their own - the reader's q->pos,
 * written at every branch, shared a line with what the thread read at
 * every branch (false sharing: each write took the line from the other
 * core).  Queues are allocated aligned (vt_decode_recording_open). */
typedef struct Queue {
	/* set before the threads start */
	VtDecodeResult *r;
	const VmcorrQueue *q;
	VtDecodeQueue *dec;
	guint64 *starts;          /* queue offset of each AUX buffer, and the total */
	GAsyncQueue *ready;       /* GArray batches of VtBranch; an empty one ends */
	GAsyncQueue *spare;       /* batches the reader is done with, for reuse */
	GThread *thread;
	GStringChunk *strings;    /* comm names (the queue's thread names events) */
	guint64 done_off;         /* AUX bytes decoded so far, from its start (progress; atomic) */
	/* formatting in threads (vt_decode_result_start with a formatter) */
	gpointer fctx;            /* the queue's formatter (formers: the first's) */
	Former *formers;          /* formatting the queue in several threads (NULL: in its own) */
	guint nformers;
	GAsyncQueue *jobs_free;   /* formers: jobs done, for reuse */

	/* the decoding thread's */
	_Alignas(64) Waiter w;    /* batches decoded (chunks formatted) and not yet read (r->lock) */
	guint nerrors;            /* decode errors its thread formatted, or dropped (keep) */
	CodeCtx code;             /* guest_user_code()'s for the queue's decoder */
	/* the thread of the branch last named (name_event()): a queue's branches
	 * mostly stay on one thread, so no lookups per branch */
	gboolean named;
	guint32 tid;
	gint32 pid, vcpu;
	const char *comm;         /* in strings */
	/* the names name_event() gave the last time it looked up (tsc in
	 * named_at.b.tsc): branches between two timing packets share a TSC,
	 * so the thread and time lookups run once per time, not per branch */
	gboolean have_named_at;
	VtDecodeEvent named_at;
	GArray *lost;             /* guint: indexes into r->lost due in this queue, in order */
	guint lost_next;          /* the next of them to splice in (lost_splice) */

	/* the reader's */
	_Alignas(64) GArray *cur; /* the reader's batch */
	guint pos;
	gboolean ended;
	Chunk *ccur;              /* the reader's chunk */
	guint rf;                 /* formers: the one whose chunks come next */
	guint cmark;              /* its next mark */
	GPtrArray *held;          /* Chunk: read, kept for the reader (vt_decode_result_hold_text) */
	/* next_queue(): its next branch's time as last peeked (head_known),
	 * or its end (head_end); valid while no branch is read from it */
	guint64 head_tsc;
	gboolean head_known, head_end;
} Queue;

/* Where a formatting thread's text goes: its formatter's, its waiter
 * (r->lock), the reader's queue of its chunks and the spare ones. */
typedef struct {
	gpointer fctx;
	Waiter *w;
	GAsyncQueue *ready, *spare;
} Sink;

/* A thread formatting every n-th job of a queue (formers_start). */
struct Former {
	struct VtDecodeResult *r;
	struct Queue *q;
	Sink sink;                /* its formatter, &w, its chunks for the reader, q->spare */
	GAsyncQueue *jobs;        /* Job, in the queue's order */
	GThread *thread;
	_Alignas(64) Waiter w;    /* chunks formatted and not read (r->lock) */
	guint pending;            /* jobs handed and not taken (r->lock) */
};

/* Set up before the threads start and read by all of them; then the lock's
 * fields and the reader's, each on lines of their own (as Queue's). */
struct VtDecodeResult {
	VmcorrSession *s;
	Queue *qs;
	guint n;                  /* queues */
	gboolean timed, per_cpu;
	gboolean tcg;             /* written by record --source tcg: "CPU n/TCG" are vCPUs */
	VtDecodeGuestThreads *guest;   /* an injected guest sideband's threads */
	GArray *lost;             /* Lost, in file order */
	const VtDecodeGuestUser *guest_user;   /* its user code per process (options) */
	gboolean started;         /* the queues' threads run */
	gboolean drops_jumps;     /* vt_decode_result_drop_jumps */
	gboolean formatting;      /* started with a formatter: text, not branches */
	VtDecodeFormatter fmt;
	VtDecodeKeep keep;        /* branches the reader wants (NULL: all) */
	gpointer keep_data;
	gboolean hold;            /* read chunks wait in their queue's held, not spare */
	guint nheld;              /* (the reader's) so many, in all */

	_Alignas(64) GMutex lock;
	guint tokens;             /* threads that may decode now (--jobs) */
	guint jobs;               /* (at the start) */
	gboolean stop;
	GError *error;            /* a queue that could not be read to its end (lock) */
	guint64 ranges;           /* decoded apart (lock) */
	guint ahead_max;          /* vt_decode_result_ahead_max (0: no limit) */
	guint cpus;               /* CPUs --jobs counts up to when threads decode ahead (ahead_threads) */
	guint ahead_most;         /* the most that decoded one queue ahead (lock) */
	guint job_events;         /* formers: events a job (JOB_EVENTS; VMTRACE_FORMAT_JOB) */
	gboolean job_forced;      /* VMTRACE_FORMAT_JOB: formers at any size */
	guint64 jobs_formed;      /* handed to formers (lock) */
	guint formers_most;       /* the most formers of a queue (lock) */

	/* the reader's */
	_Alignas(64) guint at;    /* timeless: the queue being read */
	guint nerrors;
	Queue *run, *run_q;       /* next_queue(): the queue read, the next other one */
	guint64 run_tsc;          /* and that one's first time (no other: G_MAXUINT64) */
};

/* Where the queue's AUX buffers start in its data (buffers that follow
 * each other). */
static void buffer_starts(const VmcorrSession *s, Queue *q)
{
	q->starts = g_new(guint64, q->q->nbufs + 1);
	q->starts[0] = 0;
	for (guint i = 0; i < q->q->nbufs; i++)
		q->starts[i + 1] = q->starts[i] + s->bufs[q->q->first + i].size;
}

/* The queue's AUX bytes [off, off+len): read, not mapped (a file that
 * shrinks is an error, not SIGBUS). */
static gboolean read_queue(gpointer ctx, guint64 off, guint8 *dst, gsize len, GError **error)
{
	const Queue *q = ctx;
	const VmcorrSession *s = q->r->s;
	guint lo = 0, hi = q->q->nbufs;

	while (hi - lo > 1) {                  /* the buffer holding off */
		guint mid = (lo + hi) / 2;

		if (q->starts[mid] <= off)
			lo = mid;
		else
			hi = mid;
	}
	for (guint i = lo; len; i++) {
		const VmcorrBuffer *b = &s->bufs[q->q->first + i];
		guint64 in = off - q->starts[i];
		gsize n = (gsize)MIN((guint64)len, b->size - in);

		if (!vt_perf_file_read(s->f, b->payload_off + in, dst, n, error))
			return FALSE;
		dst += n;
		off += n;
		len -= n;
	}
	return TRUE;
}

/* CPU identity (errata), TSC:CTC ratio, MTC frequency, nominal ratio. */
static void cpu_of(const VmcorrSession *s, VtDecodeCpu *cpu)
{
	g_autofree char *id = vt_perf_file_feature_string(s->f, VT_PERF_FEAT_CPUID);
	unsigned fam, model, step;

	memset(cpu, 0, sizeof(*cpu));
	if (id && sscanf(id, "GenuineIntel,%u,%u,%u", &fam, &model, &step) == 3) {
		cpu->family = fam;
		cpu->model = model;
		cpu->stepping = step;
	}
	if (s->have_tsc) {
		cpu->cpuid_15_eax = (guint32)s->tsc_ctc_d;
		cpu->cpuid_15_ebx = (guint32)s->tsc_ctc_n;
		cpu->mtc_freq = (guint8)s->mtc_period;
		if (s->nr_priv > VT_PT_INFO_MAX_NONTURBO_RATIO)
			cpu->nom_freq = (guint8)s->priv[VT_PT_INFO_MAX_NONTURBO_RATIO];
	}
	cpu->cyc_thresh = (guint8)((s->pt_attr->attr.config >> 19) & 0xf);   /* perf's intel_pt cyc_thresh */
}

/* A recording of record --source tcg (its OSRELEASE says so). */
static gboolean is_tcg(const VmcorrSession *s)
{
	g_autofree char *rel = vt_perf_file_feature_string(s->f, VT_PERF_FEAT_OSRELEASE);

	return !g_strcmp0(rel, "guest (QEMU TCG)");
}

/* The vCPU of thread t: "CPU n/KVM" (the session's), or in a TCG source's
 * recording "CPU n/TCG" - its AUX streams are the guest's own execution.
 * (A host recording of a TCG QEMU keeps -1: those threads run host code.) */
static gint32 vcpu_of(const VtDecodeResult *r, const VmcorrThread *t)
{
	unsigned v;
	char tail[8];

	if (!t || t->vcpu >= 0 || !r->tcg || !t->comm)
		return t ? t->vcpu : -1;
	if (sscanf(t->comm, "CPU %u/%7s", &v, tail) == 2 && strcmp(tail, "TCG") == 0)
		return (gint32)v;
	return -1;
}

/* Thread tid's pid, vCPU and comm into q (unless they are there). */
static void name_thread(VtDecodeResult *r, Queue *q, guint32 tid)
{
	const VmcorrThread *t;

	if (q->named && q->tid == tid)
		return;
	t = tid ? vmcorr_session_thread(r->s, tid) : NULL;
	q->named = TRUE;
	q->tid = tid;
	q->pid = t ? (gint32)t->pid : -1;
	q->vcpu = vcpu_of(r, t);
	q->comm = t && t->comm ? g_string_chunk_insert_const(q->strings, t->comm) : NULL;
}

static void name_lookup(VtDecodeResult *r, const VmcorrSession *s, Queue *queue, VtDecodeEvent *e)
{
	const VmcorrQueue *q = queue->q;
	guint32 tid = q->tid;

	e->cpu = s->per_cpu ? (gint32)q->cpu : -1;
	if (s->per_cpu)
		tid = r->timed && e->b.tsc ? vmcorr_session_thread_at(s, q->cpu, e->b.tsc) : 0;
	name_thread(r, queue, tid);
	e->tid = (gint32)tid;
	e->pid = queue->pid;
	e->vcpu = queue->vcpu;
	e->comm = queue->comm;
	e->time = r->timed && s->have_tc && e->b.tsc ? vt_perf_tsc_to_time(e->b.tsc, &s->tc) : 0;
	if (!r->timed || !vt_decode_guest_threads_machine_pid(r->guest))
		return;
	/* perf: pid/tid -1 on a vCPU before its first guest switch-in */
	e->guest_pid = e->guest_tid = -1;
	if (vt_decode_guest_threads_at(r->guest, e->vcpu, e->time, &e->guest_pid, &e->guest_tid, &e->guest_comm))
		e->machine_pid = vt_decode_guest_threads_machine_pid(r->guest);
}

/* e's names (all but b and queue) as those of `from`. */
static void name_copy(VtDecodeEvent *e, const VtDecodeEvent *from)
{
	e->cpu = from->cpu;
	e->pid = from->pid;
	e->tid = from->tid;
	e->vcpu = from->vcpu;
	e->comm = from->comm;
	e->time = from->time;
	e->machine_pid = from->machine_pid;
	e->guest_pid = from->guest_pid;
	e->guest_tid = from->guest_tid;
	e->guest_comm = from->guest_comm;
}

/* e's names: looked up at a new time, else those of the last lookup (all
 * a function of the branch's TSC and the queue). */
static void name_event(VtDecodeResult *r, Queue *queue, VtDecodeEvent *e)
{
	if (!queue->have_named_at || queue->named_at.b.tsc != e->b.tsc) {
		queue->named_at = (VtDecodeEvent){ .b.tsc = e->b.tsc };
		name_lookup(r, r->s, queue, &queue->named_at);
		queue->have_named_at = TRUE;
	}
	name_copy(e, &queue->named_at);
}

/* A lost-data line's names: its record's (b.cycles: its index in r->lost). */
static void lost_name(const VtDecodeResult *r, VtDecodeEvent *e)
{
	const Lost *l = &g_array_index(r->lost, Lost, e->b.cycles);

	e->time = l->time;        /* (a timeless recording's records have theirs too) */
	e->cpu = l->cpu;
	e->pid = l->pid;
	e->tid = l->tid;
	e->vcpu = -1;
	e->comm = NULL;
	e->machine_pid = e->guest_pid = e->guest_tid = 0;
	e->guest_comm = NULL;
	e->b.cycles = 0;
}

/* Branch b of the queue as an event, named. */
static void event_of(VtDecodeResult *r, Queue *q, const VtBranch *b, VtDecodeEvent *e)
{
	e->b = *b;
	e->queue = q->q->idx;
	name_event(r, q, e);
	if (G_UNLIKELY(vt_branch_is_lost(b)))
		lost_name(r, e);
}

/* The queue's lost-data lines due among the branches of b, spliced in
 * where perf prints them: on a timed recording before the first branch
 * not before the record's time (perf decodes up to a record's time, not
 * the branch at it), on a timeless one all at the start (of the first
 * queue: lost_load); with end (b is the queue's last) the rest after them. */
static void lost_splice(const VtDecodeResult *r, Queue *q, GArray *b, gboolean end)
{
	guint i = 0;

	while (q->lost && q->lost_next < q->lost->len) {
		guint k = g_array_index(q->lost, guint, q->lost_next);
		const Lost *l = &g_array_index(r->lost, Lost, k);
		VtBranch x = { 0 };

		if (i == b->len && !end)
			return;
		if (i < b->len && r->timed && g_array_index(b, VtBranch, i).tsc < l->tsc) {   /* (perf: before a tie) */
			i++;
			continue;
		}
		x.kind = VT_BRANCH_ERROR;
		x.code = VT_DECODE_ERR_LOST;
		x.tsc = r->timed ? l->tsc : 0;
		x.offset = i < b->len ? g_array_index(b, VtBranch, i).offset    /* (progress: note_done) */
			   : i ? g_array_index(b, VtBranch, i - 1).offset : __atomic_load_n(&q->done_off, __ATOMIC_RELAXED);
		x.cycles = k;
		g_array_insert_val(b, i, x);
		i++;
		q->lost_next++;
	}
}

/* The queue's lost-data lines left at its end, as a batch (NULL: none). */
static GArray *lost_rest(const VtDecodeResult *r, Queue *q)
{
	GArray *b;

	if (!q->lost || q->lost_next >= q->lost->len)
		return NULL;
	b = g_array_new(FALSE, FALSE, sizeof(VtBranch));
	lost_splice(r, q, b, TRUE);
	return b;
}

/* A queue decoder's guest user code (queue.c's code hook): that of the
 * guest process on the queue's vCPU at tsc, as name_event() names it. */
static const guint8 *guest_user_code(gpointer ctx, guint64 tsc, guint64 ip, gsize *avail)
{
	CodeCtx *c = ctx;
	const Queue *q = c->q;
	const VtDecodeResult *r = q->r;
	const VmcorrSession *s = r->s;
	guint64 time = r->timed && s->have_tc && tsc ? vt_perf_tsc_to_time(tsc, &s->tc) : 0;

	if (!c->tsc || tsc != c->tsc) {     /* libipt asks at every instruction */
		guint32 tid = s->per_cpu ? (tsc ? vmcorr_session_thread_at(s, q->q->cpu, tsc) : 0) : q->q->tid;
		gint32 gtid;
		const char *comm;

		c->tsc = tsc;
		if (!r->timed || !vt_decode_guest_threads_at(r->guest, vcpu_of(r, tid ? vmcorr_session_thread(s, tid) : NULL),
							     time, &c->pid, &gtid, &comm))
			c->pid = -1;
	}
	return vt_decode_guest_user_code(r->guest_user, c->pid, time, ip, avail);
}

/* ------------------------------------------------------------- decoding */
/* A batch of BATCH elements of elt bytes, its pages mapped (it is filled
 * at once; vt_decode_populate). */
static GArray *batch_new(guint elt)
{
	GArray *a = g_array_sized_new(FALSE, FALSE, elt, BATCH);

	vt_decode_populate(a->data, (gsize)BATCH * elt);
	return a;
}

/* A batch to fill: one the reader is done with, else a new one (a batch is
 * 256 KiB: allocated anew each time, glibc mapped and unmapped it - page
 * faults clearing its pages, TLB shootdowns in the other threads). */
static GArray *batch_get(Queue *q)
{
	GArray *b = g_async_queue_try_pop(q->spare);

	if (b) {
		g_array_set_size(b, 0);
		return b;
	}
	return batch_new(sizeof(VtDecodeEvent));
}

/* The branches of raw the reader keeps, named, onto the events of ev
 * (naming here, in the queue's thread, takes it off the reader's). */
static void batch_name(VtDecodeResult *r, Queue *q, const GArray *raw, guint from, guint to, GArray *ev)
{
	guint n = ev->len;

	g_array_set_size(ev, n + (to - from));
	for (guint i = from; i < to; i++) {
		const VtBranch *b = &g_array_index(raw, VtBranch, i);

		if (!r->keep || r->keep(r->keep_data, b))
			event_of(r, q, b, &g_array_index(ev, VtDecodeEvent, n++));
		else
			q->nerrors += vt_branch_is_decode_error(b);   /* (the reader counts those it gets) */
	}
	g_array_set_size(ev, n);
}

/* Progress: the queue decoded up to the packet of b's branch `end` - 1. */
static void note_done_at(Queue *q, const GArray *b, guint end)
{
	if (end)
		__atomic_store_n(&q->done_off, g_array_index(b, VtBranch, end - 1).offset, __ATOMIC_RELAXED);
}

static void note_done(Queue *q, const GArray *b)
{
	note_done_at(q, b, b->len);
}

/* A batch of events decoded into ev (raw: the thread's branches); with a
 * keep filter, decoded on until at least half full (no more hand-offs than
 * without one).  FALSE: the queue's end. */
static gboolean batch_fill(VtDecodeResult *r, Queue *q, GArray *raw, GArray *ev)
{
	gboolean more;

	do {
		g_array_set_size(raw, 0);
		more = vt_decode_queue_next(q->dec, raw, BATCH - BATCH_ROOM - ev->len);
		lost_splice(r, q, raw, !more);
		batch_name(r, q, raw, 0, raw->len, ev);
		note_done(q, raw);       /* (progress while keep drops nearly all) */
	} while (more && r->keep && ev->len < (BATCH - BATCH_ROOM) / 2);
	return more;
}

/* The CPUs there are (VMTRACE_CPUS=N, 1 to 4096: N, so that tests run the
 * paths of any machine; anything else is ignored). */
static guint cpus(void)
{
	const char *e = g_getenv("VMTRACE_CPUS");
	guint64 n = 0;

	if (e && g_ascii_string_to_unsigned(e, 10, 1, 4096, &n, NULL))
		return (guint)n;
	return (guint)MAX(1, g_get_num_processors());
}

/* Threads decoding each queue ahead of its reading thread (0: none, the
 * reading thread decodes): where --jobs leaves two or more a queue - a
 * timed recording's queues are read at once (merged in time order), a
 * timeless one's one after the other (2 vCPUs on 2 CPUs: while the first
 * queue was read, the second decoded a few batches ahead and waited, and
 * a CPU idled; now the queue read has both) - --jobs counted up to the
 * CPUs there are (threads beyond them only took turns: 4 vCPUs, --jobs 8
 * on 2 CPUs, a 1 MiB cyc call trace took 0.169 s, 0.12 s with --jobs 4;
 * VMTRACE_CPUS=N: N CPUs, for tests). */
static guint ahead_threads(const VtDecodeResult *r)
{
	guint n = MIN(r->jobs, r->cpus) / (r->timed ? r->n : 1);

	return n < 2 ? 0 : r->ahead_max ? MIN(n, r->ahead_max) : n;
}

typedef struct Ahead Ahead;
static Ahead *ahead_start(Queue *q, guint n);
static gboolean ahead_next(Ahead *a, GArray **b);
static void ahead_stop(VtDecodeResult *r, Ahead *a);

/* A batch of events from the branches decoded ahead (*raw from *pos on,
 * then the batches after it): until it is full, never past BATCH; FALSE:
 * the queue's end. */
static gboolean batch_fill_ahead(VtDecodeResult *r, Queue *q, Ahead *a, GArray **raw, guint *pos, GArray *ev)
{
	while (ev->len < BATCH - BATCH_ROOM) {
		guint n;

		if (!*raw || *pos >= (*raw)->len) {
			if (!ahead_next(a, raw)) {
				g_autoptr(GArray) rest = lost_rest(r, q);

				if (rest)
					batch_name(r, q, rest, 0, rest->len, ev);
				return FALSE;
			}
			lost_splice(r, q, *raw, FALSE);
			*pos = 0;
		}
		n = MIN((*raw)->len - *pos, BATCH - BATCH_ROOM - ev->len);
		batch_name(r, q, *raw, *pos, *pos + n, ev);
		*pos += n;
		note_done_at(q, *raw, *pos);
	}
	return TRUE;
}

/* A queue's thread waits (r->lock held) until waiter_wake(w), a token
 * back when there were none (tokens_back) or the stop: each thread has a
 * condition of its own, signalled only while it waits.  With one for all,
 * broadcast at every batch and chunk, every thread woke at each (and
 * GLib's broadcast is a futex call even with none waiting): 25,089 futex
 * calls for 4 MiB exit-heavy --itrace=b. */
static void waiter_wait(VtDecodeResult *r, Waiter *w)
{
	w->waits = TRUE;
	g_cond_wait(&w->wake, &r->lock);
	w->waits = FALSE;
}

static void waiter_wake(Waiter *w)
{
	if (w->waits)
		g_cond_signal(&w->wake);
}

/* A token back (r->lock held): threads wait for one only while there are
 * none, so only then are the waiting ones woken (each checks again). */
static void tokens_back(VtDecodeResult *r)
{
	if (!r->tokens++) {
		for (guint i = 0; i < r->n; i++) {
			waiter_wake(&r->qs[i].w);
			for (guint k = 0; k < r->qs[i].nformers; k++)
				waiter_wake(&r->qs[i].formers[k].w);
		}
	}
}

/* A queue's thread: batches until the end, at most AHEAD ahead, at most
 * `tokens` threads decoding at once (and where --jobs leaves threads to
 * spare, decoded ahead by them: ahead_start). */
static gpointer produce(gpointer data)
{
	Queue *q = data;
	VtDecodeResult *r = q->r;
	g_autoptr(GArray) raw = batch_new(sizeof(VtBranch));
	Ahead *ahead = ahead_threads(r) ? ahead_start(q, ahead_threads(r)) : NULL;
	GArray *araw = NULL;
	guint apos = 0;
	gboolean more = TRUE;

	while (more) {
		GArray *b = batch_get(q);

		g_mutex_lock(&r->lock);
		while (!r->stop && (q->w.ahead >= AHEAD || !r->tokens))
			waiter_wait(r, &q->w);
		if (r->stop) {
			g_mutex_unlock(&r->lock);
			g_array_free(b, TRUE);
			if (araw)
				g_array_unref(araw);
			ahead_stop(r, ahead);
			return NULL;
		}
		r->tokens--;
		q->w.ahead++;
		g_mutex_unlock(&r->lock);
		more = ahead ? batch_fill_ahead(r, q, ahead, &araw, &apos, b) : batch_fill(r, q, raw, b);
		g_mutex_lock(&r->lock);
		tokens_back(r);
		q->w.ahead -= !b->len;      /* not for the reader (only q's thread waits on it) */
		g_mutex_unlock(&r->lock);
		g_async_queue_push(b->len ? q->ready : q->spare, b);
	}
	ahead_stop(r, ahead);         /* (its error first) */
	g_mutex_lock(&r->lock);
	if (vt_decode_queue_error(q->dec) && !r->error)
		r->error = g_error_copy(vt_decode_queue_error(q->dec));
	g_mutex_unlock(&r->lock);
	g_async_queue_push(q->ready, g_array_new(FALSE, FALSE, sizeof(VtDecodeEvent)));
	return NULL;
}

/* The queue's next branch, waiting for its thread; NULL at its end. */
static const VtBranch *peek_wait(VtDecodeResult *r, Queue *q)
{
	while (!q->ended && (!q->cur || q->pos >= q->cur->len)) {
		if (q->cur)
			g_async_queue_push(q->spare, q->cur);
		q->cur = g_async_queue_pop(q->ready);
		q->pos = 0;
		q->ended = q->cur->len == 0;
		g_mutex_lock(&r->lock);
		q->w.ahead--;
		waiter_wake(&q->w);
		g_mutex_unlock(&r->lock);
	}
	return q->ended ? NULL : &g_array_index(q->cur, VtDecodeEvent, q->pos).b;
}

static inline const VtBranch *peek(VtDecodeResult *r, Queue *q)
{
	if (G_LIKELY(q->cur && q->pos < q->cur->len))
		return &g_array_index(q->cur, VtDecodeEvent, q->pos).b;
	return peek_wait(r, q);
}

/* Timed: the queue whose next branch comes first (of equal times the lower
 * queue); timeless: the current queue until it ends.  Timed, the queue
 * found stays the next while its branches come before the other queues'
 * first (r->run_tsc of queue r->run_q: their heads do not move meanwhile) -
 * no look at every queue per branch (1 MiB tnt-dense --call-trace, two
 * queues: vt_decode_result_next 92 -> 61 instructions a branch).
 * The other queues' heads are the times kept when they were last peeked
 * (only r->run's branches are read): a scan peeks r->run alone.
 * Timeless, r->run is the current queue with no other (r->run_tsc
 * G_MAXUINT64), so that vt_decode_result_next's quick path takes its
 * branches too. */
/* q's next branch's time (or end) into its head_ fields. */
static void head_update(VtDecodeResult *r, Queue *q)
{
	const VtBranch *b = peek(r, q);

	q->head_known = TRUE;
	q->head_end = !b;
	q->head_tsc = b ? b->tsc : 0;
}

static G_GNUC_NO_INLINE Queue *next_queue(VtDecodeResult *r)
{
	Queue *best = NULL, *other = NULL;
	guint64 t = 0, ot = G_MAXUINT64;

	if (!r->timed) {
		while (r->at < r->n && !peek(r, &r->qs[r->at]))
			r->at++;
		r->run = r->at < r->n ? &r->qs[r->at] : NULL;
		r->run_q = NULL;
		r->run_tsc = G_MAXUINT64;
		return r->run;
	}
	if (r->run) {
		const VtBranch *b = peek(r, r->run);

		if (b && (b->tsc < r->run_tsc || (b->tsc == r->run_tsc && r->run_q && r->run < r->run_q)))
			return r->run;
	}
	for (guint i = 0; i < r->n; i++) {
		Queue *q = &r->qs[i];
		guint64 tsc;

		if (q == r->run || !q->head_known)
			head_update(r, q);
		if (q->head_end)
			continue;
		tsc = q->head_tsc;
		if (!best || tsc < t) {
			other = best;
			ot = t;
			best = q;
			t = tsc;
		} else if (!other || tsc < ot) {
			other = q;
			ot = tsc;
		}
	}
	r->run = best;
	r->run_q = other;
	r->run_tsc = other ? ot : G_MAXUINT64;
	return best;
}

/* The quick path: the queue read last has a branch in its chunk that
 * comes before the other queues' first; else next_queue() (out of line:
 * the quick path saves no registers - 1 MiB cyc --call-trace, 4 queues,
 * vt_decode_result_next 110 -> 97.5 instructions a branch, with the heads
 * kept) */
const VtDecodeEvent *vt_decode_result_next(VtDecodeResult *r)
{
	Queue *q = r->run;
	const VtDecodeEvent *e;

	if (G_LIKELY(q && q->cur && q->pos < q->cur->len)) {
		e = &g_array_index(q->cur, VtDecodeEvent, q->pos);
		if (G_LIKELY(e->b.tsc < r->run_tsc))
			goto take;
	}
	if (!(q = next_queue(r)))
		return NULL;
	e = &g_array_index(q->cur, VtDecodeEvent, q->pos);
take:
	q->pos++;
	r->nerrors += vt_branch_is_decode_error(&e->b);
	return e;
}

const VtDecodeEvent *vt_decode_result_peek(const VtDecodeResult *r, guint k)
{
	const Queue *q = r->run;

	if (!q || !q->cur || !k || q->pos + k - 1 >= q->cur->len)
		return NULL;
	return &g_array_index(q->cur, VtDecodeEvent, q->pos + k - 1);
}

/* ------------------------------------------------ formatting in threads */
/* Each queue's thread names its events and hands them to its formatter,
 * whose text goes out in chunks (at most AHEAD ahead of the reader), each
 * event's text marked with its time; the reader merges the chunks' text
 * as vt_decode_result_next merges branches: by time, ties in queue order
 * (timeless: queue after queue). */
static Chunk *chunk_get(GAsyncQueue *spare)
{
	Chunk *c = g_async_queue_try_pop(spare);

	if (c) {
		c->nmarks = 0;
		c->len = 0;
		c->last = FALSE;
		c->job_end = FALSE;
		return c;
	}
	c = g_new0(Chunk, 1);
	c->marks = vt_decode_buf_new(CHUNK_MARKS * sizeof(Mark));   /* (huge pages: written at once) */
	return c;
}

static void chunk_free(gpointer p)
{
	Chunk *c = p;

	if (!c)
		return;
	vt_decode_buf_free(c->text, c->cap);
	vt_decode_buf_free(c->marks, CHUNK_MARKS * sizeof(Mark));
	g_free(c);
}

/* The token (--jobs) back while waiting for the reader, then again. */
static gboolean token_wait(VtDecodeResult *r, Waiter *w, gboolean have, gboolean ahead)
{
	gboolean ok;

	g_mutex_lock(&r->lock);
	if (have)
		tokens_back(r);
	while (!r->stop && ((ahead && w->ahead >= AHEAD) || !r->tokens))
		waiter_wait(r, w);
	ok = !r->stop;
	if (ok) {
		r->tokens--;
		w->ahead += ahead;
	}
	g_mutex_unlock(&r->lock);
	return ok;
}

static void token_put(VtDecodeResult *r)
{
	g_mutex_lock(&r->lock);
	tokens_back(r);
	g_mutex_unlock(&r->lock);
}

/* The text of chunk c so far goes to the reader; the formatter goes on in
 * the buffer of a spare chunk, which is returned.  NULL: stopped. */
static Chunk *chunk_push(VtDecodeResult *r, const Sink *k, Chunk *c)
{
	Chunk *next = chunk_get(k->spare);
	gsize cap;

	c->text = r->fmt.take(k->fctx, next->text, next->cap, &c->len, &cap);
	c->cap = cap;
	next->text = NULL;
	next->cap = 0;
	if (!token_wait(r, k->w, TRUE, TRUE)) {
		chunk_free(c);
		chunk_free(next);
		return NULL;
	}
	g_async_queue_push(k->ready, c);
	return next;
}

/* One named event formatted into *c (its text so far *end bytes; pushed
 * when full); FALSE: stopped. */
static gboolean format_one(VtDecodeResult *r, const Sink *k, const VtDecodeEvent *ev, Chunk **c, gsize *end)
{
	gsize now = r->fmt.format(k->fctx, ev);

	if (now == *end)
		return TRUE;
	(*c)->marks[(*c)->nmarks++] = (Mark){ ev->b.tsc, now };
	*end = now;
	if (now >= CHUNK_TEXT || (*c)->nmarks >= CHUNK_MARKS) {
		if (!(*c = chunk_push(r, k, *c)))
			return FALSE;
		*end = 0;
	}
	return TRUE;
}

/* One batch of branches named and formatted into *c (pushed when full). */
static gboolean format_batch(VtDecodeResult *r, Queue *q, const Sink *k, GArray *b, Chunk **c, gsize *end)
{
	VtDecodeEvent ev;

	for (guint i = 0; i < b->len; i++) {
		const VtBranch *br = &g_array_index(b, VtBranch, i);

		q->nerrors += vt_branch_is_decode_error(br);
		if (r->keep && !r->keep(r->keep_data, br))
			continue;        /* (nothing to print: not named, not formatted) */
		if (r->fmt.ahead && i + FORMAT_AHEAD < b->len)
			r->fmt.ahead(q->fctx, &g_array_index(b, VtBranch, i + FORMAT_AHEAD));
		event_of(r, q, br, &ev);
		if (!format_one(r, k, &ev, c, end))
			return FALSE;
	}
	note_done(q, b);
	return TRUE;
}

/* Formatting in threads where --jobs leaves CPUs to spare for each queue
 * (one vCPU on two CPUs: a real single-vCPU boot's call trace decoded and
 * formatted in one thread while the other CPU idled): threads of its own
 * decode the queue ahead of its formatting thread, which formats their
 * batches in the queue's order (the text is the same).  The queue is cut
 * into ranges (vt_decode_queue_range: from a PSB to a PSB, about SEGMENT
 * bytes; a queue that cannot be cut is one range) and each thread takes
 * the next range not taken - at most `ring` (threads + 1) taken and not
 * yet read, the one read included - and decodes it into batches of its
 * own, at most `cap` waiting (ranges' slots of all queues together about
 * RANGES_BUDGET bytes of batches, but at least 4 a range), so memory stays
 * bounded.  A range's batches end with its end mark. */
#define SEGMENT (128u << 10)      /* AUX bytes a range, about */
#define SEGMENT_MIN 4096u         /* (smaller: mostly empty ranges, two PSB searches each) */
#define RANGES_BUDGET (24u << 20) /* bytes of batches waiting in slots, all queues */
#define MAX_DECODERS 8
#define MAX_RING (MAX_DECODERS + 1)

typedef struct {
	guint64 last_tsc;         /* its decoder's latest time (vt_decode_queue_last_time) */
	gboolean last;            /* the queue's last range (its end, or a read error) */
} RangeEnd;

struct Ahead {
	Queue *q;
	guint64 size;             /* of a range (G_MAXUINT64: one range) */
	guint cap;                /* batches of a range waiting to be read, at most */
	guint ring;               /* ranges taken and not read, at most */
	GMutex lock;
	GCond cond;
	guint64 taken;            /* ranges taken by the threads (lock) */
	guint64 reading;          /* the range the formatting thread reads (lock) */
	guint waiting[MAX_RING];  /* batches of range k waiting in slot k % ring (lock) */
	gboolean ended, stop;     /* the last range was taken; stopped (lock) */
	GAsyncQueue *slot[MAX_RING];   /* range k's batches, then &ends[k % ring] */
	RangeEnd ends[MAX_RING];
	GAsyncQueue *free;        /* batches read, for reuse */
	GError *error;            /* the first range that could not be read (lock) */
	guint64 ranges;           /* cut and decoded (lock) */
	guint64 carry;            /* the reader's: the latest time of the ranges read */
	guint n;
	GThread *threads[MAX_DECODERS];
};

/* Wait until range k's slot has room; FALSE: stopped. */
static gboolean range_room(Ahead *a, guint k)
{
	gboolean ok;

	g_mutex_lock(&a->lock);
	while (!a->stop && a->waiting[k] >= a->cap)
		g_cond_wait(&a->cond, &a->lock);
	ok = !a->stop;
	a->waiting[k] += ok;
	g_mutex_unlock(&a->lock);
	return ok;
}

/* Where range k starts: the boundary at k * size (0 for the first; the
 * queue's end where k * size is past it - no product that overflows). */
static gboolean range_bound(const Ahead *a, VtDecodeQueue *d, guint64 k, guint64 total, guint64 *at, GError **error)
{
	if (!k || k > total / a->size) {
		*at = k ? total : 0;
		return TRUE;
	}
	return vt_decode_queue_boundary(d, k * a->size, at, error);
}

/* Range k (from boundary(k * size) to boundary((k + 1) * size); one
 * range: the queue's own decoder, from its start) decoded by d into its
 * slot, then its end mark; FALSE: stopped. */
static gboolean range_decode(Ahead *a, VtDecodeQueue *d, guint64 k)
{
	guint i = (guint)(k % a->ring);
	guint64 total = a->q->starts[a->q->q->nbufs], start = 0, end = total;
	GError *error = NULL;
	gboolean more = TRUE, ok = TRUE;

	if (a->size != G_MAXUINT64 && (!range_bound(a, d, k, total, &start, &error) ||
					!range_bound(a, d, k + 1, total, &end, &error) ||
					!vt_decode_queue_range(d, start, end, &error)))
		more = FALSE;
	while (more && (ok = range_room(a, i))) {
		GArray *b = g_async_queue_try_pop(a->free);

		if (!b)
			b = batch_new(sizeof(VtBranch));
		g_array_set_size(b, 0);
		more = vt_decode_queue_next(d, b, BATCH - BATCH_ROOM);
		g_async_queue_push(a->slot[i], b);
	}
	if (!error && vt_decode_queue_error(d))
		error = g_error_copy(vt_decode_queue_error(d));
	a->ends[i] = (RangeEnd){ vt_decode_queue_last_time(d), error || end >= total };
	g_mutex_lock(&a->lock);
	a->ranges += a->size != G_MAXUINT64 && start < end;
	a->ended = a->ended || a->ends[i].last;
	if (error && !a->error)
		a->error = g_steal_pointer(&error);
	g_mutex_unlock(&a->lock);
	g_clear_error(&error);
	g_async_queue_push(a->slot[i], &a->ends[i]);
	return ok;
}

typedef struct {
	Ahead *a;
	VtDecodeQueue *d;         /* the thread's (a clone, or the queue's own) */
	CodeCtx code;             /* its code hook's (a clone's) */
} AheadThread;

static gpointer decode_ahead(gpointer data)
{
	AheadThread *t = data;
	Ahead *a = t->a;
	gboolean ok = TRUE;

	while (ok) {
		guint64 k;

		g_mutex_lock(&a->lock);
		while (!a->stop && !a->ended && a->taken >= a->reading + a->ring)
			g_cond_wait(&a->cond, &a->lock);
		ok = !a->stop && !a->ended;
		k = a->taken++;
		g_mutex_unlock(&a->lock);
		ok = ok && range_decode(a, t->d, k);
	}
	if (t->d != a->q->dec)
		vt_decode_queue_free(t->d);
	g_free(t);
	return NULL;
}

/* The threads decoding ahead for q: n of them on ranges where the queue
 * can be cut and n is 2 or more (VMTRACE_SEGMENT: a range's size; 0: one
 * range), else one. */
static Ahead *ahead_start(Queue *q, guint n)
{
	const char *e = g_getenv("VMTRACE_SEGMENT");
	guint64 size = e ? g_ascii_strtoull(e, NULL, 0) : SEGMENT;
	Ahead *a = g_new0(Ahead, 1);

	a->q = q;
	a->size = size && n >= 2 && vt_decode_queue_splits(q->dec) ? MAX(size, SEGMENT_MIN) : G_MAXUINT64;
	n = MIN(a->size == G_MAXUINT64 ? 1 : n, MAX_DECODERS);
	a->ring = n + 1;
	/* (the bench's tcg-boot, 9 MiB of AUX, 16 batches a range: --call-trace 0.58 s, 64:
	 * 0.56 s with 1 MB more, --itrace=b 0.93 and 0.87 s with 10 MB more,
	 * --insn-trace 3.02 and 3.07 s with 21 MB more; one range: as many as
	 * the formatter may be ahead, no more was of use) */
	a->cap = a->size == G_MAXUINT64 ? 4 :
		CLAMP(RANGES_BUDGET / (a->ring * q->r->n * BATCH * sizeof(VtBranch)), 4u, 16u);
	g_mutex_init(&a->lock);
	g_cond_init(&a->cond);
	for (guint i = 0; i < a->ring; i++)
		a->slot[i] = g_async_queue_new();
	a->free = g_async_queue_new_full((GDestroyNotify)g_array_unref);
	for (guint i = 0; i < n; i++) {
		AheadThread *t = g_new0(AheadThread, 1);

		t->a = a;
		t->code.q = q;
		t->d = a->size == G_MAXUINT64 ? q->dec : vt_decode_queue_clone(q->dec, NULL);
		if (!t->d) {             /* (no memory for libipt's images: fewer threads) */
			g_free(t);
			break;
		}
		if (t->d != q->dec && q->r->guest_user)
			vt_decode_queue_set_code(t->d, guest_user_code, &t->code);
		a->threads[a->n++] = g_thread_new("vmtrace-decode", decode_ahead, t);
	}
	if (!a->n) {
		a->size = G_MAXUINT64;
		a->threads[a->n++] = g_thread_new("vmtrace-decode", decode_ahead,
						  g_memdup2(&(AheadThread){ a, q->dec, { q, 0, 0 } }, sizeof(AheadThread)));
	}
	return a;
}

/* Times of a range that are earlier than the latest of the ranges before
 * it: that one (as monotonic() in a decoder from the queue's start). */
static void carry_time(GArray *b, guint64 carry)
{
	for (guint i = 0; i < b->len; i++) {
		VtBranch *x = &g_array_index(b, VtBranch, i);

		if (x->tsc < carry)
			x->tsc = carry;
	}
}

/* The next batch decoded ahead into *b (the one before, formatted, back
 * for reuse); FALSE at the queue's end (*b NULL). */
static gboolean ahead_next(Ahead *a, GArray **b)
{
	if (*b)
		g_async_queue_push(a->free, *b);
	for (;;) {
		guint i = (guint)(a->reading % a->ring);
		gpointer x = g_async_queue_pop(a->slot[i]);
		gboolean last;

		if (x != (gpointer)&a->ends[i]) {
			g_mutex_lock(&a->lock);
			/* (its decoder waits only at the cap: glib's broadcast is a
			 * futex call, waiter or not) */
			if (a->waiting[i]-- == a->cap)
				g_cond_broadcast(&a->cond);
			g_mutex_unlock(&a->lock);
			*b = x;
			if (a->carry)
				carry_time(*b, a->carry);
			return TRUE;
		}
		a->carry = MAX(a->carry, a->ends[i].last_tsc);
		last = a->ends[i].last;
		g_mutex_lock(&a->lock);
		a->reading++;
		g_cond_broadcast(&a->cond);
		g_mutex_unlock(&a->lock);
		if (last) {
			*b = NULL;
			return FALSE;
		}
	}
}

/* The threads stopped and joined, their batches freed; its error into
 * r->error (first come). */
static void ahead_stop(VtDecodeResult *r, Ahead *a)
{
	gpointer x;

	if (!a)
		return;
	g_mutex_lock(&a->lock);
	a->stop = TRUE;
	g_cond_broadcast(&a->cond);
	g_mutex_unlock(&a->lock);
	for (guint i = 0; i < a->n; i++)
		g_thread_join(a->threads[i]);
	for (guint i = 0; i < a->ring; i++) {
		while ((x = g_async_queue_try_pop(a->slot[i])))
			if (x != (gpointer)&a->ends[i])
				g_array_unref(x);
		g_async_queue_unref(a->slot[i]);
	}
	g_async_queue_unref(a->free);
	g_mutex_lock(&r->lock);
	if (a->error && !r->error)
		r->error = g_steal_pointer(&a->error);
	r->ranges += a->ranges;
	r->ahead_most = MAX(r->ahead_most, a->n);
	g_mutex_unlock(&r->lock);
	g_clear_error(&a->error);
	g_mutex_clear(&a->lock);
	g_cond_clear(&a->cond);
	g_free(a);
}

/* The next batch into *b (the decoding thread's, or one decoded ahead:
 * NULL at the end); FALSE when there is none after it. */
static gboolean next_batch(Queue *q, Ahead *ahead, GArray **b)
{
	gboolean more;

	if (!ahead) {
		g_array_set_size(*b, 0);
		more = vt_decode_queue_next(q->dec, *b, BATCH);
		lost_splice(q->r, q, *b, !more);
		return more;
	}
	if (ahead_next(ahead, b)) {
		lost_splice(q->r, q, *b, FALSE);
		return TRUE;
	}
	*b = lost_rest(q->r, q);      /* (NULL: none) */
	return FALSE;
}

static gpointer produce_text(Queue *q)
{
	VtDecodeResult *r = q->r;
	GArray *b = NULL;
	Ahead *ahead = NULL;
	const Sink k = { q->fctx, &q->w, q->ready, q->spare };
	Chunk *c = chunk_get(q->spare);
	gboolean more = TRUE, ok = TRUE;
	gsize end = 0;

	if (!token_wait(r, &q->w, FALSE, FALSE)) {
		chunk_free(c);
		return NULL;
	}
	if (ahead_threads(r))
		ahead = ahead_start(q, ahead_threads(r));
	else
		b = batch_new(sizeof(VtBranch));
	while (ok && more) {
		more = next_batch(q, ahead, &b);
		if (b)
			ok = format_batch(r, q, &k, b, &c, &end) && token_wait(r, &q->w, TRUE, FALSE);
		/* (the other threads' turn between batches) */
	}
	if (b)
		g_array_unref(b);
	ahead_stop(r, ahead);
	if (!ok) {
		chunk_free(c);
		return NULL;
	}
	if (c->nmarks && !(c = chunk_push(r, &k, c)))
		return NULL;
	token_put(r);
	g_mutex_lock(&r->lock);
	if (vt_decode_queue_error(q->dec) && !r->error)
		r->error = g_error_copy(vt_decode_queue_error(q->dec));
	g_mutex_unlock(&r->lock);
	c->last = TRUE;
	g_async_queue_push(q->ready, c);
	return NULL;
}

/* ------------------------------------- formatting a queue in threads */
/* Where --jobs leaves a queue two CPUs or more and its formatter can take
 * up its state from the events before (VtDecodeFormatter.replay): one
 * thread formatted a queue's instruction trace - the work of it - while
 * another CPU idled (a single-vCPU recording: the bench's tcg-boot).  Now
 * (a queue of FORMERS_MIN_AUX or more: formers_for()) the queue's thread
 * names its events into jobs of JOB_EVENTS and hands job k to former
 * k % n, each with a formatter of its own; a former
 * replays the job's seed - the events its formatter's state depends on,
 * the last branch or error before the job and the events within the flow
 * after it (PSB, CBR, flow end) - formats the job into chunks of its own
 * and marks the job's last one; the reader takes the formers' chunks job
 * after job: the text is the same as from one thread. */
#define JOB_EVENTS 1024           /* events a job (--insn-trace of real code: ~5 instructions each) */
#define JOBS_AHEAD 2              /* jobs handed to a former and not yet taken */
#define MAX_FORMERS 8
#define FORMERS_MIN_AUX (256u << 10)   /* AUX bytes a queue has formers from (VMTRACE_FORMAT_JOB: any) */

typedef struct {
	GArray *events;           /* VtDecodeEvent, named (empty: no more - the end) */
	GArray *seed;             /* VtDecodeEvent: replayed first */
	gboolean last;            /* the end, and this former's turn: the queue's last chunk */
} Job;

/* Events a job: JOB_EVENTS, or VMTRACE_FORMAT_JOB's 1 to 65536 (tests:
 * seeds at every event; 0: not set). */
static guint job_events(void)
{
	const char *e = g_getenv("VMTRACE_FORMAT_JOB");
	guint64 n = 0;

	if (e && g_ascii_string_to_unsigned(e, 10, 1, 65536, &n, NULL))
		return (guint)n;
	return 0;
}

/* Formers a queue has: where --jobs leaves it two CPUs or more (as
 * ahead_threads() counts them), with a formatter that replays - at most
 * MAX_FORMERS in all (each holds a formatter and up to AHEAD + 1 chunks:
 * ~2 MB; 4 queues with 4 formers each, 1 MiB exit-heavy --insn-trace
 * --jobs 16, peaked at 127 MiB, 94 MiB without formers) - and only for a
 * queue of FORMERS_MIN_AUX or more: on less, starting them cost more than
 * they won (a 64 KiB timeless 2-vCPU recording: +12% wall time, +14..+26%
 * CPU).  VMTRACE_FORMAT_JOB gives every queue formers (tests). */
static guint formers_for(const VtDecodeResult *r, const Queue *q, const VtDecodeFormatter *fmt)
{
	guint n = MIN(r->jobs, r->cpus) / (r->timed ? r->n : 1);

	n = MIN(n, MAX_FORMERS / MAX(r->n, 1u));
	if (!r->job_forced && q->starts[q->q->nbufs] < FORMERS_MIN_AUX)
		return 0;
	return n < 2 || !fmt || !fmt->replay || r->keep ? 0 : n;   /* (formers' jobs see every event) */
}

static Job *job_get(Queue *q)
{
	Job *j = g_async_queue_try_pop(q->jobs_free);

	if (!j) {
		j = g_new0(Job, 1);
		j->events = g_array_sized_new(FALSE, FALSE, sizeof(VtDecodeEvent), JOB_EVENTS);
		j->seed = g_array_new(FALSE, FALSE, sizeof(VtDecodeEvent));
	}
	j->last = FALSE;
	g_array_set_size(j->events, 0);
	g_array_set_size(j->seed, 0);
	return j;
}

static void job_free(gpointer p)
{
	Job *j = p;

	g_array_free(j->events, TRUE);
	g_array_free(j->seed, TRUE);
	g_free(j);
}

/* Does e move the flow (a branch, an error), or come within it (PSB, CBR,
 * flow end: their text depends on where it went before)? */
static gboolean moves_flow(const VtDecodeEvent *e)
{
	return e->b.kind != VT_BRANCH_PSB && e->b.kind != VT_BRANCH_CBR && e->b.kind != VT_BRANCH_FLOW_END &&
	       !vt_branch_is_lost(&e->b);
}

/* The seed after events ev: from its last event that moves the flow on,
 * else the seed before and all of them. */
static void seed_after(GArray *seed, const GArray *ev)
{
	guint i = ev->len;

	while (i && !moves_flow(&g_array_index(ev, VtDecodeEvent, i - 1)))
		i--;
	if (i)
		g_array_set_size(seed, 0);
	i = i ? i - 1 : 0;
	g_array_append_vals(seed, &g_array_index(ev, VtDecodeEvent, i), ev->len - i);
}

/* Job j to former f, once f has fewer than JOBS_AHEAD; FALSE: stopped. */
static gboolean job_hand(Queue *q, Former *f, Job *j)
{
	VtDecodeResult *r = q->r;
	gboolean ok;

	g_mutex_lock(&r->lock);
	while (!r->stop && f->pending >= JOBS_AHEAD)
		waiter_wait(r, &q->w);
	ok = !r->stop;
	f->pending += ok;
	g_mutex_unlock(&r->lock);
	if (ok)
		g_async_queue_push(f->jobs, j);
	else
		job_free(j);
	return ok;
}

/* Branches b[from, to) named into the queue's job k (seed: the events
 * before it its formatter depends on, then after it); FALSE: stopped. */
static gboolean job_make(Queue *q, guint64 k, const GArray *b, guint from, guint to, GArray *seed)
{
	Job *j = job_get(q);

	g_array_append_vals(j->seed, seed->data, seed->len);
	g_array_set_size(j->events, to - from);
	for (guint i = from; i < to; i++) {
		VtDecodeEvent *e = &g_array_index(j->events, VtDecodeEvent, i - from);

		event_of(q->r, q, &g_array_index(b, VtBranch, i), e);
		q->nerrors += vt_branch_is_decode_error(&e->b);
	}
	seed_after(seed, j->events);
	return job_hand(q, &q->formers[k % q->nformers], j);
}

/* One job formatted into *c, the chunk pushed at its end marked so;
 * FALSE: stopped. */
static gboolean former_job(Former *f, const Job *j, Chunk **c)
{
	VtDecodeResult *r = f->r;
	const GArray *ev = j->events;
	gsize end = 0;

	if (!token_wait(r, &f->w, FALSE, FALSE))
		return FALSE;
	r->fmt.replay(f->sink.fctx, (const VtDecodeEvent *)(gconstpointer)j->seed->data, j->seed->len);
	for (guint i = 0; i < ev->len; i++) {
		if (r->fmt.ahead && i + FORMAT_AHEAD < ev->len)
			r->fmt.ahead(f->sink.fctx, &g_array_index(ev, VtDecodeEvent, i + FORMAT_AHEAD).b);
		if (!format_one(r, &f->sink, &g_array_index(ev, VtDecodeEvent, i), c, &end))
			return FALSE;
	}
	(*c)->job_end = TRUE;
	if (!(*c = chunk_push(r, &f->sink, *c)))
		return FALSE;
	token_put(r);
	return TRUE;
}

/* A former: jobs until the end (stopped: taken and dropped). */
static gpointer former_run(gpointer data)
{
	Former *f = data;
	VtDecodeResult *r = f->r;
	Chunk *c = chunk_get(f->q->spare);
	gboolean ok = TRUE, last;

	for (;;) {
		Job *j = g_async_queue_pop(f->jobs);

		g_mutex_lock(&r->lock);
		f->pending--;
		waiter_wake(&f->q->w);
		g_mutex_unlock(&r->lock);
		if (!j->events->len) {
			last = j->last;
			g_async_queue_push(f->q->jobs_free, j);
			break;
		}
		ok = ok && former_job(f, j, &c);
		g_async_queue_push(f->q->jobs_free, j);
	}
	if (ok && last) {
		c->last = TRUE;
		g_async_queue_push(f->sink.ready, c);
	} else {
		chunk_free(c);
	}
	return NULL;
}

/* The queue's thread with formers: its batches named into jobs, job k to
 * former k % n, then the end to each - the last chunk from the one whose
 * turn is next. */
static gpointer produce_jobs(Queue *q)
{
	VtDecodeResult *r = q->r;
	Ahead *ahead = ahead_threads(r) ? ahead_start(q, ahead_threads(r)) : NULL;
	GArray *b = ahead ? NULL : batch_new(sizeof(VtBranch));
	g_autoptr(GArray) seed = g_array_new(FALSE, FALSE, sizeof(VtDecodeEvent));
	gboolean more = TRUE, ok = TRUE;
	guint64 k = 0;

	while (ok && more) {
		more = next_batch(q, ahead, &b);
		for (guint i = 0; ok && b && i < b->len; i += r->job_events)
			ok = job_make(q, k++, b, i, MIN(b->len, i + r->job_events), seed);
		if (b)
			note_done(q, b);
	}
	if (b)
		g_array_unref(b);
	ahead_stop(r, ahead);
	g_mutex_lock(&r->lock);
	if (vt_decode_queue_error(q->dec) && !r->error)
		r->error = g_error_copy(vt_decode_queue_error(q->dec));
	r->jobs_formed += k;
	r->formers_most = MAX(r->formers_most, q->nformers);
	g_mutex_unlock(&r->lock);
	for (guint i = 0; i < q->nformers; i++) {
		Former *f = &q->formers[(k + i) % q->nformers];
		Job *j = job_get(q);

		j->last = ok && i == 0;
		g_mutex_lock(&r->lock);
		f->pending++;             /* (past JOBS_AHEAD: the end is taken at once) */
		g_mutex_unlock(&r->lock);
		g_async_queue_push(f->jobs, j);
	}
	for (guint i = 0; i < q->nformers; i++)
		g_clear_pointer(&q->formers[i].thread, g_thread_join);
	return NULL;
}

/* q's formers (n of them; the first with q's formatter), their threads
 * started. */
static void formers_start(VtDecodeResult *r, Queue *q, guint n)
{
	q->formers = g_aligned_alloc0(n, sizeof(Former), 64);
	q->nformers = n;
	q->jobs_free = g_async_queue_new_full(job_free);
	for (guint i = 0; i < n; i++) {
		Former *f = &q->formers[i];

		f->r = r;
		f->q = q;
		f->jobs = g_async_queue_new_full(job_free);
		g_cond_init(&f->w.wake);
		f->sink = (Sink){ i ? r->fmt.open(r->fmt.data, (guint)(q - r->qs)) : q->fctx, &f->w, g_async_queue_new_full(chunk_free),
				  q->spare };
	}
	for (guint i = 0; i < n; i++)
		q->formers[i].thread = g_thread_new("vmtrace-format", former_run, &q->formers[i]);
}

static void formers_free(VtDecodeResult *r, Queue *q)
{
	for (guint i = 0; i < q->nformers; i++) {
		Former *f = &q->formers[i];

		g_async_queue_unref(f->jobs);
		g_async_queue_unref(f->sink.ready);
		if (i)
			r->fmt.close(f->sink.fctx);
		g_cond_clear(&f->w.wake);
	}
	g_aligned_free(q->formers);
	if (q->jobs_free)
		g_async_queue_unref(q->jobs_free);
}

/* The queue's next chunk for the reader (formers: job after job). */
static Chunk *chunk_next(VtDecodeResult *r, Queue *q)
{
	Former *f = q->nformers ? &q->formers[q->rf] : NULL;
	Waiter *w = f ? &f->w : &q->w;
	Chunk *c = g_async_queue_pop(f ? f->sink.ready : q->ready);

	if (c->last)
		return c;
	if (f && c->job_end)
		q->rf = (q->rf + 1) % q->nformers;
	g_mutex_lock(&r->lock);
	w->ahead--;
	waiter_wake(w);
	g_mutex_unlock(&r->lock);
	return c;
}

/* The queue's next mark, waiting for its thread; NULL at its end. */
static const Mark *mark_peek(VtDecodeResult *r, Queue *q)
{
	if (G_LIKELY(q->ccur && q->cmark < q->ccur->nmarks))
		return &q->ccur->marks[q->cmark];
	while (!q->ended && (!q->ccur || q->cmark >= q->ccur->nmarks)) {
		if (q->ccur && r->hold && q->ccur->nmarks) {   /* (an empty one has no text to hold) */
			g_ptr_array_add(q->held, q->ccur);
			r->nheld++;
		}
		else if (q->ccur)
			g_async_queue_push(q->spare, q->ccur);
		q->ccur = chunk_next(r, q);
		q->cmark = 0;
		q->ended = q->ccur->last;
	}
	return q->ended ? NULL : &q->ccur->marks[q->cmark];
}

void vt_decode_result_hold_text(VtDecodeResult *r)
{
	g_return_if_fail(!r->started);
	r->hold = TRUE;
	for (guint i = 0; i < r->n; i++)
		r->qs[i].held = g_ptr_array_new();
}

void vt_decode_result_release_text(VtDecodeResult *r)
{
	for (guint i = 0; r->hold && i < r->n; i++) {
		Queue *q = &r->qs[i];

		for (guint k = 0; k < q->held->len; k++)
			g_async_queue_push(q->spare, g_ptr_array_index(q->held, k));
		g_ptr_array_set_size(q->held, 0);
	}
	r->nheld = 0;
}

guint vt_decode_result_n_held(const VtDecodeResult *r)
{
	return r->nheld;
}

const char *vt_decode_result_next_text(VtDecodeResult *r, gsize *len)
{
	Queue *best = NULL, *other = NULL;
	guint64 t = 0, ot = G_MAXUINT64;
	const Mark *m;
	const Mark *ms;
	gsize start;
	guint k;

	g_return_val_if_fail(r->formatting, NULL);
	if (!r->timed) {
		while (r->at < r->n && !mark_peek(r, &r->qs[r->at]))
			r->at++;
		best = r->at < r->n ? &r->qs[r->at] : NULL;
	} else {
		for (guint i = 0; i < r->n; i++) {
			if (!(m = mark_peek(r, &r->qs[i])))
				continue;
			if (!best || m->tsc < t) {
				other = best;
				ot = t;
				best = &r->qs[i];
				t = m->tsc;
			} else if (!other || m->tsc < ot) {
				other = &r->qs[i];
				ot = m->tsc;
			}
		}
	}
	if (!best)
		return NULL;
	/* best's marks before the other queues' first (ties: the lower queue) */
	ms = best->ccur->marks;
	k = best->cmark;
	if (!r->timed || !other)
		k = best->ccur->nmarks;
	else
		while (k < best->ccur->nmarks && (ms[k].tsc < ot || (ms[k].tsc == ot && best < other)))
			k++;
	start = best->cmark ? ms[best->cmark - 1].end : 0;
	*len = ms[k - 1].end - start;
	best->cmark = k;
	return best->ccur->text + start;
}

/* The recording's TEXT_POKE records, in time order, attached to the images
 * they patch (kernel: host, guest kernel: guest) before decoders are made. */
static void bytes_clear(gpointer p)
{
	g_bytes_unref(*(GBytes **)p);
}

static gint cmp_poke_time(gconstpointer a, gconstpointer b)
{
	guint64 x, y;

	memcpy(&x, g_bytes_get_data(*(GBytes *const *)a, NULL), 8);
	memcpy(&y, g_bytes_get_data(*(GBytes *const *)b, NULL), 8);
	return x < y ? -1 : x > y;
}

/* A kernel's MMAP record ("[kernel.kallsyms]_text", host; guest kernel:
 * "[guest.kernel.kallsyms]_text"): a vmlinux image moves so that the
 * symbol named after the "]" is at its pgoff, as perf moves it (its
 * ref_reloc_sym) - once per image, at the first such record with a
 * pgoff (0: kptr_restrict hid the address; perf skips it too). */
static void relocate(const VtPerfRecord *rec, const VtDecodeOptions *opts, gboolean done[2])
{
	gsize fixed = rec->type == PERF_RECORD_MMAP2 ? 72 : 40;   /* the file name's offset */
	guint mode = rec->misc & 7;   /* PERF_RECORD_MISC_CPUMODE_MASK: 1 kernel, 4 guest kernel */
	const char *name, *end;
	guint64 pgoff;
	int g = mode == 4;

	if ((mode != 1 && mode != 4) || rec->size <= fixed || done[g])
		return;
	name = (const char *)rec->data + fixed;
	if (name[0] != '[' || !memchr(name, 0, rec->size - fixed) || !(end = strchr(name, ']')) || !end[1])
		return;
	memcpy(&pgoff, rec->data + 32, 8);
	if (!pgoff)
		return;                  /* kptr_restrict hid it: perf does not move by it either */
	done[g] = TRUE;
	if (g ? opts->guest : opts->host)
		vt_decode_image_relocate(g ? opts->guest : opts->host, end + 1, pgoff);
}

/* A host kernel MMAP record of a module ("/lib/modules/.../X.ko", or a
 * "[X]" perf record wrote - any but the kernel's own "[kernel.kallsyms]"):
 * perf's module map in a vmlinux host image. */
static void module_map(const VtPerfRecord *rec, const VtDecodeOptions *opts)
{
	gsize fixed = rec->type == PERF_RECORD_MMAP2 ? 72 : 40;
	const char *name = (const char *)rec->data + fixed;
	guint64 start, len;

	if ((rec->misc & 7) != 1 || rec->size <= fixed || !memchr(name, 0, rec->size - fixed) ||
	    (name[0] != '/' && (name[0] != '[' || g_str_has_prefix(name, "[kernel.kallsyms]"))))
		return;
	memcpy(&start, rec->data + 16, 8);   /* (after the header, pid and tid) */
	memcpy(&len, rec->data + 24, 8);
	vt_decode_image_add_module(opts->host, start, len, name);
}

/* Is the recorded build id (hex theirs, of n bytes) the vmlinux's (hex
 * mine)?  As perf's dso__build_id_equal with the vmlinux's cut to 20 bytes:
 * the same bytes, or a 20-byte record of a shorter id padded with zeros
 * (written before the size field). */
static gboolean build_id_equal(const char *mine, const char *theirs, guint n)
{
	gsize m = MIN(strlen(mine), (gsize)40);

	if (strncmp(mine, theirs, m) || strlen(theirs) < m)
		return FALSE;
	return theirs[m] == 0 || (n == 20 && strspn(theirs + m, "0") == strlen(theirs + m));
}

/* A vmlinux image against the build id the recording has for that kernel
 * (HEADER_BUILD_ID, as perf record writes it: the host's "[kernel.kallsyms]",
 * cpumode kernel, pid -1; the guest's, cpumode guest kernel, pid the guest
 * machine's - 0, or the QEMU pid of an injected recording): another
 * kernel's code would decode into silent garbage, so it is refused, as is
 * a vmlinux without a build id then (perf refuses both). */
static gboolean build_id_check(const VmcorrSession *s, const VtDecodeOptions *opts, gint32 machine_pid,
			       GError **error)
{
	const guint8 *p;
	guint64 n, off = 0;
	VtPerfBuildId e;

	if (!vt_perf_file_feature(s->f, VT_PERF_FEAT_BUILD_ID, &p, &n))
		return TRUE;
	while (vt_perf_build_id_next(p, n, &off, &e)) {
		guint mode = e.misc & 7;   /* PERF_RECORD_MISC_CPUMODE_MASK: 1 kernel, 4 guest kernel */
		const VtDecodeImage *img = mode == 1 && e.pid == -1 ? opts->host
					   : mode == 4 && e.pid == machine_pid ? opts->guest : NULL;
		const char *mine;
		g_autofree char *theirs = NULL;

		if (!img || !vt_decode_image_vmlinux(img) || !e.name || e.name[0] != '[' ||
		    !strstr(e.name, "kernel.kallsyms"))
			continue;
		mine = vt_decode_image_build_id(img);
		theirs = vt_perf_hex(e.id, e.len);
		if (!mine || !build_id_equal(mine, theirs, e.len)) {
			g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE,
				    "the %s vmlinux %s is not the kernel that ran: %s%s, the recording's %s %s",
				    mode == 4 ? "guest" : "host", vt_decode_image_path(img),
				    mine ? "its build id is " : "it has no build id", mine ? mine : "", e.name, theirs);
			return FALSE;
		}
	}
	return TRUE;
}

/* The images as the recording ran them: vmlinux images checked against the
 * recording's build ids and relocated by its kernel MMAP records, then the
 * TEXT_POKEs attached. */
static gboolean images_prepare(const VmcorrSession *s, const VtDecodeOptions *opts, gint32 machine_pid,
			       GError **error)
{
	g_autofree VtPerfIter *it = g_new(VtPerfIter, 1);
	g_autoptr(GArray) all = g_array_new(FALSE, FALSE, sizeof(GBytes *));
	VtDecodePokes *host = NULL, *guest = NULL;
	VtPerfRecord rec;
	gboolean ok = TRUE, moved[2] = { FALSE, FALSE };
	int rc;

	g_array_set_clear_func(all, bytes_clear);
	if (!build_id_check(s, opts, machine_pid, error))
		return FALSE;
	vt_perf_iter_init(it, s->f);
	while ((rc = vt_perf_iter_next(it, &rec, error)) == 1) {
		VtPerfSampleId sid;
		guint64 tsc;
		GBytes *b;
		GByteArray *a;

		if (rec.type == PERF_RECORD_MMAP || rec.type == PERF_RECORD_MMAP2) {
			relocate(&rec, opts, moved);
			module_map(&rec, opts);
		}
		if (rec.type != PERF_RECORD_TEXT_POKE || !vt_perf_record_sample_id(s->f, &rec, &sid) || !sid.has_time)
			continue;
		tsc = s->have_tc ? vt_perf_time_to_tsc(sid.time, &s->tc) : sid.time;
		a = g_byte_array_new();
		g_byte_array_append(a, (const guint8 *)&tsc, 8);
		g_byte_array_append(a, rec.data, rec.size);
		b = g_byte_array_free_to_bytes(a);
		g_array_append_val(all, b);
	}
	if (rc < 0)
		return FALSE;
	g_array_sort(all, cmp_poke_time);
	for (guint i = 0; i < all->len; i++) {
		gsize n;
		const guint8 *p = g_bytes_get_data(g_array_index(all, GBytes *, i), &n);
		guint64 tsc;

		memcpy(&tsc, p, 8);
		vt_decode_pokes_add_record(&host, &guest, p + 8, n - 8, tsc);
	}
	if (host && opts->host && !vt_decode_image_set_pokes(opts->host, g_steal_pointer(&host), error))
		ok = FALSE;
	if (ok && guest && opts->guest && !vt_decode_image_set_pokes(opts->guest, g_steal_pointer(&guest), error))
		ok = FALSE;
	vt_decode_pokes_free(host);
	vt_decode_pokes_free(guest);
	return ok;
}

static gboolean open_queues(VtDecodeResult *r, const VtDecodeOptions *opts, gboolean power, GError **error)
{
	const char *w = g_getenv("VMTRACE_DECODE_WINDOW");   /* tests: the window's size */
	guint64 window = w ? g_ascii_strtoull(w, NULL, 0) : WINDOW;
	VtDecodeCpu cpu;

	cpu_of(r->s, &cpu);
	for (guint i = 0; i < r->n; i++) {
		Queue *q = &r->qs[i];

		q->r = r;
		q->q = &g_array_index(r->s->queues, VmcorrQueue, i);
		q->strings = g_string_chunk_new(4096);
		q->ready = g_async_queue_new();
		buffer_starts(r->s, q);
		q->dec = vt_decode_queue_new_reader(read_queue, q, NULL, q->starts[q->q->nbufs], window, &cpu,
						    opts->host, opts->guest, error);
		if (!q->dec)
			return FALSE;
		vt_decode_queue_set_power(q->dec, power);
		vt_decode_queue_set_flow_end(q->dec, opts->flow_end);
		q->code.q = q;
		if (r->guest_user)
			vt_decode_queue_set_code(q->dec, guest_user_code, &q->code);
	}
	return TRUE;
}

/* The queue a lost-data line goes with: on a timed recording its record's
 * (per CPU: of the CPU, per thread: of the thread; else the first - the
 * merge puts it by its time anyway), on a timeless one the first (perf
 * prints them all before the queues' branches). */
static Queue *lost_queue(VtDecodeResult *r, const Lost *l)
{
	for (guint i = 0; r->timed && i < r->n; i++) {
		const VmcorrQueue *q = r->qs[i].q;

		if (r->per_cpu ? l->cpu >= 0 && q->cpu == (guint32)l->cpu : l->tid >= 0 && q->tid == (guint32)l->tid)
			return &r->qs[i];
	}
	return &r->qs[0];
}

static gint cmp_lost(gconstpointer a, gconstpointer b, gpointer data)
{
	const GArray *lost = data;
	guint64 x = g_array_index(lost, Lost, *(const guint *)a).time, y = g_array_index(lost, Lost, *(const guint *)b).time;

	return x < y ? -1 : x > y;
}

/* The recording's PERF_RECORD_AUX records flagged TRUNCATED, each queue's
 * in time order (perf delivers the records so, timeless recordings' too). */
static gboolean lost_load(VtDecodeResult *r, GError **error)
{
	const VmcorrSession *s = r->s;
	g_autofree VtPerfIter *it = g_new(VtPerfIter, 1);
	VtPerfRecord rec;
	int rc;

	r->lost = g_array_new(FALSE, FALSE, sizeof(Lost));
	vt_perf_iter_init(it, s->f);
	while ((rc = vt_perf_iter_next(it, &rec, error)) == 1) {
		VtPerfSampleId sid = { 0 };
		VtPerfAux aux;
		Lost l;

		if (rec.type != PERF_RECORD_AUX || !vt_perf_record_aux(&rec, &aux, NULL) ||
		    !(aux.flags & VT_PERF_AUX_FLAG_TRUNCATED))
			continue;
		(void)vt_perf_record_sample_id(s->f, &rec, &sid);
		l.time = sid.has_time ? sid.time : 0;
		l.tsc = r->timed && s->have_tc && l.time ? vt_perf_time_to_tsc(l.time, &s->tc) : 0;
		l.cpu = sid.has_cpu ? (gint32)sid.cpu : -1;
		l.pid = sid.has_tid ? (gint32)sid.pid : -1;
		l.tid = sid.has_tid ? (gint32)sid.tid : -1;
		g_array_append_val(r->lost, l);
	}
	if (rc < 0)
		return FALSE;
	for (guint k = 0; r->n && k < r->lost->len; k++) {
		Queue *q = lost_queue(r, &g_array_index(r->lost, Lost, k));

		if (!q->lost)
			q->lost = g_array_new(FALSE, FALSE, sizeof(guint));
		g_array_append_val(q->lost, k);
	}
	for (guint i = 0; i < r->n; i++)
		if (r->qs[i].lost)
			g_array_sort_with_data(r->qs[i].lost, cmp_lost, r->lost);
	return TRUE;
}

static gpointer produce_any(gpointer data)
{
	Queue *q = data;

	return !q->r->formatting ? produce(q) : q->nformers ? produce_jobs(q) : produce_text(q);
}

void vt_decode_result_keep(VtDecodeResult *r, VtDecodeKeep keep, gpointer data)
{
	g_return_if_fail(!r->started);
	r->keep = keep;
	r->keep_data = data;
}

void vt_decode_result_ahead_max(VtDecodeResult *r, guint n)
{
	g_return_if_fail(!r->started);
	if (!g_getenv("VMTRACE_SEGMENT"))
		r->ahead_max = n;
}

void vt_decode_result_drop_jumps(VtDecodeResult *r)
{
	g_return_if_fail(!r->started);
	for (guint i = 0; i < r->n; i++)
		vt_decode_queue_set_drop_jumps(r->qs[i].dec, TRUE);
	r->drops_jumps = TRUE;
}

gboolean vt_decode_result_drops_jumps(const VtDecodeResult *r)
{
	return r->drops_jumps;
}

void vt_decode_result_cycles(VtDecodeResult *r)
{
	g_return_if_fail(!r->started);
	for (guint i = 0; i < r->n; i++)
		vt_decode_queue_set_cycles(r->qs[i].dec, TRUE);
}

void vt_decode_result_start(VtDecodeResult *r, const VtDecodeFormatter *fmt)
{
	g_return_if_fail(!r->started);
	r->started = TRUE;
	r->formatting = fmt != NULL;
	r->job_events = job_events();
	r->job_forced = r->job_events != 0;
	if (!r->job_forced)
		r->job_events = JOB_EVENTS;
	if (fmt)
		r->fmt = *fmt;
	for (guint i = 0; i < r->n; i++) {
		Queue *q = &r->qs[i];

		q->spare = g_async_queue_new_full(fmt ? chunk_free : (GDestroyNotify)g_array_unref);
		if (fmt)
			q->fctx = fmt->open(fmt->data, i);
		if (formers_for(r, q, fmt))
			formers_start(r, q, formers_for(r, q, fmt));
	}
	for (guint i = 0; i < r->n; i++)
		r->qs[i].thread = g_thread_new("vmtrace-decode", produce_any, &r->qs[i]);
}

VtDecodeResult *vt_decode_recording(const VtDecodeOptions *opts, GError **error)
{
	return vt_decode_recording_power(opts, FALSE, error);
}

VtDecodeResult *vt_decode_recording_power(const VtDecodeOptions *opts, gboolean power, GError **error)
{
	VtDecodeResult *r = vt_decode_recording_open(opts, power, error);

	if (r)
		vt_decode_result_start(r, NULL);
	return r;
}

VtDecodeResult *vt_decode_recording_open(const VtDecodeOptions *opts, gboolean power, GError **error)
{
	VmcorrSession *s = vmcorr_session_open(opts->path, VT_PERF_OPEN_RDONLY, error);
	VtDecodeResult *r;

	if (!s)
		return NULL;
	r = g_aligned_alloc0(1, sizeof(VtDecodeResult), _Alignof(VtDecodeResult));
	r->s = s;
	r->n = s->queues->len;
	r->qs = g_aligned_alloc0(MAX(r->n, 1u), sizeof(Queue), _Alignof(Queue));
	g_mutex_init(&r->lock);
	for (guint i = 0; i < r->n; i++)
		g_cond_init(&r->qs[i].w.wake);
	/* by default every queue may decode at once: a timed merge needs
	 * each queue's next batch, and a queue waiting for a token while the
	 * others wait for the reader left a CPU idle (1 MiB exit-heavy, 4
	 * queues on 2 CPUs: idle core-seconds 0.080 -> 0.032 in a call trace,
	 * 0.090 -> 0.043 in --insn-trace; wall -14% and -6%) */
	r->tokens = r->jobs = opts->jobs ? opts->jobs : MAX(r->n, (guint)MAX(1, g_get_num_processors()));
	r->cpus = cpus();
	r->timed = s->have_tsc;
	r->per_cpu = s->per_cpu;
	r->tcg = is_tcg(s);
	r->guest = vt_decode_guest_threads_load(s->f, error);
	r->guest_user = opts->guest_user;
	if (!r->guest || !images_prepare(s, opts, vt_decode_guest_threads_machine_pid(r->guest), error) ||
	    !open_queues(r, opts, power, error) || !lost_load(r, error)) {
		vt_decode_result_free(r);
		return NULL;
	}
	return r;
}

void vt_decode_result_join(VtDecodeResult *r)
{
	if (!r)
		return;
	g_mutex_lock(&r->lock);
	r->stop = TRUE;
	for (guint i = 0; i < r->n; i++) {
		g_cond_broadcast(&r->qs[i].w.wake);
		for (guint k = 0; k < r->qs[i].nformers; k++)
			g_cond_broadcast(&r->qs[i].formers[k].w.wake);
	}
	g_mutex_unlock(&r->lock);
	for (guint i = 0; i < r->n; i++)
		g_clear_pointer(&r->qs[i].thread, g_thread_join);
}

void vt_decode_result_free(VtDecodeResult *r)
{
	if (!r)
		return;
	vt_decode_result_join(r);
	for (guint i = 0; i < r->n; i++) {
		Queue *q = &r->qs[i];
		GArray *b;

		if (q->ready) {
			while ((b = g_async_queue_try_pop(q->ready))) {
				if (r->formatting)
					chunk_free(b);
				else
					g_array_free(b, TRUE);
			}
			g_async_queue_unref(q->ready);
		}
		if (q->spare)
			g_async_queue_unref(q->spare);
		if (q->cur)
			g_array_free(q->cur, TRUE);
		chunk_free(q->ccur);
		for (guint k = 0; q->held && k < q->held->len; k++)
			chunk_free(g_ptr_array_index(q->held, k));
		if (q->held)
			g_ptr_array_free(q->held, TRUE);
		formers_free(r, q);
		if (q->fctx)
			r->fmt.close(q->fctx);
		if (q->strings)
			g_string_chunk_free(q->strings);
		vt_decode_queue_free(q->dec);
		g_free(q->starts);
		if (q->lost)
			g_array_free(q->lost, TRUE);
		g_cond_clear(&q->w.wake);
	}
	g_clear_error(&r->error);
	g_aligned_free(r->qs);
	g_mutex_clear(&r->lock);
	vt_decode_guest_threads_free(r->guest);
	if (r->lost)
		g_array_free(r->lost, TRUE);
	vmcorr_session_free(r->s);
	g_aligned_free(r);
}

gboolean vt_decode_result_timed(const VtDecodeResult *r)
{
	return r->timed;
}

guint vt_decode_result_n_queues(const VtDecodeResult *r)
{
	return r->n;
}

gboolean vt_decode_result_per_cpu(const VtDecodeResult *r)
{
	return r->per_cpu;
}

gboolean vt_decode_result_threads_apart(const VtDecodeResult *r)
{
	if (r->per_cpu)
		return FALSE;
	for (guint i = 0; i < r->n; i++)
		for (guint k = 0; k < i; k++)
			if (r->qs[i].q->tid == r->qs[k].q->tid)
				return FALSE;
	return TRUE;
}

gint32 vt_decode_result_machine_pid(const VtDecodeResult *r)
{
	return vt_decode_guest_threads_machine_pid(r->guest);
}

const char *vt_decode_result_guest_kernel_dso(const VtDecodeResult *r)
{
	return vt_decode_guest_threads_kernel_dso(r->guest);
}

/* perf: the TSC frequency from the AUX info's time conversion (ns to
 * ticks of one second), the maximum non-turbo ratio from the AUX info or
 * else the TSC frequency in units of 100 MHz, rounded. */
guint32 vt_decode_result_cbr_khz(const VtDecodeResult *r, guint32 *max_nonturbo)
{
	const VmcorrSession *s = r->s;
	guint64 mult = s->nr_priv > VT_PT_INFO_TIME_MULT ? s->priv[VT_PT_INFO_TIME_MULT] : 0;
	guint64 shift = s->nr_priv > VT_PT_INFO_TIME_SHIFT ? s->priv[VT_PT_INFO_TIME_SHIFT] : 0;
	guint64 freq, ratio = s->nr_priv > VT_PT_INFO_MAX_NONTURBO_RATIO ? s->priv[VT_PT_INFO_MAX_NONTURBO_RATIO] : 0;

	*max_nonturbo = (guint32)ratio;
	if (!mult || shift > 32)
		return 0;
	freq = (1000000000ull / mult << shift) + ((1000000000ull % mult) << shift) / mult;
	if (!ratio)
		ratio = (freq + 50000000) / 100000000;
	*max_nonturbo = (guint32)ratio;
	return ratio ? (guint32)(freq / ratio / 1000) : 0;
}

void vt_decode_result_progress(const VtDecodeResult *r, guint64 *done, guint64 *total)
{
	*done = *total = 0;
	for (guint i = 0; i < r->n; i++) {
		const Queue *q = &r->qs[i];
		guint64 len = q->starts ? q->starts[q->q->nbufs] : 0;

		*total += len;
		*done += MIN(__atomic_load_n(&q->done_off, __ATOMIC_RELAXED), len);
	}
}

void vt_decode_result_apart(const VtDecodeResult *r, VtDecodeApart *a)
{
	g_mutex_lock((GMutex *)&r->lock);
	*a = (VtDecodeApart){ r->ranges, r->ahead_most, r->jobs_formed, r->formers_most };
	g_mutex_unlock((GMutex *)&r->lock);
}

guint vt_decode_result_n_errors(const VtDecodeResult *r)
{
	guint n = r->nerrors;

	for (guint i = 0; i < r->n; i++)
		n += r->qs[i].nerrors;   /* formatted in the queues' threads */
	return n;
}

gboolean vt_decode_result_check(VtDecodeResult *r, GError **error)
{
	gboolean ok;

	g_mutex_lock(&r->lock);
	ok = !r->error;
	if (!ok)
		g_propagate_error(error, g_error_copy(r->error));
	g_mutex_unlock(&r->lock);
	return ok;
}

char *vt_decode_recording_kcore_dir(const char *path)
{
	g_autofree char *dir = g_build_filename(path, "kcore_dir", NULL);
	g_autofree char *kcore = g_build_filename(dir, "kcore", NULL);

	if (!g_file_test(path, G_FILE_TEST_IS_DIR) || !g_file_test(kcore, G_FILE_TEST_IS_REGULAR))
		return NULL;
	return g_steal_pointer(&dir);
}
