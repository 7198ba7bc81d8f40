/* test-ring.c - the perf mmap ring consumer against a producer that
 * writes records and AUX data the way the kernel does (free-running heads,
 * records and data wrapping at the end of the ring). */
#include "config.h"

#include <string.h>

#include "src/record/ring.h"

#define DATA_SIZE 4096
#define AUX_SIZE 8192

typedef struct {
	struct perf_event_mmap_page pg;
	uint8_t data[DATA_SIZE];
	uint8_t aux[AUX_SIZE];
	VtRing ring;
	GRand *rng;
	uint64_t produced_recs, produced_aux;
	uint32_t next_seq;
} Fixture;

static void fx_init(Fixture *f, gboolean overwrite)
{
	memset(f, 0, sizeof(*f));
	vt_ring_init(&f->ring, &f->pg, f->data, DATA_SIZE, f->aux, AUX_SIZE, overwrite);
	f->rng = g_rand_new_with_seed(42);
}

static void fx_clear(Fixture *f)
{
	vt_ring_clear(&f->ring);
	g_rand_free(f->rng);
}

/* Producer: a record of `size` bytes whose payload is its sequence number
 * repeated; FALSE when the ring has no room (the kernel would count it lost). */
static gboolean produce_record(Fixture *f, uint16_t size)
{
	uint8_t buf[512];
	struct perf_event_header h = { .type = 9, .misc = 0, .size = size };
	uint64_t head = f->pg.data_head;

	if (DATA_SIZE - (head - f->pg.data_tail) < size)
		return FALSE;
	memcpy(buf, &h, sizeof(h));
	for (guint i = sizeof(h); i < size; i += 4)
		memcpy(buf + i, &f->next_seq, 4);
	for (guint i = 0; i < size; i++)
		f->data[(head + i) % DATA_SIZE] = buf[i];
	f->next_seq++;
	__atomic_store_n(&f->pg.data_head, head + size, __ATOMIC_RELEASE);
	return TRUE;
}

/* AUX producer: byte i of the stream is (i * 7 + i / 251) & 0xff. */
static uint8_t aux_byte(uint64_t i)
{
	return (uint8_t)(i * 7 + i / 251);
}

static gboolean produce_aux(Fixture *f, uint64_t len, gboolean overwrite)
{
	uint64_t head = f->pg.aux_head;

	if (!overwrite && AUX_SIZE - (head - f->pg.aux_tail) < len)
		return FALSE;
	for (uint64_t i = 0; i < len; i++)
		f->aux[(head + i) % AUX_SIZE] = aux_byte(head + i);
	__atomic_store_n(&f->pg.aux_head, head + len, __ATOMIC_RELEASE);
	return TRUE;
}

typedef struct {
	uint32_t seq;
	uint64_t count;
	gboolean bad;
} RecCheck;

static gboolean check_record(const struct perf_event_header *h, void *user, GError **error)
{
	RecCheck *c = user;

	(void)error;
	for (guint i = sizeof(*h); i < h->size; i += 4) {
		uint32_t v;

		memcpy(&v, (const uint8_t *)h + i, 4);
		if (v != c->seq)
			c->bad = TRUE;
	}
	c->seq++;
	c->count++;
	return TRUE;
}

typedef struct {
	uint64_t next;       /* expected stream offset */
	uint64_t bytes, pieces;
	gboolean bad;
} AuxCheck;

static gboolean check_aux(const uint8_t *a, uint64_t alen, const uint8_t *b, uint64_t blen, uint64_t offset,
			  void *user, GError **error)
{
	AuxCheck *c = user;

	(void)error;
	if (offset != c->next && c->next != UINT64_MAX)
		c->bad = TRUE;
	for (uint64_t i = 0; i < alen; i++)
		if (a[i] != aux_byte(offset + i))
			c->bad = TRUE;
	for (uint64_t i = 0; i < blen; i++)
		if (b[i] != aux_byte(offset + alen + i))
			c->bad = TRUE;
	if (blen)
		c->pieces++;
	c->next = offset + alen + blen;
	c->bytes += alen + blen;
	return TRUE;
}

static void test_records_wrap(void)
{
	Fixture f;
	RecCheck c = { 0 };
	uint64_t produced = 0;

	fx_init(&f, FALSE);
	for (int round = 0; round < 2000; round++) {
		int n = g_rand_int_range(f.rng, 0, 8);

		for (int i = 0; i < n; i++) {
			uint16_t size = (uint16_t)(8 * g_rand_int_range(f.rng, 1, 60));

			if (produce_record(&f, size))
				produced++;
		}
		g_assert_cmpint(vt_ring_read(&f.ring, check_record, &c, NULL), >=, 0);
		g_assert_cmpuint(f.pg.data_tail, ==, f.pg.data_head);
	}
	g_assert_false(c.bad);
	g_assert_cmpuint(c.count, ==, produced);
	g_assert_cmpuint(f.pg.data_head, >, 10 * DATA_SIZE);   /* wrapped many times */
	fx_clear(&f);
}

static gboolean fail_cb(const struct perf_event_header *h, void *user, GError **error)
{
	(void)h;
	(void)user;
	g_set_error(error, VT_RING_ERROR, VT_RING_ERROR_CALLBACK, "stop");
	return FALSE;
}

static void test_records_corrupt(void)
{
	Fixture f;
	RecCheck c = { 0 };
	GError *e = NULL;
	struct perf_event_header bad = { .type = 1, .size = 12 };

	fx_init(&f, FALSE);
	memcpy(f.data, &bad, sizeof(bad));
	f.pg.data_head = 16;
	g_assert_cmpint(vt_ring_read(&f.ring, check_record, &c, &e), ==, -1);
	g_assert_error(e, VT_RING_ERROR, VT_RING_ERROR_CORRUPT);
	g_assert_nonnull(strstr(e->message, "size 12"));
	g_clear_error(&e);
	g_assert_cmpuint(f.pg.data_tail, ==, 0);   /* nothing consumed */
	/* head too far ahead of the tail */
	f.pg.data_head = DATA_SIZE + 8;
	g_assert_cmpint(vt_ring_read(&f.ring, check_record, &c, &e), ==, -1);
	g_clear_error(&e);
	/* a callback failure stops the read and keeps the tail */
	f.pg.data_head = 0;
	g_assert_true(produce_record(&f, 16));
	g_assert_cmpint(vt_ring_read(&f.ring, fail_cb, NULL, &e), ==, -1);
	g_assert_error(e, VT_RING_ERROR, VT_RING_ERROR_CALLBACK);
	g_clear_error(&e);
	g_assert_cmpuint(f.pg.data_tail, ==, 0);
	fx_clear(&f);
}

static void test_aux_wrap(void)
{
	Fixture f;
	AuxCheck c = { .next = 0 };
	uint64_t produced = 0;

	fx_init(&f, FALSE);
	for (int round = 0; round < 3000; round++) {
		uint64_t len = (uint64_t)g_rand_int_range(f.rng, 1, AUX_SIZE / 3);

		if (produce_aux(&f, len, FALSE))
			produced += len;
		if (g_rand_int_range(f.rng, 0, 3) == 0)
			g_assert_cmpint(vt_ring_read_aux(&f.ring, check_aux, &c, NULL), >=, 0);
	}
	g_assert_cmpint(vt_ring_read_aux(&f.ring, check_aux, &c, NULL), >=, 0);
	g_assert_false(c.bad);
	g_assert_cmpuint(c.bytes, ==, produced);
	g_assert_cmpuint(c.pieces, >, 10);      /* the two-piece path ran */
	g_assert_cmpuint(f.pg.aux_tail, ==, f.pg.aux_head);
	fx_clear(&f);
}

/* Snapshot mode as Intel PT does it: the producer overwrites, and aux_head
 * is the write offset within the area. */
static void produce_overwrite(Fixture *f, uint64_t *pos, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		f->aux[(*pos + i) % AUX_SIZE] = aux_byte(*pos + i) | 1;   /* never 0: shows the wrap */
	*pos += len;
	__atomic_store_n(&f->pg.aux_head, *pos % AUX_SIZE, __ATOMIC_RELEASE);
}

typedef struct {
	GByteArray *bytes;
	uint64_t pieces, offset;
} SnapCheck;

static gboolean snap_collect(const uint8_t *a, uint64_t alen, const uint8_t *b, uint64_t blen, uint64_t offset,
			     void *user, GError **error)
{
	SnapCheck *c = user;

	(void)error;
	g_byte_array_append(c->bytes, a, (guint)alen);
	if (blen)
		g_byte_array_append(c->bytes, b, (guint)blen);
	c->pieces += blen ? 2 : 1;
	c->offset = offset;
	return TRUE;
}

/* The snapshot holds the newest bytes the producer wrote, ending at `pos`. */
static void assert_newest(const SnapCheck *c, uint64_t pos)
{
	for (guint i = 0; i < c->bytes->len; i++)
		g_assert_cmpuint(c->bytes->data[i], ==, aux_byte(pos - c->bytes->len + i) | 1);
}

static gint64 snap(Fixture *f, uint64_t max, SnapCheck *c)
{
	g_byte_array_set_size(c->bytes, 0);
	c->pieces = 0;
	return vt_ring_snapshot_aux(&f->ring, max, snap_collect, c, NULL);
}

static void test_aux_snapshot(void)
{
	Fixture f;
	SnapCheck c = { .bytes = g_byte_array_new() };
	uint64_t pos = 0;

	fx_init(&f, TRUE);
	/* not wrapped yet: everything from the start of the area to the head */
	produce_overwrite(&f, &pos, 1000);
	g_assert_cmpint(snap(&f, AUX_SIZE, &c), ==, 1000);
	assert_newest(&c, pos);
	g_assert_cmpuint(c.offset, ==, 0);
	/* the head has not moved: nothing */
	g_assert_cmpint(snap(&f, AUX_SIZE, &c), ==, 0);
	/* more, still not wrapped: the whole area up to the head again (as perf) */
	produce_overwrite(&f, &pos, 2000);
	g_assert_cmpint(snap(&f, AUX_SIZE, &c), ==, 3000);
	assert_newest(&c, pos);
	g_assert_cmpuint(c.offset, ==, 1000);    /* offsets count the bytes passed */
	/* overwritten 3 times over: the newest AUX_SIZE bytes, in two pieces */
	produce_overwrite(&f, &pos, 3 * AUX_SIZE + 123);
	g_assert_cmpint(snap(&f, AUX_SIZE, &c), ==, AUX_SIZE);
	assert_newest(&c, pos);
	g_assert_cmpuint(c.pieces, ==, 2);
	/* a smaller snapshot size: the newest `max` bytes */
	produce_overwrite(&f, &pos, 5000);
	g_assert_cmpint(snap(&f, 4096, &c), ==, 4096);
	assert_newest(&c, pos);
	/* the head at exactly the start of the area after a wrap */
	produce_overwrite(&f, &pos, AUX_SIZE - pos % AUX_SIZE);
	g_assert_cmpuint(f.pg.aux_head, ==, 0);
	g_assert_cmpint(snap(&f, AUX_SIZE, &c), ==, AUX_SIZE);
	assert_newest(&c, pos);
	g_assert_cmpuint(c.pieces, ==, 1);
	/* the consumer never writes aux_tail in overwrite mode */
	g_assert_cmpuint(f.pg.aux_tail, ==, 0);
	g_byte_array_free(c.bytes, TRUE);
	fx_clear(&f);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/ring/records-wrap", test_records_wrap);
	g_test_add_func("/ring/records-corrupt", test_records_corrupt);
	g_test_add_func("/ring/aux-wrap", test_aux_wrap);
	g_test_add_func("/ring/aux-snapshot", test_aux_snapshot);
	return g_test_run();
}
