// Native artefacts of the boundary suite, compiled by the test with the system `cc`:
// - probe.node: a Node-API addon exporting hello();
// - plain.so: a plain shared object whose constructor runs on load;
// - raise-limits: a program that tries to raise each of the four hard limits (control only).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ADDON_C = `#include <node_api.h>
static napi_value hello(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value s;
  napi_create_string_utf8(env, "native-loaded", NAPI_AUTO_LENGTH, &s);
  return s;
}
NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "hello", NAPI_AUTO_LENGTH, hello, NULL, &fn);
  napi_set_named_property(env, exports, "hello", fn);
  return exports;
}
`;

// Host side only: clears FD_CLOEXEC on a descriptor (node sets it on every descriptor it opens
// and on inherited ones at startup, so a test cannot hold a leaky descriptor otherwise).
const CLOEXEC_C = `#include <fcntl.h>
#include <node_api.h>
static napi_value clear(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  int32_t fd = -1;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_get_value_int32(env, argv[0], &fd);
  int flags = fcntl(fd, F_GETFD);
  int rc = flags < 0 ? -1 : fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
  napi_create_int32(env, rc < 0 ? -1 : fcntl(fd, F_GETFD), &out);
  return out;
}
NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "clearCloexec", NAPI_AUTO_LENGTH, clear, NULL, &fn);
  napi_set_named_property(env, exports, "clearCloexec", fn);
  return exports;
}
`;

const PLAIN_C = `int plain_loaded;
__attribute__((constructor)) static void on_load(void) { plain_loaded = 1; }
`;

// Lowers each hard limit by one below its current value (or to 1 if unlimited), then tries to
// raise it back: prints "<name> lower=<0|errno> raise=<0|errno>". Raising a hard limit needs
// CAP_SYS_RESOURCE (setrlimit(2)).
const RAISE_C = `#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>
int main(void) {
  static const struct { int r; const char *n; } L[] = {
    {RLIMIT_CPU, "cpu"}, {RLIMIT_NOFILE, "nofile"}, {RLIMIT_CORE, "core"}, {RLIMIT_FSIZE, "fsize"}};
  for (unsigned i = 0; i < sizeof L / sizeof L[0]; i++) {
    struct rlimit cur;
    getrlimit(L[i].r, &cur);
    struct rlimit low = cur;
    low.rlim_max = cur.rlim_max == RLIM_INFINITY ? 64 : (cur.rlim_max > 1 ? cur.rlim_max - 1 : 1);
    if (low.rlim_cur > low.rlim_max) low.rlim_cur = low.rlim_max;
    int lower = setrlimit(L[i].r, &low) == 0 ? 0 : errno;
    struct rlimit high = low;
    high.rlim_max = low.rlim_max + 1;
    int raise = setrlimit(L[i].r, &high) == 0 ? 0 : errno;
    printf("%s lower=%d raise=%d\\n", L[i].n, lower, raise);
  }
  return 0;
}
`;

function findCc() {
  for (const cc of ['/usr/bin/cc', '/usr/bin/gcc', '/usr/bin/clang']) {
    try {
      execFileSync(cc, ['--version'], { stdio: 'ignore' });
      return cc;
    } catch {
      // next
    }
  }
  return null;
}

function nodeInclude() {
  const prefix = path.dirname(path.dirname(fs.realpathSync(process.execPath)));
  for (const dir of [path.join(prefix, 'include', 'node'), '/usr/include/node']) {
    if (fs.existsSync(path.join(dir, 'node_api.h'))) return dir;
  }
  return null;
}

/** Compiles the artefacts; returns { skip } with a reason, or { files, raiseLimits, dir }. */
export function buildNative() {
  const cc = findCc();
  if (!cc) return { skip: 'no working system C compiler (cc, gcc, clang)' };
  const include = nodeInclude();
  if (!include) return { skip: 'no node_api.h next to the running node' };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'confined-boundary-native-'));
  fs.chmodSync(dir, 0o755);
  fs.writeFileSync(path.join(dir, 'addon.c'), ADDON_C);
  fs.writeFileSync(path.join(dir, 'plain.c'), PLAIN_C);
  fs.writeFileSync(path.join(dir, 'raise.c'), RAISE_C);
  fs.writeFileSync(path.join(dir, 'cloexec.c'), CLOEXEC_C);
  try {
    execFileSync(cc, ['-shared', '-fPIC', '-O1', `-I${include}`, '-o', path.join(dir, 'probe.node'), path.join(dir, 'addon.c')]);
    execFileSync(cc, ['-shared', '-fPIC', '-O1', '-o', path.join(dir, 'plain.so'), path.join(dir, 'plain.c')]);
    execFileSync(cc, ['-shared', '-fPIC', '-O1', `-I${include}`, '-o', path.join(dir, 'cloexec.node'), path.join(dir, 'cloexec.c')]);
    execFileSync(cc, ['-O1', '-o', path.join(dir, 'raise-limits'), path.join(dir, 'raise.c')]);
  } catch (error) {
    return { skip: `cc failed: ${String(error.stderr ?? error.message).slice(0, 300)}` };
  }
  fs.chmodSync(path.join(dir, 'raise-limits'), 0o755);
  return {
    dir,
    raiseLimits: path.join(dir, 'raise-limits'),
    cloexecAddon: path.join(dir, 'cloexec.node'),
    files: [
      { path: 'native/probe.node', content: fs.readFileSync(path.join(dir, 'probe.node')) },
      { path: 'native/plain.so', content: fs.readFileSync(path.join(dir, 'plain.so')) },
    ],
  };
}
