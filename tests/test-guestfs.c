/* test-guestfs.c - unit tests of guestfs/ (GTest), and a libelf checker
 * for the shell tests:
 *   test-guestfs --peek FILE VADDR LEN   validate FILE with libelf as an ELF64
 *       x86-64 core, print LEN bytes at guest address VADDR as hex;
 *   test-guestfs --offset FILE VADDR     print the file offset of VADDR (FILE may be
 *       just the headers of a kcore). */
#include "config.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guestfs/guestfs.h"

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

static void test_build_id(void)
{
	/* a Xen note first, then the GNU build-id (20 bytes) */
	guint8 notes[12 + 4 + 4 + 12 + 4 + 20] = { 0 };
	guint32 w[3] = { 4, 4, 1 }, g[3] = { 4, 20, 3 };
	GError *err = NULL;
	char *id;

	memcpy(notes, w, 12);
	memcpy(notes + 12, "Xen", 4);
	memcpy(notes + 20, g, 12);
	memcpy(notes + 32, "GNU", 4);
	for (int i = 0; i < 20; i++)
		notes[36 + i] = (guint8)(0xa0 + i);
	id = vt_guest_build_id_parse(notes, sizeof(notes), &err);
	g_assert_no_error(err);
	g_assert_cmpstr(id, ==, "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3");
	g_free(id);
	g_assert_null(vt_guest_build_id_parse(notes, 30, &err));    /* truncated */
	g_assert_error(err, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA);
	g_error_free(err);
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

/* A source whose kallsyms changes after the first read. */
typedef struct {
	VtGuestSource base;
	guint reads;
} FlipSource;

static GBytes *flip_read(VtGuestSource *src, const char *path, GError **error)
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

static const VtGuestSourceOps flip_ops = { flip_read, flip_pread, flip_uid, flip_close };

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
	g_test_add_func("/guestfs/ranges", test_ranges);
	g_test_add_func("/guestfs/changed", test_changed);
	return g_test_run();
}
