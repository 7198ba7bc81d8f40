/* image.c - a kernel's code (ELF core: kcore_dir/kcore, a guest snapshot's
 * kcore) and symbols (kallsyms), for libipt and for lookups. */
#include "config.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/decode/internal.h"

G_DEFINE_QUARK(vt-decode-error-quark, vt_decode_error)

static gint image_gen;            /* images loaded so far */

typedef struct {
	guint64 vaddr, offset, size;
} Segment;

/* How libipt reads the code.  By default through a read-memory callback
 * from img->map (the kcore mapped once, at load): no libipt sections, so
 * no block caches and nothing libipt maps or unmaps while decoding.
 * libipt's sections (its image section cache) cost what they save on
 * traces that roam over a whole kernel: each section is mapped from the
 * file (open, fstat, mmap, close) with a block cache of 4 bytes per code
 * byte, and the least recently mapped are unmapped (munmap of both: TLB
 * shootdowns in every decoding thread) past the cache's limit.  With 64 KiB
 * sections and a 32 MiB limit, synth's whole-kernel walks remapped 37,000
 * sections per MiB of AUX (5.1 s of system time); holding the whole kernel
 * took peak RSS from 65 to 141 MB - while the block cache saved almost
 * nothing there (libipt is 17% of vmtrace script's time with the callback,
 * 18% with every section mapped: blocks end at every call and jump).
 * Re-measured (s10, libipt 2.0.5) on the three bench-script.sh mixes of
 * 1 MiB AUX, decoding only, CPU seconds of all queues (load 14-24 on 2
 * CPUs: the range of runs), callback / sections with a 256 MiB limit
 * (nothing ever unmapped) of 64 KiB / 1 MiB / 16 MiB (one per segment):
 * tnt-dense 1.4-1.8 / 2.3-2.5 / 1.9 / 1.6, exit-heavy 1.4-1.8 / 2.0-3.2 /
 * 1.7 / 1.5, cyc 0.66-0.87 / 1.3 / 1.2 / 0.85 - and peak RSS 40-43 MB
 * with the callback, 129-139 MB with sections (block caches of code all
 * over the kernel): the callback stays.
 * Sections (in SECTION pieces, at most `limit` bytes of them mapped) serve
 * only images with TEXT_POKEs and attached ELF files (their limits below);
 * report asked for them too until s13 (vt_decode_image_set_cache_limit,
 * gone: the block walker reads the code from img->map and keeps its own
 * block tables, the sections only ever served VMTRACE_DECODER=blk). */
#define SECTION (64u << 10)
#define GAP G_MAXUINT32
#define POKE_ISCACHE_LIMIT (32u << 20)   /* images with TEXT_POKEs (TCG recordings) */

typedef struct {
	guint64 addr;
	guint32 name;            /* offset into img->names; GAP: no symbol from addr on */
	guint16 len;             /* its length (G_MAXUINT16: that or more) */
	char type;
} Symbol;

/* A growable array in vt_decode_buf_new's memory: huge pages, where a
 * kallsyms file's symbols and names are written at once (on the test VM
 * the first write to each new 4 KiB page costs ~9 us: 4 ms of the 7 ms
 * that loading a 2 MB kallsyms took, in 4 KiB pages). */
typedef struct {
	guint8 *data;
	gsize len, cap;          /* bytes */
} Pool;

struct VtDecodeImage {
	char *what, *kcore_path;
	guint8 *map;
	gsize map_len;
	GArray *segs;            /* Segment, ascending vaddr */
	Pool syms;               /* Symbol, ascending addr, one per address (SYMS, N_SYMS) */
	GArray *fence;           /* guint64: every 2^FENCE_LOG2-th symbol's address (fence_build) */
	GArray *shadowed;        /* Symbol: those another at their address hides (lookups by name) */
	Pool names;              /* NUL-separated symbol names (NAMES) */
	GArray *funcs;           /* guint64: made on first use (funcs_made), or given */
	gsize funcs_made;
	gboolean funcs_given;
	guint nsyms_file;
	guint64 text;
	gboolean vmlinux;        /* symbols from an ELF file: relocatable (vt_decode_image_relocate) */
	gboolean placed;         /* ... and placed by the recording's kernel MMAP */
	char *build_id;          /* its GNU build id, hex (vmlinux; NULL: none) */
	GArray *maps;            /* DsoMap, ascending: a vmlinux's sections as perf maps them */
	GArray *modules;         /* DsoMap (suffix: the DSO's name): perf's module maps (vmlinux), in order */
	guint gen;               /* unique per image loaded (symbol_hint) */
	guint32 limit;           /* 0: libipt reads through read_code() */
	GMutex lock;             /* iscache's creation */
	struct pt_image_section_cache *iscache;
	GArray *isids;           /* int: the sections in img->iscache */
	GPtrArray *attached;     /* VtDecodeImage: guest user code (guest-user.c), owned */
	VtDecodePokes *pokes;    /* its pages: a section per version (textpoke.c) */
	VtWalkTable *walk;       /* its decoded blocks (walk.c), made on first use */
};

#define SYMS(img) ((Symbol *)(void *)(img)->syms.data)
#define N_SYMS(img) ((guint)((img)->syms.len / sizeof(Symbol)))
#define NAMES(img) ((char *)(img)->names.data)

/* Room for n more bytes in p. */
static void pool_reserve(Pool *p, gsize n)
{
	gsize want;

	if (p->cap - p->len >= n)
		return;
	want = MAX(p->len + n, p->cap * 2);
	p->data = vt_decode_buf_renew(p->data, p->cap, want);
	p->cap = vt_decode_buf_size(want);
}

static void pool_append(Pool *p, const void *data, gsize n)
{
	pool_reserve(p, n);
	memcpy(p->data + p->len, data, n);
	p->len += n;
}

static void pool_clear(Pool *p)
{
	vt_decode_buf_free(p->data, p->cap);
	*p = (Pool){ NULL, 0, 0 };
}

/* perf's kernel maps of a vmlinux: .text, and each other allocated
 * section that holds a symbol, as a DSO of its own named after it
 * ("[guest.kernel.kallsyms].init.text"); an address in none has no DSO. */
typedef struct {
	guint64 lo, hi;
	char *suffix;            /* "" for .text, else the section's name */
} DsoMap;

static gint cmp_map(gconstpointer a, gconstpointer b)
{
	const DsoMap *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void map_clear(gpointer p)
{
	g_free(((DsoMap *)p)->suffix);
}

static gboolean bad(GError **error, const VtDecodeImage *img, const char *fmt, const char *detail)
{
	g_autofree char *msg = g_strdup_printf(fmt, detail);

	g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE, "%s kernel image %s: %s", img->what,
		    img->kcore_path, msg);
	return FALSE;
}

static gint cmp_seg(gconstpointer a, gconstpointer b)
{
	const Segment *x = a, *y = b;

	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* The executable PT_LOADs of an ELF64 little-endian core, bounds-checked. */
static gboolean parse_core(VtDecodeImage *img, GError **error)
{
	const Elf64_Ehdr *eh = (const void *)img->map;

	if (img->map_len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh->e_phentsize != sizeof(Elf64_Phdr))
		return bad(error, img, "%s", "not a little-endian ELF64 file");
	if (eh->e_phoff > img->map_len || (guint64)eh->e_phnum * sizeof(Elf64_Phdr) > img->map_len - eh->e_phoff)
		return bad(error, img, "%s", "program headers past the end of the file");
	for (guint i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const void *)(img->map + eh->e_phoff + i * sizeof(Elf64_Phdr));
		Segment s = { ph->p_vaddr, ph->p_offset, ph->p_filesz };

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || !ph->p_filesz)
			continue;
		if (s.offset > img->map_len || s.size > img->map_len - s.offset || s.vaddr + s.size < s.vaddr)
			return bad(error, img, "%s", "a PT_LOAD lies past the end of the file (truncated copy?)");
		g_array_append_val(img->segs, s);
	}
	if (!img->segs->len)
		return bad(error, img, "%s", "no executable PT_LOAD segment");
	g_array_sort(img->segs, cmp_seg);
	return TRUE;
}

static gint cmp_sym(gconstpointer a, gconstpointer b, G_GNUC_UNUSED gpointer data)
{
	const Symbol *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static gboolean wanted_type(char t)
{
	t = g_ascii_toupper(t);
	return t == 'T' || t == 'W' || t == 'D' || t == 'B';
}

#define BYTES(b) ((b) * 0x0101010101010101ULL)

/* 8 ASCII hex digits (the first in the lowest byte) as a 32-bit number,
 * all bytes at once (SWAR); FALSE if one is not a hex digit.  A byte under
 * 0x80 plus 0x80 - lo has bit 7 set iff it is >= lo, plus 0x7f - hi iff it
 * is > hi (no carry into the next byte). */
static gboolean hex8_value(const char *p, guint32 *v)
{
	guint64 x, lower, digit, letter, d;

	memcpy(&x, p, 8);
	lower = x | BYTES(0x20);            /* 'A'-'F' as 'a'-'f' */
	digit = (x + BYTES(0x80 - '0')) & ~(x + BYTES(0x7f - '9'));
	letter = (lower + BYTES(0x80 - 'a')) & ~(lower + BYTES(0x7f - 'f'));
	if ((x & BYTES(0x80)) || ((digit | letter) & BYTES(0x80)) != BYTES(0x80))
		return FALSE;
	d = (x & BYTES(0x0f)) + ((letter & BYTES(0x80)) >> 7) * 9;   /* each byte's digit */
	d = __builtin_bswap64(d);          /* the first digit highest */
	d = (d | d >> 4) & 0x00ff00ff00ff00ffULL;
	d = (d | d >> 8) & 0x0000ffff0000ffffULL;
	*v = (guint32)(d | d >> 16);
	return TRUE;
}

/* A kallsyms line's address (the line is [cur, le), not NUL-ended): its 16
 * hex digits and the space after them (every line of a 64-bit kernel's),
 * 8 digits at a time (a loop per digit was two fifths of loading an
 * image's instructions); anything else as g_ascii_strtoull reads the line. */
static guint64 kallsyms_addr(const char *cur, const char *le, const char **end)
{
	guint32 hi, lo;
	g_autofree char *line = NULL;
	char *e;
	guint64 v;

	if (le - cur > 16 && cur[16] == ' ' && hex8_value(cur, &hi) && hex8_value(cur + 8, &lo)) {
		*end = cur + 16;
		return (guint64)hi << 32 | lo;
	}
	line = g_strndup(cur, le - cur);
	v = g_ascii_strtoull(line, &e, 16);
	*end = cur + (e - line);
	return v;
}

/* n symbols in ascending address order: kallsyms files mostly are */
static gboolean syms_sorted(const Symbol *v, guint n)
{
	for (guint i = 1; i < n; i++)
		if (v[i - 1].addr > v[i].addr)
			return FALSE;
	return TRUE;
}

/* The kallsyms file mapped (no copy of it: its pages are the page cache's,
 * where a copy's were new memory - after an idle second on the test VM
 * ~2 ms a MiB even in huge pages, the hypervisor's), or read where it
 * cannot be (/proc/kallsyms: a size of 0). */
static GBytes *kallsyms_read(const char *path, GError **error)
{
	GMappedFile *m = g_mapped_file_new(path, FALSE, NULL);
	char *text;
	gsize len;

	if (m && g_mapped_file_get_length(m)) {
		GBytes *b = g_mapped_file_get_bytes(m);   /* holds the mapping */

		g_mapped_file_unref(m);
		return b;
	}
	if (m)
		g_mapped_file_unref(m);
	if (!g_file_get_contents(path, &text, &len, error))
		return NULL;
	return g_bytes_new_take(text, len);
}

#define FENCE_LOG2 4

/* Every 2^FENCE_LOG2-th symbol's address, for vt_decode_image_symbol: a
 * binary search over these (49,674 kallsyms: 25 KB) and then over the 16
 * symbols (256 bytes) of one run, instead of over all the symbols (780 KB,
 * its last steps mostly cache misses).  script --call-trace looks up each
 * new call target (1 MiB tnt-dense: 50,000 lookups): its share of the
 * run's CPU samples 3.8% -> 2.9% (medians of 5; a search without branches,
 * cmov, was slower: 4.3%). */
static void fence_build(VtDecodeImage *img)
{
	guint n = (N_SYMS(img) + (1u << FENCE_LOG2) - 1) >> FENCE_LOG2;

	g_array_set_size(img->fence, n);
	for (guint i = 0; i < n; i++)
		g_array_index(img->fence, guint64, i) = SYMS(img)[i << FENCE_LOG2].addr;
}

static gboolean parse_kallsyms(VtDecodeImage *img, const char *path, GError **error)
{
	g_autoptr(GBytes) file = kallsyms_read(path, error);
	Pool all = { NULL, 0, 0 };
	const char *text = file ? g_bytes_get_data(file, NULL) : NULL, *cur, *nl, *fend;
	gsize len = file ? g_bytes_get_size(file) : 0;
	guint lineno = 0, n = 0;
	Symbol *v;

	if (!file)
		return FALSE;
	fend = text ? memchr(text, '\0', len) : NULL;   /* up to a NUL, as a C string is read */
	fend = fend ? fend : text + len;
	/* room for what a usual file holds (lines of ~40 bytes, names half of
	 * them: a 2 MB file's are 1 MiB buffers, half a huge page each - room
	 * for all, 2 MiB each, was two), grown where a file holds more;
	 * written in place: no call per symbol */
	pool_reserve(&all, (len / 40 + 1) * sizeof(Symbol));
	img->names.len = 0;
	pool_reserve(&img->names, len / 2 + 1);
	for (cur = text; cur && cur < fend; cur = nl < fend ? nl + 1 : NULL) {
		const char *end, *name, *name_end;
		Symbol s;

		nl = memchr(cur, '\n', fend - cur);
		nl = nl ? nl : fend;
		lineno++;
		if (nl == cur)
			continue;
		s.addr = kallsyms_addr(cur, nl, &end);
		if (end == cur || nl - end < 4 || end[0] != ' ' || end[2] != ' ') {   /* "ADDR T NAME" */
			g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE, "%s kallsyms %s: line %u is malformed",
				    img->what, path, lineno);
			pool_clear(&all);
			return FALSE;
		}
		s.type = end[1];
		name = end + 3;
		name_end = memchr(name, '\t', nl - name);
		name_end = name_end ? name_end : nl;
		img->nsyms_file++;
		if (name_end - name == 5 && !memcmp(name, "_text", 5) && !img->text)
			img->text = s.addr;
		if (!wanted_type(s.type) || !s.addr)
			continue;
		s.name = (guint32)img->names.len;
		s.len = (guint16)MIN(name_end - name, G_MAXUINT16);
		if (G_UNLIKELY(img->names.cap - img->names.len < (gsize)(name_end - name) + 2))   /* (+ the last NUL) */
			pool_reserve(&img->names, (gsize)(name_end - name) + 2);
		memcpy(img->names.data + img->names.len, name, name_end - name);
		img->names.len += name_end - name;
		img->names.data[img->names.len++] = '\0';
		if (G_UNLIKELY(all.cap - all.len < sizeof(Symbol)))   /* shorter lines (addresses of fewer digits) */
			pool_reserve(&all, sizeof(Symbol));
		((Symbol *)(void *)all.data)[n++] = s;
		all.len += sizeof(Symbol);
	}
	img->names.data[img->names.len] = '\0';
	/* sort; of the symbols at one address keep the last in the file (the
	 * largest name offset) */
	v = (Symbol *)(void *)all.data;
	if (!syms_sorted(v, n))     /* a stable sort: sorted input stays as it is */
	{
		G_GNUC_BEGIN_IGNORE_DEPRECATIONS   /* (GLib 2.82's g_sort_array: the same stable sort) */
		g_qsort_with_data(v, (gint)n, sizeof(Symbol), cmp_sym, NULL);
		G_GNUC_END_IGNORE_DEPRECATIONS
	}
	/* in place: the kept symbols move down over those shadowed */
	all.len = 0;
	for (guint i = 0, k = 0; i < n; i++) {
		Symbol s = v[i];
		Symbol *last = k ? &v[k - 1] : NULL;

		if (last && last->addr == s.addr) {
			if (s.name > last->name) {   /* later in the file */
				g_array_append_val(img->shadowed, *last);
				*last = s;
			} else {
				g_array_append_val(img->shadowed, s);
			}
		} else {
			v[k++] = s;
			all.len += sizeof(Symbol);
		}
	}
	pool_clear(&img->syms);
	img->syms = all;
	fence_build(img);
	if (!img->nsyms_file) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE, "%s kallsyms %s is empty", img->what, path);
		return FALSE;
	}
	return TRUE;
}

/* Bytes [at, end) of segment s from `at` on that are not on a poked page:
 * the first run's length (0: at is on one), at most SECTION bytes. */
static guint64 unpoked_run(const VtDecodeImage *img, const Segment *s, guint64 at)
{
	guint64 n = 0, max = MIN((guint64)SECTION, s->size - at);

	while (n < max) {
		guint64 a = s->vaddr + at + n, next = MIN(max, n + (4096 - (a & 4095)));

		if (vt_decode_pokes_page(img->pokes, a >> 12))
			break;
		n = next;
	}
	return n;
}

/* libipt's sections (img->lock held, or no decoder yet): every segment in SECTION-byte pieces, except the pages
 * that a poke changes (a section per version: textpoke.c). */
static gboolean add_to_iscache(VtDecodeImage *img, GError **error)
{
	if (!img->iscache)
		img->iscache = pt_iscache_alloc(img->what);
	if (!img->iscache) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_FAILED, "cannot allocate a libipt section cache");
		return FALSE;
	}
	pt_iscache_set_limit(img->iscache, img->limit);
	if (img->isids)
		g_array_free(img->isids, TRUE);
	img->isids = g_array_new(FALSE, FALSE, sizeof(int));
	for (guint i = 0; i < img->segs->len; i++) {
		const Segment *s = &g_array_index(img->segs, Segment, i);

		for (guint64 at = 0, n; at < s->size; at += n) {
			int isid;

			n = unpoked_run(img, s, at);
			if (!n) {               /* a poked page */
				n = MIN(s->size - at, 4096 - ((s->vaddr + at) & 4095));
				continue;
			}
			isid = pt_iscache_add_file(img->iscache, img->kcore_path, s->offset + at, n, s->vaddr + at);
			if (isid < 0) {
				g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE,
					    "%s kernel image %s: libipt: %s", img->what, img->kcore_path,
					    pt_errstr(pt_errcode(isid)));
				return FALSE;
			}
			g_array_append_val(img->isids, isid);
		}
	}
	return !img->pokes || vt_decode_pokes_add_sections(img->pokes, img, img->iscache, error);
}

gboolean vt_decode_image_set_pokes(VtDecodeImage *img, VtDecodePokes *pokes, GError **error)
{
	gboolean ok = TRUE;

	vt_decode_pokes_free(img->pokes);
	img->pokes = NULL;
	if (pokes && !vt_decode_pokes_build(pokes, img, error)) {
		vt_decode_pokes_free(pokes);
		pokes = NULL;
		ok = FALSE;
	}
	img->pokes = pokes;
	/* poked code needs sections (a page's last version gets one once the
	 * decoder's time passes its last poke): not the read callback */
	if (pokes && !img->limit)
		img->limit = POKE_ISCACHE_LIMIT;
	if (!add_to_iscache(img, ok ? error : NULL)) {
		vt_decode_pokes_free(img->pokes);
		img->pokes = NULL;
		(void)add_to_iscache(img, NULL);   /* the same file as at load: only allocation can fail */
		ok = FALSE;
	}
	return ok;
}

const VtDecodePokes *vt_decode_image_pokes(const VtDecodeImage *img)
{
	return img->pokes;
}

struct pt_image_section_cache *vt_decode_image_iscache(const VtDecodeImage *img)
{
	return img->iscache;
}

/* The function starts of a kernel image, made when first asked for
 * (script never asks: ~4 M instructions and the array's pages saved at
 * its start). */
static void collect_functions(VtDecodeImage *img)
{
	guint n = 0;

	g_array_set_size(img->funcs, N_SYMS(img));   /* as large as it can get: filled in place */
	for (guint i = 0; i < N_SYMS(img); i++) {
		const Symbol *s = &SYMS(img)[i];
		gsize avail;

		if ((s->type == 'T' || s->type == 't') && vt_decode_image_code(img, s->addr, &avail) && avail >= 16)
			g_array_index(img->funcs, guint64, n++) = s->addr;
	}
	g_array_set_size(img->funcs, n);
}

/* An empty image of `what` read from `path`. */
static VtDecodeImage *image_new(const char *what, const char *path)
{
	VtDecodeImage *img = g_new0(VtDecodeImage, 1);

	img->what = g_strdup(what);
	img->kcore_path = g_strdup(path);
	img->segs = g_array_new(FALSE, FALSE, sizeof(Segment));
	img->fence = g_array_new(FALSE, FALSE, sizeof(guint64));
	img->shadowed = g_array_new(FALSE, FALSE, sizeof(Symbol));
	img->funcs = g_array_new(FALSE, FALSE, sizeof(guint64));
	img->maps = g_array_new(FALSE, FALSE, sizeof(DsoMap));
	g_array_set_clear_func(img->maps, map_clear);
	img->modules = g_array_new(FALSE, FALSE, sizeof(DsoMap));
	g_array_set_clear_func(img->modules, map_clear);
	g_mutex_init(&img->lock);
	img->gen = (guint)g_atomic_int_add(&image_gen, 1) + 1;
	return img;
}

/* Map img->kcore_path read-only (img->map, img->map_len); `desc` names it
 * in the error. */
static gboolean image_map(VtDecodeImage *img, const char *desc, GError **error)
{
	int fd = open(img->kcore_path, O_RDONLY | O_CLOEXEC);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_IO, "cannot read %s: %s", desc, g_strerror(errno));
		if (fd >= 0)
			close(fd);
		return FALSE;
	}
	if (S_ISDIR(st.st_mode)) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_IO, "cannot read %s: it is a directory", desc);
		close(fd);
		return FALSE;
	}
	img->map_len = st.st_size;
	img->map = img->map_len ? mmap(NULL, img->map_len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (img->map == MAP_FAILED) {
		img->map = NULL;
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_IO, "cannot map %s: %s", img->kcore_path,
			    g_strerror(errno));
		return FALSE;
	}
	return TRUE;
}

VtDecodeImage *vt_decode_image_load(const char *kcore, const char *kallsyms, const char *what, GError **error)
{
	VtDecodeImage *img = image_new(what, kcore);
	g_autofree char *desc = g_strdup_printf("the %s kernel image %s", what, kcore);

	if (!image_map(img, desc, error) || !parse_core(img, error) || !parse_kallsyms(img, kallsyms, error)) {
		vt_decode_image_free(img);
		return NULL;
	}
	return img;
}

VtDecodeImage *vt_decode_image_load_dir(const char *dir, const char *what, GError **error)
{
	g_autofree char *kcore = g_build_filename(dir, "kcore", NULL);
	g_autofree char *kallsyms = g_build_filename(dir, "kallsyms", NULL);

	return vt_decode_image_load(kcore, kallsyms, what, error);
}

/* A vmlinux's sections perf maps (DsoMap): .text, and the other allocated
 * sections that hold a symbol. */
static void vmlinux_maps(VtDecodeImage *img, const VtElfFile *f)
{
	g_autofree gboolean *held = g_new0(gboolean, f->sections->len + 1);

	for (guint i = 0; i < f->syms->len; i++)
		if (g_array_index(f->syms, VtElfSym, i).section < f->sections->len)
			held[g_array_index(f->syms, VtElfSym, i).section] = TRUE;
	for (guint i = 0; i < f->hidden->len; i++)
		if (g_array_index(f->hidden, VtElfSym, i).section < f->sections->len)
			held[g_array_index(f->hidden, VtElfSym, i).section] = TRUE;
	for (guint i = 0; i < f->sections->len; i++) {
		const VtElfSection *x = &g_array_index(f->sections, VtElfSection, i);
		gboolean text = x->name && !strcmp(x->name, ".text");
		DsoMap m = { x->addr, x->addr + x->size, NULL };

		if (!x->name || !x->alloc || !x->size || (!text && !held[i]))
			continue;
		m.suffix = g_strdup(text ? "" : x->name);
		g_array_append_val(img->maps, m);
	}
	g_array_sort(img->maps, cmp_map);
}

/* A vmlinux's symbols (perf's rules: elfsym.c) as the image's: a symbol
 * ends at its size, and where the next starts later a gap entry (GAP)
 * says "no symbol" from there on, as perf's lookups find none there;
 * kallsyms' types by binding and kind (FUNC: T/t/W, else D/d/V); those
 * another hid, for lookups by name; and the maps. */
static void vmlinux_symbols(VtDecodeImage *img, const VtElfFile *f)
{
	img->syms.len = 0;
	img->names.len = 0;
	for (guint i = 0; i < f->syms->len; i++) {
		const VtElfSym *e = &g_array_index(f->syms, VtElfSym, i);
		gboolean func = e->type != STT_OBJECT;
		gsize len = strlen(e->name);
		Symbol y = { e->start, (guint32)img->names.len, (guint16)MIN(len, (gsize)G_MAXUINT16),
			     e->bind == STB_WEAK ? (func ? 'W' : 'V') : e->bind == STB_GLOBAL ? (func ? 'T' : 'D')
			     : (func ? 't' : 'd') };

		if (!strcmp(e->name, "_text") && !img->text)
			img->text = e->start;
		pool_append(&img->names, e->name, len + 1);
		pool_append(&img->syms, &y, sizeof(y));
		if (e->end > e->start && (i + 1 == f->syms->len || g_array_index(f->syms, VtElfSym, i + 1).start > e->end)) {
			Symbol gap = { e->end, GAP, 0, 0 };

			pool_append(&img->syms, &gap, sizeof(gap));
		}
	}
	for (guint i = 0; i < f->hidden->len; i++) {   /* for lookups by name (relocation: _text) */
		const VtElfSym *e = &g_array_index(f->hidden, VtElfSym, i);
		Symbol y = { e->start, (guint32)img->names.len, (guint16)MIN(strlen(e->name), (gsize)G_MAXUINT16), 't' };

		pool_append(&img->names, e->name, strlen(e->name) + 1);
		g_array_append_val(img->shadowed, y);
	}
	img->nsyms_file = f->syms->len + f->hidden->len;
	fence_build(img);
	vmlinux_maps(img, f);
}

VtDecodeImage *vt_decode_image_load_vmlinux(const char *path, const char *what, GError **error)
{
	VtDecodeImage *img = image_new(what, path);
	g_autofree char *desc = g_strdup_printf("the %s kernel image %s", what, path);
	VtElfFile *f = vt_elf_file_new();
	gboolean ok = image_map(img, desc, error) && parse_core(img, error) && vt_elf_file_read(f, path, TRUE, error);

	if (ok && !f->syms->len)
		ok = bad(error, img, "%s", "no symbols (a stripped vmlinux?): give the kernel's kallsyms and kcore instead");
	if (ok) {
		vmlinux_symbols(img, f);
		img->vmlinux = TRUE;
		img->build_id = g_steal_pointer(&f->build_id);
	}
	vt_elf_file_free(f);
	if (!ok) {
		vt_decode_image_free(img);
		return NULL;
	}
	return img;
}

gint64 vt_decode_image_relocate(VtDecodeImage *img, const char *name, guint64 addr)
{
	guint64 at = img->vmlinux ? vt_decode_image_lookup(img, name) : 0;
	gint64 delta = (gint64)(addr - at);

	if (at)
		img->placed = TRUE;
	if (!at || !delta)
		return 0;
	for (guint i = 0; i < img->segs->len; i++)
		g_array_index(img->segs, Segment, i).vaddr += (guint64)delta;
	for (guint i = 0; i < N_SYMS(img); i++)
		SYMS(img)[i].addr += (guint64)delta;
	for (guint i = 0; i < img->shadowed->len; i++)
		g_array_index(img->shadowed, Symbol, i).addr += (guint64)delta;
	if (img->text)
		img->text += (guint64)delta;
	for (guint i = 0; i < img->maps->len; i++) {
		g_array_index(img->maps, DsoMap, i).lo += (guint64)delta;
		g_array_index(img->maps, DsoMap, i).hi += (guint64)delta;
	}
	fence_build(img);
	img->gen = (guint)g_atomic_int_add(&image_gen, 1) + 1;   /* the threads' hints are of the old addresses */
	return delta;
}

void vt_decode_image_free(VtDecodeImage *img)
{
	if (!img)
		return;
	if (img->attached)
		g_ptr_array_free(img->attached, TRUE);
	if (img->iscache)
		pt_iscache_free(img->iscache);
	if (img->isids)
		g_array_free(img->isids, TRUE);
	vt_decode_pokes_free(img->pokes);
	vt_walk_table_free(img->walk);
	if (img->map)
		munmap(img->map, img->map_len);
	g_array_free(img->segs, TRUE);
	pool_clear(&img->syms);
	g_array_free(img->fence, TRUE);
	g_array_free(img->shadowed, TRUE);
	g_array_free(img->funcs, TRUE);
	g_array_free(img->maps, TRUE);
	g_array_free(img->modules, TRUE);
	g_free(img->build_id);
	pool_clear(&img->names);
	g_free(img->what);
	g_free(img->kcore_path);
	g_mutex_clear(&img->lock);
	g_free(img);
}

/* The segment last found by this thread (libipt's callback asks for every
 * instruction it walks, mostly in the same segment). */
static __thread struct {
	guint gen;
	guint64 vaddr, size;
	const guint8 *code;
} segment_hint;

/* The bytes of img's segment i for vaddr..: up to its end or the start of
 * the next segment, whose bytes a lookup gives from there (overlaps). */
static guint64 segment_len(const VtDecodeImage *img, guint i)
{
	const Segment *s = &g_array_index(img->segs, Segment, i);

	if (i + 1 < img->segs->len && g_array_index(img->segs, Segment, i + 1).vaddr - s->vaddr < s->size)
		return g_array_index(img->segs, Segment, i + 1).vaddr - s->vaddr;
	return s->size;
}

/* The index of img's first segment above vaddr (segs->len: none). */
static guint segment_after(const VtDecodeImage *img, guint64 vaddr)
{
	guint lo = 0, hi = img->segs->len;

	while (lo < hi) {
		guint mid = (lo + hi) / 2;

		if (g_array_index(img->segs, Segment, mid).vaddr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Where the first segment of img or its attached images above vaddr
 * starts (G_MAXUINT64: none). */
static guint64 segment_above(const VtDecodeImage *img, guint64 vaddr)
{
	guint i = segment_after(img, vaddr);
	guint64 above = i < img->segs->len ? g_array_index(img->segs, Segment, i).vaddr : G_MAXUINT64;

	for (guint k = 0; img->attached && k < img->attached->len; k++)
		above = MIN(above, segment_above(g_ptr_array_index(img->attached, k), vaddr));
	return above;
}

const guint8 *vt_decode_image_code_own(const VtDecodeImage *img, guint64 vaddr, gsize *avail)
{
	guint lo;

	if (segment_hint.gen == img->gen && vaddr - segment_hint.vaddr < segment_hint.size) {
		*avail = segment_hint.size - (vaddr - segment_hint.vaddr);
		return segment_hint.code + (vaddr - segment_hint.vaddr);
	}
	lo = segment_after(img, vaddr);   /* the last segment starting at or below vaddr: lo - 1 */
	if (lo) {
		const Segment *s = &g_array_index(img->segs, Segment, lo - 1);
		guint64 len = segment_len(img, lo - 1);

		if (vaddr - s->vaddr < len) {
			segment_hint.gen = img->gen;
			segment_hint.vaddr = s->vaddr;
			segment_hint.size = len;
			segment_hint.code = img->map + s->offset;
			*avail = len - (vaddr - s->vaddr);
			return img->map + s->offset + (vaddr - s->vaddr);
		}
	}
	*avail = 0;
	return NULL;
}

const guint8 *vt_decode_image_code(const VtDecodeImage *img, guint64 vaddr, gsize *avail)
{
	const guint8 *own = vt_decode_image_code_own(img, vaddr, avail);

	if (own)
		return own;
	for (guint i = 0; img->attached && i < img->attached->len; i++) {
		const guint8 *p = vt_decode_image_code(g_ptr_array_index(img->attached, i), vaddr, avail);

		if (p) {                 /* (up to where code found before it starts) */
			*avail = MIN(*avail, segment_above(img, vaddr) - vaddr);
			return p;
		}
	}
	*avail = 0;
	return NULL;
}

const guint8 *vt_decode_image_code_at(const VtDecodeImage *img, guint64 vaddr, guint64 tsc, guint8 *buf, gsize n,
				      gsize *avail, guint64 *tag)
{
	const VtDecodePokes *p = vt_decode_image_pokes(img);
	gsize got = p && n ? vt_decode_pokes_read_tag(p, img, vaddr, tsc, buf, n, tag) : 0;

	if (!p || !n)
		*tag = 0;
	if (got) {
		*avail = got;
		return buf;
	}
	*tag = 0;
	return vt_decode_image_code(img, vaddr, avail);
}

/* The symbol last found by this thread and the addresses it covers:
 * script asks for the source of a branch just after the previous branch's
 * target, mostly in the same function. */
static __thread struct {
	guint gen;
	guint idx;
	guint64 lo, hi;
} symbol_hint;

/* The name of symbol i and its length (NULL and 0: a gap). */
static const char *symbol_name(const VtDecodeImage *img, guint i, gsize *len)
{
	const Symbol *y = &SYMS(img)[i];
	const char *name;

	if (G_UNLIKELY(y->name == GAP)) {
		*len = 0;
		return NULL;
	}
	name = NAMES(img) + y->name;
	*len = y->len < G_MAXUINT16 ? y->len : strlen(name);
	return name;
}

const char *vt_decode_image_symbol_len(const VtDecodeImage *img, guint64 addr, guint64 *offset, gsize *len)
{
	guint lo = 0, hi = img->fence->len;

	*len = 0;
	if (symbol_hint.gen == img->gen && addr >= symbol_hint.lo && addr < symbol_hint.hi) {
		*offset = addr - symbol_hint.lo;
		return symbol_name(img, symbol_hint.idx, len);
	}
	while (lo < hi) {         /* the run of symbols whose fence is the last at or below addr */
		guint mid = (lo + hi) / 2;

		if (g_array_index(img->fence, guint64, mid) <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	hi = MIN(lo << FENCE_LOG2, N_SYMS(img));
	lo = (lo - 1) << FENCE_LOG2;
	/* the run's 2^FENCE_LOG2 symbols (4 cache lines) asked for at once:
	 * the search's loads one after the other waited for each */
	for (guint i = lo; i < hi; i += 64 / sizeof(Symbol))
		__builtin_prefetch(&SYMS(img)[i]);
	while (lo < hi) {         /* its last symbol at or below addr (its first is) */
		guint mid = (lo + hi) / 2;

		if (SYMS(img)[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	symbol_hint.gen = img->gen;
	symbol_hint.idx = lo - 1;
	symbol_hint.lo = SYMS(img)[lo - 1].addr;
	symbol_hint.hi = lo < N_SYMS(img) ? SYMS(img)[lo].addr : G_MAXUINT64;
	*offset = addr - symbol_hint.lo;
	return symbol_name(img, lo - 1, len);
}

const char *vt_decode_image_symbol(const VtDecodeImage *img, guint64 addr, guint64 *offset)
{
	gsize len;

	return vt_decode_image_symbol_len(img, addr, offset, &len);
}

/* The first in file order (the smallest name offset) of the n symbols v
 * named name, if it comes before *best. */
static void lookup_in(const VtDecodeImage *img, const Symbol *v, guint n, const char *name, const Symbol **best)
{
	for (guint i = 0; i < n; i++) {
		const Symbol *s = &v[i];

		if (s->name != GAP && (!*best || s->name < (*best)->name) && !strcmp(NAMES(img) + s->name, name))
			*best = s;
	}
}

guint64 vt_decode_image_lookup(const VtDecodeImage *img, const char *name)
{
	const Symbol *best = NULL;

	lookup_in(img, SYMS(img), N_SYMS(img), name, &best);
	lookup_in(img, (const Symbol *)(const void *)img->shadowed->data, img->shadowed->len, name, &best);   /* names another symbol's address hides */
	return best ? best->addr : 0;
}

const guint64 *vt_decode_image_functions(const VtDecodeImage *img, guint *n)
{
	VtDecodeImage *w = (VtDecodeImage *)img;   /* (made once: a cache) */

	if (g_once_init_enter(&w->funcs_made)) {
		if (!img->funcs_given)
			collect_functions(w);
		g_once_init_leave(&w->funcs_made, 1);
	}
	*n = img->funcs->len;
	return (const guint64 *)(const void *)img->funcs->data;
}

guint64 vt_decode_image_text(const VtDecodeImage *img)
{
	return img->text;
}

gboolean vt_decode_image_vmlinux(const VtDecodeImage *img)
{
	return img && img->vmlinux;
}

const char *vt_decode_image_build_id(const VtDecodeImage *img)
{
	return img->build_id;
}

const char *vt_decode_image_path(const VtDecodeImage *img)
{
	return img->kcore_path;
}

gboolean vt_decode_image_unplaced(const VtDecodeImage *img)
{
	return img && img->vmlinux && !img->placed;
}

const char *vt_decode_image_dso_suffix(const VtDecodeImage *img, guint64 addr)
{
	guint lo = 0, hi;

	if (!img || !img->vmlinux)
		return "";
	hi = img->maps->len;
	while (lo < hi) {         /* the last map starting at or below addr */
		guint mid = (lo + hi) / 2;

		if (g_array_index(img->maps, DsoMap, mid).lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && addr < g_array_index(img->maps, DsoMap, lo - 1).hi)
		return g_array_index(img->maps, DsoMap, lo - 1).suffix;
	return NULL;
}

char *vt_decode_module_name(const char *path)
{
	const char *base = strrchr(path, '/'), *ext;
	g_autofree char *name = NULL;

	if (path[0] == '[')
		return g_strdup(path);   /* perf record's own "[kvm_intel]" */
	base = base ? base + 1 : path;
	ext = strrchr(base, '.');
	/* perf 6.1 knows gz and xz: "x.ko.xz" is a module, "x.ko.zst" not */
	if (ext && (!strcmp(ext, ".gz") || !strcmp(ext, ".xz")) && ext - base >= 3)
		ext -= 3;
	if (!ext || ext == base || strncmp(ext, ".ko", 3))
		return g_strdup(base);
	name = g_strndup(base, (gsize)(ext - base));
	g_strdelimit(name, "-", '_');
	return g_strdup_printf("[%s]", name);
}

void vt_decode_image_add_module(VtDecodeImage *img, guint64 start, guint64 len, const char *path)
{
	DsoMap m = { start, start + len, NULL };

	if (!img || !img->vmlinux || !len || m.hi < start)
		return;
	m.suffix = vt_decode_module_name(path);
	g_array_append_val(img->modules, m);   /* in the recording's order */
}

const char *vt_decode_image_module(const VtDecodeImage *img, guint64 addr)
{
	/* the latest map holding addr (as perf, whose newer map replaces
	 * the part of an older one it overlaps) */
	for (guint i = img ? img->modules->len : 0; i-- > 0;) {
		const DsoMap *m = &g_array_index(img->modules, DsoMap, i);

		if (addr >= m->lo && addr < m->hi)
			return m->suffix;
	}
	return NULL;
}

guint vt_decode_image_n_symbols(const VtDecodeImage *img)
{
	return img->nsyms_file;
}

guint vt_decode_image_n_segments(const VtDecodeImage *img)
{
	return img->segs->len;
}

/* libipt's read-memory callback: the code at ip, up to size bytes. */
static int read_code(uint8_t *buffer, size_t size, const struct pt_asid *asid, uint64_t ip, void *context)
{
	const VtDecodeImage *img = context;
	gsize avail;
	const guint8 *code;

	(void)asid;
	if (segment_hint.gen == img->gen && ip - segment_hint.vaddr < segment_hint.size) {
		avail = segment_hint.size - (ip - segment_hint.vaddr);
		code = segment_hint.code + (ip - segment_hint.vaddr);
	} else if (!(code = vt_decode_image_code(img, ip, &avail))) {
		return -pte_nomap;
	}
	size = MIN(size, avail);
	if (size >= 8) {                 /* libipt asks for 15 bytes: two words, no call */
		memcpy(buffer, code, 8);
		memcpy(buffer + size - 8, code + size - 8, 8);
	} else {
		memcpy(buffer, code, size);
	}
	return (int)size;
}

/* The sections of img->iscache into pi (made on first use). */
static gboolean add_sections(VtDecodeImage *img, struct pt_image *pi, GError **error)
{
	gboolean ok = TRUE;

	g_mutex_lock(&img->lock);
	if (!img->iscache && !add_to_iscache(img, error))
		ok = FALSE;
	for (guint i = 0; ok && i < img->isids->len; i++) {
		int rc = pt_image_add_cached(pi, img->iscache, g_array_index(img->isids, int, i), NULL);

		if (rc < 0) {
			g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_FAILED, "libipt image: %s",
				    pt_errstr(pt_errcode(rc)));
			ok = FALSE;
		}
	}
	g_mutex_unlock(&img->lock);
	return ok;
}

struct pt_image *vt_decode_image_new_pt(VtDecodeImage *img, GError **error)
{
	struct pt_image *pi = pt_image_alloc(img->what);
	guint32 limit;

	if (!pi) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_FAILED, "cannot allocate a libipt image");
		return NULL;
	}
	g_mutex_lock(&img->lock);
	limit = img->limit;
	g_mutex_unlock(&img->lock);
	if (!limit) {
		pt_image_set_callback(pi, read_code, img);
		return pi;
	}
	if (!add_sections(img, pi, error)) {
		pt_image_free(pi);
		return NULL;
	}
	/* attached code through the callback, after the sections: a decoder
	 * may read it per guest process instead (queue.c's code hook) */
	if (img->attached)
		pt_image_set_callback(pi, read_code, img);
	return pi;
}

#define ATTACHED_LIMIT (16u << 20)

/* An ELF file's code (guest-user.c): segments (vaddr, file offset, size
 * triples, vaddr ascending) and function starts (ascending) given. */
VtDecodeImage *vt_decode_image_new_file(const char *path, const char *what, const guint64 *segs, guint nsegs,
					const guint64 *funcs, guint nfuncs, GError **error)
{
	VtDecodeImage *img = image_new(what, path);

	img->limit = ATTACHED_LIMIT;     /* its sections stay mapped for report's images */
	if (!image_map(img, path, error))
		goto fail;
	for (guint i = 0; i < nsegs; i++) {
		Segment s = { segs[3 * i], segs[3 * i + 1], segs[3 * i + 2] };

		if (s.offset > img->map_len || s.size > img->map_len - s.offset) {
			bad(error, img, "%s", "a PT_LOAD lies past the end of the file");
			goto fail;
		}
		g_array_append_val(img->segs, s);
	}
	g_array_append_vals(img->funcs, funcs, nfuncs);
	img->funcs_given = TRUE;
	if (!add_to_iscache(img, error))
		goto fail;
	return img;
fail:
	vt_decode_image_free(img);
	return NULL;
}

VtWalkTable *vt_decode_image_walk_table(VtDecodeImage *img)
{
	VtWalkTable *t;

	g_mutex_lock(&img->lock);
	if (!img->walk)
		img->walk = vt_walk_table_new();
	t = img->walk;
	g_mutex_unlock(&img->lock);
	return t;
}

void vt_decode_image_attach(VtDecodeImage *img, VtDecodeImage *code)
{
	if (!img->attached)
		img->attached = g_ptr_array_new_with_free_func((GDestroyNotify)vt_decode_image_free);
	g_ptr_array_add(img->attached, code);
}
