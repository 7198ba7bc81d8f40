/* dispatch.c - commands and subcommands as data (VtCmd tables). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "src/cmd/cmd.h"

int vt_cmd_dispatch(const VtCmd *cmds, gsize n, const char *prefix, int argc, char **argv)
{
	for (gsize i = 0; i < n; i++)
		if (!strcmp(argv[0], cmds[i].name)) {
			g_autofree char *prg = g_strdup_printf("%s %s", prefix, cmds[i].name);

			g_set_prgname(prg);      /* "Usage: vmtrace correlate ..." */
			/* output that never reached stdout is a failure of every command */
			return vt_cli_close_stdout(g_str_has_prefix(prg, "vmtrace ") ? prg + 8 : prg,
						   cmds[i].fn(argc, argv));
		}
	return -1;
}

void vt_cmd_list(FILE *f, const VtCmd *cmds, gsize n)
{
	for (gsize i = 0; i < n; i++)
		fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
}

gboolean vt_cmd_is_help(const char *arg)
{
	return !strcmp(arg, "--help") || !strcmp(arg, "-h") || !strcmp(arg, "help");
}
