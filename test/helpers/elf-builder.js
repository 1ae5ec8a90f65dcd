// Builds ELF images and ld.so.cache files byte by byte for the parser tests. Written
// from the ELF and ldconfig layouts, independently of native/elf.c and native/ldcache.c.

class Writer {
  constructor(size, msb) {
    this.buf = Buffer.alloc(size);
    this.msb = msb;
  }
  u8(off, v) {
    this.buf[off] = v;
  }
  u16(off, v) {
    this.msb ? this.buf.writeUInt16BE(v, off) : this.buf.writeUInt16LE(v, off);
  }
  u32(off, v) {
    this.msb ? this.buf.writeUInt32BE(v >>> 0, off) : this.buf.writeUInt32LE(v >>> 0, off);
  }
  u64(off, v) {
    const b = BigInt(v);
    this.msb ? this.buf.writeBigUInt64BE(b, off) : this.buf.writeBigUInt64LE(b, off);
  }
  word(is64, off, v) {
    is64 ? this.u64(off, v) : this.u32(off, Number(v));
  }
}

export const PT_LOAD = 1;
export const PT_DYNAMIC = 2;
export const PT_INTERP = 3;
export const DT = { NULL: 0, NEEDED: 1, STRTAB: 5, STRSZ: 10, SONAME: 14, RPATH: 15, RUNPATH: 29, FLAGS_1: 0x6ffffffb };

/**
 * A small dynamically linked ELF image. Layout: header, program headers (PT_INTERP,
 * PT_LOAD covering the whole file at vaddr `base`, PT_DYNAMIC), interp string, string
 * table, dynamic section. Returns { bytes, layout } so tests can corrupt fields.
 * `dyn` is a list of [tag, value]; a string value is replaced by its strtab offset.
 */
export function buildElf({
  is64 = true,
  msb = false,
  machine = 62,
  type = 3,
  interp = '/lib/ld-test.so.1',
  dyn = [],
  base = 0x400000,
  strtabInLoad = true,
} = {}) {
  const ehsize = is64 ? 64 : 52;
  const phentsize = is64 ? 56 : 32;
  const dynent = is64 ? 16 : 8;
  const phnum = 3;
  const phoff = ehsize;
  const interpOff = phoff + phnum * phentsize;
  const interpBytes = Buffer.from(interp + '\0');
  const strs = [''];
  const strOffsets = new Map();
  let strLen = 1;
  for (const [, v] of dyn) {
    if (typeof v === 'string' && !strOffsets.has(v)) {
      strOffsets.set(v, strLen);
      strs.push(v);
      strLen += Buffer.byteLength(v) + 1;
    }
  }
  const strtab = Buffer.from(strs.join('\0') + '\0');
  const strtabOff = interpOff + interpBytes.length;
  let dynOff = strtabOff + strtab.length;
  dynOff += (8 - (dynOff % 8)) % 8;
  const entries = [
    [DT.STRTAB, strtabInLoad ? base + strtabOff : 0x7fff0000],
    [DT.STRSZ, strtab.length],
    ...dyn.map(([t, v]) => [t, typeof v === 'string' ? strOffsets.get(v) : v]),
    [DT.NULL, 0],
  ];
  const size = dynOff + entries.length * dynent;
  const w = new Writer(size, msb);
  w.buf.write('\x7fELF', 0, 'latin1');
  w.u8(4, is64 ? 2 : 1);
  w.u8(5, msb ? 2 : 1);
  w.u8(6, 1);
  w.u16(16, type);
  w.u16(18, machine);
  w.u32(20, 1);
  if (is64) {
    w.u64(32, phoff);
    w.u16(52, ehsize);
    w.u16(54, phentsize);
    w.u16(56, phnum);
  } else {
    w.u32(28, phoff);
    w.u16(40, ehsize);
    w.u16(42, phentsize);
    w.u16(44, phnum);
  }
  const ph = (i, ptype, offset, vaddr, filesz) => {
    const o = phoff + i * phentsize;
    w.u32(o, ptype);
    if (is64) {
      w.u64(o + 8, offset);
      w.u64(o + 16, vaddr);
      w.u64(o + 24, vaddr);
      w.u64(o + 32, filesz);
      w.u64(o + 40, filesz);
    } else {
      w.u32(o + 4, offset);
      w.u32(o + 8, vaddr);
      w.u32(o + 12, vaddr);
      w.u32(o + 16, filesz);
      w.u32(o + 20, filesz);
    }
  };
  ph(0, PT_INTERP, interpOff, base + interpOff, interpBytes.length);
  ph(1, PT_LOAD, 0, base, size);
  ph(2, PT_DYNAMIC, dynOff, base + dynOff, entries.length * dynent);
  interpBytes.copy(w.buf, interpOff);
  strtab.copy(w.buf, strtabOff);
  entries.forEach(([t, v], i) => {
    w.word(is64, dynOff + i * dynent, t);
    w.word(is64, dynOff + i * dynent + dynent / 2, v);
  });
  return {
    bytes: w.buf,
    layout: { is64, msb, phoff, phentsize, phnum, interpOff, strtabOff, dynOff, dynent, size },
    writer: w,
  };
}

/** glibc's soname order (digit runs compare as numbers), for sorting test caches. */
export function libcmp(a, b) {
  let i = 0;
  let j = 0;
  const digit = (c) => c >= '0' && c <= '9';
  while (i < a.length) {
    if (digit(a[i]) && digit(b[j] ?? '')) {
      let x = '';
      let y = '';
      while (i < a.length && digit(a[i])) x += a[i++];
      while (j < b.length && digit(b[j])) y += b[j++];
      if (Number(x) !== Number(y)) return Number(x) - Number(y);
    } else if (digit(a[i])) return 1;
    else if (digit(b[j] ?? '')) return -1;
    else if (a[i] !== b[j]) return a.charCodeAt(i) - (j < b.length ? b.charCodeAt(j) : 0);
    else {
      i++;
      j++;
    }
  }
  return j < b.length ? -b.charCodeAt(j) : 0;
}

/**
 * A new-format ld.so.cache ("glibc-ld.so.cache1.1", little-endian) holding `entries`
 * ({ key, value, flags, hwcap?: bigint, hwcapName?: string }), sorted as ldconfig sorts
 * them (decreasing libcmp; named-hwcaps entries first within a name). With `old`, an
 * old-format "ld.so-1.7.0" table is put in front.
 */
export function buildLdCache(entries, { old = false, hwcapNames = [] } = {}) {
  const sorted = [...entries].sort((x, y) => {
    const c = libcmp(y.key, x.key);
    if (c) return c;
    return (y.hwcapName ? 1 : 0) - (x.hwcapName ? 1 : 0);
  });
  const HEADER = 48;
  const table = HEADER + sorted.length * 24;
  // Strings, offsets relative to the new header.
  const strings = [];
  let strOff = table;
  const offsetOf = new Map();
  const intern = (s) => {
    if (!offsetOf.has(s)) {
      offsetOf.set(s, strOff);
      strings.push(s);
      strOff += Buffer.byteLength(s) + 1;
    }
    return offsetOf.get(s);
  };
  for (const e of sorted) {
    intern(e.key);
    intern(e.value);
  }
  for (const n of hwcapNames) intern(n);
  let extOff = strOff + ((4 - (strOff % 4)) % 4);
  const hwArrayOff = extOff + 8 + 16;
  const newSize = hwcapNames.length ? hwArrayOff + hwcapNames.length * 4 : strOff;
  const nw = new Writer(newSize, false);
  nw.buf.write('glibc-ld.so.cache1.1', 0, 'latin1');
  nw.u32(20, sorted.length);
  nw.u32(24, strOff - table);
  nw.u8(28, 2); // little-endian
  nw.u32(32, hwcapNames.length ? extOff : 0);
  sorted.forEach((e, i) => {
    const o = HEADER + i * 24;
    nw.u32(o, e.flags);
    nw.u32(o + 4, offsetOf.get(e.key));
    nw.u32(o + 8, offsetOf.get(e.value));
    nw.u32(o + 12, 0);
    let hw = e.hwcap ?? 0n;
    if (e.hwcapName) hw = (1n << 62n) | BigInt(hwcapNames.indexOf(e.hwcapName));
    nw.u64(o + 16, hw);
  });
  for (const s of strings) nw.buf.write(s + '\0', offsetOf.get(s), 'utf8');
  if (hwcapNames.length) {
    nw.u32(extOff, 0xeaa42174);
    nw.u32(extOff + 4, 1);
    nw.u32(extOff + 8, 1); // tag: glibc-hwcaps
    nw.u32(extOff + 12, 0);
    nw.u32(extOff + 16, hwArrayOff);
    nw.u32(extOff + 20, hwcapNames.length * 4);
    hwcapNames.forEach((n, i) => nw.u32(hwArrayOff + i * 4, offsetOf.get(n)));
  }
  if (!old) return nw.buf;
  // Old table: same entries with 12-byte records and its own strings after it; the
  // new header follows at an 8-byte boundary.
  const oldTable = 16 + sorted.length * 12;
  const aligned = oldTable + ((8 - (oldTable % 8)) % 8);
  const ow = new Writer(aligned, false);
  ow.buf.write('ld.so-1.7.0', 0, 'latin1');
  ow.u32(12, sorted.length);
  // The old records point at the new strings (offsets from the end of the old table),
  // which is where ldconfig puts its shared string table.
  sorted.forEach((e, i) => {
    const o = 16 + i * 12;
    ow.u32(o, e.flags & 0xff);
    ow.u32(o + 4, aligned - oldTable + offsetOf.get(e.key));
    ow.u32(o + 8, aligned - oldTable + offsetOf.get(e.value));
  });
  return Buffer.concat([ow.buf, nw.buf]);
}

/** An old-format-only cache. */
export function buildOldLdCache(entries) {
  const sorted = [...entries].sort((x, y) => libcmp(y.key, x.key));
  const table = 16 + sorted.length * 12;
  const strings = [];
  let off = 0;
  const offsets = sorted.map((e) => {
    const k = off;
    strings.push(e.key);
    off += Buffer.byteLength(e.key) + 1;
    const v = off;
    strings.push(e.value);
    off += Buffer.byteLength(e.value) + 1;
    return [k, v];
  });
  const w = new Writer(table + off, false);
  w.buf.write('ld.so-1.7.0', 0, 'latin1');
  w.u32(12, sorted.length);
  sorted.forEach((e, i) => {
    w.u32(16 + i * 12, e.flags);
    w.u32(16 + i * 12 + 4, offsets[i][0]);
    w.u32(16 + i * 12 + 8, offsets[i][1]);
  });
  Buffer.from(strings.join('\0') + '\0').copy(w.buf, table);
  return w.buf;
}
