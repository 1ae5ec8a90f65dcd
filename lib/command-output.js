// The command runner's capped output, shared by both backends (lib/confinement.js and
// lib/darwin/confinement.js): each stream delivers at most its cap, bytes beyond it are
// discarded while the pipe keeps draining (the command is never blocked and memory stays
// bounded), and the end of the delivered stderr is kept for `stderrTail`.
import { Readable } from 'node:stream';
import { parseLimitReport } from './collect.js';
import { CONTROL_MAX_BYTES } from './constants.js';

export function cappedOutput(caps, tailBytes) {
  const streams = { stdout: new Readable({ read() {} }), stderr: new Readable({ read() {} }) };
  const delivered = { stdout: 0, stderr: 0 };
  const tailCap = Math.min(tailBytes, caps.stderr);
  let tail = Buffer.alloc(0);
  let truncated = false;
  return {
    streams,
    /** A 'data' listener for the pipe of stream `name`. */
    onOutput: (name) => (chunk) => {
      const room = caps[name] - delivered[name];
      if (room <= 0) {
        truncated = true;
        return;
      }
      const piece = chunk.length <= room ? chunk : chunk.subarray(0, room);
      if (piece.length < chunk.length) truncated = true;
      delivered[name] += piece.length;
      streams[name].push(piece);
      if (name === 'stderr') {
        const joined = Buffer.concat([tail, piece]);
        tail = joined.length <= tailCap ? joined : joined.subarray(joined.length - tailCap);
      }
    },
    get truncated() {
      return truncated;
    },
    /** The end of the delivered stderr, as UTF-8. */
    stderrTail: () => tail.toString('utf8'),
    /** Ends both streams (after the last delivered byte). */
    end: () => {
      for (const s of Object.values(streams)) s.push(null);
    },
  };
}

/**
 * Reads the stage's limit report on the control channel (both backends): over CONTROL_MAX_BYTES,
 * unparsable or not matching the request -> onMismatch(); matching -> onMatch(). An empty channel
 * means the stage failed before reporting (the command never ran): neither is called.
 */
export function watchLimitReport(control, matches, { onMatch, onMismatch }) {
  let text = Buffer.alloc(0);
  control.on('data', (chunk) => {
    if (text.length + chunk.length > CONTROL_MAX_BYTES) return onMismatch();
    text = Buffer.concat([text, chunk]);
  });
  control.on('end', () => {
    if (text.length === 0) return;
    const measured = parseLimitReport(text.toString('latin1'));
    if (!measured || !matches(measured)) return onMismatch();
    onMatch();
  });
}
