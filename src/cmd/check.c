/* check.c - `vmtrace check`: is this host (and domain) ready for recording? */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "src/host/domain.h"
#include "src/host/host.h"
#include "src/cmd/cmd.h"

static void domain_checks(GPtrArray *checks, const char *name, const char *uri, gboolean qmp, guint pid)
{
	VtDomain d;
	GError *err = NULL;

	if (pid ? !vt_domain_from_pid(pid, &d, &err) : !vt_domain_find(name, uri, qmp, &d, &err)) {
		const char *fix = err->code == VT_DOMAIN_ERROR_NOT_RUNNING ? "start the domain (see the message)"
				  : err->code == VT_DOMAIN_ERROR_CONNECT ? "start libvirtd, or give --connect URI"
				  : "check the name: virsh list --all";

		vt_host_check_add(checks, "domain", VT_HOST_CHECK_FAIL, fix, "%s", err->message);
		g_error_free(err);
		vt_domain_clear(&d);
		return;
	}
	if (pid)
		vt_host_check_add(checks, "domain", VT_HOST_CHECK_OK, NULL, "QEMU process %s, %u vCPU threads, %s", d.name,
			     d.nvcpus, d.kvm ? "KVM" : "not KVM-accelerated");
	else
		vt_host_check_add(checks, "domain", VT_HOST_CHECK_OK, NULL, "domain '%s' %s on %s (driver %s, %u vCPUs, %s)",
			     d.name, d.state, d.uri, d.driver, d.nvcpus, d.kvm ? "KVM" : "not KVM-accelerated");
	if (!d.kvm)
		vt_host_check_add(checks, "domain_kvm", VT_HOST_CHECK_WARN, "use <domain type='kvm'> in the domain XML",
			     "the domain does not use KVM: Intel PT sees no VMX guest to trace");
	if (!d.pid)
		vt_host_check_add(checks, "qemu_pid", VT_HOST_CHECK_FAIL,
			     "use the QEMU driver (qemu:///system); run as root to read /run/libvirt/qemu",
			     "no QEMU process found for '%s' (driver %s)", d.name, d.driver);
	else
		vt_host_check_add(checks, "qemu_pid", VT_HOST_CHECK_OK, NULL, "QEMU pid %u", d.pid);
	if (d.vcpus->len == d.nvcpus && d.nvcpus) {
		GString *s = g_string_new(NULL);

		for (guint i = 0; i < d.vcpus->len; i++) {
			const VtDomainVcpu *v = &g_array_index(d.vcpus, VtDomainVcpu, i);

			g_string_append_printf(s, "%svCPU %d = tid %u", i ? ", " : "", v->vcpu, v->tid);
		}
		vt_host_check_add(checks, "vcpu_threads", VT_HOST_CHECK_OK, NULL, "%s (from %s)", s->str,
			     g_array_index(d.vcpus, VtDomainVcpu, 0).source);
		g_string_free(s, TRUE);
	} else if (d.pid) {
		vt_host_check_add(checks, "vcpu_threads", VT_HOST_CHECK_FAIL,
			     "mount debugfs, or let QEMU name its threads (-name debug-threads=on; libvirt does), or use --qmp",
			     "found %u of %u vCPU threads", d.vcpus->len, d.nvcpus);
	}
	if (d.kvm && d.kvm_dir) {
		const VtDomainVcpu *v0 = d.vcpus->len ? &g_array_index(d.vcpus, VtDomainVcpu, 0) : NULL;

		vt_host_check_add(checks, "kvm_debugfs", VT_HOST_CHECK_OK, NULL, "KVM debugfs %s%s (vCPU 0 tsc-offset %" G_GINT64_FORMAT ")",
			     vt_host_root(), d.kvm_dir, v0 ? v0->tsc_offset : 0);
		if (v0 && v0->have_scaling && v0->tsc_scaling_ratio != (1ULL << v0->tsc_scaling_frac_bits))
			vt_host_check_add(checks, "tsc_scaling", VT_HOST_CHECK_WARN,
				     "vmtrace correlate --tsc-scale (vmtrace record stores the ratio for it)",
				     "the guest TSC is scaled: ratio %" G_GUINT64_FORMAT "/2^%u",
				     v0->tsc_scaling_ratio, v0->tsc_scaling_frac_bits);
		else
			vt_host_check_add(checks, "tsc_scaling", VT_HOST_CHECK_OK, NULL, "no TSC scaling");
	} else if (d.pid && d.kvm) {
		vt_host_check_add(checks, "kvm_debugfs", VT_HOST_CHECK_WARN, "sudo mount -t debugfs none /sys/kernel/debug",
			     "no KVM debugfs entry for pid %u: TSC offsets will not be recorded", d.pid);
	}
	vt_domain_clear(&d);
}

/* Print a check list as a table (with fixes) or as JSON. */
void vt_checks_print(GPtrArray *checks, gboolean json, gboolean ok)
{
	if (json) {
		GString *s = g_string_new("{\"checks\": [");

		for (guint i = 0; i < checks->len; i++) {
			const VtHostCheck *c = checks->pdata[i];

			g_string_append_printf(s, "%s{\"name\": \"%s\", \"status\": \"%s\", \"what\": ", i ? ", " : "",
					       c->name, vt_host_check_level_name(c->level));
			vt_json_str(s, c->what);
			g_string_append(s, ", \"fix\": ");
			if (c->fix)
				vt_json_str(s, c->fix);
			else
				g_string_append(s, "null");
			g_string_append(s, "}");
		}
		g_string_append_printf(s, "], \"ok\": %s}\n", ok ? "true" : "false");
		fputs(s->str, stdout);
		g_string_free(s, TRUE);
	} else {
		for (guint i = 0; i < checks->len; i++) {
			const VtHostCheck *c = checks->pdata[i];

			printf("%-4s %-20s %s\n", vt_host_check_level_name(c->level), c->name, c->what);
			if (c->fix && c->level != VT_HOST_CHECK_OK)
				printf("     %-20s fix: %s\n", "", c->fix);
		}
	}
}

int cmd_check(int argc, char **argv)
{
	char *domain = NULL, *uri = NULL, *root = NULL;
	gint pid = 0;
	gboolean json = FALSE, qmp = FALSE;
	GError *err = NULL;
	GPtrArray *checks = g_ptr_array_new_with_free_func(vt_host_check_free);
	int rc = VT_EXIT_OK;
	GOptionEntry entries[] = {
		{ "domain", 'd', 0, G_OPTION_ARG_STRING, &domain, "Also check this libvirt domain", "NAME" },
		{ "connect", 'c', 0, G_OPTION_ARG_STRING, &uri, "libvirt URI (default $LIBVIRT_DEFAULT_URI, else qemu:///system)", "URI" },
		{ "pid", 'p', 0, G_OPTION_ARG_INT, &pid, "Check a QEMU process not managed by libvirt", "PID" },
		{ "qmp", 0, 0, G_OPTION_ARG_NONE, &qmp, "May ask QEMU's monitor for vCPU threads (taints the domain)", NULL },
		{ "root", 0, 0, G_OPTION_ARG_FILENAME, &root, "Read /sys, /proc, /dev and /run below DIR (for tests)", "DIR" },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &json, "JSON output", NULL },
		G_OPTION_ENTRY_NULL
	};
	GOptionContext *ctx = g_option_context_new("- is this host (and domain) ready for vmtrace record?");

	g_option_context_set_summary(ctx,
		"Checks everything host-side Intel PT tracing of KVM guests needs - the intel_pt\n"
		"PMU and its capabilities, IA32_VMX_MISC[14], kvm_intel pt_mode, permissions,\n"
		"kptr_restrict, lockdown, debugfs - and, with --domain, that the domain runs\n"
		"and its QEMU process and vCPU threads can be found.  Each check is OK, WARN\n"
		"or FAIL, with the exact fix.");
	g_option_context_set_description(ctx,
		"Exit status: 0 no FAIL; 1 some check FAILed; 2 usage error.\n\n"
		"Examples:\n"
		"  vmtrace check\n"
		"  sudo vmtrace check --domain kubuntu20.04\n"
		"  vmtrace check --domain test --connect test:///default --json\n");
	g_option_context_add_main_entries(ctx, entries, NULL);
	if (!g_option_context_parse(ctx, &argc, &argv, &err) || argc > 1) {
		vt_err("check", "%s (see vmtrace check --help)", err ? err->message : "unexpected argument");
		rc = VT_EXIT_USAGE;
		goto done;
	}
	if (root)
		vt_host_set_root(root);
	vt_host_readiness(checks);
	if (domain && pid) {
		vt_err("check", "--domain and --pid exclude each other");
		rc = VT_EXIT_USAGE;
		goto done;
	}
	if (domain || pid > 0)
		domain_checks(checks, domain, uri, qmp, pid > 0 ? (guint)pid : 0);
	for (guint i = 0; i < checks->len; i++)
		if (((VtHostCheck *)checks->pdata[i])->level == VT_HOST_CHECK_FAIL)
			rc = VT_EXIT_FAILURE;
	vt_checks_print(checks, json, rc == VT_EXIT_OK);
done:
	g_clear_error(&err);
	g_ptr_array_free(checks, TRUE);
	g_option_context_free(ctx);
	g_free(domain);
	g_free(uri);
	g_free(root);
	return rc;
}
