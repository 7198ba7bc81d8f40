/* ssh.c - guest files over SSH with libssh: known_hosts verification,
 * public-key authentication, whole files through an exec channel ("cat",
 * 2-4x faster than SFTP for /proc files) with SFTP as the fallback and for
 * errors, and ranges (kcore) through SFTP seek + read.  User-supplied
 * strings (host, user, key and known_hosts paths) only go to libssh
 * options; the only remote commands are fixed ones on fixed paths. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <libssh/callbacks.h>

#include "guestfs/guestfs.h"
#include "src/fs/inroot.h"

typedef struct {
	gboolean batch;
	const char *path;
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
} SshSource;

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
	while ((k = ssh_channel_read(ch, chunk, sizeof(chunk), 0)) > 0 && (gsize)k <= max - buf->len)
		g_byte_array_append(buf, chunk, (guint)k);
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

static GBytes *ssh_read_file(VtGuestSource *src, const char *path, gsize max, GError **error)
{
	SshSource *s = (SshSource *)src;

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
	}
	return sftp_read_file(s, path, max, error);
}

static gboolean ssh_pread(VtGuestSource *src, const char *path, guint64 offset, void *buf, gsize len, gsize *got,
			  GError **error)
{
	return sftp_read_at((SshSource *)src, path, offset, NULL, buf, len, got, error);
}

static gint64 ssh_uid(VtGuestSource *src)
{
	SshSource *s = (SshSource *)src;
	GBytes *out = NULL;
	int status;

	if (s->uid == -2) {
		s->uid = -1;
		if (ssh_exec(s, "id -u", VT_GUEST_LINE_MAX, &out, &status) && status == 0) {
			g_autofree char *txt = g_strstrip(vt_guest_bytes_dup(out));
			guint64 v;

			if (g_ascii_string_to_unsigned(txt, 10, 0, G_MAXUINT32, &v, NULL))
				s->uid = (gint64)v;
		}
		g_clear_pointer(&out, g_bytes_unref);
	}
	return s->uid;
}

static void ssh_close(VtGuestSource *src)
{
	SshSource *s = (SshSource *)src;

	g_clear_pointer(&s->sftp, sftp_free);
	if (s->ssh) {
		ssh_disconnect(s->ssh);
		ssh_free(s->ssh);
	}
	g_free(s);
}

static const VtGuestSourceOps ssh_ops = { ssh_read_file, ssh_pread, ssh_uid, ssh_close };

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

	if (p->batch || !isatty(STDIN_FILENO))
		return -1;
	return ssh_getpass(prompt, buf, len, echo, verify);
}

static gboolean authenticate(ssh_session ssh, SshSource *s, const VtGuestSshOptions *o, GError **error)
{
	int rc;
	g_autofree char *user = o->user ? g_strdup(o->user) : g_strdup(g_get_user_name());

	if (o->identity) {
		ssh_key key = NULL;
		PassCtx p = { o->batch, o->identity };

		if (access(o->identity, R_OK) < 0) {
			g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_AUTH, "cannot read the key file %s: %s",
				    o->identity, g_strerror(errno));
			return FALSE;
		}
		rc = ssh_pki_import_privkey_file(o->identity, NULL, passphrase_cb, &p, &key);
		if (rc != SSH_OK) {
			g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_AUTH,
				    "%s is not a usable private key (not a key, or encrypted%s)", o->identity,
				    o->batch ? " and --batch forbids asking for the passphrase" : " with a wrong passphrase");
			return FALSE;
		}
		rc = ssh_userauth_publickey(ssh, NULL, key);
		ssh_key_free(key);
	} else {
		/* ~/.ssh/id_*: without an auth callback, an encrypted key makes
		 * libssh's crypto library prompt on the terminal, even in --batch */
		s->pass = (PassCtx){ o->batch, NULL };
		s->cb.userdata = &s->pass;
		s->cb.auth_function = passphrase_cb;
		ssh_callbacks_init(&s->cb);
		ssh_set_callbacks(ssh, &s->cb);
		rc = ssh_userauth_publickey_auto(ssh, NULL, NULL);
	}
	if (rc == SSH_AUTH_SUCCESS)
		return TRUE;
	g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_AUTH,
		    "public-key authentication as %s on %s failed%s%s: put the public key into the guest's "
		    "~%s/.ssh/authorized_keys%s",
		    user, o->host, rc == SSH_AUTH_ERROR ? ": " : "", rc == SSH_AUTH_ERROR ? ssh_get_error(ssh) : "",
		    user, o->identity ? "" : ", or give the key with -i KEY");
	return FALSE;
}

VtGuestSource *vt_guest_source_ssh_open(const VtGuestSshOptions *o, GError **error)
{
	ssh_session ssh = ssh_new();
	SshSource *s;
	long timeout = o->timeout_s ? (long)o->timeout_s : 10;
	unsigned int port = o->port ? o->port : 22;
	g_autofree char *kh = o->known_hosts ? g_strdup(o->known_hosts)
					     : g_build_filename(g_get_home_dir(), ".ssh", "known_hosts", NULL);
	g_autofree char *sshdir = g_build_filename(g_get_home_dir(), ".ssh", NULL);
	bool no = false;

	if (!ssh) {
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
	if (ssh_connect(ssh) != SSH_OK) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_CONNECT, "cannot connect to %s port %u: %s",
			    o->host, port, ssh_get_error(ssh));
		ssh_free(ssh);
		return NULL;
	}
	s = g_new0(SshSource, 1);
	if (!verify_host(ssh, o, kh, error) || !authenticate(ssh, s, o, error)) {
		ssh_disconnect(ssh);
		ssh_free(ssh);
		g_free(s);
		return NULL;
	}
	s->base.ops = &ssh_ops;
	s->base.description = g_strdup_printf("ssh %s%s%s:%u", o->user ? o->user : "", o->user ? "@" : "", o->host, port);
	s->ssh = ssh;
	s->uid = -2;
	return &s->base;
}
