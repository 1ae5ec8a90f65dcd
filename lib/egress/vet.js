// Classification of the addresses the proxy may dial. Pure functions.
//
// A name on the allowlist may resolve anywhere, including to the host itself, the cloud
// metadata service (169.254.169.254) or the private network behind the host. So every resolved
// address is classified, and only public unicast is dialled. IPv6 forms that embed an IPv4
// address (mapped, compatible, SIIT) are refused outright; NAT64, 6to4 and Teredo are refused
// when the IPv4 address they carry is refused. IPv6 outside global unicast 2000::/3 is refused.
// An entry that names an IP literally allows exactly that address (and only for that entry).
import { parseAddress, sameBytes } from './ip.js';

// [first byte pattern as prefix bytes, prefix length, category], most specific first.
const V4_RANGES = [
  [[255, 255, 255, 255], 32, 'broadcast'],
  [[0, 0, 0, 0], 8, 'unspecified'],
  [[10, 0, 0, 0], 8, 'private'],
  [[100, 64, 0, 0], 10, 'shared'],
  [[127, 0, 0, 0], 8, 'loopback'],
  [[169, 254, 0, 0], 16, 'link-local'],
  [[172, 16, 0, 0], 12, 'private'],
  [[192, 0, 0, 0], 24, 'reserved'],
  [[192, 0, 2, 0], 24, 'documentation'],
  [[192, 88, 99, 0], 24, 'reserved'],
  [[192, 168, 0, 0], 16, 'private'],
  [[198, 18, 0, 0], 15, 'benchmarking'],
  [[198, 51, 100, 0], 24, 'documentation'],
  [[203, 0, 113, 0], 24, 'documentation'],
  [[224, 0, 0, 0], 4, 'multicast'],
  [[240, 0, 0, 0], 4, 'reserved'],
];

function inPrefix(bytes, prefix, bits) {
  for (let i = 0; i < bytes.length && bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((bytes[i] & mask) !== ((prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}

/** Category of 4 IPv4 bytes: 'public' or why it is refused. */
export function classifyIPv4(bytes) {
  for (const [prefix, bits, category] of V4_RANGES) if (inPrefix(bytes, prefix, bits)) return category;
  return 'public';
}

const hex = (text) => {
  const out = [];
  for (const w of text.split(':')) out.push(parseInt(w, 16) >> 8, parseInt(w, 16) & 0xff);
  return out;
};
// Prefixes are written as their leading 16-bit groups.
const V6_RANGES = [
  [hex('ff00'), 8, 'multicast'],
  [hex('fe80'), 10, 'link-local'],
  [hex('fec0'), 10, 'site-local'],
  [hex('fc00'), 7, 'private'],
  [hex('2001:0db8'), 32, 'documentation'],
  [hex('3fff'), 20, 'documentation'],
  [hex('2001:0002:0000'), 48, 'benchmarking'],
  [hex('0100:0000:0000:0000'), 64, 'reserved'],
  [hex('0064:ff9b:0001'), 48, 'reserved'],
  [hex('5f00'), 16, 'reserved'],
];

function embeddedAt(bytes, offset, xor = 0) {
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) out[i] = bytes[offset + i] ^ xor;
  return out;
}

/** Category of 16 IPv6 bytes: 'public' or why it is refused. */
export function classifyIPv6(bytes) {
  const zeros = (from, to) => bytes.slice(from, to).every((b) => b === 0);
  if (zeros(0, 15) && bytes[15] === 0) return 'unspecified';
  if (zeros(0, 15) && bytes[15] === 1) return 'loopback';
  if (zeros(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) return 'ipv4-mapped';
  if (zeros(0, 8) && bytes[8] === 0xff && bytes[9] === 0xff && zeros(10, 12)) return 'ipv4-mapped';
  if (zeros(0, 12)) return 'ipv4-compatible';
  for (const [prefix, bits, category] of V6_RANGES) if (inPrefix(bytes, prefix, bits)) return category;
  // NAT64 well-known prefix 64:ff9b::/96 carries the IPv4 address in the last 32 bits.
  if (inPrefix(bytes, hex('0064:ff9b:0000:0000:0000:0000'), 96)) {
    return classifyIPv4(embeddedAt(bytes, 12)) === 'public' ? 'public' : 'nat64';
  }
  // 6to4 2002::/16 carries it in bits 16-47.
  if (inPrefix(bytes, hex('2002'), 16)) {
    return classifyIPv4(embeddedAt(bytes, 2)) === 'public' ? 'public' : '6to4';
  }
  // Teredo 2001::/32: the server in bits 32-63, the client inverted in bits 96-127.
  if (inPrefix(bytes, hex('2001:0000'), 32)) {
    const server = classifyIPv4(embeddedAt(bytes, 4));
    const client = classifyIPv4(embeddedAt(bytes, 12, 0xff));
    return server === 'public' && client === 'public' ? 'public' : 'teredo';
  }
  // The rest of the IETF protocol assignments 2001::/23 (ORCHID, AMT, ...) is not for us.
  if (inPrefix(bytes, hex('2001:0000'), 23)) return 'reserved';
  if (!inPrefix(bytes, hex('2000'), 3)) return 'reserved';
  return 'public';
}

/**
 * Classifies an address as text (as dns.lookup returns it).
 * Returns { family: 4|6|null, category } where category is 'public', 'invalid' or the reason
 * the address is refused ('loopback', 'private', 'link-local', ...).
 */
export function classifyAddress(text) {
  const a = parseAddress(text);
  if (!a) return { family: null, category: 'invalid' };
  return { family: a.family, category: a.family === 4 ? classifyIPv4(a.bytes) : classifyIPv6(a.bytes) };
}

/**
 * Decides whether the proxy may dial `address` for `entry` (a normalised allowlist entry
 * from parseAllowlist, or null). Returns { allowed, category }: an entry naming an IP
 * literally allows that exact address whatever its category ('named-literally'); otherwise
 * only 'public' addresses are allowed.
 */
export function vetAddress(address, entry) {
  const a = parseAddress(address);
  if (!a) return { allowed: false, category: 'invalid' };
  const literal = entry && entry.literal ? parseAddress(entry.host) : null;
  if (literal && sameBytes(literal.bytes, a.bytes)) return { allowed: true, category: 'named-literally' };
  const category = a.family === 4 ? classifyIPv4(a.bytes) : classifyIPv6(a.bytes);
  return { allowed: category === 'public', category };
}
