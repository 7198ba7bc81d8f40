/* fuzz-correlate.c - libFuzzer target for the whole correlation pipeline:
 * any bytes as a perf.data file, opened, indexed (vmcorr/session.c), dry
 * run and patch collection (vmcorr/dryrun.c) - what `vmtrace correlate`
 * does before it writes a byte.  It must end (no crash, no hang, no
 * sanitizer report), and when it succeeds its patches must be writable:
 * sorted, within the file, not overlapping, and only over TSC packets
 * (0x19 followed by the 7 payload bytes the patch replaces).
 *
 * The input lives in a memfd, named /proc/self/fd/N (no disk I/O).
 * Build: make fuzz (clang); without libFuzzer, link fuzz/standalone.c for a
 * main() that runs the files named on the command line. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <glib.h>

#include "vmcorr/vmcorr.h"

static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fd = memfd_create("fuzz-correlate", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return 0;
}

static void check_patches(const VmcorrResult *r, const uint8_t *data, size_t size)
{
	uint64_t end = 0;

	for (guint i = 0; r->patches && i < r->patches->len; i++) {
		const VmcorrPatch *p = &g_array_index(r->patches, VmcorrPatch, i);

		/* the patch replaces the 7 payload bytes after a TSC opcode */
		if (p->offset < 1 || p->offset > size || size - p->offset < 7 || p->offset < end ||
		    data[p->offset - 1] != 0x19 || (p->value >> 56))
			abort();
		end = p->offset + 7;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	VmcorrOptions opt;
	VmcorrResult *r;
	GError *error = NULL;

	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	vmcorr_options_init(&opt);
	opt.jobs = 1;
	opt.collect_patches = TRUE;
	r = vmcorr_dry_run(path, &opt, &error);
	if (!r) {
		if (!error || !error->message || !*error->message)
			abort();    /* every failure says why */
		g_error_free(error);
		return 0;
	}
	check_patches(r, data, size);
	vmcorr_result_free(r);
	return 0;
}
