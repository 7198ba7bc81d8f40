/* test-timeline.c - src/timeline's sinks on events made up here: the
 * Perfetto writer's packets read back with protobuf-c (framing, sequence
 * flags, interning, tracks), the HTML writer's page (the longest slices
 * kept, no "<" in the data). */
#include "config.h"

#include <string.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "src/timeline/perfetto.pb-c.h"
#include "src/timeline/timeline.h"

static char *tmp_path(const char *name)
{
	static char *dir;

	if (!dir)
		dir = g_dir_make_tmp("test-timeline-XXXXXX", NULL);
	return g_build_filename(dir, name, NULL);
}

/* One vCPU: a function with a nested one on the guest lane, a VM exit on
 * the host lane, counter values; n extra slices of growing length. */
static void feed(VtTimelineSink *s, guint n)
{
	const VtTimelineSinkOps *o = s->ops;

	o->vcpu(s, 0, "vCPU 0", 100, 101, "CPU 0/KVM");
	o->begin(s, 0, 1000, VT_TIMELINE_FUNCTION, "outer", "address=0x1");
	o->begin(s, 0, 1100, VT_TIMELINE_FUNCTION, "inner", NULL);
	o->end(s, 0, 1200, NULL);
	o->end(s, 0, 1900, NULL);
	o->begin(s, 1, 2000, VT_TIMELINE_EXIT, "VM exit: handle_io", "reason=out\nhandler=handle_io");
	o->end(s, 1, 2500, "ended=</script>");
	o->counter(s, 0, 0, 1);
	for (guint i = 0; i < n; i++) {
		o->begin(s, 0, 3000 + i * 100, VT_TIMELINE_FUNCTION, i % 2 ? "odd" : "even", NULL);
		o->end(s, 0, 3000 + i * 100 + i % 100, NULL);
	}
	o->counter(s, 0, 1000000, 0);
}

/* ---------------------------------------------------------------- Perfetto */
static guint64 varint(const guint8 **p, const guint8 *end)
{
	guint64 v = 0;

	for (int shift = 0; *p < end; shift += 7) {
		guint8 b = *(*p)++;

		v |= (guint64)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	g_assert_not_reached();
}

static void test_perfetto(void)
{
	g_autofree char *path = tmp_path("t.perfetto-trace");
	g_autoptr(GError) err = NULL;
	VtTimelineSink *s = vt_timeline_perfetto_new(path, FALSE, TRUE, &err);
	g_autofree char *buf = NULL;
	gsize len;
	const guint8 *p, *end;
	GHashTable *tracks = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	GHashTable *names = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
	guint n = 0, begins = 0, ends = 0, counters = 0, depth = 0;
	guint64 guest_track = 0;

	g_assert_no_error(err);
	feed(s, 10);
	g_assert_true(s->ops->finish(s, &err));
	vt_timeline_sink_free(s);
	g_assert_true(g_file_get_contents(path, &buf, &len, NULL));
	p = (const guint8 *)buf;
	end = p + len;
	while (p < end) {
		Perfetto__Protos__TracePacket *pkt;
		guint64 size;

		g_assert_cmpuint(*p++, ==, 0x0a);   /* Trace.packet: field 1, length-delimited */
		size = varint(&p, end);
		g_assert_cmpuint(size, <=, (guint64)(end - p));
		pkt = perfetto__protos__trace_packet__unpack(NULL, size, p);
		g_assert_nonnull(pkt);
		p += size;
		g_assert_cmpuint(pkt->trusted_packet_sequence_id, ==, 1);
		g_assert_cmpuint(pkt->sequence_flags, ==, n++ ? 2 : 1);
		if (pkt->interned_data)
			for (gsize i = 0; i < pkt->interned_data->n_event_names; i++) {
				guint64 *k = g_new(guint64, 1);

				*k = pkt->interned_data->event_names[i]->iid;
				g_assert_null(g_hash_table_lookup(names, k));
				g_hash_table_insert(names, k, g_strdup(pkt->interned_data->event_names[i]->name));
			}
		if (pkt->track_descriptor) {
			Perfetto__Protos__TrackDescriptor *td = pkt->track_descriptor;

			g_assert_true(td->has_parent_uuid == FALSE ||
				      g_hash_table_contains(tracks, &td->parent_uuid));
			g_hash_table_add(tracks, g_memdup2(&td->uuid, sizeof td->uuid));
			if (td->name && !strcmp(td->name, "guest"))
				guest_track = td->uuid;
		}
		if (pkt->track_event) {
			Perfetto__Protos__TrackEvent *ev = pkt->track_event;

			g_assert_true(g_hash_table_contains(tracks, &ev->track_uuid));
			g_assert_true(pkt->has_timestamp);
			if (ev->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN) {
				g_assert_nonnull(g_hash_table_lookup(names, &ev->name_iid));
				if (ev->track_uuid == guest_track && begins == 1) {
					g_assert_cmpstr(g_hash_table_lookup(names, &ev->name_iid), ==, "inner");
					g_assert_cmpuint(pkt->timestamp, ==, 1100);
				}
				begins++;
				depth++;
			} else if (ev->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END) {
				g_assert_cmpuint(depth, >, 0);
				depth--;
				ends++;
			} else {
				g_assert_cmpint(ev->type, ==, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER);
				counters++;
			}
		}
		perfetto__protos__trace_packet__free_unpacked(pkt, NULL);
	}
	g_assert_cmpuint(begins, ==, 13);
	g_assert_cmpuint(ends, ==, 13);
	g_assert_cmpuint(counters, ==, 2);
	g_assert_cmpuint(g_hash_table_size(names), ==, 5);   /* outer inner exit odd even: each once */
	g_assert_cmpuint(g_hash_table_size(tracks), ==, 5);  /* process, thread, guest, host, counter */
	g_hash_table_destroy(tracks);
	g_hash_table_destroy(names);
	g_unlink(path);
}

/* ---------------------------------------------------------------- HTML */
static char *page_data(const char *path)
{
	g_autofree char *page = NULL;
	const char *a, *b;

	g_assert_true(g_file_get_contents(path, &page, NULL, NULL));
	a = strstr(page, "<script type=\"application/json\" id=\"data\">");
	g_assert_nonnull(a);
	a += strlen("<script type=\"application/json\" id=\"data\">");
	b = strstr(a, "</script>");
	g_assert_nonnull(b);
	return g_strndup(a, b - a);
}

static void test_html_all(void)
{
	g_autofree char *path = tmp_path("all.html");
	g_autoptr(GError) err = NULL;
	VtTimelineSink *s = vt_timeline_html_new(path, FALSE, 1000, "t", TRUE, &err);
	g_autofree char *data = NULL;

	g_assert_no_error(err);
	feed(s, 10);
	g_assert_true(s->ops->finish(s, &err));
	vt_timeline_sink_free(s);
	data = page_data(path);
	g_assert_nonnull(strstr(data, "\"complete\": true"));
	g_assert_nonnull(strstr(data, "\"total_slices\": 13"));
	g_assert_nonnull(strstr(data, "ended=\\u003c/script>"));  /* no "<" inside <script> */
	g_assert_nonnull(strstr(data, "[0, 1, 100, 100, 1, 0, \"\"]"));   /* inner: lane 0, depth 1, +100, 100 ns */
	g_assert_nonnull(strstr(data, "[1, 0, 1000, 500, 2, 1, "));       /* the exit: host lane, kind 1 */
	g_unlink(path);
}

/* More slices than kept: the longest stay, the summary still covers all. */
static void test_html_longest(void)
{
	g_autofree char *path = tmp_path("some.html");
	g_autoptr(GError) err = NULL;
	VtTimelineSink *s = vt_timeline_html_new(path, FALSE, 5, "t", TRUE, &err);
	g_autofree char *data = NULL;

	g_assert_no_error(err);
	feed(s, 1000);   /* slice i lasts i % 100 ns; kept: outer 900, exit 500, inner 100, two of 99 */
	g_assert_true(s->ops->finish(s, &err));
	vt_timeline_sink_free(s);
	data = page_data(path);
	g_assert_nonnull(strstr(data, "\"complete\": false"));
	g_assert_nonnull(strstr(data, "\"total_slices\": 1003"));
	g_assert_nonnull(strstr(data, "[0, 0, 0, 900, 0, 0, \"address=0x1\"]"));   /* outer */
	g_assert_nonnull(strstr(data, "[1, 0, 1000, 500, 2, 1, "));                   /* the exit */
	g_assert_nonnull(strstr(data, ", 99, "));
	g_assert_null(strstr(data, ", 98, 3, 0, "));    /* a 98 ns slice was not kept */
	g_assert_nonnull(strstr(data, "[0, 1, 100, 100, 1, 0"));   /* inner (100 ns) is the third longest */
	g_unlink(path);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/timeline/perfetto/packets", test_perfetto);
	g_test_add_func("/timeline/html/all", test_html_all);
	g_test_add_func("/timeline/html/longest", test_html_longest);
	return g_test_run();
}
