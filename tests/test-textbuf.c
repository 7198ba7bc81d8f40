/* test-textbuf.c - the output buffer of vmtrace script: numbers, bytes in hex and padding
 * as printf formats them (compared with printf over many values and
 * widths), pieces larger than the buffer, lines across flushes, positions,
 * and write errors kept. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <string.h>

#include "src/cli/textbuf.h"
#include "src/decode/decode.h"

typedef struct {
	char *data;
	size_t size;
	FILE *f;
	VtTextBuf *t;
} Mem;

static void mem_open(Mem *m, gsize cap)
{
	m->data = NULL;
	m->size = 0;
	m->f = open_memstream(&m->data, &m->size);
	g_assert_nonnull(m->f);
	m->t = vt_textbuf_new(m->f, cap);
}

/* Flush, free, and the text written. */
static char *mem_close(Mem *m)
{
	vt_textbuf_free(m->t);
	fclose(m->f);
	return m->data;
}

static const gint64 ints[] = { 0, 1, -1, 9, 10, -10, 99, 100, 101, -101, 999, 1000, 12345, -12345, 999999,
			       1000000000, 999999999, -2147483648LL, 18446744073LL, 10000000000000000000ULL / 2,
			       G_MAXINT64, G_MININT64 + 1, G_MININT64 };
static const guint64 hexes[] = { 0, 1, 0xf, 0x10, 0xff, 0x100, 0xfff, 0xabc, 0xffffffff, 0x100000000ULL,
				 0xffffffff81000000ULL, 0x1000000000000000ULL, 0x0fffffffffffffffULL, 0x0123456789abcdefULL, 0x123456789abcdefULL, G_MAXUINT64 };
/* up to wider than a piece of the buffer (4096) */
static const int widths[] = { 0, 1, 2, 3, 5, 9, 16, 21, 50, 4070, 4095, 5000 };

static void test_numbers(void)
{
	Mem m;
	GString *want = g_string_new(NULL);
	g_autofree char *got = NULL;

	mem_open(&m, 0);
	for (gsize w = 0; w < G_N_ELEMENTS(widths); w++) {
		for (gsize i = 0; i < G_N_ELEMENTS(ints); i++) {
			vt_textbuf_int(m.t, ints[i], widths[w], ' ');
			vt_textbuf_c(m.t, '|');
			vt_textbuf_int(m.t, ints[i], widths[w], '0');
			vt_textbuf_c(m.t, '|');
			g_string_append_printf(want, "%*" PRId64 "|%0*" PRId64 "|", widths[w], ints[i], widths[w], ints[i]);
		}
		for (gsize i = 0; i < G_N_ELEMENTS(hexes); i++) {
			vt_textbuf_hex(m.t, hexes[i], widths[w]);
			vt_textbuf_c(m.t, '|');
			g_string_append_printf(want, "%*" PRIx64 "|", widths[w], hexes[i]);
		}
	}
	for (gsize i = 0; i < G_N_ELEMENTS(hexes); i++) {   /* vt_textbuf_hex16: "%16llx" */
		vt_textbuf_hex16(m.t, hexes[i]);
		vt_textbuf_c(m.t, '|');
		g_string_append_printf(want, "%16" PRIx64 "|", hexes[i]);
	}
	for (gsize i = 0; i < G_N_ELEMENTS(hexes); i++) {   /* the same into room taken: _at */
		char *p = vt_textbuf_room(m.t, 24 + 24 + 1);
		gsize n = vt_hex_at(p, hexes[i]);

		p[n] = '|';
		vt_hex16_at(p + n + 1, hexes[i]);
		vt_textbuf_commit(m.t, n + 1 + 16);
		vt_textbuf_c(m.t, '|');
		g_string_append_printf(want, "%" PRIx64 "|%16" PRIx64 "|", hexes[i], hexes[i]);
	}
	got = mem_close(&m);
	g_assert_cmpstr(got, ==, want->str);
	g_string_free(want, TRUE);
}

static void test_strings(void)
{
	static const char *const strs[] = { "", "a", "swapper", "CPU 1/KVM", "[guest.kernel.kallsyms]",
					    "a_rather_long_kernel_function_name_that_is_longer_than_fifty_bytes" };
	Mem m;
	GString *want = g_string_new(NULL);
	g_autofree char *got = NULL;

	mem_open(&m, 0);
	for (gsize w = 0; w < G_N_ELEMENTS(widths); w++)
		for (gsize i = 0; i < G_N_ELEMENTS(strs); i++) {
			vt_textbuf_right(m.t, strs[i], strlen(strs[i]), widths[w]);
			vt_textbuf_c(m.t, '|');
			vt_textbuf_left(m.t, strs[i], strlen(strs[i]), widths[w]);
			vt_textbuf_c(m.t, '|');
			vt_textbuf_str(m.t, strs[i]);
			vt_textbuf_pad(m.t, (gsize)widths[w]);
			vt_textbuf_c(m.t, '\n');
			g_string_append_printf(want, "%*s|%-*s|%s%*s\n", widths[w], strs[i], widths[w], strs[i],
					       strs[i], widths[w], "");
		}
	got = mem_close(&m);
	g_assert_cmpstr(got, ==, want->str);
	g_string_free(want, TRUE);
}

/* " xx" per byte: every byte value, runs of 0..20 bytes (an
 * instruction's) and one longer than a piece (written in parts), each
 * followed by text that must not be overwritten. */
static void test_bytes(void)
{
	Mem m;
	GString *want = g_string_new(NULL);
	g_autofree char *got = NULL;
	guint8 b[3000];

	for (gsize i = 0; i < sizeof(b); i++)
		b[i] = (guint8)(i * 7 + i / 256);
	mem_open(&m, 0);
	for (gsize n = 0; n <= 20; n++)
		for (gsize at = 0; at + n <= 300; at += 13) {
			vt_textbuf_bytes(m.t, b + at, n);
			vt_textbuf_c(m.t, '|');
			for (gsize i = 0; i < n; i++)
				g_string_append_printf(want, " %02x", b[at + i]);
			g_string_append_c(want, '|');
		}
	vt_textbuf_bytes(m.t, b, sizeof(b));
	vt_textbuf_c(m.t, '.');
	for (gsize i = 0; i < sizeof(b); i++)
		g_string_append_printf(want, " %02x", b[i]);
	g_string_append_c(want, '.');
	got = mem_close(&m);
	g_assert_cmpstr(got, ==, want->str);
	g_string_free(want, TRUE);
}

/* Pieces larger than the buffer (a call trace's padding runs to tens of
 * kilobytes), lines across flushes, positions counted through flushes. */
static void test_large(void)
{
	Mem m;
	GString *want = g_string_new(NULL);
	g_autofree char *got = NULL;
	g_autofree char *big = g_malloc(100000);

	for (gsize i = 0; i < 100000; i++)
		big[i] = (char)('a' + i % 26);
	mem_open(&m, 5000);   /* small: many flushes */
	for (gsize n = 0; n < 100000; n = n * 3 + 7) {
		guint64 before = vt_textbuf_pos(m.t);

		vt_textbuf_pad(m.t, n);
		vt_textbuf_mem(m.t, big, n);
		vt_textbuf_hex(m.t, n, 9);
		vt_textbuf_c(m.t, '\n');
		g_assert_cmpuint(vt_textbuf_pos(m.t) - before, ==, 2 * n + 9 + 1);
		g_string_append_printf(want, "%*s%.*s%9" G_GSIZE_MODIFIER "x\n", (int)n, "", (int)n, big, n);
	}
	g_assert_cmpuint(vt_textbuf_pos(m.t), ==, want->len);
	got = mem_close(&m);
	g_assert_cmpuint(strlen(got), ==, want->len);
	g_assert_true(memcmp(got, want->str, want->len) == 0);
	g_string_free(want, TRUE);
}

/* A write that fails (a full disk, a closed pipe) is kept and said. */
static void test_write_error(void)
{
	FILE *f = fopen("/dev/full", "w");
	VtTextBuf *t;

	if (!f) {
		g_test_skip("no /dev/full");
		return;
	}
	t = vt_textbuf_new(f, 0);
	vt_textbuf_pad(t, 10000);
	g_assert_false(vt_textbuf_flush(t));
	g_assert_true(vt_textbuf_failed(t));
	vt_textbuf_free(t);
	g_assert_true(ferror(f));
	fclose(f);
}

/* A buffer in memory (script's decoding threads): it grows instead of
 * writing, vt_textbuf_swap hands its text over and goes on in another
 * buffer, positions keep counting. */
static void test_memory(void)
{
	g_autoptr(VtTextBuf) t = vt_textbuf_new_mem(16);
	g_autofree char *big = g_strnfill(100000, 'x');   /* (past a first buffer of 64 KiB too: grows) */
	char *old, *spare = vt_decode_buf_new(5000);
	gsize len, cap;

	vt_textbuf_str(t, "abc ");
	vt_textbuf_int(t, -42, 6, ' ');
	vt_textbuf_mem_long(t, big, 100000);    /* past its first size: grows */
	g_assert_cmpuint(vt_textbuf_pos(t), ==, 100010);
	old = vt_textbuf_swap(t, spare, vt_decode_buf_size(5000), &len, &cap);
	g_assert_cmpuint(len, ==, 100010);
	g_assert_cmpuint(cap, >=, 100010);
	g_assert_cmpmem(old, 10, "abc    -42", 10);
	g_assert_cmpmem(old + 10, 100000, big, 100000);
	vt_textbuf_c(t, 'y');
	g_assert_cmpuint(vt_textbuf_pos(t), ==, 100011);
	g_assert_true(t->buf == spare);
	g_assert_cmpmem(t->buf, 1, "y", 1);
	vt_decode_buf_free(old, cap);
	old = vt_textbuf_swap(t, NULL, 0, &len, &cap);   /* a new buffer of its own */
	g_assert_cmpuint(len, ==, 1);
	g_assert_true(old == spare);
	g_assert_cmpuint(cap, ==, vt_decode_buf_size(5000));
	g_assert_true(vt_textbuf_flush(t));
	vt_decode_buf_free(old, cap);
}

/* A pipe's buffer grows to the buffer's size (up to the system's limit);
 * the text still goes through it whole. */
static void test_pipe(void)
{
	g_autofree char *max_text = NULL;
	int fds[2], want = 1 << 20, size;
	FILE *f;
	char got[8] = "";

	if (g_file_get_contents("/proc/sys/fs/pipe-max-size", &max_text, NULL, NULL))
		want = MIN(want, (int)g_ascii_strtoll(max_text, NULL, 10));
	g_assert_cmpint(pipe(fds), ==, 0);
	f = fdopen(fds[1], "w");
	g_assert_nonnull(f);
	g_assert_cmpint(fcntl(fds[1], F_GETPIPE_SZ), <, want);   /* 64 KiB by default */
	{
		g_autoptr(VtTextBuf) t = vt_textbuf_new(f, 1 << 20);

		size = fcntl(fds[1], F_GETPIPE_SZ);
		vt_textbuf_str(t, "pipe\n");
	}
	g_assert_cmpint(size, >=, want);
	g_assert_cmpint(read(fds[0], got, sizeof(got)), ==, 5);
	g_assert_cmpmem(got, 5, "pipe\n", 5);
	fclose(f);
	close(fds[0]);
}

/* Pieces written at once (script's merged text): after what the FILE and
 * the buffer hold, in order, counted in positions - through the descriptor
 * (writev), through fwrite where the FILE has none (a memory stream), and
 * appended in memory; a failed writev kept as a failed write. */
static void write_pieces(VtTextBuf *t, FILE *f, const char *big)
{
	struct iovec iov[] = { { (char *)"bc", 2 }, { (char *)"", 0 }, { (char *)big, 10000 }, { (char *)"d", 1 } };

	if (f)
		fputs("head ", f);
	vt_textbuf_str(t, "a ");
	vt_textbuf_write_pieces(t, iov, G_N_ELEMENTS(iov));
	vt_textbuf_str(t, "e\n");
	g_assert_cmpuint(vt_textbuf_pos(t), ==, 2 + 2 + 10000 + 1 + 2);
}

static void test_pieces(void)
{
	g_autofree char *big = g_strnfill(10000, 'x');
	g_autofree char *want = g_strconcat("head a bc", big, "de\n", NULL);
	g_autofree char *dir = g_dir_make_tmp("test-textbuf-XXXXXX", NULL);
	g_autofree char *path = g_build_filename(dir, "out", NULL);
	g_autofree char *got = NULL;
	char *text;
	Mem m;
	FILE *f = fopen(path, "w");
	VtTextBuf *t = vt_textbuf_new(f, 0);

	write_pieces(t, f, big);
	vt_textbuf_free(t);
	fclose(f);
	g_assert_true(g_file_get_contents(path, &got, NULL, NULL));
	g_assert_cmpstr(got, ==, want);
	g_unlink(path);
	g_rmdir(dir);

	mem_open(&m, 0);                      /* no descriptor */
	g_assert_cmpint(fileno(m.f), <, 0);
	write_pieces(m.t, m.f, big);
	text = mem_close(&m);
	g_assert_cmpstr(text, ==, want);
	free(text);

	t = vt_textbuf_new_mem(16);
	write_pieces(t, NULL, big);
	g_assert_cmpuint(t->len, ==, strlen(want) - 5);
	g_assert_cmpmem(t->buf, t->len, want + 5, strlen(want) - 5);
	vt_textbuf_free(t);

	f = fopen("/dev/full", "w");
	if (f) {
		struct iovec iov = { big, 10000 };

		t = vt_textbuf_new(f, 0);
		vt_textbuf_write_pieces(t, &iov, 1);
		g_assert_true(vt_textbuf_failed(t));
		vt_textbuf_free(t);
		g_assert_true(ferror(f));
		fclose(f);
	}
}

/* ------------------------------------------------ zero-copy into a pipe */
/* The text of line i (of different lengths: flushes fall mid-line). */
static void splice_line(GString *s, guint i)
{
	g_string_append_printf(s, "line %08u %*s|\n", i, (int)(i % 97) * 7, "");
}

typedef struct {
	int fd;                  /* the pipe's read end */
	gboolean tee;            /* first tee() what the pipe holds into another pipe */
	gboolean slow;           /* read a little at a time, with pauses */
	int kept;                /* (tee) that pipe's read end */
	int least;               /* (tee) bytes the pipe holds before the tee */
	GString *got;
} Reader;

static void read_all(int fd, GString *got, gboolean slow)
{
	char buf[65536];
	ssize_t n;

	while ((n = read(fd, buf, slow ? 4096 : sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		g_assert_cmpint(n, >, 0);
		g_string_append_len(got, buf, n);
		if (slow && got->len % (64 << 10) < 4096)
			g_usleep(2000);
	}
}

/* With tee: what the pipe holds (at least one flush) is referenced from
 * a second pipe, read only after the writer has written everything (and
 * reused its buffer's addresses many times): the pages given to the pipe
 * must never be written again. */
static gpointer reader_run(gpointer data)
{
	Reader *r = data;

	if (r->tee) {
		int q[2], avail = 0;
		struct pollfd pfd = { r->fd, POLLIN, 0 };

		g_assert_cmpint(pipe(q), ==, 0);
		(void)fcntl(q[1], F_SETPIPE_SZ, 1 << 20);
		while (avail < r->least) {
			g_assert_cmpint(poll(&pfd, 1, -1), ==, 1);
			g_assert_cmpint(ioctl(r->fd, FIONREAD, &avail), ==, 0);
			if (avail < r->least)
				g_usleep(1000);
		}
		g_assert_cmpint(tee(r->fd, q[1], (size_t)avail, 0), >, 0);
		close(q[1]);
		r->kept = q[0];
	}
	read_all(r->fd, r->got, r->slow);
	return NULL;
}

/* 5 MiB of lines through vt_textbuf into a pipe read by a thread (every
 * 4000th line as a piece: of the ~1.4 MB of lines between two pieces the
 * full 1 MiB halves are spliced, the rest is copied into the pipe before
 * the piece); the text read is the text written. */
static void splice_through(gboolean tee, gboolean slow, gboolean nonblock, gboolean nosplice)
{
	int fds[2];
	FILE *f;
	VtTextBuf *t;
	Reader r = { 0 };
	GThread *th;
	g_autoptr(GString) want = g_string_new(NULL);
	g_autoptr(GString) line = g_string_new(NULL);

	g_assert_cmpint(pipe(fds), ==, 0);
	if (nonblock)
		g_assert_cmpint(fcntl(fds[1], F_SETFL, O_NONBLOCK), ==, 0);
	f = fdopen(fds[1], "w");
	if (nosplice)
		g_setenv("VMTRACE_NO_SPLICE", "1", TRUE);
	t = vt_textbuf_new(f, 1 << 20);
	g_unsetenv("VMTRACE_NO_SPLICE");
	if (!t->splice && !nosplice) {
		g_test_skip("no vmsplice output here (no transparent huge pages)");
		vt_textbuf_free(t);
		fclose(f);
		close(fds[0]);
		return;
	}
	/* a quarter of what the pipe holds (1 MiB unless pipe-max-size is lower) */
	r = (Reader){ fds[0], tee, slow, -1, fcntl(fds[1], F_GETPIPE_SZ) / 4, g_string_new(NULL) };
	th = g_thread_new("reader", reader_run, &r);
	for (guint i = 0; want->len < (5u << 20); i++) {
		g_string_truncate(line, 0);
		splice_line(line, i);
		g_string_append_len(want, line->str, line->len);
		if (i % 4000) {
			vt_textbuf_mem(t, line->str, line->len);
		} else {
			struct iovec iov = { line->str, line->len };

			vt_textbuf_write_pieces(t, &iov, 1);
		}
	}
	g_assert_true(vt_textbuf_flush(t));
	vt_textbuf_free(t);
	fclose(f);
	g_thread_join(th);
	g_assert_cmpuint(r.got->len, ==, want->len);
	g_assert_true(memcmp(r.got->str, want->str, want->len) == 0);
	if (tee) {
		g_autoptr(GString) kept = g_string_new(NULL);

		read_all(r.kept, kept, FALSE);
		close(r.kept);
		g_assert_cmpuint(kept->len, >=, (guint)r.least);
		g_assert_true(memcmp(kept->str, want->str, kept->len) == 0);
	}
	g_string_free(r.got, TRUE);
	close(fds[0]);
}

static void test_splice(void)
{
	splice_through(FALSE, FALSE, FALSE, FALSE);
}

static void test_splice_tee(void)
{
	splice_through(TRUE, FALSE, FALSE, FALSE);
}

/* a slow reader of a non-blocking pipe: vmsplice's EAGAIN waited out */
static void test_splice_nonblock(void)
{
	splice_through(FALSE, TRUE, TRUE, FALSE);
}

/* the same with write (VMTRACE_NO_SPLICE=1): the buffer's EAGAIN waited
 * out as the pieces' (its fwrite failed on it before session 29) */
static void test_write_nonblock(void)
{
	splice_through(FALSE, TRUE, TRUE, TRUE);
}

/* The reader gone: the write fails (EPIPE, SIGPIPE ignored), kept as
 * failed, and the FILE's error flag set. */
static void test_splice_errors(void)
{
	int fds[2];
	FILE *f;
	VtTextBuf *t;
	g_autofree char *big = g_strnfill(3 << 20, 'x');

	signal(SIGPIPE, SIG_IGN);
	g_assert_cmpint(pipe(fds), ==, 0);
	close(fds[0]);
	f = fdopen(fds[1], "w");
	t = vt_textbuf_new(f, 1 << 20);
	vt_textbuf_mem_long(t, big, 3 << 20);
	g_assert_false(vt_textbuf_flush(t));
	g_assert_true(vt_textbuf_failed(t));
	vt_textbuf_free(t);
	g_assert_true(ferror(f));
	fclose(f);
}

/* The same where text waits before pieces (copied, not spliced): failed,
 * the pieces not written, every byte counted. */
static void test_splice_errors_pieces(void)
{
	int fds[2];
	FILE *f;
	VtTextBuf *t;
	g_autofree char *big = g_strnfill(100000, 'y');
	struct iovec iov[2] = { { big, 70000 }, { big, 30000 } };

	signal(SIGPIPE, SIG_IGN);
	g_assert_cmpint(pipe(fds), ==, 0);
	close(fds[0]);
	f = fdopen(fds[1], "w");
	t = vt_textbuf_new(f, 1 << 20);
	if (!t->splice) {
		g_test_skip("no vmsplice output here (no transparent huge pages)");
	} else {
		vt_textbuf_mem_long(t, big, 5000);
		vt_textbuf_write_pieces(t, iov, 2);
		g_assert_true(vt_textbuf_failed(t));
		g_assert_cmpuint(vt_textbuf_pos(t), ==, 5000 + 100000);
		g_assert_false(vt_textbuf_flush(t));
		g_assert_true(ferror(f));
	}
	vt_textbuf_free(t);
	fclose(f);
}

/* VMTRACE_NO_SPLICE=1: no vmsplice (before any test's threads: setenv) */
static void test_splice_off(void)
{
	int fds[2];
	FILE *f;
	VtTextBuf *t;

	g_assert_cmpint(pipe(fds), ==, 0);
	f = fdopen(fds[1], "w");
	g_setenv("VMTRACE_NO_SPLICE", "1", TRUE);
	t = vt_textbuf_new(f, 1 << 20);
	g_unsetenv("VMTRACE_NO_SPLICE");
	g_assert_false(t->splice);
	vt_textbuf_free(t);
	fclose(f);
	close(fds[0]);
}

/* A pipe asked to grow past what the system allows an unprivileged
 * process (pipe-max-size) gets as large as it allows, not left at 64 KiB. */
static void test_pipe_grow_capped(void)
{
	g_autofree char *max_text = NULL;
	int fds[2], most = 1 << 20;
	FILE *f;
	VtTextBuf *t;

	if (g_file_get_contents("/proc/sys/fs/pipe-max-size", &max_text, NULL, NULL))
		most = MIN(most, (int)g_ascii_strtoll(max_text, NULL, 10));
	g_assert_cmpint(pipe(fds), ==, 0);
	f = fdopen(fds[1], "w");
	g_setenv("VMTRACE_NO_SPLICE", "1", TRUE);   /* its buffer's size is asked for */
	t = vt_textbuf_new(f, 64u << 20);
	g_unsetenv("VMTRACE_NO_SPLICE");
	g_assert_cmpint(fcntl(fds[1], F_GETPIPE_SZ), >=, most);
	vt_textbuf_free(t);
	fclose(f);
	close(fds[0]);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/textbuf/numbers", test_numbers);
	g_test_add_func("/textbuf/strings", test_strings);
	g_test_add_func("/textbuf/bytes", test_bytes);
	g_test_add_func("/textbuf/large", test_large);
	g_test_add_func("/textbuf/write-error", test_write_error);
	g_test_add_func("/textbuf/memory", test_memory);
	g_test_add_func("/textbuf/pipe", test_pipe);
	g_test_add_func("/textbuf/pieces", test_pieces);
	g_test_add_func("/textbuf/splice-off", test_splice_off);
	g_test_add_func("/textbuf/pipe-grow-capped", test_pipe_grow_capped);
	g_test_add_func("/textbuf/splice", test_splice);
	g_test_add_func("/textbuf/splice-tee", test_splice_tee);
	g_test_add_func("/textbuf/splice-nonblock", test_splice_nonblock);
	g_test_add_func("/textbuf/write-nonblock", test_write_nonblock);
	g_test_add_func("/textbuf/splice-errors", test_splice_errors);
	g_test_add_func("/textbuf/splice-errors-pieces", test_splice_errors_pieces);
	return g_test_run();
}
