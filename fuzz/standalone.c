/* standalone.c - a main() for the fuzz targets in builds without libFuzzer
 * (gcc, valgrind): runs LLVMFuzzerTestOneInput once on each file named on
 * the command line, after LLVMFuzzerInitialize when the target has one.
 *
 * Build: cc ... fuzz/fuzz-decode.c fuzz/standalone.c ... (any target).
 * Exit status 1 when a file cannot be read; a target's check fails by
 * aborting, as under libFuzzer. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f) {
		perror(path);
		return 1;
	}
	do {
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap = cap ? 2 * cap : 65536);

			if (!nb) {
				perror(path);
				free(buf);
				fclose(f);
				return 1;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	if (ferror(f)) {
		perror(path);
		free(buf);
		fclose(f);
		return 1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++)
		if (run_file(argv[i]))
			return 1;
	return 0;
}
