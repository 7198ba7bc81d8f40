/* test-guestfs.c - unit tests of guestfs/ (GTest), and a libelf checker
 * for the shell tests:
 *   test-guestfs --peek FILE VADDR LEN   validate FILE with libelf as an ELF64
 *       x86-64 core, print LEN bytes at guest address VADDR as hex;
 *   test-guestfs --offset FILE VADDR     print the file offset of VADDR (FILE may be
 *       just the headers of a kcore). */
#include "config.h"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guestfs/guestfs.h"
#include "src/fs/inroot.h"

/* --- the libelf checker ------------------------------------------------- */
static int elf_lookup(const char *file, guint64 vaddr, gboolean validate, guint64 *off_out)
{
	int fd = open(file, O_RDONLY);
	Elf *e;
	GElf_Ehdr eh;
	size_t nph;
	int rc = 1;
	off_t fsize;

	if (fd < 0) {
		perror(file);
		return 1;
	}
	fsize = lseek(fd, 0, SEEK_END);
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) || elf_getphdrnum(e, &nph) < 0) {
		fprintf(stderr, "%s: libelf: %s\n", file, elf_errmsg(-1));
		goto out;
	}
	if (gelf_getclass(e) != ELFCLASS64 || eh.e_type != ET_CORE || eh.e_machine != EM_X86_64) {
		fprintf(stderr, "%s: not an ELF64 x86-64 core\n", file);
		goto out;
	}
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph)) {
			fprintf(stderr, "%s: phdr %zu: %s\n", file, i, elf_errmsg(-1));
			goto out;
		}
		if (ph.p_type != PT_LOAD)
			continue;
		if (validate && (ph.p_offset + ph.p_filesz > (guint64)fsize || ph.p_filesz != ph.p_memsz)) {
			fprintf(stderr, "%s: PT_LOAD %zu lies outside the file\n", file, i);
			goto out;
		}
		if (vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz) {
			*off_out = ph.p_offset + (vaddr - ph.p_vaddr);
			rc = 0;
			goto out;
		}
	}
	fprintf(stderr, "%s: no PT_LOAD maps 0x%" G_GINT64_MODIFIER "x\n", file, vaddr);
out:
	if (e)
		elf_end(e);
	close(fd);
	return rc;
}

static int tool(int argc, char **argv)
{
	guint64 vaddr, len = 0, off;
	gboolean peek = !strcmp(argv[1], "--peek");

	if (argc != (peek ? 5 : 4) || !g_ascii_string_to_unsigned(argv[3] + (g_str_has_prefix(argv[3], "0x") ? 2 : 0),
								16, 0, G_MAXUINT64, &vaddr, NULL) ||
	    (peek && !g_ascii_string_to_unsigned(argv[4], 10, 1, 1 << 20, &len, NULL))) {
		fprintf(stderr, "usage: test-guestfs --peek FILE VADDR LEN | --offset FILE VADDR\n");
		return 2;
	}
	if (elf_lookup(argv[2], vaddr, peek, &off))
		return 1;
	if (peek) {
		g_autofree guint8 *buf = g_malloc(len);
		int fd = open(argv[2], O_RDONLY);

		if (fd < 0 || pread(fd, buf, len, (off_t)off) != (ssize_t)len) {
			fprintf(stderr, "%s: short read\n", argv[2]);
			return 1;
		}
		close(fd);
		for (guint64 i = 0; i < len; i++)
			printf("%02x", buf[i]);
		printf("\n");
	} else {
		printf("%" G_GUINT64_FORMAT "\n", off);
	}
	return 0;
}

/* --- unit tests ------------------------------------------------------------ */
static void test_target(void)
{
	VtGuestSshOptions o = { 0 };
	const char *bad[] = { "", "@host", "root@", "h:0", "h:65536", "h:22:1", "a;b", "root@h$(x)", "`id`@h",
			      "h:22x", "fe80::1", "[fe80::1", "root@h /x" };

	g_assert_true(vt_guest_ssh_parse_target("root@vm0:2222", &o, NULL));
	g_assert_cmpstr(o.user, ==, "root");
	g_assert_cmpstr(o.host, ==, "vm0");
	g_assert_cmpuint(o.port, ==, 2222);
	vt_guest_ssh_options_clear(&o);
	o.port = 0;
	g_assert_true(vt_guest_ssh_parse_target("[::1]:22", &o, NULL));
	g_assert_cmpstr(o.host, ==, "::1");
	g_assert_null(o.user);
	vt_guest_ssh_options_clear(&o);
	g_assert_true(vt_guest_ssh_parse_target("vm0", &o, NULL));
	g_assert_cmpstr(o.host, ==, "vm0");
	vt_guest_ssh_options_clear(&o);
	for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
		GError *err = NULL;

		g_assert_false(vt_guest_ssh_parse_target(bad[i], &o, &err));
		g_assert_error(err, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED);
		g_error_free(err);
		vt_guest_ssh_options_clear(&o);
	}
}

/* A copy of data that ends where an unmapped page begins: reading one byte
 * past it faults (no ASan needed).  Free with guarded_free. */
static guint8 *guarded_copy(const void *data, gsize len)
{
	gsize page = (gsize)sysconf(_SC_PAGESIZE);
	guint8 *map;

	g_assert_cmpuint(len, <=, page);
	map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	g_assert_true(map != MAP_FAILED);
	g_assert_cmpint(mprotect(map + page, page, PROT_NONE), ==, 0);
	memcpy(map + page - len, data, len);
	return map + page - len;
}

static void guarded_free(guint8 *p)
{
	gsize page = (gsize)sysconf(_SC_PAGESIZE);

	/* p - 1: the copy ends at the guard page, also when it is empty */
	munmap((void *)(((guintptr)p - 1) & ~(guintptr)(page - 1)), 2 * page);
}

/* The build-id of notes (guarded), or NULL with the error's code checked. */
static char *build_id_of(const void *notes, gsize len)
{
	guint8 *g = guarded_copy(notes, len);
	GError *err = NULL;
	char *id = vt_guest_build_id_parse(g, len, &err);

	guarded_free(g);
	if (!id) {
		g_assert_error(err, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA);
		g_error_free(err);
	} else {
		g_assert_no_error(err);
	}
	return id;
}

/* A note header (n_namesz, n_descsz, n_type) at p. */
static void nhdr(guint8 *p, guint32 namesz, guint32 descsz, guint32 type)
{
	Elf64_Nhdr h = { namesz, descsz, type };

	memcpy(p, &h, sizeof(h));
}

static void test_build_id(void)
{
	/* a Xen note first, then the GNU build-id (20 bytes) */
	guint8 notes[12 + 4 + 4 + 12 + 4 + 20] = { 0 };
	char *id;

	nhdr(notes, 4, 4, 1);
	memcpy(notes + 12, "Xen", 4);
	nhdr(notes + 20, 4, 20, NT_GNU_BUILD_ID);
	memcpy(notes + 32, "GNU", 4);
	for (int i = 0; i < 20; i++)
		notes[36 + i] = (guint8)(0xa0 + i);
	id = build_id_of(notes, sizeof(notes));
	g_assert_cmpstr(id, ==, "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3");
	g_free(id);
	/* truncated anywhere: in the second header, name, descriptor */
	for (gsize len = 0; len < sizeof(notes); len++)
		g_assert_null(build_id_of(notes, len));
}

/* Crafted notes: odd sizes, missing padding, sizes that overflow. */
static void test_build_id_hostile(void)
{
	guint8 n[64] = { 0 };
	char *id;

	/* the issue's 21 bytes: namesz 4, descsz 5, no padding - not GNU */
	nhdr(n, 4, 5, 1);
	memcpy(n + 12, "Xen", 4);
	g_assert_null(build_id_of(n, 21));
	/* the same as a GNU build-id: the last descriptor may lack its padding */
	nhdr(n, 4, 5, NT_GNU_BUILD_ID);
	memcpy(n + 12, "GNU", 4);
	memcpy(n + 16, "\x01\x02\x03\x04\x05", 5);
	id = build_id_of(n, 21);
	g_assert_cmpstr(id, ==, "0102030405");
	g_free(id);
	/* odd name size (padded to 8), then a GNU note */
	nhdr(n, 5, 3, 7);
	memcpy(n + 12, "Linux", 5);
	nhdr(n + 12 + 8 + 4, 4, 2, NT_GNU_BUILD_ID);
	memcpy(n + 36, "GNU", 4);
	memcpy(n + 40, "\xab\xcd", 2);
	id = build_id_of(n, 42);
	g_assert_cmpstr(id, ==, "abcd");
	g_free(id);
	/* an empty note (no name, no descriptor) is skipped; a GNU note
	 * without a descriptor or with more than 64 bytes is no build-id */
	memset(n, 0, sizeof(n));
	nhdr(n + 12, 4, 0, NT_GNU_BUILD_ID);
	memcpy(n + 24, "GNU", 4);
	g_assert_null(build_id_of(n, 28));
	nhdr(n, 4, 65, NT_GNU_BUILD_ID);
	g_assert_null(build_id_of(n, sizeof(n)));
	/* sizes that overflow 32-bit padding or the buffer */
	const guint32 huge[][2] = { { 0xffffffff, 0 }, { 0xfffffffd, 4 }, { 4, 0xffffffff },
				    { 4, 0xfffffffd }, { 0xfffffff0, 0xfffffff0 }, { 4, 49 } };
	for (guint i = 0; i < G_N_ELEMENTS(huge); i++) {
		memset(n, 0, sizeof(n));
		nhdr(n, huge[i][0], huge[i][1], NT_GNU_BUILD_ID);
		memcpy(n + 12, "GNU", 4);
		g_assert_null(build_id_of(n, sizeof(n)));
	}
	/* a note, then fewer than 12 bytes: no build-id, no read past the end */
	memset(n, 0, sizeof(n));
	nhdr(n, 4, 4, 1);
	g_assert_null(build_id_of(n, 20 + 11));
	g_assert_null(build_id_of(n, 20 + 3));
}

static void test_ranges(void)
{
	const char *ks = "ffffffff81000000 T _stext\n"
			 "ffffffff81000010 T startup_64\n"
			 "ffffffff81e01234 T _etext\n"
			 "ffffffff82000100 T __entry_text_start\n"
			 "ffffffff82003000 T __entry_text_end\n"
			 "fffffe0000009000 T __entry_SYSCALL_64_trampoline\n"
			 "ffffffffc0300000 t e1000_probe\t[e1000]\n"
			 "ffffffffc0100800 t bpf_prog_6deef7357e7b4530\t[bpf]\n";
	const char *mods = "e1000 159744 0 - Live 0xffffffffc0200000\n";
	g_autoptr(GBytes) k = g_bytes_new_static(ks, strlen(ks));
	g_autoptr(GBytes) m = g_bytes_new_static(mods, strlen(mods));
	VtGuestKallsyms sym;
	GArray *r;

	g_assert_true(vt_guest_kallsyms_parse(k, m, &sym, NULL));
	g_assert_cmpuint(sym.nsyms, ==, 8);
	g_assert_false(sym.all_zero);
	r = vt_guest_kallsyms_ranges(&sym);
	g_assert_cmpuint(r->len, ==, 4);     /* sorted by address */
	g_assert_cmphex(g_array_index(r, VtGuestRange, 0).start, ==, 0xfffffe0000009000);
	g_assert_cmphex(g_array_index(r, VtGuestRange, 0).end, ==, 0xfffffe000000a000);
	g_assert_cmpstr(g_array_index(r, VtGuestRange, 0).what, ==, "entry trampoline");
	g_assert_cmphex(g_array_index(r, VtGuestRange, 1).start, ==, 0xffffffff81000000);
	g_assert_cmphex(g_array_index(r, VtGuestRange, 1).end, ==, 0xffffffff81e02000);
	g_assert_cmphex(g_array_index(r, VtGuestRange, 2).start, ==, 0xffffffff82000000);
	g_assert_cmphex(g_array_index(r, VtGuestRange, 2).end, ==, 0xffffffff82003000);
	g_assert_cmpstr(g_array_index(r, VtGuestRange, 2).what, ==, "entry text");
	g_assert_cmphex(g_array_index(r, VtGuestRange, 3).start, ==, 0xffffffffc0100000);
	g_assert_cmphex(g_array_index(r, VtGuestRange, 3).end, ==, 0xffffffffc0301000);   /* last symbol + page */
	g_array_free(r, TRUE);
	vt_guest_kallsyms_clear(&sym);
}

/* --- src/fs/inroot: openat2 RESOLVE_IN_ROOT and the user-space walk ---- */
/* What opening path beneath root gives: "R:<contents>" or "E:<code>". */
static char *open_result(int root, const char *path, gboolean walk)
{
	GError *err = NULL;
	int fd = walk ? vt_fs_open_in_root_walk(root, path, &err) : vt_fs_open_in_root(root, path, &err);
	g_autoptr(GBytes) b = NULL;
	g_autofree char *text = NULL;
	char *r;

	if (fd < 0) {
		g_assert_nonnull(err);
		r = g_strdup_printf("E:%s%d", err->domain == VT_FS_ERROR ? "fs" : "file", err->code);
		g_error_free(err);
		return r;
	}
	g_assert_no_error(err);
	b = vt_fs_read_bounded(fd, 100, path, &err);
	g_assert_no_error(err);
	close(fd);
	text = vt_guest_bytes_dup(b);
	return g_strdup_printf("R:%s", text);
}

static void put(const char *dir, const char *name, const char *text)
{
	g_autofree char *p = g_build_filename(dir, name, NULL);

	g_assert_true(g_file_set_contents(p, text, -1, NULL));
}

static void link_at(const char *dir, const char *target, const char *name)
{
	g_autofree char *p = g_build_filename(dir, name, NULL);

	g_assert_cmpint(symlink(target, p), ==, 0);
}

static void test_inroot(void)
{
	g_autofree char *top = g_dir_make_tmp("test-inroot-XXXXXX", NULL);
	g_autofree char *root = g_build_filename(top, "root", NULL);
	g_autofree char *outside = g_build_filename(top, "secret", NULL);
	g_autofree char *escape = g_strdup_printf("../../../../..%s", outside);
	g_autofree char *fifo = g_build_filename(root, "fifo", NULL);
	g_autofree char *etc = g_build_filename(root, "etc", NULL);
	g_autofree char *rm = g_strdup_printf("rm -rf '%s'", top);
	int rootfd;
	const char *cases[][2] = {
		{ "/etc/file", "R:inside" },            /* plain */
		{ "etc//./file", "R:inside" },
		{ "/abs", "R:inside" },                 /* -> /etc/file: the root's, not the host's */
		{ "/rel", "R:inside" },                 /* -> etc/file */
		{ "/host", "E:file4" },                 /* -> the host's secret: not below the root */
		{ "/escape", "E:file4" },               /* -> ../../..: clamped at the root */
		{ "/../../etc/file", "R:inside" },
		{ "/d/file", "R:inside" },              /* d -> /etc: a directory link in the middle */
		{ "/d/../etc/file", "R:inside" },
		{ "/chain", "R:inside" },               /* chain -> abs -> /etc/file */
		{ "/loop", "E:file11" },                /* loop -> loop: ELOOP */
		{ "/etc", "E:fs0" },                    /* a directory */
		{ "/fifo", "E:fs0" },                   /* a FIFO: refused, never blocks */
		{ "/missing", "E:file4" },
		{ "/etc/file/x", "E:file5" },           /* ENOTDIR */
		{ "/", "E:fs0" },
	};

	g_assert_cmpint(g_mkdir_with_parents(root, 0755), ==, 0);
	put(top, "secret", "SECRET");
	g_assert_cmpint(mkdir(etc, 0755), ==, 0);
	put(root, "etc/file", "inside");
	link_at(root, "/etc/file", "abs");
	link_at(root, "etc/file", "rel");
	link_at(root, outside, "host");
	link_at(root, escape, "escape");
	link_at(root, "/etc", "d");
	link_at(root, "abs", "chain");
	link_at(root, "loop", "loop");
	g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
	rootfd = open(root, O_RDONLY | O_DIRECTORY);

	g_assert_cmpint(G_FILE_ERROR_NOENT, ==, 4);
	g_assert_cmpint(G_FILE_ERROR_NOTDIR, ==, 5);
	g_assert_cmpint(G_FILE_ERROR_LOOP, ==, 11);
	for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
		for (int walk = 0; walk < 2; walk++) {
			g_autofree char *got = open_result(rootfd, cases[i][0], walk);

			if (g_strcmp0(got, cases[i][1]))
				g_error("%s (%s): %s, expected %s", cases[i][0], walk ? "walk" : "openat2", got, cases[i][1]);
		}
	}
	close(rootfd);
	g_assert_cmpint(system(rm), ==, 0);
}

static void test_read_bounded(void)
{
	g_autofree char *dir = g_dir_make_tmp("test-bounded-XXXXXX", NULL);
	g_autofree char *f = g_build_filename(dir, "f", NULL);
	g_autofree char *fifo = g_build_filename(dir, "fifo", NULL);
	g_autofree char *rm = g_strdup_printf("rm -rf '%s'", dir);
	GError *err = NULL;
	GBytes *b;

	put(dir, "f", "0123456789");
	b = vt_fs_read_regular(f, 10, &err);
	g_assert_no_error(err);
	g_assert_cmpuint(g_bytes_get_size(b), ==, 10);
	g_bytes_unref(b);
	g_assert_null(vt_fs_read_regular(f, 9, &err));
	g_assert_error(err, VT_FS_ERROR, VT_FS_ERROR_TOO_BIG);
	g_assert_null(strstr(err->message, "0123"));     /* never the contents */
	g_clear_error(&err);
	g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
	g_assert_null(vt_fs_read_regular(fifo, 10, &err));   /* no writer: would block */
	g_assert_error(err, VT_FS_ERROR, VT_FS_ERROR_NOT_REGULAR);
	g_clear_error(&err);
	g_assert_false(vt_fs_regular_or_absent(fifo, TRUE, &err));
	g_assert_error(err, VT_FS_ERROR, VT_FS_ERROR_NOT_REGULAR);
	g_clear_error(&err);
	g_assert_true(vt_fs_regular_or_absent(f, FALSE, NULL));
	g_assert_true(vt_fs_regular_or_absent(rm, TRUE, NULL));    /* absent */
	g_assert_false(vt_fs_regular_or_absent(dir, TRUE, NULL));
	g_assert_cmpint(system(rm), ==, 0);
}

/* A source whose kallsyms changes after the first read. */
typedef struct {
	VtGuestSource base;
	guint reads;
} FlipSource;

static GBytes *flip_read(VtGuestSource *src, const char *path, gsize max, GError **error)
{
	FlipSource *f = (FlipSource *)src;
	static const guint8 notes[] = { 4, 0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0, 1, 2, 3, 4 };

	if (!strcmp(path, "/sys/kernel/notes"))
		return g_bytes_new_static(notes, sizeof(notes));
	if (!strcmp(path, "/proc/sys/kernel/osrelease"))
		return g_bytes_new_static("6.1.0-test\n", 11);
	if (!strcmp(path, "/proc/modules"))
		return g_bytes_new_static("", 0);
	if (!strcmp(path, "/proc/kallsyms"))
		return ++f->reads == 1 ? g_bytes_new_static("ffffffff81000000 T _stext\nffffffff81001000 T _etext\n", 52)
				       : g_bytes_new_static("ffffffff81000000 T _stext\nffffffff81002000 T _etext\n", 52);
	g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_NOT_FOUND, "%s: no such file", path);
	return NULL;
}

static gboolean flip_pread(VtGuestSource *src, const char *path, guint64 offset, void *buf, gsize len, gsize *got,
			   GError **error)
{
	g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_NOT_FOUND, "%s: no such file", path);
	return FALSE;
}

static gint64 flip_uid(VtGuestSource *src)
{
	return 0;
}

static void flip_close(VtGuestSource *src)
{
	g_free(src);
}

static const VtGuestSourceOps flip_ops = { flip_read, flip_pread, flip_uid, flip_close, NULL };

static void test_changed(void)
{
	FlipSource *f = g_new0(FlipSource, 1);
	g_autofree char *cache = g_dir_make_tmp("test-guestfs-XXXXXX", NULL);
	g_autofree char *bdir = g_build_filename(cache, "[kernel.kcore]", "01020304", NULL);
	VtGuestFetchOptions o = { cache, FALSE, 0, NULL };
	VtGuestFetchResult r;
	GError *err = NULL;
	g_autofree char *rm = NULL;
	GDir *d;

	f->base.ops = &flip_ops;
	f->base.description = g_strdup("flip");
	g_assert_false(vt_guest_fetch(&f->base, &o, &r, &err));
	g_assert_error(err, VT_GUEST_ERROR, VT_GUEST_ERROR_CHANGED);
	g_clear_error(&err);
	vt_guest_fetch_result_clear(&r);
	/* nothing half-written is left */
	d = g_dir_open(bdir, 0, NULL);
	g_assert_nonnull(d);
	g_assert_null(g_dir_read_name(d));
	g_dir_close(d);
	/* the second and third reads agree: a snapshot */
	g_assert_true(vt_guest_fetch(&f->base, &o, &r, &err));
	g_assert_no_error(err);
	g_assert_cmpstr(r.build_id, ==, "01020304");
	g_assert_cmpstr(r.osrelease, ==, "6.1.0-test");
	g_assert_false(r.reused);
	g_assert_true(g_file_test(r.kallsyms, G_FILE_TEST_IS_REGULAR));
	g_assert_true(g_str_has_prefix(r.dir, bdir));
	g_assert_cmpuint(strlen(r.dir) - strlen(bdir) - 1, ==, 16);
	vt_guest_fetch_result_clear(&r);
	/* with retries, a change during the first attempt is not an error */
	{
		g_autofree char *cache2 = g_build_filename(cache, "second", NULL);

		f->reads = 0;
		o.retries = 1;
		o.cache = cache2;
		g_assert_true(vt_guest_fetch(&f->base, &o, &r, &err));
		g_assert_no_error(err);
		g_assert_cmpuint(f->reads, ==, 4);   /* v1 != v2: again; v2 == v2 */
		g_assert_false(r.reused);
	}
	vt_guest_fetch_result_clear(&r);
	vt_guest_source_close(&f->base);
	rm = g_strdup_printf("rm -rf '%s'", cache);
	g_assert_cmpint(system(rm), ==, 0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--peek") || !strcmp(argv[1], "--offset")))
		return tool(argc, argv);
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/guestfs/target", test_target);
	g_test_add_func("/guestfs/build-id", test_build_id);
	g_test_add_func("/guestfs/build-id-hostile", test_build_id_hostile);
	g_test_add_func("/guestfs/ranges", test_ranges);
	g_test_add_func("/guestfs/changed", test_changed);
	g_test_add_func("/fs/inroot", test_inroot);
	g_test_add_func("/fs/read-bounded", test_read_bounded);
	return g_test_run();
}
