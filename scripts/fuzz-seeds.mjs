// Writes the seed corpora of the libFuzzer targets in fuzz/ (used by scripts/fuzz.sh):
// tiny valid inputs built by the test helpers, so each run starts from the shapes the readers
// accept instead of from nothing. Usage: node scripts/fuzz-seeds.mjs <dir>
// Creates <dir>/runtime, <dir>/macho and <dir>/snapshot.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DT, buildElf, buildLdCache, buildOldLdCache } from '../test/helpers/elf-builder.js';
import { CPU, dylib, executable, fat } from '../test/helpers/macho-fixtures.js';

const out = process.argv[2];
if (!out) {
  console.error('usage: node scripts/fuzz-seeds.mjs <dir>');
  process.exit(2);
}
const counts = {};
function seed(target, name, bytes) {
  const dir = path.join(out, target);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, name), bytes);
  counts[target] = (counts[target] ?? 0) + 1;
}

// runtime_fuzz.c: byte 0 odd selects the ELF reader, even the ld.so.cache reader.
const elf = (bytes) => Buffer.concat([Buffer.from([1]), bytes]);
const cache = (bytes) => Buffer.concat([Buffer.from([0]), bytes]);
const dyn = [
  [DT.NEEDED, 'libc.so.6'],
  [DT.NEEDED, 'libm.so.6'],
  [DT.SONAME, 'libtest.so.1'],
  [DT.RUNPATH, '$ORIGIN/../lib'],
  [DT.FLAGS_1, 0x800],
];
seed('runtime', 'elf64-le', elf(buildElf({ dyn }).bytes));
seed('runtime', 'elf64-be', elf(buildElf({ dyn, msb: true }).bytes));
seed('runtime', 'elf32-le', elf(buildElf({ dyn, is64: false, machine: 3 }).bytes));
seed('runtime', 'elf-rpath', elf(buildElf({ dyn: [[DT.RPATH, '/opt/lib'], [DT.NEEDED, 'libz.so.1']] }).bytes));
seed('runtime', 'elf-static', elf(buildElf({ interp: '/lib64/ld-linux-x86-64.so.2', dyn: [] }).bytes));
const entries = [
  { key: 'libc.so.6', value: '/lib/x86_64-linux-gnu/libc.so.6', flags: 0x303 },
  { key: 'libm.so.6', value: '/lib/x86_64-linux-gnu/libm.so.6', flags: 0x303 },
  { key: 'libfoo.so.1', value: '/usr/lib/libfoo.so.1', flags: 0x303 },
];
seed('runtime', 'ldcache-new', cache(buildLdCache(entries)));
seed('runtime', 'ldcache-both', cache(buildLdCache(entries, { old: true })));
seed('runtime', 'ldcache-old', cache(buildOldLdCache(entries)));
seed(
  'runtime',
  'ldcache-hwcaps',
  cache(
    buildLdCache(
      [...entries, { key: 'libc.so.6', value: '/lib/glibc-hwcaps/x86-64-v3/libc.so.6', flags: 0x303, hwcapName: 'x86-64-v3' }],
      { hwcapNames: ['x86-64-v3'] },
    ),
  ),
);

// macho_fuzz.c: a whole thin or fat file.
const deps = [{ name: '/usr/lib/libSystem.B.dylib' }, { name: '@rpath/libfoo.dylib', kind: 'weak' }];
const exeArm = executable({ cpu: CPU.arm64, deps, rpaths: ['@loader_path/../lib'] });
const exeX86 = executable({ cpu: CPU.x86_64, deps });
seed('macho', 'thin-arm64', exeArm);
seed('macho', 'thin-x86_64', exeX86);
seed('macho', 'dylib', dylib({ cpu: CPU.arm64, id: '@rpath/libfoo.dylib', deps }));
seed('macho', 'fat', fat({ slices: [{ cpu: CPU.x86_64, bytes: exeX86 }, { cpu: CPU.arm64, bytes: exeArm }] }).bytes);
seed('macho', 'fat64', fat({ is64: true, slices: [{ cpu: CPU.arm64, bytes: exeArm }] }).bytes);

// snapshot_fuzz.c: byte 0 limit selector, records "flags path NUL content" separated by 0xff.
const record = (p, content = 'x', flags = 0) =>
  Buffer.concat([Buffer.from([flags]), Buffer.from(p, 'latin1'), Buffer.from([0]), Buffer.from(content)]);
const snapshot = (limit, ...records) => {
  const parts = [Buffer.from([limit])];
  records.forEach((r, i) => parts.push(...(i ? [Buffer.from([0xff]), r] : [r])));
  return Buffer.concat(parts);
};
seed('snapshot', 'valid', snapshot(0xfc, record('main.mjs', 'console.log(1)'), record('lib/a.js'), record('lib/b/c.txt', '')));
seed('snapshot', 'duplicate', snapshot(0xfc, record('a.js'), record('A.js')));
seed('snapshot', 'clash', snapshot(0xfc, record('a'), record('a/b')));
seed('snapshot', 'dots', snapshot(0xfc, record('./a'), record('a/../b'), record('a//b')));
seed('snapshot', 'deep', snapshot(0xfc, record(Array.from({ length: 16 }, () => 'd').join('/'))));
seed('snapshot', 'long', snapshot(0xfc, record('p'.repeat(256))));
seed('snapshot', 'too-large', snapshot(0x02, record('a', 'xxxxxxxxxxxxxxxxx'), record('b', 'y')));
seed('snapshot', 'not-string', snapshot(0xfc, record('a', 'x', 1), record('b', 'x', 2)));
seed('snapshot', 'empty', Buffer.from([0xfc]));

console.log(`fuzz seeds in ${out}: ${Object.entries(counts).map(([t, n]) => `${t} ${n}`).join(', ')}`);
