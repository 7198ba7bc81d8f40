/* ssh.c - guest files over SSH with libssh: known_hosts verification,
 * public-key authentication, whole files through an exec channel ("cat",
 * 2-4x faster than SFTP for /proc files) with SFTP as the fallback and for
 * errors, and ranges (kcore) through SFTP seek + read.  User-supplied
 * strings (host, user, key and known_hosts paths) only go to libssh
 * options; the only remote commands are fixed ones on fixed paths. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dlfcn.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <libssh/callbacks.h>

#include "guestfs/guestfs.h"
#include "src/fs/inroot.h"

/* libssh is loaded when a connection is opened, not linked: it brings
 * libcrypto and Kerberos (9 shared libraries), whose loading and
 * relocation cost every vmtrace run ~2.5 ms of CPU, most of it system time
 * (~200 page faults) - 4-5% of a 64 MiB dry run - and only this file
 * uses it.  The calls go through pointers of the functions' own types
 * (as src/host/domain.c does for libvirt). */
#define SSH_FUNCS(X) \
	X(sftp_close) X(sftp_free) X(sftp_get_error) X(sftp_init) \
	X(sftp_new) X(sftp_open) X(sftp_read) X(sftp_seek64) \
	X(ssh_channel_close) X(ssh_channel_free) \
	X(ssh_channel_get_exit_status) X(ssh_channel_new) \
	X(ssh_channel_open_session) X(ssh_channel_read) \
	X(ssh_channel_read_nonblocking) X(ssh_channel_request_exec) \
	X(ssh_channel_send_eof) X(ssh_clean_pubkey_hash) \
	X(ssh_connect) X(ssh_disconnect) X(ssh_free) X(ssh_get_error) \
	X(ssh_get_fd) X(ssh_get_fingerprint_hash) \
	X(ssh_get_publickey_hash) X(ssh_get_server_publickey) \
	X(ssh_getpass) X(ssh_key_free) X(ssh_key_type) \
	X(ssh_key_type_to_char) X(ssh_new) X(ssh_options_set) \
	X(ssh_pki_import_privkey_base64) \
	X(ssh_session_export_known_hosts_entry) \
	X(ssh_session_is_known_server) X(ssh_set_blocking) \
	X(ssh_set_callbacks) X(ssh_string_free_char) \
	X(ssh_userauth_publickey) X(ssh_userauth_publickey_auto)
#define SSH_PTR(f)	static __typeof__(f) *p_##f;
SSH_FUNCS(SSH_PTR)

/* Load libssh (once; thread-safe).  NULL or a message saying why not. */
static gpointer ssh_lib_load_once(gpointer unused)
{
	void *lib = dlopen("libssh.so.4", RTLD_NOW | RTLD_LOCAL);
	GString *missing = g_string_new(NULL);

	(void)unused;
	if (!lib) {
		g_string_free(missing, TRUE);
		return g_strdup_printf("cannot load libssh: %s (apt-get install libssh-4)", dlerror());
	}
#define SSH_SYM(f)							\
	if (!(*(void **)&p_##f = dlsym(lib, #f)))			\
		g_string_append_printf(missing, " %s", #f);
	SSH_FUNCS(SSH_SYM)
	if (!missing->len) {
		g_string_free(missing, TRUE);
		return NULL;
	}
	return g_strdup_printf("libssh.so.4 lacks%s (libssh 0.9 or later needed)", g_string_free(missing, FALSE));
}

static gboolean ssh_lib_load(GError **error)
{
	static GOnce once = G_ONCE_INIT;
	const char *msg = g_once(&once, ssh_lib_load_once, NULL);

	if (!msg)
		return TRUE;
	g_set_error_literal(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, msg);
	return FALSE;
}

#define sftp_close			p_sftp_close
#define sftp_free			p_sftp_free
#define sftp_get_error			p_sftp_get_error
#define sftp_init			p_sftp_init
#define sftp_new			p_sftp_new
#define sftp_open			p_sftp_open
#define sftp_read			p_sftp_read
#define sftp_seek64			p_sftp_seek64
#define ssh_channel_close		p_ssh_channel_close
#define ssh_channel_free		p_ssh_channel_free
#define ssh_channel_get_exit_status	p_ssh_channel_get_exit_status
#define ssh_channel_new			p_ssh_channel_new
#define ssh_channel_open_session	p_ssh_channel_open_session
#define ssh_channel_read		p_ssh_channel_read
#define ssh_channel_read_nonblocking	p_ssh_channel_read_nonblocking
#define ssh_channel_request_exec	p_ssh_channel_request_exec
#define ssh_channel_send_eof		p_ssh_channel_send_eof
#define ssh_clean_pubkey_hash		p_ssh_clean_pubkey_hash
#define ssh_connect			p_ssh_connect
#define ssh_disconnect			p_ssh_disconnect
#define ssh_free			p_ssh_free
#define ssh_get_error			p_ssh_get_error
#define ssh_get_fd			p_ssh_get_fd
#define ssh_get_fingerprint_hash	p_ssh_get_fingerprint_hash
#define ssh_get_publickey_hash		p_ssh_get_publickey_hash
#define ssh_get_server_publickey	p_ssh_get_server_publickey
#define ssh_getpass			p_ssh_getpass
#define ssh_key_free			p_ssh_key_free
#define ssh_key_type			p_ssh_key_type
#define ssh_key_type_to_char		p_ssh_key_type_to_char
#define ssh_new				p_ssh_new
#define ssh_options_set			p_ssh_options_set
#define ssh_pki_import_privkey_base64	p_ssh_pki_import_privkey_base64
#define ssh_session_export_known_hosts_entry	p_ssh_session_export_known_hosts_entry
#define ssh_session_is_known_server	p_ssh_session_is_known_server
#define ssh_set_blocking		p_ssh_set_blocking
#define ssh_set_callbacks		p_ssh_set_callbacks
#define ssh_string_free_char		p_ssh_string_free_char
#define ssh_userauth_publickey		p_ssh_userauth_publickey
#define ssh_userauth_publickey_auto	p_ssh_userauth_publickey_auto

/* The watchdog of a connection: libssh's blocking calls (channel open,
 * exec, sftp_init, reads) wait without a limit, and a signal handler can
 * only set a flag.  A thread looks at the clock and the flag every
 * VT_GUEST_SSH_SLICE_MS while a call is under way, and when the deadline
 * passes or the flag is set it shuts the socket down: the call returns
 * with an error, which is then reported as a timeout or an interruption. */
typedef enum { WATCH_QUIET, WATCH_TIMEOUT, WATCH_STOPPED } WatchFired;

typedef struct {
	GMutex lock;
	GCond cond;
	GThread *thread;
	int fd;                 /* the connection's socket */
	gint64 timeout_us;
	gint64 deadline;        /* monotonic; 0: no call under way */
	const char *what;       /* what the call is doing, for the message */
	const volatile sig_atomic_t *stop;
	WatchFired fired;
	gboolean quit;
} Watch;

typedef struct {
	gboolean batch;
	const char *path;
	Watch *watch;          /* paused while the user types a passphrase */
} PassCtx;

typedef struct {
	VtGuestSource base;
	ssh_session ssh;
	/* libssh asks for key passphrases through these, also for the keys it
	 * finds itself: they live as long as the session */
	struct ssh_callbacks_struct cb;
	PassCtx pass;
	sftp_session sftp;
	gboolean exec_broken;   /* the account cannot run commands */
	gint64 uid;             /* -2: not asked yet */
	Watch watch;
	char *host;
	char *doing;            /* the current call, for a timeout's message */
} SshSource;

/* --- the watchdog --------------------------------------------------------- */
static gboolean watch_expired(Watch *w)
{
	if (!w->deadline || w->fired)
		return FALSE;
	if (w->stop && *w->stop)
		w->fired = WATCH_STOPPED;
	else if (g_get_monotonic_time() >= w->deadline)
		w->fired = WATCH_TIMEOUT;
	return w->fired != WATCH_QUIET;
}

static gpointer watch_thread(gpointer data)
{
	Watch *w = data;

	g_mutex_lock(&w->lock);
	while (!w->quit) {
		if (watch_expired(w))
			shutdown(w->fd, SHUT_RDWR);   /* the blocked call returns */
		g_cond_wait_until(&w->cond, &w->lock, g_get_monotonic_time() + VT_GUEST_SSH_SLICE_MS * 1000);
	}
	g_mutex_unlock(&w->lock);
	return NULL;
}

static void watch_start(Watch *w, int fd, guint timeout_s, const volatile sig_atomic_t *stop)
{
	sigset_t all, old;

	g_mutex_init(&w->lock);
	g_cond_init(&w->cond);
	w->fd = fd;
	w->timeout_us = (gint64)timeout_s * G_USEC_PER_SEC;
	w->stop = stop;
	/* signals go to the thread that waits in libssh, not to the watchdog */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	w->thread = g_thread_new("vmtrace-ssh-watch", watch_thread, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void watch_stop(Watch *w)
{
	if (!w->thread)
		return;
	g_mutex_lock(&w->lock);
	w->quit = TRUE;
	g_cond_signal(&w->cond);
	g_mutex_unlock(&w->lock);
	g_thread_join(w->thread);
	w->thread = NULL;
	g_mutex_clear(&w->lock);
	g_cond_clear(&w->cond);
}

/* A call that waits for the server starts (or makes progress): the clock
 * starts again.  what: "reading /proc/kallsyms" */
static void watch_arm(Watch *w, const char *what)
{
	if (!w->thread)
		return;
	g_mutex_lock(&w->lock);
	w->deadline = g_get_monotonic_time() + w->timeout_us;
	if (what)
		w->what = what;
	g_mutex_unlock(&w->lock);
}

static void watch_disarm(Watch *w)
{
	if (!w->thread)
		return;
	g_mutex_lock(&w->lock);
	w->deadline = 0;
	g_mutex_unlock(&w->lock);
}

static WatchFired watch_fired(Watch *w)
{
	WatchFired f;

	if (!w->thread)
		return WATCH_QUIET;
	g_mutex_lock(&w->lock);
	f = w->fired;
	g_mutex_unlock(&w->lock);
	return f;
}

static void set_stall_error(GError **error, WatchFired f, const char *host, guint64 timeout_s, const char *what,
			    int code)
{
	if (f == WATCH_STOPPED)
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_INTERRUPTED, "interrupted while %s", what);
	else
		g_set_error(error, VT_GUEST_ERROR, code,
			    "%s did not answer for %" G_GUINT64_FORMAT " s while %s (--timeout)", host, timeout_s, what);
}

/* After a failed call: if the watchdog ended it, that is the error. */
static gboolean watch_explains(SshSource *s, GError **error)
{
	WatchFired f = watch_fired(&s->watch);

	if (f == WATCH_QUIET)
		return FALSE;
	if (error)
		g_clear_error(error);
	set_stall_error(error, f, s->host, (guint64)(s->watch.timeout_us / G_USEC_PER_SEC), s->watch.what,
			VT_GUEST_ERROR_TIMEOUT);
	return TRUE;
}

void vt_guest_ssh_options_clear(VtGuestSshOptions *o)
{
	g_clear_pointer(&o->user, g_free);
	g_clear_pointer(&o->host, g_free);
	g_clear_pointer(&o->identity, g_free);
	g_clear_pointer(&o->known_hosts, g_free);
}

gboolean vt_guest_ssh_parse_target(const char *target, VtGuestSshOptions *o, GError **error)
{
	const char *at = strrchr(target, '@'), *h = at ? at + 1 : target, *colon = NULL;
	g_autofree char *host = NULL;

	if (at && at == target)
		goto bad;
	if (*h == '[') {             /* [v6]:port */
		const char *close = strchr(h, ']');

		if (!close || close == h + 1 || (close[1] && close[1] != ':'))
			goto bad;
		host = g_strndup(h + 1, (gsize)(close - h - 1));
		colon = close[1] ? close + 1 : NULL;
	} else {
		colon = strchr(h, ':');
		if (colon && strchr(colon + 1, ':'))
			goto bad;     /* a bare IPv6 address: needs [] */
		host = colon ? g_strndup(h, (gsize)(colon - h)) : g_strdup(h);
	}
	if (!*host || strpbrk(host, " \t\n/\\'\"`$;&|<>"))
		goto bad;
	if (colon) {
		guint64 port;

		if (!g_ascii_string_to_unsigned(colon + 1, 10, 1, 65535, &port, NULL))
			goto bad;
		o->port = (guint)port;
	}
	if (at) {
		g_autofree char *user = g_strndup(target, (gsize)(at - target));

		if (strpbrk(user, " \t\n/\\'\"`$;&|<>:@"))
			goto bad;
		g_free(o->user);
		o->user = g_steal_pointer(&user);
	}
	g_free(o->host);
	o->host = g_steal_pointer(&host);
	return TRUE;
bad:
	g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED,
		    "bad SSH target '%s': expected [USER@]HOST[:PORT]", target);
	return FALSE;
}

/* A call that waits for the server begins: "reading PATH". */
static void op_begin(SshSource *s, const char *verb, const char *path)
{
	if (watch_fired(&s->watch))
		return;        /* keep what the stall happened in */
	g_free(s->doing);
	s->doing = g_strdup_printf("%s %s", verb, path);
	watch_arm(&s->watch, s->doing);
}

/* It ended; if it failed because of the watchdog, that is the error. */
static gboolean op_end(SshSource *s, gboolean ok, GError **error)
{
	watch_disarm(&s->watch);
	return !watch_explains(s, error) && ok;
}

/* --- reading ------------------------------------------------------------ */
static GError *sftp_error(SshSource *s, const char *what, const char *path)
{
	int e = sftp_get_error(s->sftp);

	return g_error_new(VT_GUEST_ERROR,
			   e == SSH_FX_NO_SUCH_FILE || e == SSH_FX_NO_SUCH_PATH ? VT_GUEST_ERROR_NOT_FOUND
			   : e == SSH_FX_PERMISSION_DENIED ? VT_GUEST_ERROR_PERMISSION : VT_GUEST_ERROR_FAILED,
			   "%s %s in the guest: %s", what, path,
			   e == SSH_FX_NO_SUCH_FILE || e == SSH_FX_NO_SUCH_PATH ? "no such file"
			   : e == SSH_FX_PERMISSION_DENIED ? "permission denied" : ssh_get_error(s->ssh));
}

static gboolean sftp_ready(SshSource *s, GError **error)
{
	if (s->sftp)
		return TRUE;
	s->sftp = sftp_new(s->ssh);
	if (!s->sftp || sftp_init(s->sftp) != SSH_OK) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED,
			    "the SSH server offers no SFTP subsystem: %s", ssh_get_error(s->ssh));
		g_clear_pointer(&s->sftp, sftp_free);
		return FALSE;
	}
	return TRUE;
}

static void too_big(GError **error, const char *path, gsize max)
{
	g_autofree char *lim = vt_fs_format_size(max);

	g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA, "%s in the guest is larger than %s", path, lim);
}

/* Read from the current offset until the server says EOF (never trusting
 * the size: /proc files report 0): into dst, len bytes at most; or into
 * out, failing beyond len bytes. */
static gboolean sftp_read_loop(SshSource *s, sftp_file f, const char *path, GByteArray *out, guint8 *dst,
			       gsize len, gsize *got, GError **error)
{
	guint8 chunk[65536];
	gsize done = 0;

	while (out || done < len) {
		gsize want = out ? sizeof(chunk) : MIN(sizeof(chunk), len - done);
		ssize_t k = sftp_read(f, dst ? dst + done : chunk, want);

		if (k < 0) {
			g_propagate_error(error, sftp_error(s, "cannot read", path));
			return FALSE;
		}
		if (k == 0)
			break;
		if (out && (gsize)k > len - done) {
			too_big(error, path, len);
			return FALSE;
		}
		if (out)
			g_byte_array_append(out, chunk, (guint)k);
		done += (gsize)k;
		watch_arm(&s->watch, NULL);     /* progress: the clock starts again */
	}
	if (got)
		*got = done;
	return TRUE;
}

/* Open path, seek to offset, read (see sftp_read_loop), close. */
static gboolean sftp_read_at(SshSource *s, const char *path, guint64 offset, GByteArray *out, guint8 *dst,
			     gsize len, gsize *got, GError **error)
{
	sftp_file f;
	gboolean ok;

	if (!sftp_ready(s, error))
		return FALSE;
	f = sftp_open(s->sftp, path, O_RDONLY, 0);
	if (!f) {
		g_propagate_error(error, sftp_error(s, "cannot open", path));
		return FALSE;
	}
	if (offset && sftp_seek64(f, offset) < 0) {
		g_propagate_error(error, sftp_error(s, "cannot seek in", path));
		sftp_close(f);
		return FALSE;
	}
	ok = sftp_read_loop(s, f, path, out, dst, len, got, error);
	sftp_close(f);
	return ok;
}

static GBytes *sftp_read_file(SshSource *s, const char *path, gsize max, GError **error)
{
	GByteArray *buf = g_byte_array_new();

	if (!sftp_read_at(s, path, 0, buf, NULL, max, NULL, error)) {
		g_byte_array_free(buf, TRUE);
		return NULL;
	}
	return g_byte_array_free_to_bytes(buf);
}

/* Run a fixed command; stdout to EOF (at most max bytes: more is exit
 * status -2), exit status.  FALSE (no GError) if the channel cannot run
 * commands at all. */
static gboolean ssh_exec(SshSource *s, const char *command, gsize max, GBytes **out, int *status)
{
	ssh_channel ch;
	GByteArray *buf;
	guint8 chunk[65536];
	int k;

	if (s->exec_broken)
		return FALSE;
	ch = ssh_channel_new(s->ssh);
	if (!ch)
		return FALSE;
	if (ssh_channel_open_session(ch) != SSH_OK || ssh_channel_request_exec(ch, command) != SSH_OK) {
		ssh_channel_free(ch);
		s->exec_broken = TRUE;
		return FALSE;
	}
	buf = g_byte_array_new();
	while ((k = ssh_channel_read(ch, chunk, sizeof(chunk), 0)) > 0 && (gsize)k <= max - buf->len) {
		g_byte_array_append(buf, chunk, (guint)k);
		watch_arm(&s->watch, NULL);
	}
	while (k <= 0 && ssh_channel_read(ch, chunk, sizeof(chunk), 1) > 0)
		;     /* drain stderr; errors are taken from SFTP */
	ssh_channel_send_eof(ch);
	*status = k > 0 ? -2 : k < 0 ? -1 : ssh_channel_get_exit_status(ch);
	ssh_channel_close(ch);
	ssh_channel_free(ch);
	*out = g_byte_array_free_to_bytes(buf);
	return TRUE;
}

/* A path safe to hand to a remote shell unquoted: our fixed /proc and /sys
 * paths are; anything else goes through SFTP only. */
static gboolean shell_safe_path(const char *path)
{
	if (*path != '/')
		return FALSE;
	for (const char *p = path; *p; p++)
		if (!g_ascii_isalnum(*p) && !strchr("/_.-", *p))
			return FALSE;
	return !strstr(path, "..");
}

static GBytes *read_file(SshSource *s, const char *path, gsize max, GError **error)
{
	if (shell_safe_path(path)) {
		g_autofree char *cmd = g_strdup_printf("exec cat %s", path);
		GBytes *out = NULL;
		int status = -1;

		if (ssh_exec(s, cmd, max, &out, &status) && status == 0)
			return out;
		g_clear_pointer(&out, g_bytes_unref);     /* SFTP tells why */
		if (status == -2) {
			too_big(error, path, max);
			return NULL;
		}
		if (watch_fired(&s->watch)) {
			g_set_error_literal(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "stalled");  /* op_end says how */
			return NULL;
		}
	}
	return sftp_read_file(s, path, max, error);
}

static GBytes *ssh_read_file(VtGuestSource *src, const char *path, gsize max, GError **error)
{
	SshSource *s = (SshSource *)src;
	GBytes *b;

	op_begin(s, "reading", path);
	b = read_file(s, path, max, error);
	if (!op_end(s, b != NULL, error))
		g_clear_pointer(&b, g_bytes_unref);
	return b;
}

static gboolean ssh_pread(VtGuestSource *src, const char *path, guint64 offset, void *buf, gsize len, gsize *got,
			  GError **error)
{
	SshSource *s = (SshSource *)src;

	op_begin(s, "reading", path);
	return op_end(s, sftp_read_at(s, path, offset, NULL, buf, len, got, error), error);
}

static gint64 ssh_uid(VtGuestSource *src)
{
	SshSource *s = (SshSource *)src;
	GBytes *out = NULL;
	int status;

	if (s->uid == -2) {
		gboolean ok;

		s->uid = -1;
		op_begin(s, "running", "id -u");
		ok = ssh_exec(s, "id -u", VT_GUEST_LINE_MAX, &out, &status);
		op_end(s, TRUE, NULL);     /* a stall shows in the next call's error */
		if (ok && status == 0) {
			g_autofree char *txt = g_strstrip(vt_guest_bytes_dup(out));
			guint64 v;

			if (g_ascii_string_to_unsigned(txt, 10, 0, G_MAXUINT32, &v, NULL))
				s->uid = (gint64)v;
		}
		g_clear_pointer(&out, g_bytes_unref);
	}
	return s->uid;
}

static gboolean ssh_run(VtGuestSource *src, const char *command, gsize max, GBytes **out, int *status,
			GError **error)
{
	SshSource *s = (SshSource *)src;
	gboolean ok;

	*out = NULL;
	op_begin(s, "running", command);
	ok = ssh_exec(s, command, max, out, status);
	if (!ok)
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "cannot run a command in the guest: %s",
			    ssh_get_error(s->ssh));
	if (!op_end(s, ok, error) && *out)
		g_clear_pointer(out, g_bytes_unref);
	return ok && *out;
}

static void ssh_close(VtGuestSource *src)
{
	SshSource *s = (SshSource *)src;

	op_begin(s, "closing", "the connection");
	g_clear_pointer(&s->sftp, sftp_free);
	if (s->ssh)
		ssh_disconnect(s->ssh);
	watch_stop(&s->watch);
	if (s->ssh)
		ssh_free(s->ssh);
	g_free(s->doing);
	g_free(s->host);
	g_free(s);
}

/* --- a command that runs meanwhile ------------------------------------------ */
struct VtGuestCommand {
	SshSource *s;
	ssh_channel ch;
	GString *out, *err;
	gboolean eof_sent;
};

VtGuestCommand *vt_guest_command_start(VtGuestSource *src, const char *command, GError **error)
{
	SshSource *s = (SshSource *)src;
	VtGuestCommand *c;
	ssh_channel ch;
	gboolean ok;

	if (!src->ops->run) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "%s cannot run commands in the guest (SSH can)",
			    vt_guest_source_describe(src));
		return NULL;
	}
	op_begin(s, "starting", "a command");
	ch = ssh_channel_new(s->ssh);
	ok = ch && ssh_channel_open_session(ch) == SSH_OK && ssh_channel_request_exec(ch, command) == SSH_OK;
	if (!ok)
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "cannot run a command in the guest: %s",
			    ssh_get_error(s->ssh));
	if (!op_end(s, ok, error)) {
		if (ch)
			ssh_channel_free(ch);
		return NULL;
	}
	c = g_new0(VtGuestCommand, 1);
	c->s = s;
	c->ch = ch;
	c->out = g_string_new(NULL);
	c->err = g_string_new(NULL);
	return c;
}

/* The first non-empty line of its stderr (perf's error; its usage text
 * follows), printable (NULL if none). */
static char *command_err_line(VtGuestCommand *c)
{
	g_auto(GStrv) lines = g_strsplit(c->err->str, "\n", -1);

	for (guint i = 0; lines[i]; i++) {
		g_autoptr(GBytes) b = g_bytes_new_static(lines[i], strlen(lines[i]));
		char *t = vt_guest_bytes_text(b);

		if (t && *t)
			return t;
		g_free(t);
	}
	return NULL;
}

/* One read of stdout (and what stderr has meanwhile): > 0 bytes, 0 at EOF, < 0 error. */
static int command_read(VtGuestCommand *c)
{
	char buf[4096];
	int k, e;

	while ((e = ssh_channel_read_nonblocking(c->ch, buf, sizeof(buf), 1)) > 0)
		if (c->err->len < 65536)
			g_string_append_len(c->err, buf, e);
	k = ssh_channel_read(c->ch, buf, sizeof(buf), 0);
	if (k > 0)
		g_string_append_len(c->out, buf, k);
	while ((e = ssh_channel_read_nonblocking(c->ch, buf, sizeof(buf), 1)) > 0)
		if (c->err->len < 65536)
			g_string_append_len(c->err, buf, e);
	return k;
}

static void command_ended(VtGuestCommand *c, int *status, const char *what, GError **error)
{
	g_autofree char *line = command_err_line(c);

	*status = ssh_channel_get_exit_status(c->ch);
	g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "the command in the guest %s (exit status %d)%s%s",
		    what, *status, line ? ": " : "", line ? line : "");
}

gboolean vt_guest_command_wait_line(VtGuestCommand *c, const char *prefix, char **rest, int *status, GError **error)
{
	gsize from = 0;
	int k = 1;

	*status = -1;
	op_begin(c->s, "waiting for", "the command in the guest");
	for (;;) {
		char *nl;

		while ((nl = strchr(c->out->str + from, '\n'))) {
			g_autofree char *l = g_strndup(c->out->str + from, (gsize)(nl - c->out->str - from));

			from = (gsize)(nl - c->out->str) + 1;
			if (g_str_has_prefix(l, prefix)) {
				g_autoptr(GBytes) b = g_bytes_new(l + strlen(prefix), strlen(l) - strlen(prefix));

				*rest = vt_guest_bytes_text(b);
				g_string_erase(c->out, 0, (gssize)from);
				if (!*rest)
					g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA,
						    "the command in the guest printed an unreadable line");
				if (!op_end(c->s, *rest != NULL, error))
					g_clear_pointer(rest, g_free);
				return *rest != NULL;
			}
		}
		if (k <= 0 || c->out->len > 65536)
			break;
		k = command_read(c);
	}
	if (k < 0)
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "lost the command in the guest: %s",
			    ssh_get_error(c->s->ssh));
	else
		command_ended(c, status, k == 0 ? "ended" : "printed too much", error);
	op_end(c->s, FALSE, error);
	return FALSE;
}

gboolean vt_guest_command_finish(VtGuestCommand *c, int *status, char **err_line, GError **error)
{
	int k;

	*status = -1;
	op_begin(c->s, "waiting for the end of", "the command in the guest");
	if (!c->eof_sent && ssh_channel_send_eof(c->ch) != SSH_OK) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "lost the command in the guest: %s",
			    ssh_get_error(c->s->ssh));
		return op_end(c->s, FALSE, error);
	}
	c->eof_sent = TRUE;
	while ((k = command_read(c)) > 0)
		if (c->out->len > 65536)
			g_string_truncate(c->out, 0);
	if (k < 0) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "lost the command in the guest: %s",
			    ssh_get_error(c->s->ssh));
		return op_end(c->s, FALSE, error);
	}
	*status = ssh_channel_get_exit_status(c->ch);
	if (err_line)
		*err_line = command_err_line(c);
	return op_end(c->s, TRUE, error);
}

void vt_guest_command_free(VtGuestCommand *c)
{
	if (!c)
		return;
	ssh_channel_close(c->ch);
	ssh_channel_free(c->ch);
	g_string_free(c->out, TRUE);
	g_string_free(c->err, TRUE);
	g_free(c);
}

static const VtGuestSourceOps ssh_ops = { ssh_read_file, ssh_pread, ssh_uid, ssh_close, ssh_run };

/* --- connecting ----------------------------------------------------------- */
static char *fingerprint(ssh_session ssh, char **type)
{
	ssh_key key = NULL;
	unsigned char *hash = NULL;
	size_t hlen = 0;
	char *fp = NULL, *ret = NULL;

	if (ssh_get_server_publickey(ssh, &key) != SSH_OK)
		return g_strdup("(no server key)");
	*type = g_strdup(ssh_key_type_to_char(ssh_key_type(key)));
	if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) == 0) {
		fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
		ret = g_strdup(fp);
		ssh_string_free_char(fp);
		ssh_clean_pubkey_hash(&hash);
	}
	ssh_key_free(key);
	return ret ? ret : g_strdup("(unknown)");
}

/* "[host]:port" as known_hosts and ssh-keygen -R spell it. */
static char *known_hosts_name(const VtGuestSshOptions *o)
{
	return o->port && o->port != 22 ? g_strdup_printf("[%s]:%u", o->host, o->port) : g_strdup(o->host);
}

static gboolean verify_host(ssh_session ssh, const VtGuestSshOptions *o, const char *kh_file, GError **error)
{
	enum ssh_known_hosts_e state = ssh_session_is_known_server(ssh);
	g_autofree char *type = NULL;
	g_autofree char *fp = NULL;
	g_autofree char *name = known_hosts_name(o);
	g_autofree char *qkh = g_shell_quote(kh_file);   /* the printed commands must be safe to paste */
	char *entry = NULL;

	switch (state) {
	case SSH_KNOWN_HOSTS_OK:
		return TRUE;
	case SSH_KNOWN_HOSTS_CHANGED:
	case SSH_KNOWN_HOSTS_OTHER:
		fp = fingerprint(ssh, &type);
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_HOSTKEY_CHANGED,
			    "the host key of %s CHANGED (or is of another type than the one recorded in %s): "
			    "refusing to connect.  The server offers %s %s.  If the guest was reinstalled and "
			    "this fingerprint is right, remove the old key with: ssh-keygen -R '%s' -f %s "
			    "- then accept the new one (vmtrace guest fetch tells how).",
			    name, kh_file, type ? type : "a key", fp, name, qkh);
		return FALSE;
	case SSH_KNOWN_HOSTS_UNKNOWN:
	case SSH_KNOWN_HOSTS_NOT_FOUND:
		fp = fingerprint(ssh, &type);
		if (ssh_session_export_known_hosts_entry(ssh, &entry) != SSH_OK)
			entry = NULL;
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_HOSTKEY_UNKNOWN,
			    "the host key of %s is not in %s: refusing to connect.  The server offers %s %s.  "
			    "If that is the guest's key (on the guest: ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub), "
			    "accept it with: echo '%s' >> %s",
			    name, kh_file, type ? type : "a key", fp,
			    type && g_str_has_prefix(type, "ssh-") ? type + 4 : "ed25519",
			    entry ? g_strchomp(entry) : "<the known_hosts line>", qkh);
		ssh_string_free_char(entry);
		return FALSE;
	case SSH_KNOWN_HOSTS_ERROR:
	default:
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_HOSTKEY_UNKNOWN,
			    "cannot check the host key of %s against %s: %s", name, kh_file, ssh_get_error(ssh));
		return FALSE;
	}
}

static int passphrase_cb(const char *prompt, char *buf, size_t len, int echo, int verify, void *userdata)
{
	const PassCtx *p = userdata;
	int rc;

	if (p->batch || !isatty(STDIN_FILENO))
		return -1;
	if (p->watch)
		watch_disarm(p->watch);     /* the user may take their time */
	rc = ssh_getpass(prompt, buf, len, echo, verify);
	if (p->watch)
		watch_arm(p->watch, NULL);
	return rc;
}

#define KEY_FILE_MAX (1u << 20)    /* a private key: a few KiB */

/* The key file's contents (NUL-terminated), read without blocking on a FIFO
 * or device: only a regular file is read. */
static char *read_key_file(const char *path, GError **error)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	const char *why = NULL;
	GBytes *b = NULL;
	char *text;

	if (fd < 0)
		why = g_strerror(errno);
	else if (fstat(fd, &st) < 0)
		why = g_strerror(errno);
	else if (!S_ISREG(st.st_mode))
		why = S_ISFIFO(st.st_mode) ? "it is a FIFO, not a regular file"
		      : S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file";
	else if (!(b = vt_fs_read_bounded(fd, KEY_FILE_MAX, path, NULL)))
		why = "unreadable, or larger than 1 MiB";
	if (fd >= 0)
		close(fd);
	if (why) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_AUTH, "cannot read the key file %s: %s", path, why);
		return NULL;
	}
	text = g_strndup(g_bytes_get_data(b, NULL), g_bytes_get_size(b));
	g_bytes_unref(b);
	return text;
}

/* Files libssh opens itself (known_hosts, the default keys ~/.ssh/id_*):
 * a FIFO or device there would block it for ever - refuse it before. */
static gboolean libssh_files_regular(const VtGuestSshOptions *o, const char *kh, const char *sshdir,
				     GError **error)
{
	static const char *const keys[] = { "id_ed25519", "id_ecdsa", "id_rsa", "id_dsa", "id_ed25519_sk", "id_ecdsa_sk" };
	GError *e = NULL;

	if (!vt_fs_regular_or_absent(kh, TRUE, &e)) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_HOSTKEY_UNKNOWN, "cannot use the known_hosts file: %s",
			    e->message);
		g_error_free(e);
		return FALSE;
	}
	for (guint i = 0; !o->identity && i < G_N_ELEMENTS(keys) * 2; i++) {
		g_autofree char *f = g_strdup_printf("%s/%s%s", sshdir, keys[i / 2], i % 2 ? ".pub" : "");

		if (!vt_fs_regular_or_absent(f, TRUE, &e)) {
			g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_AUTH, "cannot use the default key: %s "
				    "(give a key with -i KEY)", e->message);
			g_error_free(e);
			return FALSE;
		}
	}
	return TRUE;
}

static gboolean authenticate(ssh_session ssh, SshSource *s, const VtGuestSshOptions *o, GError **error)
{
	int rc;
	g_autofree char *user = o->user ? g_strdup(o->user) : g_strdup(g_get_user_name());

	if (o->identity) {
		ssh_key key = NULL;
		PassCtx p = { o->batch, o->identity, NULL };
		char *text = read_key_file(o->identity, error);

		if (!text)
			return FALSE;
		rc = ssh_pki_import_privkey_base64(text, NULL, passphrase_cb, &p, &key);
		memset(text, 0, strlen(text));    /* an unencrypted key */
		g_free(text);
		if (rc != SSH_OK) {
			g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_AUTH,
				    "%s is not a usable private key (not a key, or encrypted%s)", o->identity,
				    o->batch ? " and --batch forbids asking for the passphrase" : " with a wrong passphrase");
			return FALSE;
		}
		op_begin(s, "authenticating as", user);
		rc = ssh_userauth_publickey(ssh, NULL, key);
		ssh_key_free(key);
	} else {
		/* ~/.ssh/id_*: without an auth callback, an encrypted key makes
		 * libssh's crypto library prompt on the terminal, even in --batch */
		s->pass = (PassCtx){ o->batch, NULL, &s->watch };
		s->cb.userdata = &s->pass;
		s->cb.auth_function = passphrase_cb;
		ssh_callbacks_init(&s->cb);
		ssh_set_callbacks(ssh, &s->cb);
		op_begin(s, "authenticating as", user);
		rc = ssh_userauth_publickey_auto(ssh, NULL, NULL);
	}
	if (!op_end(s, TRUE, error))
		return FALSE;
	if (rc == SSH_AUTH_SUCCESS)
		return TRUE;
	g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_AUTH,
		    "public-key authentication as %s on %s failed%s%s: put the public key into the guest's "
		    "~%s/.ssh/authorized_keys%s",
		    user, o->host, rc == SSH_AUTH_ERROR ? ": " : "", rc == SSH_AUTH_ERROR ? ssh_get_error(ssh) : "",
		    user, o->identity ? "" : ", or give the key with -i KEY");
	return FALSE;
}

/* ssh_connect (TCP connect, banner, key exchange) in non-blocking steps:
 * every VT_GUEST_SSH_SLICE_MS at most, look at the deadline and the stop flag. */
static gboolean connect_bounded(ssh_session ssh, const VtGuestSshOptions *o, guint timeout_s, unsigned port,
				GError **error)
{
	gint64 deadline = g_get_monotonic_time() + (gint64)timeout_s * G_USEC_PER_SEC;
	int rc;

	ssh_set_blocking(ssh, 0);
	while ((rc = ssh_connect(ssh)) == SSH_AGAIN) {
		struct pollfd p = { ssh_get_fd(ssh), POLLIN, 0 };
		WatchFired f = o->stop && *o->stop ? WATCH_STOPPED
			       : g_get_monotonic_time() >= deadline ? WATCH_TIMEOUT : WATCH_QUIET;

		if (f) {
			g_autofree char *what = g_strdup_printf("connecting to port %u", port);

			set_stall_error(error, f, o->host, timeout_s, what, VT_GUEST_ERROR_CONNECT);
			return FALSE;
		}
		if (p.fd < 0 || poll(&p, 1, 10) <= 0)
			g_usleep(10000);   /* connecting, or nothing to read yet */
	}
	ssh_set_blocking(ssh, 1);
	if (rc != SSH_OK) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_CONNECT, "cannot connect to %s port %u: %s",
			    o->host, port, ssh_get_error(ssh));
		return FALSE;
	}
	return TRUE;
}

VtGuestSource *vt_guest_source_ssh_open(const VtGuestSshOptions *o, GError **error)
{
	ssh_session ssh = ssh_lib_load(error) ? ssh_new() : NULL;
	SshSource *s;
	guint timeout_s = o->timeout_s ? o->timeout_s : VT_GUEST_SSH_TIMEOUT;
	long timeout = (long)timeout_s;
	unsigned int port = o->port ? o->port : 22;
	g_autofree char *kh = o->known_hosts ? g_strdup(o->known_hosts)
					     : g_build_filename(g_get_home_dir(), ".ssh", "known_hosts", NULL);
	g_autofree char *sshdir = g_build_filename(g_get_home_dir(), ".ssh", NULL);
	bool no = false;

	if (!ssh) {
		if (error && !*error)
			g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "cannot create an SSH session");
		return NULL;
	}
	ssh_options_set(ssh, SSH_OPTIONS_PROCESS_CONFIG, &no);    /* only what the command line says */
	if (ssh_options_set(ssh, SSH_OPTIONS_HOST, o->host) < 0 || ssh_options_set(ssh, SSH_OPTIONS_PORT, &port) < 0 ||
	    /* default keys from the same ~/.ssh as known_hosts ($HOME, not the passwd entry) */
	    ssh_options_set(ssh, SSH_OPTIONS_SSH_DIR, sshdir) < 0 ||
	    (o->user && ssh_options_set(ssh, SSH_OPTIONS_USER, o->user) < 0) ||
	    ssh_options_set(ssh, SSH_OPTIONS_KNOWNHOSTS, kh) < 0 ||
	    (o->known_hosts && ssh_options_set(ssh, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null") < 0) ||
	    ssh_options_set(ssh, SSH_OPTIONS_TIMEOUT, &timeout) < 0) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "bad SSH option: %s", ssh_get_error(ssh));
		ssh_free(ssh);
		return NULL;
	}
	if (!libssh_files_regular(o, kh, sshdir, error) || !connect_bounded(ssh, o, timeout_s, port, error)) {
		ssh_free(ssh);
		return NULL;
	}
	s = g_new0(SshSource, 1);
	s->ssh = ssh;
	s->host = g_strdup(o->host);
	watch_start(&s->watch, ssh_get_fd(ssh), timeout_s, o->stop);
	if (!verify_host(ssh, o, kh, error) || !authenticate(ssh, s, o, error)) {
		s->base.ops = &ssh_ops;
		ssh_close(&s->base);
		return NULL;
	}
	s->base.ops = &ssh_ops;
	s->base.description = g_strdup_printf("ssh %s%s%s:%u", o->user ? o->user : "", o->user ? "@" : "", o->host, port);
	s->uid = -2;
	return &s->base;
}
