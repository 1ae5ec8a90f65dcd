// Reads the memcheck logs of scripts/valgrind.sh (one per process, --log-file=dir/log.%p) and
// counts the errors that are ours: any error record with a frame in confined.node (or the
// confined-stage helper), and any definite leak whose allocation was made by our code (the
// first frame after the allocator is ours). Everything else is node's or V8's own (JIT code,
// compressed pointers that hide live blocks from the leak checker, externals whose finalizer
// does not run at exit) and is only counted. Leak records of forked children are ignored: a
// child that execs or _exits reports its copy of the parent's heap.
// Usage: node scripts/valgrind-report.mjs <dir> <main pid>; exits 1 if any error is ours.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

const [dir, mainPid] = process.argv.slice(2);
const OURS = /confined\.node|confined-stage/;
const ALLOCATORS = /(malloc|calloc|realloc|operator new|memalign|posix_memalign|strdup|aligned_alloc)\b/;
let ours = 0;
let others = 0;
let oursLeaks = 0;
let processes = 0;
const shown = [];
const summaries = [];
for (const name of readdirSync(dir).filter((f) => f.startsWith('log.'))) {
  const pid = name.slice(4);
  const text = readFileSync(path.join(dir, name), 'utf8');
  processes++;
  const isMain = pid === mainPid;
  // Records are separated by an empty "==pid== " line.
  const records = text.split(new RegExp(`^==${pid}== *$`, 'm')).map((r) => r.trim());
  for (const record of records) {
    const lines = record.split('\n').filter((l) => l.startsWith(`==${pid}==`));
    if (lines.length < 2) continue;
    const head = lines[0].replace(`==${pid}== `, '');
    const frames = lines.slice(1).filter((l) => /^==\d+==\s+(at|by) /.test(l));
    if (frames.length === 0) continue;
    const isLeak = /are (definitely|possibly|indirectly) lost/.test(head);
    if (isLeak) {
      if (!isMain || !/definitely lost/.test(head)) continue;
      const caller = frames.find((f) => !ALLOCATORS.test(f));
      if (caller && OURS.test(caller)) {
        oursLeaks++;
        if (shown.length < 5) shown.push(record);
      } else {
        others++;
      }
      continue;
    }
    if (frames.some((f) => OURS.test(f))) {
      ours++;
      if (shown.length < 5) shown.push(record);
    } else {
      others++;
    }
  }
  const summary = /ERROR SUMMARY: .*/.exec(text);
  if (isMain && summary) summaries.push(`main process: ${summary[0]}`);
  const unhandled = [...new Set([...text.matchAll(/unhandled amd64-linux syscall: (\d+)/g)].map((m) => m[1]))];
  if (unhandled.length) summaries.push(`pid ${pid}${isMain ? ' (main)' : ''}: syscalls valgrind does not implement: ${unhandled.join(', ')}`);
}
for (const s of summaries) console.log(`valgrind: ${s}`);
console.log(
  `valgrind: ${processes} processes; errors in our code: ${ours}, definite leaks allocated by our code: ${oursLeaks}; ` +
    `records elsewhere (node, V8, libc; not ours): ${others}`,
);
for (const r of shown) console.log(`--- ours ---\n${r}`);
process.exit(ours + oursLeaks > 0 ? 1 : 0);
