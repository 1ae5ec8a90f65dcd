// An independent implementation of the snapshot protocol with node:crypto, for the tests,
// and a seeded generator of random valid snapshots.
import { createHash } from 'node:crypto';

/** The spec's digest, computed without the addon. */
export function referenceDigest(files) {
  const sorted = files
    .map((file) => ({ key: Buffer.from(file.path, 'utf8'), file }))
    .sort((a, b) => Buffer.compare(a.key, b.key));
  const outer = createHash('sha256');
  outer.update('sf-confined-snapshot/1\n');
  for (const { file } of sorted) {
    const bytes = Buffer.from(
      file.content.buffer,
      file.content.byteOffset,
      file.content.byteLength,
    );
    const hex = createHash('sha256').update(bytes).digest('hex');
    outer.update(`${file.path}\t${bytes.length}\t${hex}\n`);
  }
  return `sha256:${outer.digest('hex')}`;
}

/** mulberry32: a small seeded PRNG returning floats in [0, 1). */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const SEGMENT_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-';

/** Random snapshots that satisfy every rule, built so that all path shapes occur. */
export function randomSnapshot(random) {
  const int = (n) => Math.floor(random() * n);
  const pick = (s) => s[int(s.length)];
  const files = [];
  const foldedFiles = new Set();
  const foldedDirs = new Set();
  const count = random() < 0.05 ? 0 : 1 + int(random() < 0.2 ? 60 : 8);
  const dirs = ['a', 'A', 'src', 'Src', 'lib', 'x.y', '-', '_', '...', '.hidden', 'a-b', 'a.b'];

  function segment() {
    const shape = random();
    let s;
    if (shape < 0.3) s = pick(dirs);
    else if (shape < 0.35) s = Array.from({ length: 1 + int(3) }, () => '.').join('');
    else {
      const n = 1 + int(shape < 0.9 ? 12 : 60);
      s = Array.from({ length: n }, () => pick(SEGMENT_CHARS)).join('');
    }
    return s === '.' || s === '..' ? `${s}x` : s;
  }

  function path() {
    const shape = random();
    let segments;
    if (shape < 0.03) {
      // The longest path: 256 characters.
      const first = Array.from({ length: 200 }, () => pick(SEGMENT_CHARS)).join('');
      return `${first}/${'q'.repeat(55)}`;
    }
    if (shape < 0.06) segments = 16;
    else segments = 1 + int(shape < 0.7 ? 3 : 8);
    return Array.from({ length: segments }, segment).join('/').slice(0, 256);
  }

  function valid(p) {
    if (p.length === 0 || p.length > 256 || p.endsWith('/')) return false;
    const parts = p.split('/');
    if (parts.length > 16 || parts.some((s) => s === '' || s === '.' || s === '..')) return false;
    const folded = p.toLowerCase();
    if (foldedFiles.has(folded) || foldedDirs.has(folded)) return false;
    for (let i = 1; i < parts.length; i++) {
      if (foldedFiles.has(parts.slice(0, i).join('/').toLowerCase())) return false;
    }
    return true;
  }

  for (let tries = 0; files.length < count && tries < count * 20; tries++) {
    const p = path();
    if (!valid(p)) continue;
    const parts = p.toLowerCase().split('/');
    foldedFiles.add(parts.join('/'));
    for (let i = 1; i < parts.length; i++) foldedDirs.add(parts.slice(0, i).join('/'));
    files.push({ path: p, content: randomContent(random) });
  }
  return files;
}

function randomContent(random) {
  const shape = random();
  let size;
  if (shape < 0.15) size = 0;
  else if (shape < 0.8) size = Math.floor(random() * 200);
  else if (shape < 0.97) size = Math.floor(random() * 5000);
  else size = Math.floor(random() * 200_000);
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = Math.floor(random() * 256);
  const view = random();
  if (view < 0.2) return Buffer.from(bytes);
  if (view < 0.4) {
    // A view into the middle of a larger buffer: byteOffset must be honoured.
    const larger = new Uint8Array(size + 16).fill(0xaa);
    larger.set(bytes, 7);
    return larger.subarray(7, 7 + size);
  }
  return bytes;
}
