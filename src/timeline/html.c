/* html.c - the timeline as one self-contained HTML page: the data as JSON
 * in a <script type="application/json">, drawn by page.js (embedded, no
 * network).  What is kept does not grow with the recording:
 *   - a level-of-detail summary: per lane and depth NBINS time bins (busy
 *     time, slices, the name that covers most of the bin); when a time
 *     beyond the last bin comes, neighbouring bins merge and each covers
 *     twice the time;
 *   - the max_slices longest functions and the max_slices longest VM
 *     exits with their details (two min-heaps on duration: on a large
 *     recording long guest functions crowded every exit out of one), all
 *     of them when there are not more;
 *   - per vCPU the counter's maximum per bin. */
#include "config.h"

#include <string.h>

#include "src/cli/json.h"
#include "src/fs/output.h"
#include "src/timeline/timeline.h"

#define NBINS 2048
#define MAX_ROWS 16          /* summary depths per lane (deeper: only as slices) */

typedef struct {
	guint64 busy, best;      /* time covered; the largest part one name covered */
	guint32 count, name;     /* slices touching the bin; name + 1 of that part (0: none) */
} Bin;

typedef struct {
	guint64 start, end;
	guint32 lane, depth, name;
	guint8 kind;
	char *details;
} Slice;

typedef struct {
	guint64 start;
	guint32 name;
	guint8 kind;
	char *details;
} Open;

typedef struct {
	GArray *open;            /* Open, innermost last */
	Bin *rows[MAX_ROWS];     /* lazily allocated */
	guint depth;             /* deepest slice seen + 1 */
} Lane;

typedef struct {
	char *name, *comm;
	gint32 pid, tid;
	gint64 *counter;         /* NBINS maxima, -1 none */
} Vcpu;

typedef struct {
	VtTimelineSink sink;
	VtFsOutput *out;
	char *title;
	guint max_slices;
	gboolean started, evicted, timed;
	guint64 t0, width;       /* bin i covers [t0 + i*width, t0 + (i+1)*width) */
	guint64 last;            /* the latest time seen */
	GArray *lanes;           /* Lane */
	GPtrArray *vcpus;        /* Vcpu */
	GHashTable *name_ids;    /* name -> id + 1 */
	GPtrArray *names;
	GArray *heap;            /* Slice, min-heap on duration: functions */
	GArray *exits;           /* Slice, min-heap on duration: VM exits */
	guint64 n_slices;
} Html;

/* ---------------------------------------------------------- summary bins */
static void merge_bins(Bin *row)
{
	for (guint i = 0; i < NBINS / 2; i++) {
		Bin a = row[2 * i], b = row[2 * i + 1];

		row[i].busy = a.busy + b.busy;
		row[i].count = a.count + b.count;
		row[i].best = MAX(a.best, b.best);
		row[i].name = a.best >= b.best ? a.name : b.name;
	}
	memset(&row[NBINS / 2], 0, sizeof(Bin) * (NBINS / 2));
}

static void merge_counter(gint64 *c)
{
	for (guint i = 0; i < NBINS / 2; i++)
		c[i] = MAX(c[2 * i], c[2 * i + 1]);
	for (guint i = NBINS / 2; i < NBINS; i++)
		c[i] = -1;
}

/* Make the bins reach ts (the first time seen starts them). */
static void cover(Html *h, guint64 ts)
{
	if (!h->started) {
		h->started = TRUE;
		h->t0 = ts;
		h->width = 1;
	}
	if (ts < h->t0)
		ts = h->t0;   /* a counter bucket start before the first event: its first bin */
	h->last = MAX(h->last, ts);
	while ((ts - h->t0) / h->width >= NBINS) {
		for (guint l = 0; l < h->lanes->len; l++) {
			Lane *lane = &g_array_index(h->lanes, Lane, l);

			for (guint d = 0; d < MAX_ROWS; d++)
				if (lane->rows[d])
					merge_bins(lane->rows[d]);
		}
		for (guint v = 0; v < h->vcpus->len; v++)
			merge_counter(((Vcpu *)h->vcpus->pdata[v])->counter);
		h->width *= 2;
	}
}

static void summarize(Html *h, Lane *lane, guint depth, guint64 a, guint64 b, guint32 name)
{
	Bin *row;
	guint64 first = (a - h->t0) / h->width, last = (MAX(b, a + 1) - 1 - h->t0) / h->width;

	if (depth >= MAX_ROWS)
		return;
	if (!lane->rows[depth])
		lane->rows[depth] = g_new0(Bin, NBINS);
	row = lane->rows[depth];
	for (guint64 i = first; i <= last && i < NBINS; i++) {
		guint64 lo = MAX(a, h->t0 + i * h->width), hi = MIN(b, h->t0 + (i + 1) * h->width);
		guint64 part = (hi > lo ? hi - lo : 0) + 1;

		row[i].busy += part - 1;
		row[i].count++;
		if (part > row[i].best) {
			row[i].best = part;
			row[i].name = name + 1;
		}
	}
}

/* ------------------------------------------------------ the longest slices */
static guint64 dur(const Slice *s) { return s->end - s->start; }

static void heap_swap(GArray *a, guint i, guint j)
{
	Slice t = g_array_index(a, Slice, i);

	g_array_index(a, Slice, i) = g_array_index(a, Slice, j);
	g_array_index(a, Slice, j) = t;
}

static void heap_down(GArray *a, guint i)
{
	for (;;) {
		guint l = 2 * i + 1, r = l + 1, m = i;

		if (l < a->len && dur(&g_array_index(a, Slice, l)) < dur(&g_array_index(a, Slice, m)))
			m = l;
		if (r < a->len && dur(&g_array_index(a, Slice, r)) < dur(&g_array_index(a, Slice, m)))
			m = r;
		if (m == i)
			return;
		heap_swap(a, i, m);
		i = m;
	}
}

static void heap_up(GArray *a, guint i)
{
	while (i && dur(&g_array_index(a, Slice, (i - 1) / 2)) > dur(&g_array_index(a, Slice, i))) {
		heap_swap(a, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

/* Keep s if it is among the longest of its kind; takes s->details. */
static void keep(Html *h, Slice *s)
{
	GArray *a = s->kind == VT_TIMELINE_EXIT ? h->exits : h->heap;

	if (a->len < h->max_slices) {
		g_array_append_val(a, *s);
		heap_up(a, a->len - 1);
		return;
	}
	h->evicted = TRUE;
	if (!a->len || dur(s) <= dur(&g_array_index(a, Slice, 0))) {
		g_free(s->details);
		return;
	}
	g_free(g_array_index(a, Slice, 0).details);
	g_array_index(a, Slice, 0) = *s;
	heap_down(a, 0);
}

/* ---------------------------------------------------------------- events */
static guint32 name_id(Html *h, const char *name)
{
	gpointer id = g_hash_table_lookup(h->name_ids, name);

	if (id)
		return GPOINTER_TO_UINT(id) - 1;
	g_ptr_array_add(h->names, g_strdup(name));
	g_hash_table_insert(h->name_ids, h->names->pdata[h->names->len - 1], GUINT_TO_POINTER(h->names->len));
	return h->names->len - 1;
}

static Lane *lane_at(Html *h, guint lane)
{
	if (h->lanes->len <= lane) {
		guint old = h->lanes->len;

		g_array_set_size(h->lanes, lane + 1);
		for (guint i = old; i <= lane; i++)
			g_array_index(h->lanes, Lane, i).open = g_array_new(FALSE, FALSE, sizeof(Open));
	}
	return &g_array_index(h->lanes, Lane, lane);
}

static void vcpu_free(gpointer p)
{
	Vcpu *v = p;

	if (!v)
		return;
	g_free(v->name);
	g_free(v->comm);
	g_free(v->counter);
	g_free(v);
}

static void ht_vcpu(VtTimelineSink *s, guint index, const char *name, gint32 pid, gint32 tid, const char *comm)
{
	Html *h = (Html *)s;
	Vcpu *v = g_new0(Vcpu, 1);

	v->name = g_strdup(name);
	v->comm = g_strdup(comm ? comm : "");
	v->pid = pid;
	v->tid = tid;
	v->counter = g_new(gint64, NBINS);
	for (guint i = 0; i < NBINS; i++)
		v->counter[i] = -1;
	if (h->vcpus->len <= index)
		g_ptr_array_set_size(h->vcpus, index + 1);
	h->vcpus->pdata[index] = v;
	lane_at(h, VT_TIMELINE_LANE(index, VT_TIMELINE_HOST));
}

static void ht_begin(VtTimelineSink *s, guint lane, guint64 ts, VtTimelineKind kind, const char *name,
		     const char *details)
{
	Html *h = (Html *)s;
	Open o = { ts, name_id(h, name), kind, g_strdup(details) };

	cover(h, ts);
	g_array_append_val(lane_at(h, lane)->open, o);
}

static void ht_end(VtTimelineSink *s, guint lane, guint64 ts, const char *details)
{
	Html *h = (Html *)s;
	Lane *l = lane_at(h, lane);
	Open o;
	Slice sl;

	if (!l->open->len)
		return;
	cover(h, ts);
	o = g_array_index(l->open, Open, l->open->len - 1);
	g_array_set_size(l->open, l->open->len - 1);
	sl = (Slice){ o.start, MAX(ts, o.start), lane, l->open->len, o.name, o.kind, o.details };
	if (details) {
		sl.details = o.details ? g_strconcat(o.details, "\n", details, NULL) : g_strdup(details);
		g_free(o.details);
	}
	l->depth = MAX(l->depth, sl.depth + 1);
	summarize(h, l, sl.depth, sl.start, sl.end, sl.name);
	h->n_slices++;
	keep(h, &sl);
}

static void ht_counter(VtTimelineSink *s, guint vcpu, guint64 ts, gint64 value)
{
	Html *h = (Html *)s;
	Vcpu *v;
	guint64 i;

	g_return_if_fail(vcpu < h->vcpus->len && h->vcpus->pdata[vcpu]);
	cover(h, ts);
	v = h->vcpus->pdata[vcpu];
	i = ts < h->t0 ? 0 : (ts - h->t0) / h->width;
	v->counter[i] = MAX(v->counter[i], value);
}

/* ------------------------------------------------------------------ page */
static int slice_order(gconstpointer a, gconstpointer b)
{
	const Slice *x = a, *y = b;

	if (x->lane != y->lane)
		return x->lane < y->lane ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

static guint used_bins(Html *h)
{
	return h->started ? (guint)((h->last - h->t0) / h->width + 1) : 0;
}

static void json_row(VtJson *j, const Bin *row, guint n)
{
	vt_json_begin_object(j);
	vt_json_key(j, "busy");
	vt_json_begin_array(j);
	for (guint i = 0; i < n; i++)
		vt_json_uint(j, row ? row[i].busy : 0);
	vt_json_end_array(j);
	vt_json_key(j, "count");
	vt_json_begin_array(j);
	for (guint i = 0; i < n; i++)
		vt_json_uint(j, row ? row[i].count : 0);
	vt_json_end_array(j);
	vt_json_key(j, "name");
	vt_json_begin_array(j);
	for (guint i = 0; i < n; i++)
		vt_json_int(j, row ? (gint64)row[i].name - 1 : -1);
	vt_json_end_array(j);
	vt_json_end_object(j);
}

static void json_lanes(Html *h, VtJson *j, guint n)
{
	vt_json_key(j, "lanes");
	vt_json_begin_array(j);
	for (guint l = 0; l < h->lanes->len; l++) {
		Lane *lane = &g_array_index(h->lanes, Lane, l);

		vt_json_begin_object(j);
		vt_json_kv_uint(j, "vcpu", l / 2);
		vt_json_kv_string(j, "mode", l % 2 == VT_TIMELINE_GUEST ? "guest" : "host");
		vt_json_kv_uint(j, "depth", lane->depth);
		vt_json_key(j, "rows");
		vt_json_begin_array(j);
		for (guint d = 0; d < MIN(lane->depth, MAX_ROWS); d++)
			json_row(j, lane->rows[d], n);
		vt_json_end_array(j);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
}

static void json_vcpus(Html *h, VtJson *j, guint n)
{
	vt_json_key(j, "vcpus");
	vt_json_begin_array(j);
	for (guint i = 0; i < h->vcpus->len; i++) {
		Vcpu *v = h->vcpus->pdata[i];

		vt_json_begin_object(j);
		vt_json_kv_string(j, "name", v ? v->name : "?");
		vt_json_kv_string(j, "comm", v ? v->comm : "");
		vt_json_kv_int(j, "pid", v ? v->pid : -1);
		vt_json_kv_int(j, "tid", v ? v->tid : -1);
		vt_json_key(j, "counter");
		vt_json_begin_array(j);
		for (guint b = 0; b < n; b++) {
			if (v && v->counter[b] >= 0)
				vt_json_int(j, v->counter[b]);
			else
				vt_json_null(j);
		}
		vt_json_end_array(j);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
}

static void json_slices(Html *h, VtJson *j)
{
	g_array_append_vals(h->heap, h->exits->data, h->exits->len);
	g_array_set_size(h->exits, 0);
	g_array_sort(h->heap, slice_order);
	vt_json_key(j, "slices");
	vt_json_begin_array(j);
	for (guint i = 0; i < h->heap->len; i++) {
		const Slice *s = &g_array_index(h->heap, Slice, i);

		vt_json_begin_array(j);
		vt_json_uint(j, s->lane);
		vt_json_uint(j, s->depth);
		vt_json_uint(j, s->start - h->t0);
		vt_json_uint(j, dur(s));
		vt_json_uint(j, s->name);
		vt_json_uint(j, s->kind);
		vt_json_string(j, s->details ? s->details : "");
		vt_json_end_array(j);
	}
	vt_json_end_array(j);
}

static void json_data(Html *h, GString *out)
{
	g_autoptr(VtJson) j = vt_json_new_string(out);
	guint n = used_bins(h);

	vt_json_begin_object(j);
	vt_json_kv_string(j, "title", h->title);
	vt_json_kv_string(j, "unit", h->timed ? "ns" : "instructions");
	vt_json_kv_uint(j, "t0", h->t0);
	vt_json_kv_uint(j, "bin", h->width);
	vt_json_kv_uint(j, "nbins", n);
	vt_json_kv_bool(j, "complete", !h->evicted);
	vt_json_kv_uint(j, "total_slices", h->n_slices);
	vt_json_key(j, "names");
	vt_json_begin_array(j);
	for (guint i = 0; i < h->names->len; i++)
		vt_json_string(j, h->names->pdata[i]);
	vt_json_end_array(j);
	json_vcpus(h, j, n);
	json_lanes(h, j, n);
	json_slices(h, j);
	vt_json_end_object(j);
}

/* JSON inside <script>: no "<" at all ("\u003c" means the same in JSON),
 * so neither "</script" nor "<!--" can end or confuse the element. */
static void append_script_safe(GString *page, const char *s)
{
	for (const char *p; (p = strchr(s, '<')); s = p + 1) {
		g_string_append_len(page, s, p - s);
		g_string_append(page, "\\u003c");
	}
	g_string_append(page, s);
}

static GString *page(Html *h)
{
	GString *p = g_string_new("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
	g_autoptr(GString) data = g_string_new(NULL);
	g_autofree char *title = g_markup_escape_text(h->title, -1);

	json_data(h, data);
	g_string_append_printf(p, "%s</title>\n<style>\n%s</style>\n</head>\n<body>\n", title, vt_timeline_page_css);
	g_string_append_printf(p, "<header><h1>%s</h1><p id=\"help\">wheel: zoom, drag: pan, click: details, "
			       "0: whole trace</p></header>\n", title);
	g_string_append(p, "<div id=\"wrap\"><canvas id=\"timeline\"></canvas></div>\n<pre id=\"details\"></pre>\n"
			   "<ol id=\"drawn\" hidden></ol>\n<script type=\"application/json\" id=\"data\">");
	append_script_safe(p, data->str);
	g_string_append_printf(p, "</script>\n<script>\n%s</script>\n</body>\n</html>\n", vt_timeline_page_js);
	return p;
}

static gboolean ht_finish(VtTimelineSink *s, GError **error)
{
	Html *h = (Html *)s;
	g_autoptr(GString) p = NULL;

	for (guint l = 0; l < h->lanes->len; l++)   /* what is still open ends at the last time */
		while (g_array_index(h->lanes, Lane, l).open->len)
			ht_end(s, l, h->last, "ended=end of the recording");
	p = page(h);
	return vt_fs_write_all(vt_fs_output_fd(h->out), p->str, p->len, -1, vt_fs_output_path(h->out), error) &&
	       vt_fs_output_commit(h->out, error);
}

static void ht_free(VtTimelineSink *s)
{
	Html *h = (Html *)s;

	vt_fs_output_free(h->out);
	for (guint l = 0; l < h->lanes->len; l++) {
		Lane *lane = &g_array_index(h->lanes, Lane, l);

		for (guint i = 0; i < lane->open->len; i++)
			g_free(g_array_index(lane->open, Open, i).details);
		g_array_free(lane->open, TRUE);
		for (guint d = 0; d < MAX_ROWS; d++)
			g_free(lane->rows[d]);
	}
	g_array_free(h->lanes, TRUE);
	for (guint i = 0; i < h->heap->len; i++)
		g_free(g_array_index(h->heap, Slice, i).details);
	g_array_free(h->heap, TRUE);
	for (guint i = 0; i < h->exits->len; i++)
		g_free(g_array_index(h->exits, Slice, i).details);
	g_array_free(h->exits, TRUE);
	g_ptr_array_free(h->vcpus, TRUE);
	g_hash_table_destroy(h->name_ids);
	g_ptr_array_free(h->names, TRUE);
	g_free(h->title);
	g_free(h);
}

static const VtTimelineSinkOps html_ops = {
	ht_vcpu, ht_begin, ht_end, ht_counter, ht_finish, ht_free,
};

VtTimelineSink *vt_timeline_html_new(const char *path, gboolean replace, guint max_slices, const char *title,
				     gboolean timed, GError **error)
{
	VtFsOutput *out = vt_fs_output_new(path, replace ? VT_FS_OUTPUT_REPLACE : VT_FS_OUTPUT_NEW, 0600, error);
	Html *h;

	if (!out)
		return NULL;
	h = g_new0(Html, 1);
	h->sink.ops = &html_ops;
	h->out = out;
	h->title = g_strdup(title);
	h->max_slices = max_slices;
	h->timed = timed;
	h->lanes = g_array_new(FALSE, TRUE, sizeof(Lane));
	h->vcpus = g_ptr_array_new_with_free_func(vcpu_free);
	h->name_ids = g_hash_table_new(g_str_hash, g_str_equal);
	h->names = g_ptr_array_new_with_free_func(g_free);
	h->heap = g_array_new(FALSE, FALSE, sizeof(Slice));
	h->exits = g_array_new(FALSE, FALSE, sizeof(Slice));
	return &h->sink;
}
