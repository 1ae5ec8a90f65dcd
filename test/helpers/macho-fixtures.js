// Builds Mach-O files byte by byte for the reader's tests, from the format's published
// layout (mach-o/loader.h, mach-o/fat.h), independently of native/macho.c.

export const MH_MAGIC = 0xfeedface;
export const MH_MAGIC_64 = 0xfeedfacf;
export const FAT_MAGIC = 0xcafebabe;
export const FAT_MAGIC_64 = 0xcafebabf;

export const CPU = Object.freeze({
  arm64: { type: 0x0100000c, subtype: 0 },
  arm64e: { type: 0x0100000c, subtype: 2 },
  x86_64: { type: 0x01000007, subtype: 3 },
  x86_64h: { type: 0x01000007, subtype: 8 },
  arm: { type: 12, subtype: 9 },
  i386: { type: 7, subtype: 3 },
});

export const MH_EXECUTE = 2;
export const MH_DYLIB = 6;
export const MH_BUNDLE = 8;

const REQ = 0x80000000;
export const LC = Object.freeze({
  LOAD_DYLIB: 0xc,
  ID_DYLIB: 0xd,
  LOAD_DYLINKER: 0xe,
  UUID: 0x1b,
  LOAD_WEAK_DYLIB: (0x18 | REQ) >>> 0,
  RPATH: (0x1c | REQ) >>> 0,
  REEXPORT_DYLIB: (0x1f | REQ) >>> 0,
  LAZY_LOAD_DYLIB: 0x20,
  LOAD_UPWARD_DYLIB: (0x23 | REQ) >>> 0,
  DYLD_ENVIRONMENT: 0x27,
  MAIN: (0x28 | REQ) >>> 0,
  UNKNOWN_REQ: (0x7e | REQ) >>> 0,
});

const pad8 = (n) => (n + 7) & ~7;

/** dylib_command: cmd, cmdsize, name.offset = 24, timestamp, current, compatibility. */
export function dylibCommand(cmd, name, { nameOffset = 24, cmdsize, terminate = true } = {}) {
  const str = Buffer.from(name, 'utf8');
  const size = cmdsize ?? pad8(24 + str.length + 1);
  const b = Buffer.alloc(Math.max(size, 24 + str.length + (terminate ? 1 : 0)));
  b.writeUInt32LE(cmd, 0);
  b.writeUInt32LE(size, 4);
  b.writeUInt32LE(nameOffset, 8);
  b.writeUInt32LE(2, 12);
  b.writeUInt32LE(0x10000, 16);
  b.writeUInt32LE(0x10000, 20);
  str.copy(b, 24);
  if (!terminate) b.fill(0x41, 24 + str.length);
  return b;
}

/** rpath_command / dylinker_command: cmd, cmdsize, offset = 12, then the string. */
export function stringCommand(cmd, value, { offset = 12, cmdsize, raw } = {}) {
  const str = raw ?? Buffer.from(value, 'utf8');
  const size = cmdsize ?? pad8(12 + str.length + 1);
  const b = Buffer.alloc(Math.max(size, 12 + str.length + 1));
  b.writeUInt32LE(cmd, 0);
  b.writeUInt32LE(size, 4);
  b.writeUInt32LE(offset, 8);
  str.copy(b, 12);
  return b;
}

/** Any command with an opaque body of `size` bytes (cmdsize = size). */
export function rawCommand(cmd, size) {
  const b = Buffer.alloc(Math.max(size, 8));
  b.writeUInt32LE(cmd, 0);
  b.writeUInt32LE(size, 4);
  return b;
}

/** A thin 64-bit (or, with magic MH_MAGIC, 32-bit-labelled) Mach-O file. */
export function thin({
  cpu = CPU.arm64,
  filetype = MH_EXECUTE,
  commands = [],
  ncmds,
  sizeofcmds,
  magic = MH_MAGIC_64,
  bigEndian = false,
  tail = 64,
} = {}) {
  const body = Buffer.concat(commands);
  const h = Buffer.alloc(32);
  const w = (v, o) => (bigEndian ? h.writeUInt32BE(v >>> 0, o) : h.writeUInt32LE(v >>> 0, o));
  w(magic, 0);
  w(cpu.type, 4);
  w(cpu.subtype, 8);
  w(filetype, 12);
  w(ncmds ?? commands.length, 16);
  w(sizeofcmds ?? body.length, 20);
  w(0x00200085, 24);
  return Buffer.concat([h, body, Buffer.alloc(tail, 0xcc)]);
}

/**
 * A fat file: slices [{ cpu, bytes, offset?, size? }] placed at 16-byte-aligned offsets
 * after the header unless given; returns { bytes, offsets }.
 */
export function fat({ slices, is64 = false, nfat, align = 16 }) {
  const archSize = is64 ? 32 : 20;
  const headerSize = 8 + slices.length * archSize;
  let cursor = headerSize;
  const placed = slices.map((s) => {
    cursor = Math.ceil(cursor / align) * align;
    const offset = s.offset ?? cursor;
    cursor = offset + s.bytes.length;
    return { ...s, offset };
  });
  const total = Math.max(cursor, headerSize);
  const b = Buffer.alloc(total);
  b.writeUInt32BE(is64 ? FAT_MAGIC_64 : FAT_MAGIC, 0);
  b.writeUInt32BE(nfat ?? slices.length, 4);
  placed.forEach((s, i) => {
    const o = 8 + i * archSize;
    b.writeUInt32BE(s.cpu.type >>> 0, o);
    b.writeUInt32BE(s.cpu.subtype >>> 0, o + 4);
    if (is64) {
      b.writeBigUInt64BE(BigInt(s.offset), o + 8);
      b.writeBigUInt64BE(BigInt(s.size ?? s.bytes.length), o + 16);
      b.writeUInt32BE(4, o + 24);
    } else {
      b.writeUInt32BE(s.offset >>> 0, o + 8);
      b.writeUInt32BE((s.size ?? s.bytes.length) >>> 0, o + 12);
      b.writeUInt32BE(4, o + 16);
    }
    if (s.offset + s.bytes.length <= total) s.bytes.copy(b, s.offset);
  });
  return { bytes: b, offsets: placed.map((s) => s.offset) };
}

/** A dylib whose LC_ID_DYLIB is `id`, with dependencies [{ kind, name }] and rpaths. */
export function dylib({ cpu = CPU.arm64, id, deps = [], rpaths = [], filetype = MH_DYLIB }) {
  const commands = [];
  if (id) commands.push(dylibCommand(LC.ID_DYLIB, id));
  for (const r of rpaths) commands.push(stringCommand(LC.RPATH, r));
  for (const d of deps) commands.push(dylibCommand(kindToCmd(d.kind ?? 'load'), d.name));
  return thin({ cpu, filetype, commands });
}

/** A main executable with LC_LOAD_DYLINKER /usr/lib/dyld, dependencies and rpaths. */
export function executable({ cpu = CPU.arm64, deps = [], rpaths = [], dylinker = '/usr/lib/dyld', extra = [] }) {
  const commands = [stringCommand(LC.LOAD_DYLINKER, dylinker), rawCommand(LC.MAIN, 24)];
  for (const r of rpaths) commands.push(stringCommand(LC.RPATH, r));
  for (const d of deps) commands.push(dylibCommand(kindToCmd(d.kind ?? 'load'), d.name));
  commands.push(...extra);
  return thin({ cpu, filetype: MH_EXECUTE, commands });
}

export function kindToCmd(kind) {
  switch (kind) {
    case 'load':
      return LC.LOAD_DYLIB;
    case 'weak':
      return LC.LOAD_WEAK_DYLIB;
    case 'reexport':
      return LC.REEXPORT_DYLIB;
    case 'upward':
      return LC.LOAD_UPWARD_DYLIB;
    default:
      throw new Error(`unknown kind ${kind}`);
  }
}
