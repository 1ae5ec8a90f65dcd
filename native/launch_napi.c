/* Node-API glue of the Linux launch: seccomp filters, spawn, exit watching through a pidfd on
 * the libuv loop, SIGKILL only through a live unreaped pidfd.
 *
 * JavaScript sees a process handle object with { pid, fds } and three functions:
 * watch(handle, cb) calls cb(exit) once, after the launcher was reaped; kill(handle) returns
 * false once it was reaped (a reaped pid is never a signal target); unref(handle) lets the loop
 * exit while an unreaped launcher is abandoned (the `unresolved` path). */
#include "addon.h"
#include "napi_util.h"

#ifdef __linux__
#include "seccomp_policy.h"
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

struct proc {
  pid_t pid;
  int pidfd; /* -1 once reaped and closed */
  bool reaped;
  bool watching;
  bool poll_closing;
  uv_poll_t poll;
  napi_env env;
  napi_ref callback;
  napi_ref self; /* keeps the handle object alive while watched */
  napi_async_context async;
};

static void free_strings(char **v) {
  if (!v)
    return;
  for (char **p = v; *p; p++)
    free(*p);
  free(v);
}

/* Reads a JS array of strings into a NULL-terminated vector. */
static char **get_string_array(napi_env env, napi_value arr, const char *what) {
  bool is = false;
  uint32_t n = 0;
  if (napi_is_array(env, arr, &is) != napi_ok || !is || napi_get_array_length(env, arr, &n)) {
    confined_throw_type_error(env, what);
    return NULL;
  }
  char **v = calloc((size_t)n + 1, sizeof *v);
  if (!v)
    return NULL;
  for (uint32_t i = 0; i < n; i++) {
    napi_value e;
    if (napi_get_element(env, arr, i, &e) != napi_ok ||
        !confined_get_string(env, e, what, &v[i], NULL)) {
      free_strings(v);
      return NULL;
    }
  }
  return v;
}

static bool get_prop(napi_env env, napi_value obj, const char *key, napi_value *out) {
  if (napi_get_named_property(env, obj, key, out) != napi_ok) {
    confined_throw_last_error(env, key);
    return false;
  }
  return true;
}

static bool get_int_prop(napi_env env, napi_value obj, const char *key, int64_t *out) {
  napi_value v;
  return get_prop(env, obj, key, &v) && confined_get_int64(env, v, key, out);
}

static void proc_finalize(napi_env env, void *data, void *hint) {
  struct proc *p = data;
  (void)hint;
  /* Only reached when not watched (a watch holds a strong reference until it ends). */
  if (p->pidfd >= 0)
    close(p->pidfd);
  if (p->callback)
    napi_delete_reference(env, p->callback);
  free(p);
}

/* spawn({ file, argv, envp, staging, mounts: [{source, target, readonly, noexec}], dropUid,
 *         dropGid, fds: [6 ints, -1 for closed] }) -> { pid } (a handle object) */
static napi_value js_spawn(napi_env env, napi_callback_info info) {
  napi_value argv[1], v;
  if (!confined_get_args(env, info, 1, argv))
    return NULL;
  napi_value plan_obj = argv[0];
  struct spawn_plan plan;
  memset(&plan, 0, sizeof plan);
  char *file = NULL, *staging = NULL;
  char **args = NULL, **envp = NULL;
  struct stage_mount *mounts = NULL;
  char **mount_strings = NULL;
  uint32_t nmounts = 0;
  napi_value result = NULL;
  int64_t drop_uid = 65534, drop_gid = 65534;

  if (!get_prop(env, plan_obj, "file", &v) || !confined_get_string(env, v, "file", &file, NULL))
    goto out;
  if (!get_prop(env, plan_obj, "argv", &v) || !(args = get_string_array(env, v, "argv")))
    goto out;
  if (!get_prop(env, plan_obj, "envp", &v) || !(envp = get_string_array(env, v, "envp")))
    goto out;
  if (!get_prop(env, plan_obj, "staging", &v))
    goto out;
  napi_valuetype t;
  napi_typeof(env, v, &t);
  if (t == napi_string && !confined_get_string(env, v, "staging", &staging, NULL))
    goto out;
  if (!get_prop(env, plan_obj, "mounts", &v) || napi_get_array_length(env, v, &nmounts) != napi_ok)
    goto out;
  if (nmounts > SPAWN_MAX_MOUNTS) {
    confined_throw_type_error(env, "too many stage mounts");
    goto out;
  }
  mounts = calloc((size_t)nmounts + 1, sizeof *mounts);
  mount_strings = calloc((size_t)nmounts * 2 + 1, sizeof *mount_strings);
  if (!mounts || !mount_strings)
    goto out;
  for (uint32_t i = 0; i < nmounts; i++) {
    napi_value m, f;
    bool b;
    if (napi_get_element(env, v, i, &m) != napi_ok)
      goto out;
    if (!get_prop(env, m, "source", &f) ||
        !confined_get_string(env, f, "mount source", &mount_strings[2 * i], NULL) ||
        !get_prop(env, m, "target", &f) ||
        !confined_get_string(env, f, "mount target", &mount_strings[2 * i + 1], NULL))
      goto out;
    mounts[i].source = mount_strings[2 * i];
    mounts[i].target = mount_strings[2 * i + 1];
    if (!get_prop(env, m, "readonly", &f) || napi_get_value_bool(env, f, &b) != napi_ok)
      goto out;
    mounts[i].readonly = b;
    if (!get_prop(env, m, "noexec", &f) || napi_get_value_bool(env, f, &b) != napi_ok)
      goto out;
    mounts[i].noexec = b;
    if (!get_prop(env, m, "isFile", &f) || napi_get_value_bool(env, f, &b) != napi_ok)
      b = false;
    mounts[i].is_file = b;
  }
  int64_t userns = -1;
  if (!get_int_prop(env, plan_obj, "idmapUserns", &userns))
    goto out;
  plan.idmap_userns = (int)userns;
  if (!get_int_prop(env, plan_obj, "dropUid", &drop_uid) ||
      !get_int_prop(env, plan_obj, "dropGid", &drop_gid))
    goto out;
  if (drop_uid <= 0 || drop_gid <= 0) {
    confined_throw_type_error(env, "dropUid/dropGid must be an unprivileged id");
    goto out;
  }
  if (!get_prop(env, plan_obj, "fds", &v))
    goto out;
  for (uint32_t i = 0; i < SPAWN_FDS; i++) {
    napi_value e;
    int64_t fd;
    if (napi_get_element(env, v, i, &e) != napi_ok || !confined_get_int64(env, e, "fd", &fd))
      goto out;
    plan.fds[i] = (int)fd;
  }
  plan.file = file;
  plan.argv = args;
  plan.envp = envp;
  plan.staging = staging;
  plan.mounts = mounts;
  plan.nmounts = nmounts;
  plan.drop_uid = (uid_t)drop_uid;
  plan.drop_gid = (gid_t)drop_gid;

  pid_t pid;
  int pidfd;
  struct spawn_error err;
  if (confined_spawn(&plan, &pid, &pidfd, &err) != 0) {
    char msg[256];
    snprintf(msg, sizeof msg, "spawn failed at %s: %s", err.step, strerror(err.err));
    napi_value e, code, message;
    napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
    napi_create_string_utf8(env, err.step, NAPI_AUTO_LENGTH, &code);
    napi_create_error(env, code, message, &e);
    confined_set_int64(env, e, "errno", err.err);
    napi_throw(env, e);
    goto out;
  }
  struct proc *p = calloc(1, sizeof *p);
  if (!p) {
    kill(pid, SIGKILL);
    close(pidfd);
    goto out;
  }
  p->pid = pid;
  p->pidfd = pidfd;
  p->env = env;
  napi_value obj;
  if (napi_create_object(env, &obj) != napi_ok ||
      napi_wrap(env, obj, p, proc_finalize, NULL, NULL) != napi_ok) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    close(pidfd);
    free(p);
    goto out;
  }
  confined_set_int64(env, obj, "pid", pid);
  result = obj;
out:
  free(file);
  free(staging);
  free_strings(args);
  free_strings(envp);
  if (mount_strings)
    for (uint32_t i = 0; i < nmounts * 2; i++)
      free(mount_strings[i]);
  free(mount_strings);
  free(mounts);
  return result;
}

static struct proc *unwrap(napi_env env, napi_value obj) {
  void *data = NULL;
  if (napi_unwrap(env, obj, &data) != napi_ok || !data) {
    confined_throw_type_error(env, "not a process handle");
    return NULL;
  }
  return data;
}

static void poll_closed(uv_handle_t *h) {
  struct proc *p = h->data;
  /* Release the strong reference taken by watch: the object may now be collected. */
  if (p->self) {
    napi_delete_reference(p->env, p->self);
    p->self = NULL;
  }
  p->watching = false;
}

static void deliver(struct proc *p, const struct spawn_exit *ex, int err) {
  napi_env env = p->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value cb, obj, global, ignored;
  napi_get_reference_value(env, p->callback, &cb);
  napi_get_global(env, &global);
  napi_create_object(env, &obj);
  if (err) {
    confined_set_int64(env, obj, "errno", -err);
  } else {
    napi_value nul;
    napi_get_null(env, &nul);
    if (ex->code >= 0)
      confined_set_int64(env, obj, "code", ex->code);
    else
      confined_set_value(env, obj, "code", nul);
    if (ex->signal > 0)
      confined_set_int64(env, obj, "signal", ex->signal);
    else
      confined_set_value(env, obj, "signal", nul);
    confined_set_int64(env, obj, "utimeUs", ex->utime_us);
    confined_set_int64(env, obj, "stimeUs", ex->stime_us);
    confined_set_int64(env, obj, "maxRssKiB", ex->maxrss_kib);
  }
  napi_delete_reference(env, p->callback);
  p->callback = NULL;
  napi_value self = global;
  if (p->self)
    napi_get_reference_value(env, p->self, &self);
  napi_make_callback(env, p->async, self, cb, 1, &obj, &ignored);
  napi_close_handle_scope(env, scope);
}

static void on_pidfd(uv_poll_t *h, int status, int events) {
  struct proc *p = h->data;
  struct spawn_exit ex;
  memset(&ex, 0, sizeof ex);
  int r = confined_reap(p->pidfd, &ex);
  if (r == 0 && status == 0)
    return; /* spurious wake-up: still running */
  /* Reaped (or the pidfd failed): the pid is dead to us from here on. */
  p->reaped = true;
  uv_poll_stop(&p->poll);
  close(p->pidfd);
  p->pidfd = -1;
  p->poll_closing = true;
  uv_close((uv_handle_t *)&p->poll, poll_closed);
  if (p->async) {
    deliver(p, &ex, r < 0 ? r : (status < 0 ? status : 0));
    napi_async_destroy(p->env, p->async);
    p->async = NULL;
  }
}

/* watch(handle, cb): cb({ code, signal, utimeUs, stimeUs, maxRssKiB }) once, after reaping. */
static napi_value js_watch(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (!confined_get_args(env, info, 2, argv))
    return NULL;
  struct proc *p = unwrap(env, argv[0]);
  if (!p)
    return NULL;
  if (p->watching || p->reaped)
    return confined_throw_error(env, NULL, "process handle already watched or reaped");
  uv_loop_t *loop;
  NAPI_CALL(env, napi_get_uv_event_loop(env, &loop));
  NAPI_CALL(env, napi_create_reference(env, argv[1], 1, &p->callback));
  NAPI_CALL(env, napi_create_reference(env, argv[0], 1, &p->self));
  napi_value name = confined_make_string(env, "confined:process");
  NAPI_CALL(env, napi_async_init(env, argv[0], name, &p->async));
  int rc = uv_poll_init(loop, &p->poll, p->pidfd);
  if (rc == 0) {
    p->poll.data = p;
    rc = uv_poll_start(&p->poll, UV_READABLE, on_pidfd);
  }
  if (rc != 0)
    return confined_throw_error(env, NULL, uv_strerror(rc));
  p->watching = true;
  return NULL;
}

/* kill(handle, signo) -> true if sent. Only through the pidfd of an unreaped process. */
static napi_value js_kill(napi_env env, napi_callback_info info) {
  napi_value argv[2], out;
  if (!confined_get_args(env, info, 2, argv))
    return NULL;
  struct proc *p = unwrap(env, argv[0]);
  int64_t sig;
  if (!p || !confined_get_int64(env, argv[1], "signal", &sig))
    return NULL;
  bool sent = false;
  if (!p->reaped && p->pidfd >= 0)
    sent = syscall(SYS_pidfd_send_signal, p->pidfd, (int)sig, NULL, 0) == 0;
  NAPI_CALL(env, napi_get_boolean(env, sent, &out));
  return out;
}

/* unref(handle): an abandoned (unresolved) launcher no longer keeps the loop alive. */
static napi_value js_unref(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (!confined_get_args(env, info, 1, argv))
    return NULL;
  struct proc *p = unwrap(env, argv[0]);
  if (!p)
    return NULL;
  if (p->watching && !p->poll_closing)
    uv_unref((uv_handle_t *)&p->poll);
  return NULL;
}

/* idmapUserns(uid, gid) -> fd of a user namespace mapping 0 to uid/gid (for root callers'
 * idmapped stage mounts; made once per process by lib/launch.js). */
static napi_value js_idmap_userns(napi_env env, napi_callback_info info) {
  napi_value argv[2], out;
  int64_t uid, gid;
  if (!confined_get_args(env, info, 2, argv) || !confined_get_int64(env, argv[0], "uid", &uid) ||
      !confined_get_int64(env, argv[1], "gid", &gid))
    return NULL;
  int fd = confined_idmap_userns((uid_t)uid, (gid_t)gid);
  if (fd < 0)
    return confined_throw_error(env, "idmap", strerror(errno));
  NAPI_CALL(env, napi_create_int32(env, fd, &out));
  return out;
}

/* pipe() -> [readFd, writeFd], both close-on-exec (the spawn dup2s what the child keeps). */
static napi_value js_pipe(napi_env env, napi_callback_info info) {
  int fds[2];
  napi_value out, r, w;
  (void)info;
  if (pipe2(fds, O_CLOEXEC) != 0)
    return confined_throw_error(env, "pipe", strerror(errno));
  NAPI_CALL(env, napi_create_array_with_length(env, 2, &out));
  NAPI_CALL(env, napi_create_int32(env, fds[0], &r));
  NAPI_CALL(env, napi_create_int32(env, fds[1], &w));
  NAPI_CALL(env, napi_set_element(env, out, 0, r));
  NAPI_CALL(env, napi_set_element(env, out, 1, w));
  return out;
}

/* seccompFilter('executor' | 'command') -> Buffer of struct sock_filter. */
static napi_value js_seccomp_filter(napi_env env, napi_callback_info info) {
  napi_value argv[1], out;
  char *name = NULL;
  if (!confined_get_args(env, info, 1, argv) ||
      !confined_get_string(env, argv[0], "policy", &name, NULL))
    return NULL;
  enum confined_policy policy =
      strcmp(name, "executor") == 0 ? CONFINED_POLICY_EXECUTOR : CONFINED_POLICY_COMMAND;
  bool known = strcmp(name, "executor") == 0 || strcmp(name, "command") == 0;
  free(name);
  if (!known)
    return confined_throw_type_error(env, "unknown seccomp policy");
  uint8_t *bpf;
  size_t len;
  const char *failed;
  int rc = confined_seccomp_build(policy, &bpf, &len, &failed);
  if (rc != 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "seccomp policy failed at %s: %s", failed ? failed : "?",
             strerror(rc < 0 ? -rc : rc));
    return confined_throw_error(env, "seccomp", msg);
  }
  void *data;
  napi_status st = napi_create_buffer_copy(env, len, bpf, &data, &out);
  free(bpf);
  NAPI_CALL(env, st);
  return out;
}

bool confined_launch_init(napi_env env, napi_value exports) {
  return confined_export(env, exports, "spawn", js_spawn) &&
         confined_export(env, exports, "watch", js_watch) &&
         confined_export(env, exports, "kill", js_kill) &&
         confined_export(env, exports, "unref", js_unref) &&
         confined_export(env, exports, "pipe", js_pipe) &&
         confined_export(env, exports, "idmapUserns", js_idmap_userns) &&
         confined_export(env, exports, "seccompFilter", js_seccomp_filter);
}

#else
bool confined_launch_init(napi_env env, napi_value exports) {
  (void)env;
  (void)exports;
  return true;
}
#endif
