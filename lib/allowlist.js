// The per-job egress allowlist (issue 6): grammar, host normalisation and address vetting. Pure
// functions, shared by the validation of runConfinedCommand and the egress proxy.
//
// Grammar: each entry is exactly `host:port`: no bare host, wildcard or CIDR. host is a DNS name
// (letters, digits, '-', labels of 1..63, at most 253 characters), an IPv4 literal (also the
// inet_aton shorthands such as `127.1`, `0x7f.1` or `2130706433`, normalised to the dotted quad
// they denote) or a bracketed IPv6 literal without zone id. Names are normalised: lower case, one
// trailing dot removed. port is decimal 1..65535 without sign or leading zero.
import net from 'node:net';

/** Refusal codes of an invalid allowlist (all `proxy.job-allowlist.*`). */
export const ALLOWLIST_CODES = Object.freeze({
  notArray: 'proxy.job-allowlist.not-an-array',
  empty: 'proxy.job-allowlist.empty',
  entry: 'proxy.job-allowlist.entry-invalid',
  portMissing: 'proxy.job-allowlist.port-missing',
  wildcard: 'proxy.job-allowlist.wildcard',
  cidr: 'proxy.job-allowlist.cidr',
  host: 'proxy.job-allowlist.host-invalid',
  port: 'proxy.job-allowlist.port-invalid',
});

/** Most entries one allowlist may hold. */
export const MAX_ALLOWLIST_ENTRIES = 256;

const NUMERIC_PART = /^(?:0x[0-9a-f]+|0[0-7]*|[1-9][0-9]*)$/;
const LOOKS_NUMERIC = /^(?:0x[0-9a-z]*|[0-9][0-9a-z]*)$/;
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** inet_aton: 1 to 4 parts, each decimal, octal (leading 0) or hex (0x); the last part fills the
 * remaining bytes. Returns the dotted quad, or null when `text` is not such a literal. */
function inetAton(text) {
  const parts = text.split('.');
  if (parts.length < 1 || parts.length > 4) return null;
  const values = [];
  for (const p of parts) {
    if (!NUMERIC_PART.test(p)) return null;
    const v = p.startsWith('0x') ? parseInt(p.slice(2), 16) : p.length > 1 && p[0] === '0' ? parseInt(p, 8) : Number(p);
    if (!Number.isSafeInteger(v)) return null;
    values.push(v);
  }
  const last = values.pop();
  for (const v of values) if (v > 255) return null;
  const lastBytes = 4 - values.length;
  if (last >= 2 ** (8 * lastBytes)) return null;
  const bytes = [...values];
  for (let i = lastBytes - 1; i >= 0; i--) bytes.push(Math.floor(last / 2 ** (8 * i)) % 256);
  return bytes.join('.');
}

/**
 * Normalises a host as requested (from an allowlist entry or a proxy request target).
 * Returns { host, family } (family 4, 6, or 0 for a name; host is the canonical form: lower-case
 * name without trailing dot, dotted quad, or an IPv6 literal without brackets in its shortest
 * form) or null when the host is invalid (NUL, CR/LF, whitespace, zone id, bad label...).
 */
export function normalizeHost(raw) {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > 255) return null;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0020\u007f]/.test(raw)) return null;
  if (raw.startsWith('[') || raw.includes(':')) {
    const inner = raw.startsWith('[') && raw.endsWith(']') ? raw.slice(1, -1) : raw;
    if (inner.includes('%') || !net.isIPv6(inner)) return null;
    let canonical;
    try {
      canonical = new URL(`http://[${inner}]/`).hostname.slice(1, -1);
    } catch {
      return null;
    }
    return { host: canonical, family: 6 };
  }
  let host = raw.toLowerCase();
  if (host.endsWith('.')) host = host.slice(0, -1);
  if (host === '' || host.length > 253) return null;
  const labels = host.split('.');
  // A name whose every label is numeric-looking is an IPv4 literal attempt (no TLD is numeric).
  if (labels.every((l) => LOOKS_NUMERIC.test(l))) {
    const quad = inetAton(host);
    return quad === null ? null : { host: quad, family: 4 };
  }
  if (!labels.every((l) => LABEL.test(l))) return null;
  return { host, family: 0 };
}

function refusal(code, message) {
  const err = new Error(message);
  err.code = code;
  return err;
}

/** Parses one `host:port` (an allowlist entry or a CONNECT target). Returns { host, family,
 * port } or throws an Error whose code is one of ALLOWLIST_CODES. */
export function parseHostPort(entry) {
  if (typeof entry !== 'string' || entry.length === 0 || entry.length > 300)
    throw refusal(ALLOWLIST_CODES.entry, 'an entry must be a non-empty string of at most 300 characters');
  if (entry.includes('*')) throw refusal(ALLOWLIST_CODES.wildcard, `${JSON.stringify(entry)}: wildcards are not allowed`);
  if (entry.includes('/')) throw refusal(ALLOWLIST_CODES.cidr, `${JSON.stringify(entry)}: CIDR ranges are not allowed`);
  let hostPart;
  let portPart;
  if (entry.startsWith('[')) {
    const close = entry.indexOf(']');
    if (close < 0) throw refusal(ALLOWLIST_CODES.host, `${JSON.stringify(entry)}: unterminated IPv6 literal`);
    hostPart = entry.slice(0, close + 1);
    const rest = entry.slice(close + 1);
    if (rest === '') throw refusal(ALLOWLIST_CODES.portMissing, `${JSON.stringify(entry)}: no port`);
    if (!rest.startsWith(':')) throw refusal(ALLOWLIST_CODES.entry, `${JSON.stringify(entry)}: expected :port`);
    portPart = rest.slice(1);
  } else {
    const colon = entry.lastIndexOf(':');
    if (colon < 0) throw refusal(ALLOWLIST_CODES.portMissing, `${JSON.stringify(entry)}: no port (a bare host is not allowed)`);
    hostPart = entry.slice(0, colon);
    portPart = entry.slice(colon + 1);
    if (hostPart.includes(':'))
      throw refusal(ALLOWLIST_CODES.host, `${JSON.stringify(entry)}: an IPv6 literal must be bracketed`);
  }
  if (!/^[1-9][0-9]{0,4}$/.test(portPart) || Number(portPart) > 65535)
    throw refusal(ALLOWLIST_CODES.port, `${JSON.stringify(entry)}: the port must be decimal 1..65535`);
  const host = normalizeHost(hostPart);
  if (!host) throw refusal(ALLOWLIST_CODES.host, `${JSON.stringify(entry)}: invalid host`);
  return { ...host, port: Number(portPart) };
}

/** The canonical text of a parsed entry: `host:port`, `[v6]:port`. */
export function formatHostPort({ host, family, port }) {
  return family === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * Validates and normalises an allowlist. Returns a frozen array of canonical entries (duplicates
 * removed, first occurrence order) or throws an Error whose code is one of ALLOWLIST_CODES.
 */
export function parseAllowlist(list) {
  if (!Array.isArray(list)) throw refusal(ALLOWLIST_CODES.notArray, 'allowlist must be an array');
  if (list.length === 0) throw refusal(ALLOWLIST_CODES.empty, 'allowlist is empty (use network: "off")');
  if (list.length > MAX_ALLOWLIST_ENTRIES)
    throw refusal(ALLOWLIST_CODES.entry, `allowlist has more than ${MAX_ALLOWLIST_ENTRIES} entries`);
  const out = [];
  for (const entry of list) {
    const text = formatHostPort(parseHostPort(entry));
    if (!out.includes(text)) out.push(text);
  }
  return Object.freeze(out);
}

// Addresses a proxy must never dial unless an entry names the address literally. Two lists: a
// BlockList also matches IPv4 addresses against IPv6 rules through their mapped form.
const refused4 = new net.BlockList();
const refused6 = new net.BlockList();
for (const [net4, prefix] of [
  ['0.0.0.0', 8], // unspecified, "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (169.254.169.254: cloud metadata)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
])
  refused4.addSubnet(net4, prefix, 'ipv4');
for (const [net6, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['::', 96], // IPv4-compatible (embedded)
  ['::ffff:0:0', 96], // IPv4-mapped (embedded)
  ['::ffff:0:0:0', 96], // IPv4-translated (embedded)
  ['64:ff9b::', 96], // NAT64 (embedded)
  ['64:ff9b:1::', 48], // local NAT64 (embedded)
  ['100::', 64], // discard
  ['2001::', 32], // Teredo (embedded)
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4 (embedded)
  ['fc00::', 7], // unique local (private)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
])
  refused6.addSubnet(net6, prefix, 'ipv6');

/** True when a resolved address may be dialled: not loopback, private, link-local, multicast,
 * unspecified, reserved or an embedded IPv4 form. */
export function addressAllowed(address) {
  const family = net.isIP(address);
  if (family === 0) return false;
  return family === 4 ? !refused4.check(address, 'ipv4') : !refused6.check(address, 'ipv6');
}
