// ConfinedExecutor: one bounded node program against read-only snapshots, decided in the order
// of the spec's failure semantics, reported as a frozen result.
import { createHash } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import path from 'node:path';
import { executorArgv, stageArgv } from './bwrap.js';
import { collect, limitsMatch, parseControl, parseStatus } from './collect.js';
import { EXECUTOR_CHANNEL, REFUSAL_EXIT_CODE } from './constants.js';
import { deepFreeze } from './freeze.js';
import { signalName } from './signals.js';
import { hostLaunchers, hostProblem } from './host.js';
import { needsStaging, spawnLauncher, STAGING_DIR } from './launch.js';
import * as namespace from './namespace.js';
import { activeProfile, executorFilter } from './profile.js';
import { runDarwin } from './darwin/executor.js';
import { confinementPosture, decidedPosture } from './posture.js';
import { verifyRuntime } from './runtime.js';
import { validateExecutorOptions, validateRunRequest } from './validate.js';

const channel = diagnostics.channel(EXECUTOR_CHANNEL);

function publish(event, payload) {
  if (channel.hasSubscribers) channel.publish(deepFreeze({ event, ...payload }));
}

function sha256(text) {
  return 'sha256:' + createHash('sha256').update(text).digest('hex');
}

function notStarted(reason, message, namespaceDisposition = null) {
  return deepFreeze({ status: 'not-started', reason, message, namespace: namespaceDisposition });
}

/** The loader's cache: ld.so inside resolves the closure with the same cache as the pin. */
const LOADER_CACHE = '/etc/ld.so.cache';

/** The parts of a namespace that are bound into the sandbox, read-only and noexec. */
const BOUND_PARTS = ['program', 'input', 'home'];

export class ConfinedExecutor {
  #options;

  constructor(options) {
    // Touches nothing: the root is checked on every run.
    this.#options = validateExecutorOptions(options);
  }

  run(request, signal) {
    // Invariant 1: validation throws synchronously, before anything is touched.
    const req = validateRunRequest(request, signal);
    return this.#run(req, signal);
  }

  async #run(req, signal) {
    const { root, maxRetained } = this.#options;
    if (signal?.aborted) return notStarted('aborted', 'the signal was aborted before the run');
    const problem = hostProblem();
    if (problem) return notStarted('unsupported-host', problem);
    if (process.platform === 'linux') {
      // Once per process: a trial launch proves bwrap can create its namespaces here. Once it
      // is decided, no await: the path from here to the slot claim stays synchronous.
      const posture = decidedPosture() ?? (await confinementPosture());
      if (!posture.enforced) return notStarted('unsupported-host', posture.reason);
    }
    const profile = activeProfile();
    if (req.profile !== profile.digest)
      return notStarted('profile-mismatch', `profile digest ${req.profile} is not ${profile.digest}`);
    const runtime = verifyRuntime(req.runtime);
    if (!runtime.ok) return notStarted('runtime-mismatch', runtime.problem);

    const rootCheck = namespace.checkRoot(root);
    if (!rootCheck.ok) return notStarted('setup-failed', `executor root refused: ${rootCheck.reason}`);
    const counted = namespace.countEntries(root);
    if (!counted.ok) return notStarted('setup-failed', `executor root unreadable: ${counted.reason}`);
    const retained = counted.count;
    publish('counted', { root, retained });
    if (retained >= maxRetained)
      return notStarted(
        'retained-limit',
        `${retained} entries in ${root} reach maxRetained ${maxRetained}; leftovers are never reclaimed automatically`,
      );
    const claim = namespace.claimSlot(root, maxRetained);
    if (!claim.ok && claim.full)
      return notStarted(
        'retained-limit',
        `every slot is taken in ${root}; leftovers are never reclaimed automatically`,
      );
    if (!claim.ok) return notStarted('setup-failed', `cannot claim a slot: ${claim.reason}`);
    const slot = claim.path;

    const canary = path.join(slot, 'canary', 'canary');
    const made = namespace.materialise(slot, {
      program: req.program.files,
      input: req.input.files,
      home: [],
      canary: [{ path: 'canary', content: Buffer.from('confined canary\n') }],
    });
    if (!made.ok) {
      // A partial namespace is removed if it verifies, else quarantined (spec).
      const disposition = made.manifest
        ? namespace.remove(made.manifest)
        : { state: 'quarantined', path: slot, reason: made.reason };
      return notStarted('setup-failed', `namespace setup failed: ${made.reason}`, disposition);
    }
    const manifest = made.manifest;
    publish('materialised', { namespace: slot });
    if (process.platform === 'darwin') return this.#runDarwin({ req, slot, manifest, profile, runtime, signal });

    // Launch plan, built before the final check so nothing but the check and the spawn sit
    // between them.
    const tools = profile.parts.tools;
    const stage = stageArgv(tools.stage, {
      limits: { cpuSeconds: req.cpuSeconds, descriptors: req.maxDescriptors, coreBlocks: 0, fileBlocks: 0 },
      gate: { canary, hostTool: tools.bwrap },
      env: {
        LC_ALL: 'C',
        TZ: 'UTC',
        HOME: path.join(slot, 'home'),
        TMPDIR: path.join(slot, 'home'),
        OPENSSL_CONF: '/dev/null',
      },
      file: runtime.identity.node.path,
      args: [path.join(slot, 'program', req.program.entry), ...req.program.args],
    });
    // What the sandbox reads of the host: the closure (bwrap itself runs outside) and the loader
    // cache the closure was resolved with. A root caller's launcher runs as an unprivileged uid
    // that may not traverse the paths (the 0700 executor root, a package under /root), so every
    // source is staged as an idmapped clone (native/spawn_linux.c); otherwise only the snapshot
    // parts are re-mounted over themselves, read-only and noexec.
    const asRoot = process.geteuid() === 0;
    const runtimeFiles = [
      ...runtime.identity.files.filter((f) => f.path !== tools.bwrap).map((f) => f.path),
      LOADER_CACHE,
    ];
    const mounts = [];
    const fileBinds = runtimeFiles.map((file, i) => {
      if (!asRoot || !needsStaging(file)) return { source: file, target: file };
      const staged = `${STAGING_DIR}/f${i}`;
      mounts.push({ source: file, target: staged, readonly: true, noexec: false, isFile: true });
      return { source: staged, target: file };
    });
    const partBinds = BOUND_PARTS.map((p) => {
      const source = path.join(slot, p);
      const staged = asRoot ? `${STAGING_DIR}/${p}` : source;
      mounts.push({ source, target: staged, readonly: true, noexec: true, isFile: false });
      return { source: staged, target: source };
    });
    let argv = executorArgv({
      bwrap: tools.bwrap,
      runtime: { files: fileBinds, aliases: runtime.identity.aliases },
      binds: partBinds,
      cwd: path.join(slot, 'input'),
      stage,
    });
    let filter = executorFilter();
    let stagedMounts = mounts;
    // Test seam only (lib/testing.js, not exported by the package): a patched profile has its
    // own digest, so a caller must pin it explicitly; production never sets one.
    if (profile.patched) {
      if (profile.patch.argv) argv = profile.patch.argv(argv);
      if (profile.patch.filter) filter = profile.patch.filter(filter);
      if (profile.patch.mounts) stagedMounts = profile.patch.mounts(mounts);
    }
    const instantiatedText = JSON.stringify({ argv, seccomp: filter.toString('base64') });
    const identities = {
      program: { digest: req.program.digest, entry: req.program.entry, args: req.program.args },
      input: { digest: req.input.digest },
      runtime: req.runtime,
      profile: { name: profile.parts.name, digest: profile.digest, instantiated: sha256(instantiatedText) },
      bounds: {
        timeoutMs: req.timeoutMs,
        maxOutputBytes: req.maxOutputBytes,
        cpuSeconds: req.cpuSeconds,
        maxDescriptors: req.maxDescriptors,
      },
    };

    // Invariant 4: verified immediately before the synchronous spawn, no await in between.
    const verified = namespace.verify(manifest);
    if (!verified.ok)
      return notStarted('snapshot-mismatch', `namespace changed before launch: ${verified.reason}`, {
        state: 'quarantined',
        path: slot,
        reason: verified.reason,
      });
    if (signal?.aborted)
      return notStarted('aborted', 'the signal was aborted before launch', namespace.remove(manifest));
    let proc;
    const startedAt = performance.now();
    try {
      proc = spawnLauncher({
        file: argv[0],
        argv,
        mounts: stagedMounts,
        filter,
        staging: asRoot ? STAGING_DIR : null,
      });
    } catch (err) {
      return notStarted('setup-failed', `spawn failed: ${err.message}`, namespace.remove(manifest));
    }
    publish('launched', { namespace: slot, pid: proc.pid, profile: instantiatedText });

    const facts = await collect(proc, {
      request: req,
      signal,
      startedAt,
      hooks: { onAdmitted: () => publish('admitted', { namespace: slot, pid: proc.pid }) },
    });
    return this.#conclude({ req, slot, manifest, proc, facts, identities });
  }

  // macOS (lib/darwin/executor.js): the same order of decision and collection; sandbox-exec
  // execs node in place, so the reaped ChildProcess status is the program's own.
  async #runDarwin({ req, slot, manifest, profile, runtime, signal }) {
    let launchedPid = null;
    const outcome = await runDarwin({
      request: req,
      slot,
      runtime: runtime.identity,
      profile,
      signal,
      verify: () => namespace.verify(manifest),
      hooks: {
        onLaunched: ({ pid, profile: text }) => {
          launchedPid = pid;
          publish('launched', { namespace: slot, pid, profile: text });
        },
        onAdmitted: () => publish('admitted', { namespace: slot, pid: launchedPid }),
      },
    });
    if (!outcome.started) {
      const disposition =
        outcome.reason === 'snapshot-mismatch'
          ? { state: 'quarantined', path: slot, reason: outcome.message }
          : namespace.remove(manifest);
      return notStarted(outcome.reason, outcome.message, disposition);
    }
    const identities = {
      program: { digest: req.program.digest, entry: req.program.entry, args: req.program.args },
      input: { digest: req.input.digest },
      runtime: req.runtime,
      profile: { name: profile.parts.name, digest: profile.digest, instantiated: outcome.instantiated },
      bounds: {
        timeoutMs: req.timeoutMs,
        maxOutputBytes: req.maxOutputBytes,
        cpuSeconds: req.cpuSeconds,
        maxDescriptors: req.maxDescriptors,
      },
    };
    return this.#conclude({
      req,
      slot,
      manifest,
      proc: outcome.proc,
      facts: outcome.facts,
      identities,
      direct: { exit: outcome.exit },
    });
  }

  /**
   * `direct`, on macOS only: the reaped process is the program itself, so its exit is exact and
   * there is no stage status record to expect.
   */
  #conclude({ req, slot, manifest, proc, facts, identities, direct = null }) {
    const problems = [];
    const parsed = facts.controlOverflow ? null : parseControl(facts.control);
    const status = direct ? { exit: direct.exit, resources: null } : parseStatus(facts.statusText);
    const limits = parsed?.limits ?? null;

    let exit = null;
    let resources = null;
    if (facts.reaped) {
      if (status && status.exit) {
        exit = status.exit;
        resources = status.resources;
      } else if (facts.killSent) {
        // The launcher died by our SIGKILL; its death killed every process of the pid
        // namespace with SIGKILL, the program included.
        exit = { code: null, signal: 'SIGKILL' };
      } else {
        const l = facts.launcherExit;
        exit = { code: l.code, signal: l.signal === null ? null : signalOf(l.signal) };
      }
    }

    let admission;
    if (!parsed) admission = 'malformed';
    else if (parsed.admitted) admission = 'admitted';
    else if (exit?.code === REFUSAL_EXIT_CODE) admission = 'refused';
    else admission = 'absent';

    if (admission !== 'admitted') problems.push(`admission ${admission}: the program ${admission === 'malformed' ? 'start is unconfirmed' : 'never ran'}`);
    if (limits && !limitsMatch(limits, req)) problems.push('limits-mismatch: measured limits differ from the request');
    if (admission === 'admitted' && !facts.goSent && facts.stopped === null)
      problems.push('lost contact: the go byte could not be sent');
    if (status?.unexecuted)
      problems.push(`not executed: execve of the program failed after admission (errno ${status.unexecuted})`);
    if (facts.reaped && !status && admission === 'admitted' && !facts.killSent)
      problems.push('lost contact: the program exit status was not reported');
    if (!facts.reaped) problems.push('not reaped: the launcher was not confirmed gone');
    if (!facts.pipesClosed) problems.push('pipes open: output pipes stayed open after exit');

    const runtimeAfter = verifyRuntime(req.runtime);
    if (!runtimeAfter.ok) problems.push(`runtime changed: ${runtimeAfter.problem}`);

    let disposition;
    const unresolved = !facts.reaped || !facts.pipesClosed;
    if (unresolved) {
      disposition = { state: 'quarantined', path: slot, reason: 'the process was not confirmed gone' };
    } else {
      disposition = namespace.remove(manifest);
      if (disposition.state === 'quarantined') problems.push(`namespace changed: ${disposition.reason}`);
    }
    publish('collected', { namespace: slot });

    const processFacts = {
      pid: proc.pid,
      admission,
      limits,
      exit,
      pipesClosed: facts.pipesClosed,
      stopped: facts.stopped,
      killSent: facts.killSent,
      stdout: facts.stdout,
      stderr: facts.stderr,
      outputBytes: facts.outputBytes,
      durationMs: Math.round(facts.durationMs * 1000) / 1000,
      resources,
    };
    const result = unresolved
      ? { status: 'unresolved', problems, identities, process: processFacts, namespace: disposition }
      : {
          status: 'observed',
          attributable: problems.length === 0,
          problems,
          identities,
          process: processFacts,
          namespace: disposition,
        };
    return deepFreeze(result);
  }
}

function signalOf(n) {
  return typeof n === 'string' ? n : signalName(n);
}
