/* record-tcg.c - `vmtrace record --source tcg -o REC -- QEMU ARGS...`:
 * runs QEMU (TCG) with vmtrace-tcg.so, then turns what the plugin wrote
 * into REC (src/tcg/tcg.h) and reports instructions, packets and size. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <glib/gstdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/cli/json.h"
#include "src/cmd/cmd.h"
#include "src/fs/output.h"
#include "src/host/domain.h"
#include "src/tcg/tcg.h"

static volatile pid_t qemu_child;

/* Ctrl-C, SIGTERM, SIGHUP while QEMU runs: QEMU shuts down (its plugin
 * writes its files), then the recording is written. */
static void forward(int sig)
{
	if (qemu_child > 0)
		kill(qemu_child, sig);
}

/* $VMTRACE_TCG_PLUGIN; else, when vmtrace runs from its build tree, the
 * plugin built beside it (vmtrace-tcg.so next to the binary); else the
 * installed one. */
static char *plugin_path(void)
{
	const char *env = g_getenv("VMTRACE_TCG_PLUGIN");
	g_autofree char *self = NULL, *dir = NULL, *built = NULL;

	if (env && *env)
		return g_strdup(env);
	self = g_file_read_link("/proc/self/exe", NULL);
	dir = self ? g_path_get_dirname(self) : NULL;
	built = dir ? g_build_filename(dir, "vmtrace-tcg.so", NULL) : NULL;
	if (built && g_file_test(built, G_FILE_TEST_IS_REGULAR))
		return g_steal_pointer(&built);
	return g_strdup(VT_PKGLIBDIR "/vmtrace-tcg.so");
}

static char *plugin_arg(const VtRecordTcg *a, const char *plugin, const char *raw)
{
	GString *s = g_string_new(NULL);

	g_string_append_printf(s, "%s%s,out=%s", a->domain ? "file=" : "", plugin, raw);
	if (a->kernel_only)
		g_string_append(s, ",filter=kernel");
	if (a->skip)
		g_string_append_printf(s, ",skip=%" G_GUINT64_FORMAT, a->skip);
	if (a->limit)
		g_string_append_printf(s, ",limit=%" G_GUINT64_FORMAT, a->limit);
	return g_string_free(s, FALSE);
}

/* An -accel argument: TCG without thread= gets thread=single.  QEMU runs
 * an x86_64 guest's vCPUs in a thread each by default (MTTCG), and API v1's
 * inline counter is shared by all threads: with one thread the vCPUs take
 * turns and every count is exact (QEMU's own; -smp 1 is the same either
 * way).  thread=multi stays (the summary warns). */
static char *accel_arg(const char *v)
{
	if ((!strcmp(v, "tcg") || g_str_has_prefix(v, "tcg,")) && !strstr(v, "thread="))
		return g_strconcat(v, ",thread=single", NULL);
	return g_strdup(v);
}

/* Run QEMU to its end; *secs: how long it ran. */
static gboolean run_qemu(const VtRecordTcg *a, const char *arg, pid_t *pid, double *secs, GError **error)
{
	GPtrArray *argv = g_ptr_array_new();
	struct sigaction sa = { .sa_handler = forward }, old[3];
	const int sigs[3] = { SIGINT, SIGTERM, SIGHUP };
	gint64 t0 = g_get_monotonic_time();
	GPid child;
	int status = 0;
	gboolean ok;

	g_ptr_array_set_free_func(argv, g_free);
	for (guint i = 0; a->qemu_argv[i]; i++)
		g_ptr_array_add(argv, i && !strcmp(a->qemu_argv[i - 1], "-accel") ? accel_arg(a->qemu_argv[i])
										 : g_strdup(a->qemu_argv[i]));
	g_ptr_array_add(argv, g_strdup("-plugin"));
	g_ptr_array_add(argv, g_strdup(arg));
	g_ptr_array_add(argv, NULL);
	ok = g_spawn_async(NULL, (char **)argv->pdata, NULL,
			   G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_CHILD_INHERITS_STDIN, NULL, NULL,
			   &child, error);
	g_ptr_array_free(argv, TRUE);
	if (!ok)
		return FALSE;
	qemu_child = *pid = child;
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	qemu_child = 0;
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	*secs = (g_get_monotonic_time() - t0) / 1e6;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return TRUE;
	if (WIFEXITED(status))
		g_set_error(error, VT_TCG_ERROR, VT_TCG_ERROR_INPUT, "%s exited with status %d", a->qemu_argv[0],
			    WEXITSTATUS(status));
	else
		g_set_error(error, VT_TCG_ERROR, VT_TCG_ERROR_INPUT, "%s was killed by signal %d", a->qemu_argv[0],
			    WTERMSIG(status));
	return FALSE;
}

static void remove_raw(const char *raw)
{
	GDir *d = g_dir_open(raw, 0, NULL);
	const char *name;

	while (d && (name = g_dir_read_name(d))) {
		g_autofree char *p = g_build_filename(raw, name, NULL);

		g_unlink(p);
	}
	if (d)
		g_dir_close(d);
	g_rmdir(raw);
}

static void report_text(const VtRecordTcg *a, const VtTcgStats *st, double secs)
{
	double mib = st->aux_bytes / 1048576.0;

	fprintf(stderr,
		"vmtrace record: %s (QEMU TCG, %u vCPU%s, %s)\n"
		"  instructions traced %" G_GUINT64_FORMAT " (QEMU started %" G_GUINT64_FORMAT ": %" G_GUINT64_FORMAT
		" before tracing began, %" G_GUINT64_FORMAT " after it stopped, %" G_GUINT64_FORMAT
		" restarted after exceptions, %" G_GUINT64_FORMAT
		" rep iterations, %" G_GUINT64_FORMAT " filtered, %" G_GUINT64_FORMAT " in the last block)\n"
		"  packets %" G_GUINT64_FORMAT ", %.1f MiB of trace, %.1f s (%.1f MiB/s), perf.data %.1f MiB\n"
		"  interrupts and exceptions %" G_GUINT64_FORMAT " (return address guessed: %" G_GUINT64_FORMAT
		" never seen, %" G_GUINT64_FORMAT " in flight at the end)\n"
		"  code image: %" G_GUINT64_FORMAT " bytes in %" G_GUINT64_FORMAT " pages; %" G_GUINT64_FORMAT
		" translations changed code (%" G_GUINT64_FORMAT " bytes patched at run time: the image holds the "
		"first bytes, TEXT_POKE records the changes)\n"
		"  execution mode: %" G_GUINT64_FORMAT " changes of 16/32/64-bit mode, %" G_GUINT64_FORMAT
		" without a TIP (a wrong guess), %" G_GUINT64_FORMAT " translations ran alike in several modes\n",
		a->out, st->vcpus, st->vcpus == 1 ? "" : "s", st->kernel_only ? "kernel only" : "kernel and user",
		st->retired, st->started, st->before, st->after, st->faults, st->rep_iters, st->filtered, st->final_started,
		st->packets, mib, secs, secs > 0 ? mib / secs : 0.0, st->file_bytes / 1048576.0, st->asyncs,
		st->unresolved, st->inflight, st->code_bytes, st->code_pages, st->smc_translations,
		st->smc_bytes, st->mode_changes, st->mode_resyncs, st->mode_ambiguous);
	for (guint i = 0; st->n_per_vcpu > 1 && i < st->n_per_vcpu; i++)
		fprintf(stderr, "  vCPU %u (tid %u): %" G_GUINT64_FORMAT " instructions traced, %" G_GUINT64_FORMAT
			" started\n", st->per_vcpu[i].vcpu, st->per_vcpu[i].tid, st->per_vcpu[i].retired, st->per_vcpu[i].ran);
	if (st->mttcg)
		fprintf(stderr, "  warning: several TCG threads ran vCPUs: counts and streams are inexact "
				"(use -accel tcg,thread=single)\n");
}

static void report_json(const VtRecordTcg *a, const VtTcgStats *st, double secs)
{
	VtJson *j = vt_json_new(stdout);

	vt_json_begin_object(j);
	vt_json_kv_string(j, "output", a->out);
	vt_json_kv_string(j, "source", "tcg");
	vt_json_kv_uint(j, "vcpus", st->vcpus);
	vt_json_kv_bool(j, "kernel_only", st->kernel_only);
	vt_json_kv_uint(j, "instructions", st->retired);
	vt_json_kv_uint(j, "started", st->started);
	vt_json_kv_uint(j, "before_trace", st->before);
	vt_json_kv_uint(j, "after_trace", st->after);
	vt_json_kv_uint(j, "restarted", st->faults);
	vt_json_kv_uint(j, "rep_iterations", st->rep_iters);
	vt_json_kv_uint(j, "filtered", st->filtered);
	vt_json_kv_uint(j, "last_block", st->final_started);
	vt_json_kv_uint(j, "packets", st->packets);
	vt_json_kv_uint(j, "aux_bytes", st->aux_bytes);
	vt_json_kv_uint(j, "file_bytes", st->file_bytes);
	vt_json_kv_double(j, "seconds", secs, 3);
	vt_json_kv_uint(j, "async", st->asyncs);
	vt_json_kv_uint(j, "unresolved", st->unresolved);
	vt_json_kv_uint(j, "in_flight", st->inflight);
	vt_json_kv_uint(j, "code_bytes", st->code_bytes);
	vt_json_kv_uint(j, "smc_translations", st->smc_translations);
	vt_json_kv_uint(j, "smc_bytes", st->smc_bytes);
	vt_json_kv_uint(j, "mode_changes", st->mode_changes);
	vt_json_kv_uint(j, "mode_resyncs", st->mode_resyncs);
	vt_json_kv_uint(j, "mode_ambiguous", st->mode_ambiguous);
	vt_json_kv_bool(j, "mttcg", st->mttcg);
	vt_json_key(j, "per_vcpu");
	vt_json_begin_array(j);
	for (guint i = 0; i < st->n_per_vcpu; i++) {
		vt_json_begin_object(j);
		vt_json_kv_uint(j, "vcpu", st->per_vcpu[i].vcpu);
		vt_json_kv_uint(j, "tid", st->per_vcpu[i].tid);
		vt_json_kv_uint(j, "instructions", st->per_vcpu[i].retired);
		vt_json_kv_uint(j, "started", st->per_vcpu[i].ran);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
	vt_json_end_object(j);
	vt_json_free(j);
}

/* What the plugin wrote into raw (QEMU ran it as pid, ok: to its end;
 * else err says how it ended) -> a->out, and the summary. */
static int record_convert(const VtRecordTcg *a, VtFsOutput *out, const char *raw, pid_t pid, gboolean ran,
			  GError *run_err, double secs)
{
	g_autoptr(GError) err = NULL;
	VtTcgStats st;
	g_autofree char *abs = g_canonicalize_filename(a->out, NULL);
	g_autofree char *image = g_build_filename(abs, "guest", "kcore", NULL);
	VtTcgConvertOptions co = { .kallsyms = a->kallsyms, .argv = a->cmdline, .image_path = image };

	if (!vt_tcg_read_meta(raw, &st, NULL)) {
		vt_err("record", "%s; the plugin wrote nothing", ran ? "QEMU did not run the plugin to its end" : run_err->message);
		return VT_EXIT_TCG_QEMU;
	}
	if (!ran)
		vt_warn("record", "%s: recording what the plugin wrote", run_err->message);
	co.in_dir = raw;
	co.out_dir = vt_fs_output_tmp(out);
	co.qemu_pid = (uint32_t)pid;
	if (!vt_tcg_convert(&co, &st, &err)) {
		vt_err("record", "%s", err->message);
		return g_error_matches(err, VT_TCG_ERROR, VT_TCG_ERROR_NO_TRACE) ? VT_EXIT_TCG_NOTHING : VT_EXIT_FAILURE;
	}
	if (!a->domain)
		remove_raw(raw);
	if (!vt_fs_output_commit(out, &err)) {
		vt_err("record", "%s", err->message);
		return VT_EXIT_FAILURE;
	}
	if (!a->quiet)
		report_text(a, &st, secs);
	if (a->json)
		report_json(a, &st, secs);
	return VT_EXIT_OK;
}

/* The -plugin argument of process pid that loads vmtrace-tcg, or NULL. */
static char *domain_plugin_arg(uint32_t pid)
{
	g_autofree char *path = g_strdup_printf("/proc/%u/cmdline", pid);
	g_autofree char *cmd = NULL;
	gsize len = 0;

	if (!pid || !g_file_get_contents(path, &cmd, &len, NULL))
		return NULL;
	for (gsize i = 0; i < len; i += strlen(cmd + i) + 1) {
		const char *next = cmd + i + strlen(cmd + i) + 1;

		if (!strcmp(cmd + i, "-plugin") && next < cmd + len && strstr(next, "vmtrace-tcg"))
			return g_strdup(next);
	}
	return NULL;
}

/* out=DIR of a -plugin argument, or NULL. */
static char *plugin_out_dir(const char *arg)
{
	g_auto(GStrv) kv = g_strsplit(arg, ",", -1);

	for (guint i = 0; kv[i]; i++)
		if (g_str_has_prefix(kv[i], "out="))
			return g_strdup(kv[i] + 4);
	return NULL;
}

/* The domain's QEMU does not load the plugin: what to add to its XML. */
static int domain_advise(const VtRecordTcg *a, const VtDomain *d, const char *plugin)
{
	g_autofree char *dir = g_strdup_printf("/var/lib/libvirt/qemu/vmtrace-%s", d->name);
	g_autofree char *arg = plugin_arg(a, plugin, dir);

	vt_err("record",
	       "domain '%s' on %s was not started with vmtrace's TCG plugin.  Add to its XML (virsh -c %s edit %s):\n"
	       "  <domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n"
	       "    ...\n"
	       "    <qemu:commandline>\n"
	       "      <qemu:arg value='-plugin'/>\n"
	       "      <qemu:arg value='%s'/>\n"
	       "    </qemu:commandline>\n"
	       "  </domain>\n"
	       "%s"
	       "then start it again (virsh -c %s shutdown %s; virsh -c %s start %s) and run this command again: it waits "
	       "until the domain shuts down (the plugin writes %s when QEMU exits) and records that",
	       d->name, d->uri, d->uri, d->name, arg,
	       d->kvm ? "(type='qemu': TCG; this domain is type='kvm', and plugins run only under TCG)\n" : "",
	       d->uri, d->name, d->uri, d->name, dir);
	return VT_EXIT_TCG_DOMAIN;
}

/* --domain: a running domain whose QEMU loads the plugin; wait until it
 * exits, then record what the plugin wrote. */
static int record_domain(const VtRecordTcg *a, VtFsOutput *out, const char *plugin)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *arg = NULL, *dir = NULL;
	VtDomain d;
	gint64 t0;
	int rc;

	if (!vt_domain_find(a->domain, a->uri, FALSE, &d, &err)) {
		vt_err("record", "%s", err->message);
		vt_domain_clear(&d);
		return VT_EXIT_FAILURE;
	}
	arg = domain_plugin_arg(d.pid);
	dir = arg ? plugin_out_dir(arg) : NULL;
	if (!dir) {
		rc = domain_advise(a, &d, plugin);
		vt_domain_clear(&d);
		return rc;
	}
	if (!a->quiet)
		fprintf(stderr, "vmtrace record: domain '%s' (QEMU pid %u) runs the plugin (%s): waiting until it shuts down\n",
			d.name, d.pid, dir);
	t0 = g_get_monotonic_time();
	while (kill((pid_t)d.pid, 0) == 0 || errno == EPERM)
		g_usleep(200000);
	rc = record_convert(a, out, dir, (pid_t)d.pid, TRUE, NULL, (g_get_monotonic_time() - t0) / 1e6);
	vt_domain_clear(&d);
	return rc;
}

int vt_record_tcg(const VtRecordTcg *a)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(VtFsOutput) out = vt_fs_output_new(a->out, VT_FS_OUTPUT_DIR, 0700, &err);
	g_autofree char *plugin = plugin_path();
	g_autofree char *raw = NULL;
	g_autofree char *arg = NULL;
	double secs = 0;
	pid_t pid = 0;
	gboolean ran;

	if (!out) {
		vt_err("record", "%s", err->message);
		return VT_EXIT_FAILURE;
	}
	if (!g_file_test(plugin, G_FILE_TEST_IS_REGULAR)) {
		vt_err("record", "the QEMU plugin %s is missing (install vmtrace, or set VMTRACE_TCG_PLUGIN)", plugin);
		return VT_EXIT_TCG_QEMU;
	}
	if (a->domain)
		return record_domain(a, out, plugin);
	raw = g_build_filename(vt_fs_output_tmp(out), "tcg-raw", NULL);
	arg = plugin_arg(a, plugin, raw);
	ran = run_qemu(a, arg, &pid, &secs, &err);
	return record_convert(a, out, raw, pid, ran, err, secs);
}
