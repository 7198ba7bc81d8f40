/* perfev.c - perf_event_open(2), mmap and ioctl. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "src/host/host.h"
#include "src/record/perfev.h"

G_DEFINE_QUARK(vt-perfev-error-quark, vt_perfev_error)

gboolean vt_perfev_open(VtPerfevEvent *ev, struct perf_event_attr *attr, pid_t pid, int cpu,
			const char *what, GError **error)
{
	int code, e;

	memset(ev, 0, sizeof(*ev));
	ev->fd = -1;
	attr->size = sizeof(*attr);
	ev->fd = (int)syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (ev->fd < 0) {
		e = errno;
		switch (e) {
		case EACCES: case EPERM:
			code = VT_PERFEV_ERROR_PERMISSION;
			break;
		case ESRCH:
			code = VT_PERFEV_ERROR_NO_TARGET;
			break;
		case ENOENT: case EOPNOTSUPP: case EINVAL: case ENODEV:
			code = VT_PERFEV_ERROR_UNSUPPORTED;
			break;
		default:
			code = VT_PERFEV_ERROR_FAILED;
		}
		g_set_error(error, VT_PERFEV_ERROR, code, "perf_event_open (%s): %s%s", what, g_strerror(e),
			    code == VT_PERFEV_ERROR_PERMISSION
				    ? " (run as root, or lower kernel.perf_event_paranoid; see `vmtrace check`)"
			    : code == VT_PERFEV_ERROR_NO_TARGET ? " (the thread has exited)" : "");
		return FALSE;
	}
	if (ioctl(ev->fd, PERF_EVENT_IOC_ID, &ev->id) < 0) {
		g_set_error(error, VT_PERFEV_ERROR, VT_PERFEV_ERROR_FAILED, "PERF_EVENT_IOC_ID (%s): %s", what,
			    g_strerror(errno));
		vt_perfev_close(ev);
		return FALSE;
	}
	return TRUE;
}

gboolean vt_perfev_map(VtPerfevEvent *ev, uint64_t data_bytes, uint64_t aux_bytes, gboolean aux_overwrite,
		       GError **error)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	struct perf_event_mmap_page *pg;

	if (!data_bytes || (data_bytes & (data_bytes - 1)) || data_bytes % page ||
	    (aux_bytes && ((aux_bytes & (aux_bytes - 1)) || aux_bytes % page))) {
		g_set_error(error, VT_PERFEV_ERROR, VT_PERFEV_ERROR_FAILED,
			    "ring sizes must be powers of two and whole pages (data %" G_GUINT64_FORMAT
			    ", AUX %" G_GUINT64_FORMAT ")", data_bytes, aux_bytes);
		return FALSE;
	}
	ev->base_len = page + data_bytes;
	ev->base = mmap(NULL, ev->base_len, PROT_READ | PROT_WRITE, MAP_SHARED, ev->fd, 0);
	if (ev->base == MAP_FAILED) {
		ev->base = NULL;
		g_set_error(error, VT_PERFEV_ERROR, VT_PERFEV_ERROR_FAILED,
			    "cannot map a %" G_GUINT64_FORMAT " KiB perf ring: %s%s", data_bytes >> 10,
			    g_strerror(errno),
			    errno == EPERM ? " (over kernel.perf_event_mlock_kb? use smaller buffers or run as root)" : "");
		return FALSE;
	}
	pg = ev->base;
	if (aux_bytes) {
		pg->aux_offset = ev->base_len;
		pg->aux_size = aux_bytes;
		ev->aux_len = aux_bytes;
		ev->aux = mmap(NULL, aux_bytes, PROT_READ | (aux_overwrite ? 0 : PROT_WRITE), MAP_SHARED, ev->fd,
			       (off_t)pg->aux_offset);
		if (ev->aux == MAP_FAILED) {
			ev->aux = NULL;
			g_set_error(error, VT_PERFEV_ERROR, VT_PERFEV_ERROR_FAILED,
				    "cannot map a %" G_GUINT64_FORMAT " KiB AUX area: %s", aux_bytes >> 10,
				    g_strerror(errno));
			return FALSE;
		}
	}
	vt_ring_init(&ev->ring, pg, (uint8_t *)ev->base + page, data_bytes, ev->aux, aux_bytes, aux_overwrite);
	return TRUE;
}

gboolean vt_perfev_redirect(VtPerfevEvent *ev, const VtPerfevEvent *to, GError **error)
{
	if (ioctl(ev->fd, PERF_EVENT_IOC_SET_OUTPUT, to->fd) < 0) {
		g_set_error(error, VT_PERFEV_ERROR, VT_PERFEV_ERROR_FAILED, "PERF_EVENT_IOC_SET_OUTPUT: %s",
			    g_strerror(errno));
		return FALSE;
	}
	return TRUE;
}

gboolean vt_perfev_enable(VtPerfevEvent *ev, gboolean on, GError **error)
{
	if (ioctl(ev->fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0) < 0) {
		g_set_error(error, VT_PERFEV_ERROR, VT_PERFEV_ERROR_FAILED, "cannot %s a perf event: %s",
			    on ? "enable" : "disable", g_strerror(errno));
		return FALSE;
	}
	return TRUE;
}

void vt_perfev_close(VtPerfevEvent *ev)
{
	if (ev->base)
		vt_ring_clear(&ev->ring);
	if (ev->aux)
		munmap(ev->aux, ev->aux_len);
	if (ev->base)
		munmap(ev->base, ev->base_len);
	if (ev->fd >= 0)
		close(ev->fd);
	memset(ev, 0, sizeof(*ev));
	ev->fd = -1;
}

static void perfev_free(gpointer p)
{
	vt_perfev_close(p);
	g_free(p);
}

GPtrArray *vt_perfev_array_new(void)
{
	return g_ptr_array_new_with_free_func(perfev_free);
}

VtPerfevEvent *vt_perfev_open_stream(GPtrArray *events, struct perf_event_attr *attr, const int32_t *tids,
				   guint ntids, int cpu, uint64_t data_bytes, uint64_t aux_bytes,
				   gboolean aux_overwrite, const char *what, GError **error)
{
	VtPerfevEvent *owner = NULL;
	guint n = tids ? ntids : 1;

	for (guint k = 0; k < n; k++) {
		VtPerfevEvent *ev = g_new0(VtPerfevEvent, 1);
		pid_t pid = tids ? tids[k] : -1;
		g_autofree char *w = !tids ? g_strdup_printf("%s on CPU %d", what, cpu)
				     : cpu >= 0 ? g_strdup_printf("%s on thread %d, CPU %d", what, (int)pid, cpu)
				     : g_strdup_printf("%s on thread %d", what, (int)pid);

		if (!vt_perfev_open(ev, attr, pid, cpu, w, error)) {
			g_free(ev);
			return NULL;
		}
		g_ptr_array_add(events, ev);
		if (!owner) {
			if (!vt_perfev_map(ev, data_bytes, aux_bytes, aux_overwrite, error))
				return NULL;
			owner = ev;
		} else if (!vt_perfev_redirect(ev, owner, error)) {
			return NULL;
		}
	}
	return owner;
}

gboolean vt_perfev_array_enable(GPtrArray *events, gboolean on, GError **error)
{
	for (guint i = 0; i < events->len; i++)
		if (!vt_perfev_enable(g_ptr_array_index(events, i), on, error))
			return FALSE;
	return TRUE;
}

char *vt_perfev_tracepoint_file(const char *system, const char *name, const char *file)
{
	static const char *const roots[] = { "/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events" };

	for (guint i = 0; i < G_N_ELEMENTS(roots); i++) {
		g_autofree char *p = g_strdup_printf("%s/%s/%s/%s", roots[i], system, name, file);
		char *s = vt_host_read(p);

		if (s)
			return s;
	}
	return NULL;
}

gint64 vt_perfev_tracepoint_id(const char *system, const char *name)
{
	g_autofree char *s = vt_perfev_tracepoint_file(system, name, "id");
	char *end;
	gint64 id;

	if (!s)
		return -1;
	id = g_ascii_strtoll(s, &end, 10);
	return end != s && id >= 0 ? id : -1;
}
