// The per-job allowlist grammar: exact `host:port` entries, nothing broader.
//
// An entry is a DNS name or an IP literal, a colon and a decimal port (1-65535, no sign, no
// leading zero). IPv6 literals are bracketed (`[2001:db8::1]:443`). There is no bare host,
// wildcard, CIDR, scheme, path or userinfo: each would widen what one entry reaches. Names are
// normalised before matching (lower case, one trailing dot removed) and anything a resolver
// could read differently from us is refused (non-ASCII/IDNA, NUL, CR, LF, space, zone ids).
// A host whose last label is numeric is an IPv4 address in inet_aton form (`127.1`,
// `0x7f.1`, `2130706433`, `0177.0.0.1`) and is matched as the address it denotes.
//
// The same parser normalises the targets the proxy receives, so an entry and a request are
// compared in one canonical form.
import { ConfinementError } from '../errors.js';
import { formatIPv4, formatIPv6, looksNumeric, parseIPv4, parseIPv6 } from './ip.js';

export const MAX_ENTRIES = 1024;
const MAX_TEXT = 300;
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

function fail(reason) {
  return { ok: false, reason };
}

/**
 * Normalises a host (no port): { ok: true, host, literal, bytes } or { ok: false, reason }.
 * `bracketed` says the host came from `[...]`, where only IPv6 is allowed.
 */
export function normaliseHost(raw, bracketed = false) {
  if (bracketed) {
    if (raw.includes('%')) return fail('zone-id');
    const bytes = parseIPv6(raw);
    if (!bytes) return fail('invalid-host');
    return { ok: true, host: formatIPv6(bytes), literal: 'ipv6', bytes };
  }
  let host = raw.toLowerCase();
  if (host.endsWith('.')) host = host.slice(0, -1);
  if (host.length === 0 || host.length > 253) return fail('invalid-host');
  if (host.includes('%')) return fail('zone-id');
  if (looksNumeric(host)) {
    const bytes = parseIPv4(host);
    if (!bytes) return fail('invalid-host');
    return { ok: true, host: formatIPv4(bytes), literal: 'ipv4', bytes };
  }
  for (const label of host.split('.')) if (!LABEL.test(label)) return fail('invalid-host');
  return { ok: true, host, literal: null, bytes: null };
}

/** A decimal port 1-65535 without sign or leading zero, or null. */
export function parsePort(text) {
  if (!/^[1-9][0-9]{0,4}$/.test(text)) return null;
  const port = Number(text);
  return port <= 65535 ? port : null;
}

/**
 * Parses one `host:port`: { ok: true, host, port, literal, bytes } or { ok: false, reason }
 * where reason names the first rule broken (the suffix of a `proxy.job-allowlist.*` code).
 */
export function parseHostPort(text) {
  if (typeof text !== 'string') return fail('invalid-type');
  if (text.length === 0) return fail('empty');
  if (text.length > MAX_TEXT) return fail('too-long');
  // Control characters and spaces: a resolver or log line could split or truncate on them.
  if (/[\x00-\x20\x7f]/.test(text)) return fail('control-character');
  // Non-ASCII: IDNA mappings differ between resolvers, so a Unicode name is refused.
  if (/[^\x00-\x7f]/.test(text)) return fail('non-ascii');
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) return fail('scheme');
  if (text.includes('@')) return fail('userinfo');
  if (text.includes('*')) return fail('wildcard');
  if (/\/[0-9]{1,3}(?::[^/]*)?$/.test(text)) return fail('cidr');
  if (/[/?#\\]/.test(text)) return fail('path');
  let hostText;
  let portText;
  let bracketed = false;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) return fail('invalid-host');
    hostText = text.slice(1, close);
    const rest = text.slice(close + 1);
    if (rest === '') return fail('bare-host');
    if (!rest.startsWith(':')) return fail('invalid-host');
    portText = rest.slice(1);
    bracketed = true;
  } else {
    const colons = text.split(':').length - 1;
    if (colons === 0) return fail('bare-host');
    if (colons > 1) {
      if (text.includes('%')) return fail('zone-id');
      return fail(parseIPv6(text) ? 'ipv6-unbracketed' : 'invalid-host');
    }
    const colon = text.indexOf(':');
    hostText = text.slice(0, colon);
    portText = text.slice(colon + 1);
  }
  const port = parsePort(portText);
  if (port === null) return fail('invalid-port');
  const host = normaliseHost(hostText, bracketed);
  if (!host.ok) return host;
  return { ok: true, host: host.host, port, literal: host.literal, bytes: host.bytes };
}

/** The canonical text of an entry: `host:port` or `[v6]:port`. */
export function entryKey(host, port) {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * Validates and normalises an allowlist. Throws ConfinementError `proxy.job-allowlist.<reason>`
 * on the first invalid entry. Returns a frozen list of frozen { host, port, literal }, without
 * duplicates, in first-seen order.
 */
export function parseAllowlist(entries) {
  if (!Array.isArray(entries)) {
    throw new ConfinementError('proxy.job-allowlist.invalid-type', 'network.allowlist must be an array of "host:port" strings');
  }
  if (entries.length > MAX_ENTRIES) {
    throw new ConfinementError('proxy.job-allowlist.too-many', `network.allowlist has more than ${MAX_ENTRIES} entries`);
  }
  const seen = new Set();
  const out = [];
  for (let i = 0; i < entries.length; i++) {
    const r = parseHostPort(entries[i]);
    if (!r.ok) {
      const shown = typeof entries[i] === 'string' ? JSON.stringify(entries[i].slice(0, 80)) : typeof entries[i];
      throw new ConfinementError(`proxy.job-allowlist.${r.reason}`, `network.allowlist[${i}] ${shown} is not an exact host:port entry (${r.reason})`);
    }
    const key = entryKey(r.host, r.port);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(Object.freeze({ host: r.host, port: r.port, literal: r.literal }));
  }
  const list = Object.freeze(out);
  parsed.add(list);
  return list;
}

const parsed = new WeakSet();

/** True for a list returned by parseAllowlist (so it need not be validated again). */
export function isParsedAllowlist(list) {
  return parsed.has(list);
}

/** The entry matching a normalised host and port exactly, or null. */
export function findEntry(allowlist, host, port) {
  for (const e of allowlist) if (e.host === host && e.port === port) return e;
  return null;
}
