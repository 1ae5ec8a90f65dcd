/* Seatbelt profile builder (see profile_seatbelt.h).
 *
 * Parameters, in this order (names are fixed; <i> counts from 0 in the caller's order):
 *   executor: EXEC, PROGRAM, INPUT, RUNTIME_<i>..., SYSTEM_*..., DEV_*..., ANCESTOR_<i>...
 *   command:  MOUNT_<i>..., PROXY_PORT (only with a proxy), SYSTEM_*..., DEV_*...,
 *             ANCESTOR_<i>...
 * SYSTEM_* and DEV_* come from the tables below (the policy's rows, table order).
 * ANCESTOR_<i> are the proper ancestor directories of every readable path, deduplicated,
 * in order of first appearance over the parameters above: they get file-read-metadata
 * only, which path resolution (realpath, getcwd, module lookup) needs.
 *
 * Instantiated digest ("sha256:" + 64 lowercase hex digits), with u64be(n) the 8-byte
 * big-endian encoding of n:
 *   SHA-256( u64be(len(TAG)) TAG  u64be(len(text)) text  u64be(count)
 *            { u64be(len(name)) name  u64be(len(value)) value } for each parameter in order )
 *   TAG = "confined-seatbelt-instantiated/1"
 * Every field is length-prefixed, so no two (text, parameters) pairs serialise alike. */
#include "profile_seatbelt.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POLICY_EXECUTOR 1u
#define POLICY_COMMAND 2u
#define MAP_EXEC 4u     /* executable mapping (and, for commands, exec) allowed */
#define DEV_WRITABLE 8u /* command policy: write-data allowed (only /dev/null) */

struct fixed_path {
  const char *name;
  const char *path;
  unsigned flags;
};

/* System paths, all SIP-protected (their content is identified by the OS build, not
 * pinned file by file). The executor reads only what node needs to start; the command
 * runner also gets the macOS counterparts of the spec's always-bound /usr, /bin, /sbin
 * and /etc. /System/Volumes as a whole is not listed: it holds the data volume. */
static const struct fixed_path system_paths[] = {
    {"SYSTEM_USR_LIB", "/usr/lib", POLICY_EXECUTOR | MAP_EXEC},
    {"SYSTEM_USR_SHARE", "/usr/share", POLICY_EXECUTOR},
    {"SYSTEM_USR", "/usr", POLICY_COMMAND | MAP_EXEC},
    {"SYSTEM_BIN", "/bin", POLICY_COMMAND | MAP_EXEC},
    {"SYSTEM_SBIN", "/sbin", POLICY_COMMAND | MAP_EXEC},
    {"SYSTEM_LIBRARY", "/System/Library", POLICY_EXECUTOR | POLICY_COMMAND | MAP_EXEC},
    /* The dyld shared cache from macOS 13 on. */
    {"SYSTEM_CRYPTEX", "/System/Volumes/Preboot/Cryptexes/OS",
     POLICY_EXECUTOR | POLICY_COMMAND | MAP_EXEC},
    /* The dyld shared cache up to macOS 10.15. */
    {"SYSTEM_DYLD_DB", "/private/var/db/dyld", POLICY_EXECUTOR | POLICY_COMMAND | MAP_EXEC},
    /* TZ=UTC resolves through /usr/share/zoneinfo to here. */
    {"SYSTEM_TIMEZONE", "/private/var/db/timezone", POLICY_EXECUTOR | POLICY_COMMAND},
    {"SYSTEM_ETC", "/private/etc", POLICY_COMMAND},
    /* /bin/sh executes the shell named here. */
    {"SYSTEM_SELECT", "/private/var/select", POLICY_COMMAND | MAP_EXEC},
};

static const struct fixed_path device_paths[] = {
    {"DEV_NULL", "/dev/null", POLICY_EXECUTOR | POLICY_COMMAND | DEV_WRITABLE},
    {"DEV_ZERO", "/dev/zero", POLICY_COMMAND},
    {"DEV_RANDOM", "/dev/random", POLICY_EXECUTOR | POLICY_COMMAND},
    {"DEV_URANDOM", "/dev/urandom", POLICY_EXECUTOR | POLICY_COMMAND},
};

/* sysctl names are not paths: they are policy, written into the text. Read-only, and
 * never kern.proc.* or kern.procargs*, which describe other processes (nor the host
 * name). The list is what node and common tools read at start; it has not yet been
 * measured on macOS, and a missing name only fails closed (EPERM). */
static const char *const sysctl_prefixes[] = {"hw.", "machdep.cpu."};
static const char *const sysctl_names[] = {
    "kern.osrelease",         "kern.ostype",        "kern.osversion",
    "kern.osproductversion",  "kern.version",       "kern.argmax",
    "kern.maxfilesperproc",   "kern.usrstack64",    "kern.boottime",
    "sysctl.proc_translated", "kern.secure_kernel",
};

/* Mach services the command runner's tools need for user lookups (getpwuid): the same
 * information the Linux runner exposes by binding /etc. The executor gets none. */
static const char *const command_mach_services[] = {
    "com.apple.system.opendirectoryd.libinfo",
    "com.apple.system.notification_center",
};

/* ---- growable text and parameter list ------------------------------------------------ */

struct sbuf {
  char *p;
  size_t len, cap;
  int oom;
};

static void sb_addn(struct sbuf *b, const char *s, size_t n) {
  if (b->oom)
    return;
  if (n + 1 > b->cap - b->len || !b->p) {
    size_t cap = b->cap ? b->cap : 1024;
    while (cap - b->len < n + 1)
      cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) {
      b->oom = 1;
      return;
    }
    b->p = np;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void sb_add(struct sbuf *b, const char *s) {
  sb_addn(b, s, strlen(s));
}

struct plist {
  struct seatbelt_param *v;
  size_t n, cap;
  int oom;
};

/* Appends NAME=value (value copied); returns its index or -1 when out of memory. */
__attribute__((format(printf, 3, 4))) static long plist_add(struct plist *l, const char *value,
                                                            const char *fmt, ...) {
  if (l->oom)
    return -1;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 32;
    struct seatbelt_param *nv = realloc(l->v, cap * sizeof *nv);
    if (!nv) {
      l->oom = 1;
      return -1;
    }
    l->v = nv;
    l->cap = cap;
  }
  struct seatbelt_param *p = &l->v[l->n];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->name, sizeof p->name, fmt, ap);
  va_end(ap);
  p->value = strdup(value);
  if (!p->value) {
    l->oom = 1;
    return -1;
  }
  return (long)l->n++;
}

/* ---- rules ------------------------------------------------------------------------- */

/* A rule is written only once it has a filter: an allow without a filter would allow the
 * operation everywhere, so an empty group of paths must produce no rule at all. */
struct rule {
  struct sbuf *sb;
  const char *head; /* "allow file-read*" */
  int started;
};

static void rule_filter(struct rule *r, const char *kind, const char *name) {
  if (!r->started) {
    sb_add(r->sb, "(");
    sb_add(r->sb, r->head);
    r->started = 1;
  }
  sb_add(r->sb, "\n  (");
  sb_add(r->sb, kind);
  sb_add(r->sb, " (param \"");
  sb_add(r->sb, name); /* a fixed name from this file, never a caller's value */
  sb_add(r->sb, "\"))");
}

static void rule_close(struct rule *r) {
  if (r->started)
    sb_add(r->sb, ")\n");
  r->started = 0;
}

/* ---- path checks (syntax only: the caller resolved symlinks) ------------------------- */

static int path_problem(const char *p, char *why, size_t whylen) {
  size_t n = strlen(p);
  if (n == 0 || p[0] != '/')
    return snprintf(why, whylen, "is not absolute"), 1;
  if (n > SEATBELT_MAX_PATH)
    return snprintf(why, whylen, "is longer than %d bytes", SEATBELT_MAX_PATH), 1;
  if (n > 1 && p[n - 1] == '/')
    return snprintf(why, whylen, "ends with /"), 1;
  for (const char *s = p; *s; s++) {
    if (s[0] != '/')
      continue;
    const char *seg = s + 1;
    size_t len = strcspn(seg, "/");
    if (len == 0 && seg[0] == '/')
      return snprintf(why, whylen, "contains //"), 1;
    if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
      return snprintf(why, whylen, "contains a . or .. segment"), 1;
  }
  return 0;
}

/* True when `inner` is `outer` or lies below it (path-segment wise). */
static int path_within(const char *inner, const char *outer) {
  size_t n = strlen(outer);
  if (n == 1 && outer[0] == '/')
    return 1;
  return strncmp(inner, outer, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

static int overlaps(const char *a, const char *b) {
  return path_within(a, b) || path_within(b, a);
}

__attribute__((format(printf, 3, 4))) static int fail(struct seatbelt_profile *out, int err,
                                                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->reason, sizeof out->reason, fmt, ap);
  va_end(ap);
  out->ok = 0;
  return err;
}

static int check_path(struct seatbelt_profile *out, const char *what, const char *p) {
  char why[96];
  if (!p)
    return fail(out, -EINVAL, "%s is missing", what);
  if (path_problem(p, why, sizeof why))
    return fail(out, -EINVAL, "%s %s", what, why);
  return 0;
}

static int validate(const struct seatbelt_request *q, struct seatbelt_profile *out) {
  int rc;
  if (q->policy == SEATBELT_POLICY_EXECUTOR) {
    if (q->n_mounts || q->mounts || q->proxy_port)
      return fail(out, -EINVAL, "the executor policy takes no mounts and no network");
    if (q->n_runtime_files > SEATBELT_MAX_RUNTIME_FILES)
      return fail(out, -EINVAL, "more than %d runtime files", SEATBELT_MAX_RUNTIME_FILES);
    if ((rc = check_path(out, "exec path", q->exec_path)) < 0 ||
        (rc = check_path(out, "program directory", q->program_dir)) < 0 ||
        (rc = check_path(out, "input directory", q->input_dir)) < 0)
      return rc;
    for (size_t i = 0; i < q->n_runtime_files; i++)
      if ((rc = check_path(out, "runtime file", q->runtime_files[i])) < 0)
        return rc;
    /* No executable mapping of snapshot files: a snapshot may neither hold nor lie in a
     * path this profile lets be mapped executable or executed. */
    const char *snaps[2] = {q->program_dir, q->input_dir};
    for (size_t s = 0; s < 2; s++) {
      if (path_within(snaps[s], "/dev"))
        return fail(out, -EINVAL, "a snapshot directory is under /dev");
      if (overlaps(snaps[s], q->exec_path))
        return fail(out, -EINVAL, "a snapshot directory overlaps the exec path");
      for (size_t i = 0; i < q->n_runtime_files; i++)
        if (overlaps(snaps[s], q->runtime_files[i]))
          return fail(out, -EINVAL, "a snapshot directory overlaps runtime file %zu", i);
      for (size_t i = 0; i < sizeof system_paths / sizeof system_paths[0]; i++)
        if ((system_paths[i].flags & POLICY_EXECUTOR) && overlaps(snaps[s], system_paths[i].path))
          return fail(out, -EINVAL, "a snapshot directory overlaps the system path %s",
                      system_paths[i].path);
    }
    return 0;
  }
  if (q->policy != SEATBELT_POLICY_COMMAND)
    return fail(out, -EINVAL, "unknown policy");
  if (q->exec_path || q->runtime_files || q->n_runtime_files || q->program_dir || q->input_dir)
    return fail(out, -EINVAL, "the command policy takes mounts, not runtime or snapshot paths");
  if (q->n_mounts > SEATBELT_MAX_MOUNTS)
    return fail(out, -EINVAL, "more than %d mounts", SEATBELT_MAX_MOUNTS);
  if (q->n_mounts && !q->mounts)
    return fail(out, -EINVAL, "mounts missing");
  for (size_t i = 0; i < q->n_mounts; i++) {
    char what[32];
    snprintf(what, sizeof what, "mount %zu", i);
    if ((rc = check_path(out, what, q->mounts[i].path)) < 0)
      return rc;
  }
  if (q->proxy_port > 65535)
    return fail(out, -EINVAL, "proxy port %u is not a TCP port", q->proxy_port);
  return 0;
}

/* ---- parameters --------------------------------------------------------------------- */

/* Adds ANCESTOR_<k> for each proper ancestor of `p` not yet listed. */
static void add_ancestors(struct plist *l, size_t first_ancestor, size_t *n_anc, const char *p) {
  char buf[SEATBELT_MAX_PATH + 1];
  size_t n = strlen(p);
  for (size_t i = 0; i < n && !l->oom; i++) {
    if (p[i] != '/')
      continue;
    size_t len = i == 0 ? 1 : i; /* "/" then "/a", "/a/b", ... */
    memcpy(buf, p, len);
    buf[len] = '\0';
    if (strcmp(buf, p) == 0)
      break;
    int seen = 0;
    for (size_t k = first_ancestor; k < l->n && !seen; k++)
      seen = strcmp(l->v[k].value, buf) == 0;
    if (!seen)
      plist_add(l, buf, "ANCESTOR_%zu", (*n_anc)++);
  }
}

static void fill_params(const struct seatbelt_request *q, unsigned pol, struct plist *l) {
  if (q->policy == SEATBELT_POLICY_EXECUTOR) {
    plist_add(l, q->exec_path, "EXEC");
    plist_add(l, q->program_dir, "PROGRAM");
    plist_add(l, q->input_dir, "INPUT");
    for (size_t i = 0; i < q->n_runtime_files; i++)
      plist_add(l, q->runtime_files[i], "RUNTIME_%zu", i);
  } else {
    for (size_t i = 0; i < q->n_mounts; i++)
      plist_add(l, q->mounts[i].path, "MOUNT_%zu", i);
    if (q->proxy_port) {
      char port[16];
      snprintf(port, sizeof port, "%u", q->proxy_port);
      plist_add(l, port, "PROXY_PORT");
    }
  }
  for (size_t i = 0; i < sizeof system_paths / sizeof system_paths[0]; i++)
    if (system_paths[i].flags & pol)
      plist_add(l, system_paths[i].path, "%s", system_paths[i].name);
  for (size_t i = 0; i < sizeof device_paths / sizeof device_paths[0]; i++)
    if (device_paths[i].flags & pol)
      plist_add(l, device_paths[i].path, "%s", device_paths[i].name);
  size_t first_ancestor = l->n, n_anc = 0, readable = l->n;
  for (size_t i = 0; i < readable && !l->oom; i++) {
    if (strcmp(l->v[i].name, "PROXY_PORT") == 0)
      continue;
    /* Copy: plist_add may move l->v. */
    char value[SEATBELT_MAX_PATH + 1];
    snprintf(value, sizeof value, "%s", l->v[i].value);
    add_ancestors(l, first_ancestor, &n_anc, value);
  }
}

/* ---- text ---------------------------------------------------------------------------- */

static int name_is(const struct seatbelt_param *p, const char *prefix) {
  return strncmp(p->name, prefix, strlen(prefix)) == 0;
}

static const struct fixed_path *system_row(const char *name) {
  for (size_t i = 0; i < sizeof system_paths / sizeof system_paths[0]; i++)
    if (strcmp(system_paths[i].name, name) == 0)
      return &system_paths[i];
  return NULL;
}

/* Adds a filter for every parameter whose name starts with `prefix` (and, when
 * `need_map`, whose system row allows executable mapping). */
static void filters(struct rule *r, const struct plist *l, const char *prefix, const char *kind,
                    int need_map) {
  for (size_t i = 0; i < l->n; i++) {
    if (!name_is(&l->v[i], prefix))
      continue;
    if (need_map) {
      const struct fixed_path *row = system_row(l->v[i].name);
      if (!row || !(row->flags & MAP_EXEC))
        continue;
    }
    rule_filter(r, kind, l->v[i].name);
  }
}

static void sysctl_rule(struct sbuf *sb) {
  sb_add(sb, "(allow sysctl-read");
  for (size_t i = 0; i < sizeof sysctl_prefixes / sizeof sysctl_prefixes[0]; i++) {
    sb_add(sb, "\n  (sysctl-name-prefix \"");
    sb_add(sb, sysctl_prefixes[i]);
    sb_add(sb, "\")");
  }
  for (size_t i = 0; i < sizeof sysctl_names / sizeof sysctl_names[0]; i++) {
    sb_add(sb, "\n  (sysctl-name \"");
    sb_add(sb, sysctl_names[i]);
    sb_add(sb, "\")");
  }
  sb_add(sb, ")\n");
}

static void common_reads(struct sbuf *sb, const struct plist *l) {
  struct rule r = {sb, "allow file-read*", 0};
  sb_add(sb, "; Reads: system paths (SIP-protected, identified by the OS build) and devices.\n");
  filters(&r, l, "SYSTEM_", "subpath", 0);
  filters(&r, l, "DEV_", "literal", 0);
  rule_close(&r);
}

static void ancestors_rule(struct sbuf *sb, const struct plist *l) {
  struct rule r = {sb, "allow file-read-metadata", 0};
  sb_add(sb, "; Metadata only: the directories above each readable path, for path lookups.\n");
  filters(&r, l, "ANCESTOR_", "literal", 0);
  rule_close(&r);
}

static void process_info_rules(struct sbuf *sb) {
  sb_add(sb, "; Process probes: (deny default) alone does not stop reading another process's\n"
             "; arguments, so deny the family and allow it for this process only.\n"
             "(deny process-info*)\n"
             "(allow process-info* (target self))\n");
}

static void executor_text(struct sbuf *sb, const struct plist *l) {
  struct rule r = {sb, "allow file-read*", 0};
  sb_add(sb, "; Reads: the node binary and its non-system library closure, file by file.\n");
  filters(&r, l, "EXEC", "literal", 0);
  filters(&r, l, "RUNTIME_", "literal", 0);
  rule_close(&r);
  sb_add(sb, "; Reads: the program and input snapshots.\n");
  filters(&r, l, "PROGRAM", "subpath", 0);
  filters(&r, l, "INPUT", "subpath", 0);
  rule_close(&r);
  common_reads(sb, l);
  ancestors_rule(sb, l);

  r.head = "allow file-map-executable";
  sb_add(sb, "; Executable mapping: the runtime files and system libraries, never a snapshot.\n");
  filters(&r, l, "EXEC", "literal", 0);
  filters(&r, l, "RUNTIME_", "literal", 0);
  filters(&r, l, "SYSTEM_", "subpath", 1);
  rule_close(&r);

  r.head = "allow process-exec";
  sb_add(sb, "; The one exec: sandbox-exec applies this profile, then executes node.\n");
  filters(&r, l, "EXEC", "literal", 0);
  rule_close(&r);

  sb_add(sb, "(allow signal (target self))\n");
  process_info_rules(sb);
  sysctl_rule(sb);
  sb_add(sb, "; Stated last so that no rule above can grant them: no write anywhere, no fork,\n"
             "; no network.\n"
             "(deny file-write*)\n"
             "(deny process-fork)\n"
             "(deny network*)\n");
}

static void command_text(struct sbuf *sb, const struct plist *l, const struct seatbelt_request *q) {
  struct rule r = {sb, "allow file-read*", 0};
  common_reads(sb, l);
  sb_add(sb, "; Reads: every mount, ro or rw.\n");
  filters(&r, l, "MOUNT_", "subpath", 0);
  rule_close(&r);
  ancestors_rule(sb, l);

  sb_add(sb, "; A command runner: fork, and exec or map code from the system paths and mounts.\n"
             "(allow process-fork)\n");
  r.head = "allow process-exec file-map-executable";
  filters(&r, l, "SYSTEM_", "subpath", 1);
  filters(&r, l, "MOUNT_", "subpath", 0);
  rule_close(&r);

  sb_add(sb, "; Writes follow the mounts in order, as bind mounts shadow earlier ones: a later\n"
             "; rule wins, so an ro mount inside an earlier rw mount stays read-only.\n");
  r.head = "allow file-write-data";
  for (size_t i = 0; i < l->n; i++) {
    const struct fixed_path *row = NULL;
    for (size_t k = 0; k < sizeof device_paths / sizeof device_paths[0]; k++)
      if (strcmp(device_paths[k].name, l->v[i].name) == 0)
        row = &device_paths[k];
    if (row && (row->flags & DEV_WRITABLE))
      rule_filter(&r, "literal", l->v[i].name);
  }
  rule_close(&r);
  for (size_t i = 0; i < q->n_mounts; i++) {
    char name[32];
    snprintf(name, sizeof name, "MOUNT_%zu", i);
    r.head = q->mounts[i].writable ? "allow file-write*" : "deny file-write*";
    rule_filter(&r, "subpath", name);
    rule_close(&r);
  }

  sb_add(sb, "(allow signal (target same-sandbox))\n");
  process_info_rules(sb);
  sysctl_rule(sb);
  sb_add(sb, "(allow mach-lookup");
  for (size_t i = 0; i < sizeof command_mach_services / sizeof command_mach_services[0]; i++) {
    sb_add(sb, "\n  (global-name \"");
    sb_add(sb, command_mach_services[i]);
    sb_add(sb, "\")");
  }
  sb_add(sb, ")\n");
  if (q->proxy_port) {
    sb_add(sb, "; Network: outbound to the egress proxy's loopback port, nothing else.\n"
               "(allow network-outbound\n"
               "  (remote ip (string-append \"localhost:\" (param \"PROXY_PORT\"))))\n");
  } else {
    sb_add(sb, "; Network: none.\n(deny network*)\n");
  }
}

/* ---- digest -------------------------------------------------------------------------- */

static int digest_field(EVP_MD_CTX *ctx, const void *data, size_t n) {
  uint8_t len[8];
  uint64_t v = n;
  for (int i = 7; i >= 0; i--, v >>= 8)
    len[i] = (uint8_t)(v & 0xff);
  return EVP_DigestUpdate(ctx, len, sizeof len) == 1 &&
         (n == 0 || EVP_DigestUpdate(ctx, data, n) == 1);
}

int seatbelt_instantiated(const char *text, size_t text_len, const struct seatbelt_param *params,
                          size_t n_params, char out[7 + 64 + 1]) {
  static const char tag[] = "confined-seatbelt-instantiated/1";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  uint8_t count[8];
  uint64_t v = n_params;
  for (int i = 7; i >= 0; i--, v >>= 8)
    count[i] = (uint8_t)(v & 0xff);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
           digest_field(ctx, tag, sizeof tag - 1) && digest_field(ctx, text, text_len) &&
           EVP_DigestUpdate(ctx, count, sizeof count) == 1;
  for (size_t i = 0; ok && i < n_params; i++)
    ok = digest_field(ctx, params[i].name, strlen(params[i].name)) &&
         digest_field(ctx, params[i].value, strlen(params[i].value));
  ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == 32;
  EVP_MD_CTX_free(ctx);
  if (!ok)
    return -EIO;
  static const char hex[] = "0123456789abcdef";
  memcpy(out, "sha256:", 7);
  for (unsigned i = 0; i < 32; i++) {
    out[7 + 2 * i] = hex[md[i] >> 4];
    out[7 + 2 * i + 1] = hex[md[i] & 0xf];
  }
  out[7 + 64] = '\0';
  return 0;
}

/* ---- entry point --------------------------------------------------------------------- */

int seatbelt_build(const struct seatbelt_request *q, struct seatbelt_profile *out) {
  memset(out, 0, sizeof *out);
  if (!q)
    return fail(out, -EINVAL, "no request");
  int rc = validate(q, out);
  if (rc < 0)
    return rc;
  unsigned pol = q->policy == SEATBELT_POLICY_EXECUTOR ? POLICY_EXECUTOR : POLICY_COMMAND;
  struct plist l = {0};
  struct sbuf sb = {0};
  fill_params(q, pol, &l);
  sb_add(&sb, "(version 1)\n");
  sb_add(&sb, q->policy == SEATBELT_POLICY_EXECUTOR
                  ? "; confined executor profile. Every path is a parameter (-D NAME=value).\n"
                  : "; confined command profile. Every path is a parameter (-D NAME=value).\n");
  sb_add(&sb, "(deny default)\n");
  if (q->policy == SEATBELT_POLICY_EXECUTOR)
    executor_text(&sb, &l);
  else
    command_text(&sb, &l, q);
  out->params = l.v;
  out->n_params = l.n;
  out->text = sb.p;
  out->text_len = sb.len;
  if (l.oom || sb.oom) {
    seatbelt_profile_free(out);
    return fail(out, -ENOMEM, "out of memory");
  }
  rc = seatbelt_instantiated(out->text, out->text_len, out->params, out->n_params,
                             out->instantiated);
  if (rc < 0) {
    seatbelt_profile_free(out);
    return fail(out, rc, "sha256 failed");
  }
  out->ok = 1;
  return 0;
}

void seatbelt_profile_free(struct seatbelt_profile *p) {
  if (!p)
    return;
  for (size_t i = 0; i < p->n_params; i++)
    free(p->params[i].value);
  free(p->params);
  free(p->text);
  p->params = NULL;
  p->n_params = 0;
  p->text = NULL;
  p->text_len = 0;
}
