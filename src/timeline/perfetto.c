/* perfetto.c - the timeline as a Perfetto trace: protobuf TracePackets
 * (src/timeline/perfetto.proto, packed by protobuf-c) written one at a
 * time as the events come, each framed as field 1 of a Trace.  One packet
 * sequence (id 1): the first packet clears the incremental state, later
 * ones need it; event names and annotation keys are interned the first
 * time they are used. */
#include "config.h"

#include <string.h>

#include "src/fs/output.h"
#include "src/timeline/perfetto.pb-c.h"
#include "src/timeline/timeline.h"

#define SEQUENCE_ID 1
#define FLUSH_AT (1u << 20)

typedef struct {
	guint64 thread, lane[2], counter;   /* track uuids */
} VcpuTracks;

typedef struct {
	VtTimelineSink sink;
	VtFsOutput *out;
	GByteArray *buf;
	GError *error;                      /* the first write error */
	gboolean first;                     /* no packet written yet */
	const char *counter_name;           /* "VM exits/ms", timeless "VM exits/1000 instructions" */
	guint64 next_uuid;
	GHashTable *processes;              /* pid -> uuid */
	GArray *vcpus;                      /* VcpuTracks */
	GHashTable *names, *keys;           /* interned: string -> iid */
	guint64 next_name, next_key;
	guint8 *pack;                       /* packing buffer */
	gsize pack_size;
} Perfetto;

static void flush(Perfetto *p)
{
	if (!p->error && p->buf->len)
		vt_fs_write_all(vt_fs_output_fd(p->out), p->buf->data, p->buf->len, -1, vt_fs_output_path(p->out),
				&p->error);
	g_byte_array_set_size(p->buf, 0);
}

static void put_varint(GByteArray *buf, guint64 v)
{
	guint8 b[10];
	guint n = 0;

	do {
		b[n++] = (v & 0x7f) | (v > 0x7f ? 0x80 : 0);
		v >>= 7;
	} while (v);
	g_byte_array_append(buf, b, n);
}

/* One TracePacket, framed as Trace.packet (field 1, length-delimited). */
static void write_packet(Perfetto *p, Perfetto__Protos__TracePacket *pkt)
{
	gsize len;

	pkt->has_trusted_packet_sequence_id = TRUE;
	pkt->trusted_packet_sequence_id = SEQUENCE_ID;
	pkt->has_sequence_flags = TRUE;
	pkt->sequence_flags = p->first ? PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED
				       : PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_NEEDS_INCREMENTAL_STATE;
	p->first = FALSE;
	len = perfetto__protos__trace_packet__get_packed_size(pkt);
	if (len > p->pack_size) {
		p->pack_size = MAX(len, 2 * p->pack_size);
		p->pack = g_realloc(p->pack, p->pack_size);
	}
	perfetto__protos__trace_packet__pack(pkt, p->pack);
	g_byte_array_append(p->buf, (const guint8 *)"\x0a", 1);
	put_varint(p->buf, len);
	g_byte_array_append(p->buf, p->pack, len);
	if (p->buf->len >= FLUSH_AT)
		flush(p);
}

/* ---------------------------------------------------------------- tracks */
static void track(Perfetto *p, guint64 uuid, guint64 parent, const char *name,
		  Perfetto__Protos__ProcessDescriptor *proc, Perfetto__Protos__ThreadDescriptor *thread,
		  gboolean counter)
{
	Perfetto__Protos__TracePacket pkt = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__CounterDescriptor cd = PERFETTO__PROTOS__COUNTER_DESCRIPTOR__INIT;

	td.has_uuid = TRUE;
	td.uuid = uuid;
	td.has_parent_uuid = parent != 0;
	td.parent_uuid = parent;
	td.name = (char *)name;
	td.process = proc;
	td.thread = thread;
	td.counter = counter ? &cd : NULL;
	pkt.track_descriptor = &td;
	write_packet(p, &pkt);
}

static guint64 process_track(Perfetto *p, gint32 pid)
{
	gpointer uuid = g_hash_table_lookup(p->processes, GINT_TO_POINTER(pid));
	Perfetto__Protos__ProcessDescriptor pd = PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT;
	g_autofree char *name = g_strdup_printf("QEMU %d", pid);

	if (uuid)
		return GPOINTER_TO_SIZE(uuid);
	pd.has_pid = TRUE;
	pd.pid = pid;
	pd.process_name = name;
	track(p, p->next_uuid, 0, NULL, &pd, NULL, FALSE);
	g_hash_table_insert(p->processes, GINT_TO_POINTER(pid), GSIZE_TO_POINTER(p->next_uuid));
	return p->next_uuid++;
}

static void pf_vcpu(VtTimelineSink *s, guint index, const char *name, gint32 pid, gint32 tid, const char *comm)
{
	Perfetto *p = (Perfetto *)s;
	Perfetto__Protos__ThreadDescriptor td = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
	g_autofree char *tname = g_strdup_printf("%s (%s)", name, comm ? comm : "?");
	VcpuTracks t;

	process_track(p, pid);
	td.has_pid = td.has_tid = TRUE;
	td.pid = pid;
	td.tid = tid;
	td.thread_name = tname;
	t.thread = p->next_uuid++;
	track(p, t.thread, 0, NULL, NULL, &td, FALSE);
	t.lane[VT_TIMELINE_GUEST] = p->next_uuid++;
	track(p, t.lane[VT_TIMELINE_GUEST], t.thread, "guest", NULL, NULL, FALSE);
	t.lane[VT_TIMELINE_HOST] = p->next_uuid++;
	track(p, t.lane[VT_TIMELINE_HOST], t.thread, "host", NULL, NULL, FALSE);
	t.counter = p->next_uuid++;
	track(p, t.counter, t.thread, p->counter_name, NULL, NULL, TRUE);
	if (p->vcpus->len <= index)
		g_array_set_size(p->vcpus, index + 1);
	g_array_index(p->vcpus, VcpuTracks, index) = t;
}

/* ---------------------------------------------------------------- events */
typedef struct {
	Perfetto__Protos__InternedData data;
	Perfetto__Protos__EventName name, *names[1];
	Perfetto__Protos__DebugAnnotationName *keys_p[16];
	Perfetto__Protos__DebugAnnotationName keys[16];
} Interning;

/* The iid of s in table; a new one is added to the packet's interned data. */
static guint64 intern(GHashTable *table, guint64 *next, const char *s, gboolean *is_new)
{
	gpointer iid = g_hash_table_lookup(table, s);

	*is_new = iid == NULL;
	if (iid)
		return GPOINTER_TO_SIZE(iid);
	g_hash_table_insert(table, g_strdup(s), GSIZE_TO_POINTER(++*next));
	return *next;
}

static void intern_name(Perfetto *p, Interning *in, Perfetto__Protos__TrackEvent *ev, const char *name)
{
	gboolean is_new;

	ev->has_name_iid = TRUE;
	ev->name_iid = intern(p->names, &p->next_name, name, &is_new);
	if (!is_new)
		return;
	perfetto__protos__event_name__init(&in->name);
	in->name.has_iid = TRUE;
	in->name.iid = ev->name_iid;
	in->name.name = (char *)name;
	in->names[0] = &in->name;
	in->data.n_event_names = 1;
	in->data.event_names = in->names;
}

/* details "k=v\nk=v" -> annotations (at most 16), keys interned; strings
 * point into the copy `d`. */
static guint annotate(Perfetto *p, Interning *in, char *d, Perfetto__Protos__DebugAnnotation *ann, guint max)
{
	guint n = 0;

	for (char *line = d, *next; line && *line && n < max; line = next) {
		char *eq;
		gboolean is_new;
		guint64 iid;

		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (!(eq = strchr(line, '=')))
			continue;
		*eq = 0;
		perfetto__protos__debug_annotation__init(&ann[n]);
		iid = intern(p->keys, &p->next_key, line, &is_new);
		ann[n].has_name_iid = TRUE;
		ann[n].name_iid = iid;
		ann[n].string_value = eq + 1;
		if (is_new) {
			Perfetto__Protos__DebugAnnotationName *k = &in->keys[in->data.n_debug_annotation_names];

			perfetto__protos__debug_annotation_name__init(k);
			k->has_iid = TRUE;
			k->iid = iid;
			k->name = line;
			in->keys_p[in->data.n_debug_annotation_names++] = k;
			in->data.debug_annotation_names = in->keys_p;
		}
		n++;
	}
	return n;
}

static void event(Perfetto *p, guint64 uuid, guint64 ts, int type, const char *name, const char *details,
		  gint64 value)
{
	Perfetto__Protos__TracePacket pkt = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackEvent ev = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	Perfetto__Protos__DebugAnnotation ann[16], *ann_p[16];
	Interning in;
	g_autofree char *d = g_strdup(details);

	memset(&in, 0, sizeof in);
	perfetto__protos__interned_data__init(&in.data);
	pkt.has_timestamp = TRUE;
	pkt.timestamp = ts;
	ev.has_type = TRUE;
	ev.type = type;
	ev.has_track_uuid = TRUE;
	ev.track_uuid = uuid;
	if (name)
		intern_name(p, &in, &ev, name);
	if (type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER) {
		ev.has_counter_value = TRUE;
		ev.counter_value = value;
	}
	if (d) {
		ev.n_debug_annotations = annotate(p, &in, d, ann, G_N_ELEMENTS(ann));
		for (guint i = 0; i < ev.n_debug_annotations; i++)
			ann_p[i] = &ann[i];
		ev.debug_annotations = ann_p;
	}
	if (in.data.n_event_names || in.data.n_debug_annotation_names)
		pkt.interned_data = &in.data;
	pkt.track_event = &ev;
	write_packet(p, &pkt);
}

static guint64 lane_uuid(Perfetto *p, guint lane)
{
	g_return_val_if_fail(lane / 2 < p->vcpus->len, 0);
	return g_array_index(p->vcpus, VcpuTracks, lane / 2).lane[lane % 2];
}

static void pf_begin(VtTimelineSink *s, guint lane, guint64 ts, VtTimelineKind kind, const char *name,
		     const char *details)
{
	Perfetto *p = (Perfetto *)s;
	const char *rest = details ? strchr(details, '\n') : NULL;

	/* a function's address (its first detail) would double the file: its
	 * name says it; what follows (continued=...) is kept */
	if (kind == VT_TIMELINE_FUNCTION)
		details = rest ? rest + 1 : NULL;
	event(p, lane_uuid(p, lane), ts, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN, name, details, 0);
}

static void pf_end(VtTimelineSink *s, guint lane, guint64 ts, const char *details)
{
	Perfetto *p = (Perfetto *)s;

	event(p, lane_uuid(p, lane), ts, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END, NULL, details, 0);
}

static void pf_counter(VtTimelineSink *s, guint vcpu, guint64 ts, gint64 value)
{
	Perfetto *p = (Perfetto *)s;

	g_return_if_fail(vcpu < p->vcpus->len);
	event(p, g_array_index(p->vcpus, VcpuTracks, vcpu).counter, ts,
	      PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER, NULL, NULL, value);
}

static gboolean pf_finish(VtTimelineSink *s, GError **error)
{
	Perfetto *p = (Perfetto *)s;

	flush(p);
	if (p->error) {
		g_propagate_error(error, p->error);
		p->error = NULL;
		return FALSE;
	}
	return vt_fs_output_commit(p->out, error);
}

static void pf_free(VtTimelineSink *s)
{
	Perfetto *p = (Perfetto *)s;

	vt_fs_output_free(p->out);
	g_byte_array_free(p->buf, TRUE);
	g_clear_error(&p->error);
	g_hash_table_destroy(p->processes);
	g_hash_table_destroy(p->names);
	g_hash_table_destroy(p->keys);
	g_array_free(p->vcpus, TRUE);
	g_free(p->pack);
	g_free(p);
}

static const VtTimelineSinkOps perfetto_ops = {
	pf_vcpu, pf_begin, pf_end, pf_counter, pf_finish, pf_free,
};

VtTimelineSink *vt_timeline_perfetto_new(const char *path, gboolean replace, gboolean timed, GError **error)
{
	VtFsOutput *out = vt_fs_output_new(path, replace ? VT_FS_OUTPUT_REPLACE : VT_FS_OUTPUT_NEW, 0600, error);
	Perfetto *p;

	if (!out)
		return NULL;
	p = g_new0(Perfetto, 1);
	p->sink.ops = &perfetto_ops;
	p->out = out;
	p->buf = g_byte_array_sized_new(FLUSH_AT + 4096);
	p->first = TRUE;
	p->counter_name = timed ? "VM exits/ms" : "VM exits/1000 instructions";
	p->next_uuid = 1;
	p->processes = g_hash_table_new(g_direct_hash, g_direct_equal);
	p->vcpus = g_array_new(FALSE, TRUE, sizeof(VcpuTracks));
	p->names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	p->keys = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	return &p->sink;
}
