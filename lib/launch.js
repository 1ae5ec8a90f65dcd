// The one process lifecycle of the Linux backend, shared by the executor and the command
// runner: pipes, the staged spawn of bwrap (native/spawn_linux.c), exit through a pidfd, and
// SIGKILL only while the launcher is unreaped (the launcher is pid 1 of the run's pid namespace).
//
// The launcher gets exactly six descriptors (native/exe/stage.c documents them):
//   0 stdin (read end; the host keeps the write end), 1 stdout, 2 stderr,
//   3 control (stage limits report, then the program's admission record), 4 status (the
//   stage's report of the program's wait status), 5 the seccomp program (read once).
import { closeSync, statSync, writeSync } from 'node:fs';
import path from 'node:path';
import net from 'node:net';
import { native } from './native.js';

/** uid/gid a root caller's sandbox runs as (never host root: research section 1). */
export const UNPRIVILEGED_ID = 65534;
/** Where the child mounts its private staging tmpfs (only in its own mount namespace). */
export const STAGING_DIR = '/tmp';

const reachable = new Map();
/**
 * Whether a root caller's launcher (uid 65534) must get `file` as a staged clone: when it lies
 * under the staging directory (hidden by the staging tmpfs) or when uid 65534 could not reach
 * it (a directory on the way without o+x, the file without o+r). If this answer goes stale,
 * bwrap fails to bind and the run is refused: it never weakens confinement.
 */
export function needsStaging(file) {
  if (file === STAGING_DIR || file.startsWith(`${STAGING_DIR}/`)) return true;
  let answer = reachable.get(file);
  if (answer === undefined) {
    answer = false;
    try {
      if ((statSync(file).mode & 0o004) === 0) answer = true;
      for (let dir = path.dirname(file); !answer; dir = path.dirname(dir)) {
        if ((statSync(dir).mode & 0o001) === 0) answer = true;
        if (dir === '/') break;
      }
    } catch {
      answer = true;
    }
    reachable.set(file, answer);
  }
  return answer;
}

let idmapUserns = -1;
/** The user namespace of root callers' idmapped mounts, made once per process. */
function sharedIdmapUserns() {
  if (idmapUserns < 0) idmapUserns = native.idmapUserns(UNPRIVILEGED_ID, UNPRIVILEGED_ID);
  return idmapUserns;
}

function readable(fd) {
  const socket = new net.Socket({ fd, readable: true, writable: false });
  return socket;
}

/**
 * Spawns the launcher. Synchronous: when it returns, bwrap has been exec'd (or it threw with
 * `err.code` naming the failed step). `plan` = { file, argv, mounts, filter }.
 */
export function spawnLauncher(plan) {
  const opened = [];
  const pipe = () => {
    const p = native.pipe();
    opened.push(...p);
    return p;
  };
  try {
    const [stdinRead, stdinWrite] = pipe();
    const [stdoutRead, stdoutWrite] = pipe();
    const [stderrRead, stderrWrite] = pipe();
    const [controlRead, controlWrite] = pipe();
    const [statusRead, statusWrite] = pipe();
    const [filterRead, filterWrite] = pipe();
    // A filter is at most 32 KiB: it fits a pipe's buffer, so this write never blocks.
    writeSync(filterWrite, plan.filter);
    closeSync(filterWrite);
    const handle = native.spawn({
      file: plan.file,
      argv: plan.argv,
      envp: [],
      staging: plan.staging ?? null,
      mounts: plan.mounts,
      idmapUserns: process.geteuid() === 0 && plan.mounts.length > 0 ? sharedIdmapUserns() : -1,
      dropUid: UNPRIVILEGED_ID,
      dropGid: UNPRIVILEGED_ID,
      fds: [stdinRead, stdoutWrite, stderrWrite, controlWrite, statusWrite, filterRead],
    });
    // The child has its copies; the host keeps only its own ends.
    for (const fd of [stdinRead, stdoutWrite, stderrWrite, controlWrite, statusWrite, filterRead])
      closeSync(fd);
    return new LauncherProcess(handle, {
      stdin: stdinWrite,
      stdout: readable(stdoutRead),
      stderr: readable(stderrRead),
      control: readable(controlRead),
      status: readable(statusRead),
    });
  } catch (err) {
    for (const fd of opened) {
      try {
        closeSync(fd);
      } catch {
        // already closed
      }
    }
    throw err;
  }
}

class LauncherProcess {
  #handle;
  #stdin;
  constructor(handle, { stdin, stdout, stderr, control, status }) {
    this.#handle = handle;
    this.#stdin = stdin;
    this.pid = handle.pid;
    this.stdout = stdout;
    this.stderr = stderr;
    this.control = control;
    this.status = status;
    this.reaped = false;
    this.exit = null;
  }

  /** Calls cb({ code, signal, utimeUs, stimeUs, maxRssKiB }) once the launcher was reaped. */
  onExit(cb) {
    native.watch(this.#handle, (exit) => {
      this.reaped = true;
      this.exit = exit;
      cb(exit);
    });
  }

  /**
   * SIGKILL through the pidfd; false once reaped (the pid is never a target then). The launcher
   * is pid 1 of the run's pid namespace, so its death ends the whole sandbox, at any moment of
   * bwrap's start (native/spawn_linux.c).
   */
  kill() {
    if (this.reaped) return false;
    return native.kill(this.#handle, 9);
  }

  /** Writes bytes to the program's stdin and closes it (at most once). */
  writeStdinAndClose(bytes) {
    if (this.#stdin < 0) return false;
    let ok = true;
    try {
      if (bytes && bytes.length) writeSync(this.#stdin, bytes);
    } catch {
      ok = false; // EPIPE: the reader is gone
    }
    this.closeStdin();
    return ok;
  }

  closeStdin() {
    if (this.#stdin < 0) return;
    try {
      closeSync(this.#stdin);
    } catch {
      // ignore
    }
    this.#stdin = -1;
  }

  /** An abandoned launcher (unresolved) stops keeping the event loop alive. */
  unref() {
    native.unref(this.#handle);
    for (const s of [this.stdout, this.stderr, this.control, this.status]) s.unref();
  }
}
