/* textbuf.c - one large output buffer, numbers and padding without printf
 * (see textbuf.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/cli/textbuf.h"
#include "src/decode/decode.h"   /* vt_decode_table_new */

/* A pipe's buffer as large as one write of ours, if the system lets it
 * (the default 64 KiB takes a reader's wake-up and a context switch each),
 * else as large as it lets it (/proc/sys/fs/pipe-max-size, 1 MiB by
 * default, caps it for unprivileged processes): nothing else changes on
 * failure. */
static void pipe_grow(FILE *f, gsize cap)
{
	struct stat st;
	int fd = fileno(f), want = (int)MIN(cap, (gsize)G_MAXINT);

	if (fd < 0 || fstat(fd, &st) || !S_ISFIFO(st.st_mode))
		return;
	for (; want >= VT_TEXTBUF_PIECE && fcntl(fd, F_GETPIPE_SZ) < want; want /= 2) {
		if (fcntl(fd, F_SETPIPE_SZ, want) >= 0)
			break;
	}
}

/* ------------------------------------------------ zero-copy to a pipe */
/* Text for a pipe goes into it without a copy: the buffer is one
 * transparent huge page (2 MiB, anonymous), its text is given to the pipe
 * with vmsplice() - the pipe then holds references to the page itself -
 * half by half, and the page's range is dropped after its second half
 * (MADV_DONTNEED), so the next text lands in a new page and no page
 * given to the pipe is ever written again: what the reader gets is what
 * was written, whoever reads it and however long it keeps the pages
 * (tee, splice).  After a failed vmsplice the buffer stays in the half
 * it is in (the other was given whole, or not at all).  write() into a pipe
 * allocates, charges and copies a page per 4 KiB, and the reader frees
 * each; here that is one page per 2 MiB, zeroed by the kernel.  Measured
 * (session 16, the 1 MiB bench recordings into `wc -l`, 9 runs of each,
 * alternating, medians): call traces -9..-22% wall and CPU (tnt-dense's
 * 571 MB of text: 0.329 -> 0.260 s wall), branches -4..-8% wall,
 * instructions 0..-5% (their text was then copied here from the threads'
 * chunks; into a file or with write() the kernel copies it).  A test
 * program writing the same 571 MB: 0.34 s CPU for writer and reader with
 * write(), 0.14 s with vmsplice.  Text that is already in memory of
 * its own - the threads' chunks of branch and instruction lines, given as
 * pieces (vt_textbuf_write_pieces) - is not copied here to be spliced
 * but written with writev (one copy, by the kernel, into pages the pipe
 * reuses): copying it into fresh huge pages cost more, most where memory
 * is cold - here a page the process has not touched costs ~1.7 ms per
 * 2 MiB the first time, ~0.1 ms again (the hypervisor takes back free
 * memory: virtio balloon free page reporting, likely), and the bench
 * runs vmtrace after perf's seconds.  Measured (session 29, the bench
 * recordings, each run after 2.5 s idle, medians of 3, wall): 1 MiB
 * branches -20..-23%, instructions -10..-17%; 4 MiB branches -2..-13%,
 * instructions -4..-12%; tcg-boot's branches 0..-19%, but its
 * instructions (one queue, ~6 GB of text) +25% cold, +8% warm - not
 * understood yet.  Call traces (their lines padded by the reader into
 * this buffer) still splice: with write() their 4 MiB runs took up to
 * 26% longer.  Without huge pages (4 KiB faults and zeroing) it cost
 * as much as write, so it is used only where the kernel has them
 * (transparent_hugepage not "never") and stdout is a pipe;
 * VMTRACE_NO_SPLICE=1 turns it off.  Any vmsplice error but EINTR and
 * EAGAIN turns it off for good: the rest goes through fwrite (where a
 * real error - EPIPE - fails again and sets the FILE's error flag). */
#define HUGE_BYTES ((gsize)2 << 20)

static gboolean huge_pages_on(void)
{
	g_autofree char *mode = NULL;

	if (!g_file_get_contents("/sys/kernel/mm/transparent_hugepage/enabled", &mode, NULL, NULL))
		return FALSE;
	return strstr(mode, "[never]") == NULL;
}

static gboolean splice_wanted(FILE *f)
{
	struct stat st;
	int fd = f ? fileno(f) : -1;

	return fd >= 0 && !g_getenv("VMTRACE_NO_SPLICE") && !fstat(fd, &st) && S_ISFIFO(st.st_mode) &&
	       huge_pages_on();
}

/* The text goes on in the huge page's next half; after its second, the
 * page, all given to the pipe, leaves our address space: the range maps
 * a fresh page from now on (if madvise fails, a new range is mapped).  Halves: a
 * vmsplice of 1 MiB fits a pipe of 1 MiB (the most an unprivileged
 * process may ask for) at once, and the reader reads one half while the
 * next is written. */
static void splice_next(VtTextBuf *t)
{
	char *fresh;

	if (t->buf == t->region) {
		t->buf = t->region + HUGE_BYTES / 2;
		return;
	}
	t->buf = t->region;
	if (!madvise(t->region, HUGE_BYTES, MADV_DONTNEED))
		return;
	fresh = vt_decode_table_new(HUGE_BYTES);
	vt_decode_table_free(t->region, HUGE_BYTES);   /* munmap: never fails on a range of ours */
	t->buf = t->region = fresh;
}

/* The buffer's text into the pipe (vmsplice); FALSE: an error (errno),
 * and what is left of the text is at t->buf + *done. */
static gboolean splice_text(VtTextBuf *t, gsize *done)
{
	int fd = fileno(t->f);

	*done = 0;
	while (*done < t->len) {
		struct iovec iov = { t->buf + *done, t->len - *done };
		ssize_t w = vmsplice(fd, &iov, 1, 0);

		if (w > 0) {
			*done += (gsize)w;
		} else if (w < 0 && errno == EAGAIN) {   /* a non-blocking pipe */
			struct pollfd pfd = { fd, POLLOUT, 0 };

			(void)poll(&pfd, 1, -1);
		} else if (!(w < 0 && errno == EINTR)) {
			return FALSE;
		}
	}
	return TRUE;
}

static void splice_out(VtTextBuf *t)
{
	gsize done;

	if (fflush(t->f) != 0) {         /* what went through stdio first */
		t->failed = TRUE;
		return;
	}
	if (!splice_text(t, &done)) {
		t->splice = FALSE;       /* for good: the rest, and all after, with fwrite */
		if (fwrite(t->buf + done, 1, t->len - done, t->f) != t->len - done)
			t->failed = TRUE;
	}
	if (done)
		splice_next(t);
}

VtTextBuf *vt_textbuf_new(FILE *f, gsize cap)
{
	VtTextBuf *t = g_new0(VtTextBuf, 1);

	t->cap = MAX(cap, (gsize)VT_TEXTBUF_PIECE);
	t->f = f;
	if (splice_wanted(f)) {
		/* the decoder's huge page tables' allocator: 2 MiB-aligned, MADV_HUGEPAGE */
		t->buf = t->region = vt_decode_table_new(HUGE_BYTES);
		t->cap = HUGE_BYTES / 2;
		t->splice = TRUE;
	} else {
		t->buf = vt_decode_buf_new(t->cap);   /* (huge pages: filled before it is written out) */
		t->cap = vt_decode_buf_size(t->cap);
	}
	if (f)
		pipe_grow(f, t->cap);
	return t;
}

VtTextBuf *vt_textbuf_new_mem(gsize cap)
{
	return vt_textbuf_new(NULL, cap);
}

char *vt_textbuf_swap(VtTextBuf *t, char *buf, gsize cap, gsize *len, gsize *old_cap)
{
	char *old = t->buf;

	g_return_val_if_fail(!t->region, NULL);
	*len = t->len;
	*old_cap = t->cap;
	t->flushed += t->len;
	t->len = 0;
	t->cap = buf ? cap : vt_decode_buf_size(MAX(*old_cap, (gsize)VT_TEXTBUF_PIECE));
	if (!buf)
		buf = vt_decode_buf_new(t->cap);
	t->buf = buf;
	return old;
}

void vt_textbuf_free(VtTextBuf *t)
{
	if (!t)
		return;
	if (t->f)
		vt_textbuf_flush(t);
	if (t->region)
		vt_decode_table_free(t->region, HUGE_BYTES);
	else
		vt_decode_buf_free(t->buf, t->cap);
	g_free(t);
}

/* iov[0..n) with fwrite: after a failed writev the rest, which fails the
 * same way and sets the FILE's error flag. */
static void pieces_fwrite(VtTextBuf *t, const struct iovec *iov, int n)
{
	for (int i = 0; i < n; i++) {
		if (!t->failed && fwrite(iov[i].iov_base, 1, iov[i].iov_len, t->f) != iov[i].iov_len)
			t->failed = TRUE;
	}
}

/* iov[0..*n) to fd with writev (a non-blocking pipe waited for); after
 * an error *iov and *n are what is left. */
static void writev_all(int fd, struct iovec **iovp, int *np)
{
	struct iovec *iov = *iovp;
	int n = *np;

	while (n > 0) {
		ssize_t w = writev(fd, iov, MIN(n, IOV_MAX));

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {   /* a non-blocking pipe */
			struct pollfd pfd = { fd, POLLOUT, 0 };

			(void)poll(&pfd, 1, -1);
			continue;
		}
		if (w <= 0)
			break;
		for (; n > 0 && (gsize)w >= iov->iov_len; iov++, n--)
			w -= (ssize_t)iov->iov_len;
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (gsize)w;
		}
	}
	*iovp = iov;
	*np = n;
}

/* t's text copied into its FILE's descriptor (stdio's buffer first; a
 * non-blocking pipe waited for; no descriptor - fmemopen - or after an
 * error: fwrite, which fails as well and sets the FILE's error flag). */
static void copy_out(VtTextBuf *t)
{
	int fd = fileno(t->f);
	struct iovec own = { t->buf, t->len }, *p = &own;
	int left = 1;

	if (fd >= 0) {
		if (fflush(t->f) != 0) {
			t->failed = TRUE;
			return;
		}
		writev_all(fd, &p, &left);
	}
	pieces_fwrite(t, p, left);
}

/* t's text out: spliced (where t splices and !copy) or copied. */
static void write_out_as(VtTextBuf *t, gboolean copy)
{
	if (t->len && !t->failed && t->splice && !copy)
		splice_out(t);
	else if (t->len && !t->failed)
		copy_out(t);
	t->flushed += t->len;
	t->len = 0;
}

static void write_out(VtTextBuf *t)
{
	write_out_as(t, FALSE);
}

gboolean vt_textbuf_flush(VtTextBuf *t)
{
	if (!t->f)
		return TRUE;
	write_out(t);
	if (!t->failed && fflush(t->f) != 0)
		t->failed = TRUE;
	return !t->failed;
}

gboolean vt_textbuf_failed(const VtTextBuf *t)
{
	return t->failed;
}

void vt_textbuf_make_room(VtTextBuf *t, gsize n)
{
	if (!t->f) {                  /* in memory: grows */
		gsize old = t->cap;

		t->buf = vt_decode_buf_renew(t->buf, old, MAX(t->cap * 2, t->len + n));
		t->cap = vt_decode_buf_size(MAX(old * 2, t->len + n));
		return;
	}
	g_return_if_fail(n <= t->cap);
	if (t->cap - t->len < n)
		write_out(t);
}

void vt_textbuf_mem_long(VtTextBuf *t, const void *p, gsize n)
{
	const char *c = p;

	while (n) {
		gsize k = MIN(n, (gsize)VT_TEXTBUF_PIECE);

		memcpy(vt_textbuf_room(t, k), c, k);
		t->len += k;
		c += k;
		n -= k;
	}
}

void vt_textbuf_write_pieces(VtTextBuf *t, struct iovec *iov, int n)
{
	int fd = t->f ? fileno(t->f) : -1;
	gsize total = 0;

	if (!t->f) {                 /* in memory */
		for (int i = 0; i < n; i++)
			vt_textbuf_mem_long(t, iov[i].iov_base, iov[i].iov_len);
		return;
	}
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	/* t's text first, copied even where t splices: its page stays t's to
	 * write again, and the text shares the pipe's pages with the pieces'
	 * (a few lines spliced on their own took a page of the pipe's each:
	 * test-textbuf's reader, waiting for 256 KiB in a pipe of 1 MiB
	 * filled so, waited for good); no descriptor: fwrite */
	write_out_as(t, TRUE);
	if (vt_textbuf_flush(t) && fd >= 0)
		writev_all(fd, &iov, &n);
	pieces_fwrite(t, iov, n);
	t->flushed += total;
}

void vt_textbuf_pad_long(VtTextBuf *t, gsize n)
{
	while (n) {
		gsize k = MIN(n, (gsize)VT_TEXTBUF_PIECE);

		memset(vt_textbuf_room(t, k), ' ', k);
		t->len += k;
		n -= k;
	}
}

void vt_textbuf_right(VtTextBuf *t, const char *s, gsize n, int width)
{
	if (width > 0 && (gsize)width > n)
		vt_textbuf_pad(t, (gsize)width - n);
	vt_textbuf_mem(t, s, n);
}

void vt_textbuf_left(VtTextBuf *t, const char *s, gsize n, int width)
{
	vt_textbuf_mem(t, s, n);
	if (width > 0 && (gsize)width > n)
		vt_textbuf_pad(t, (gsize)width - n);
}

/* Two digits at a time from tables (a division by 100 per pair, by a
 * constant: a multiplication), no loop per digit. */
static const char dec2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

static const guint64 pow10[20] = {
	1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL, 1000000000ULL,
	10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL, 100000000000000ULL,
	1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL, 1000000000000000000ULL,
	10000000000000000000ULL,
};

/* How many decimal digits u has (log10 from the bit length). */
static int dec_count(guint64 u)
{
	int t = ((64 - __builtin_clzll(u | 1)) * 1233) >> 12;

	return u ? t + (u >= pow10[t]) : 1;
}

/* The n decimal digits of u at p..p+n-1, two at a time. */
static void dec_digits(char *p, guint64 u, int n)
{
	char *e = p + n;

	while (u >= 100) {
		guint64 q = u / 100;

		e -= 2;
		memcpy(e, dec2 + 2 * (u - q * 100), 2);
		u = q;
	}
	if (u >= 10)
		memcpy(e - 2, dec2 + 2 * u, 2);
	else
		e[-1] = (char)('0' + u);
}

/* n bytes c at p: short runs (almost all) in one 16-byte store */
static void fill_with(char *p, char c, int n)
{
	if (n <= 16) {
		char run[16];

		memset(run, c, sizeof(run));
		memcpy(p, run, sizeof(run));    /* the buffer has room past n (see callers) */
	} else {
		memset(p, c, (gsize)n);
	}
}


/* " xx" of each byte value, padded to 4 bytes: a byte is one copy of a
 * constant size (the 4th byte is overwritten by the next) */
#define BYTE3_DIGIT(d) ((char)((d) < 10 ? '0' + (d) : 'a' + (d) - 10))
#define BYTE3(b) { ' ', BYTE3_DIGIT((b) >> 4), BYTE3_DIGIT((b) & 15), 0 }
#define BYTE3_4(b) BYTE3(b), BYTE3((b) + 1), BYTE3((b) + 2), BYTE3((b) + 3)
#define BYTE3_16(b) BYTE3_4(b), BYTE3_4((b) + 4), BYTE3_4((b) + 8), BYTE3_4((b) + 12)
#define BYTE3_64(b) BYTE3_16(b), BYTE3_16((b) + 16), BYTE3_16((b) + 32), BYTE3_16((b) + 48)
static const char byte3[256][4] = { BYTE3_64(0), BYTE3_64(64), BYTE3_64(128), BYTE3_64(192) };

void vt_textbuf_bytes(VtTextBuf *t, const guint8 *p, gsize n)
{
	char *o;

	if (G_UNLIKELY(n > VT_TEXTBUF_PIECE / 3)) {
		vt_textbuf_bytes(t, p, VT_TEXTBUF_PIECE / 3);
		vt_textbuf_bytes(t, p + VT_TEXTBUF_PIECE / 3, n - VT_TEXTBUF_PIECE / 3);
		return;
	}
	o = vt_textbuf_room(t, 3 * n + 1);   /* + 1: each byte writes 4 */
	for (gsize i = 0; i < n; i++, o += 3)
		memcpy(o, byte3[p[i]], 4);
	t->len += 3 * n;
}

gsize vt_textbuf_format_hex(char *buf, guint64 v)
{
	char tmp[24];
	int n = vt_hex_count(v);

	vt_hex_digits(tmp, v, n);
	memcpy(buf, tmp, (gsize)n);
	return (gsize)n;
}

void vt_textbuf_hex(VtTextBuf *t, guint64 v, int width)
{
	int n = vt_hex_count(v), fill = width > n ? width - n : 0;
	char *p;

	if (G_UNLIKELY(fill > VT_TEXTBUF_PIECE - 32)) {
		vt_textbuf_pad(t, (gsize)fill);
		fill = 0;
	}
	p = vt_textbuf_room(t, (gsize)(fill + n + 16));
	if (fill)
		fill_with(p, ' ', fill);
	vt_hex_digits(p + fill, v, n);
	t->len += (gsize)(fill + n);
}

void vt_textbuf_hex16(VtTextBuf *t, guint64 v)
{
	vt_hex16_at(vt_textbuf_room(t, 24), v);
	t->len += 16;
}

/* printf's "%*lld"/"%0*lld" wider than a piece */
static void int_wide(VtTextBuf *t, const char *digits, int n, int sign, int fill, char pad)
{
	if (pad != '0')
		vt_textbuf_pad(t, (gsize)fill);
	if (sign)
		vt_textbuf_c(t, '-');
	for (; pad == '0' && fill > 0; fill--)
		vt_textbuf_c(t, '0');
	vt_textbuf_mem(t, digits, (gsize)n);
}

void vt_textbuf_int(VtTextBuf *t, gint64 v, int width, char pad)
{
	guint64 u = v < 0 ? -(guint64)v : (guint64)v;
	int n = dec_count(u), sign = v < 0, fill = MAX(width - sign - n, 0);
	char *p;

	if (G_UNLIKELY(fill > VT_TEXTBUF_PIECE - 48)) {
		char buf[24];

		dec_digits(buf, u, n);
		int_wide(t, buf, n, sign, fill, pad);
		return;
	}
	p = vt_textbuf_room(t, (gsize)(fill + sign + n + 16));
	if (pad != '0') {
		fill_with(p, ' ', fill);
		p += fill;
	}
	if (sign)
		*p++ = '-';
	if (pad == '0') {
		fill_with(p, '0', fill);
		p += fill;
	}
	dec_digits(p, u, n);
	t->len = (gsize)(p + n - t->buf);
}
