/* ring.c - read perf_event mmap rings (data records and AUX area). */
#include "config.h"

#include <string.h>

#include "src/record/ring.h"

G_DEFINE_QUARK(vt-ring-error-quark, vt_ring_error)

void vt_ring_init(VtRing *r, struct perf_event_mmap_page *pg, uint8_t *data, uint64_t data_size,
		  uint8_t *aux, uint64_t aux_size, gboolean aux_overwrite)
{
	memset(r, 0, sizeof(*r));
	r->pg = pg;
	r->data = data;
	r->data_size = data_size;
	r->aux = aux;
	r->aux_size = aux_size;
	r->aux_overwrite = aux_overwrite;
	r->tmp = g_byte_array_new();
}

void vt_ring_clear(VtRing *r)
{
	if (r->tmp)
		g_byte_array_free(r->tmp, TRUE);
	memset(r, 0, sizeof(*r));
}

/* The producer publishes head with a release store after writing the data;
 * the acquire load orders our reads of the data after it.  Our release
 * store of the tail orders our reads before the producer may overwrite. */
static uint64_t load_acquire(const __u64 *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store_release(__u64 *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

uint64_t vt_ring_data_pending(const VtRing *r)
{
	return load_acquire(&r->pg->data_head) - r->pg->data_tail;
}

/* Copy len bytes at ring position pos into dst, across the wrap. */
static void ring_copy(const uint8_t *ring, uint64_t size, uint64_t pos, void *dst, uint64_t len)
{
	uint64_t off = pos & (size - 1), first = MIN(len, size - off);

	memcpy(dst, ring + off, first);
	memcpy((uint8_t *)dst + first, ring, len - first);
}

gint64 vt_ring_read(VtRing *r, VtRingRecordFn fn, void *user, GError **error)
{
	uint64_t head = load_acquire(&r->pg->data_head), tail = r->pg->data_tail;
	gint64 count = 0;

	if (head - tail > r->data_size) {
		g_set_error(error, VT_RING_ERROR, VT_RING_ERROR_CORRUPT,
			    "data ring: head %" G_GUINT64_FORMAT " is %" G_GUINT64_FORMAT
			    " bytes ahead of tail, more than the ring holds", head, head - tail);
		return -1;
	}
	while (tail < head) {
		struct perf_event_header h;
		uint64_t off = tail & (r->data_size - 1);
		const struct perf_event_header *rec;

		if (head - tail < sizeof(h)) {
			g_set_error(error, VT_RING_ERROR, VT_RING_ERROR_CORRUPT,
				    "data ring: %" G_GUINT64_FORMAT " stray bytes at the head", head - tail);
			return -1;
		}
		ring_copy(r->data, r->data_size, tail, &h, sizeof(h));
		if (h.size < sizeof(h) || h.size % 8 || h.size > head - tail) {
			g_set_error(error, VT_RING_ERROR, VT_RING_ERROR_CORRUPT,
				    "data ring: record of type %u has size %u (%" G_GUINT64_FORMAT
				    " bytes left)", h.type, h.size, head - tail);
			return -1;
		}
		if (off + h.size <= r->data_size) {
			rec = (const void *)(r->data + off);
		} else {
			g_byte_array_set_size(r->tmp, h.size);
			ring_copy(r->data, r->data_size, tail, r->tmp->data, h.size);
			rec = (const void *)r->tmp->data;
		}
		if (!fn(rec, user, error))
			return -1;
		tail += h.size;
		count++;
	}
	store_release(&r->pg->data_tail, tail);
	return count;
}

static gint64 pass_aux(VtRing *r, uint64_t from, uint64_t to, VtRingAuxFn fn, void *user, GError **error)
{
	uint64_t len = to - from, off = from & (r->aux_size - 1), first = MIN(len, r->aux_size - off);

	if (!len)
		return 0;
	if (!fn(r->aux + off, first, first < len ? r->aux : NULL, len - first, from, user, error))
		return -1;
	return (gint64)len;
}

gint64 vt_ring_read_aux(VtRing *r, VtRingAuxFn fn, void *user, GError **error)
{
	uint64_t head, tail;
	gint64 n;

	if (!r->aux)
		return 0;
	g_return_val_if_fail(!r->aux_overwrite, -1);
	head = load_acquire(&r->pg->aux_head);
	tail = r->pg->aux_tail;
	if (head - tail > r->aux_size) {
		g_set_error(error, VT_RING_ERROR, VT_RING_ERROR_CORRUPT,
			    "AUX area: head %" G_GUINT64_FORMAT " is %" G_GUINT64_FORMAT
			    " bytes ahead of tail, more than the area holds", head, head - tail);
		return -1;
	}
	n = pass_aux(r, tail, head, fn, user, error);
	if (n >= 0)
		store_release(&r->pg->aux_tail, head);
	return n;
}

gint64 vt_ring_snapshot_aux(VtRing *r, uint64_t max, VtRingAuxFn fn, void *user, GError **error)
{
	uint64_t size = r->aux_size, head, len, from, first;
	gboolean wrapped;

	if (!r->aux)
		return 0;
	head = load_acquire(&r->pg->aux_head) & (size - 1);
	if (!r->aux_wrapped) {
		uint64_t tail = MIN(size, (uint64_t)512);

		for (uint64_t i = size - tail; i < size && !r->aux_wrapped; i++)
			r->aux_wrapped = r->aux[i] != 0;
	}
	wrapped = r->aux_wrapped;
	if (head == r->aux_last_head - 1 && r->aux_emitted)
		return 0;       /* nothing new */
	len = MIN(wrapped ? size : head, max);
	r->aux_last_head = head + 1;
	if (!len)
		return 0;
	from = (head - len) & (size - 1);
	first = MIN(len, size - from);
	if (!fn(r->aux + from, first, first < len ? r->aux : NULL, len - first, r->aux_emitted, user, error))
		return -1;
	r->aux_emitted += len;
	return (gint64)len;
}
