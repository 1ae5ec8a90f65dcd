// IP literal parsing and formatting for the egress allowlist and the proxy. Pure functions.
//
// IPv4 follows inet_aton, because that is what the C library (and so the program being
// confined) makes of a name such as `127.1`, `0x7f.1`, `2130706433` or `0177.0.0.1`: one to four
// parts, each decimal, octal (leading 0) or hexadecimal (0x), the last part filling the bytes
// the earlier ones left. Matching and vetting must see the address the name denotes, not its
// spelling. IPv6 is RFC 4291 text (with an optional trailing dotted quad); zone ids are refused.

const IPV4_PART = /^(?:0x[0-9a-f]*|[0-9]+)$/;

/** True when the last dot-separated label looks numeric: such a host must be an IPv4 address. */
export function looksNumeric(host) {
  const labels = host.split('.');
  return IPV4_PART.test(labels[labels.length - 1].toLowerCase());
}

function partValue(part) {
  const p = part.toLowerCase();
  if (!IPV4_PART.test(p)) return null;
  if (p.startsWith('0x')) return p.length === 2 ? null : parseInt(p.slice(2), 16);
  if (p.length > 1 && p.startsWith('0')) return /^[0-7]+$/.test(p) ? parseInt(p, 8) : null;
  return parseInt(p, 10);
}

/**
 * inet_aton semantics: returns the 4 bytes (Uint8Array) the text denotes, or null.
 * `1.2.3` is 1.2.0.3, `1.2` is 1.0.0.2, `16909060` is 1.2.3.4.
 */
export function parseIPv4(text) {
  if (typeof text !== 'string' || text.length === 0 || text.length > 64) return null;
  const parts = text.split('.');
  if (parts.length > 4) return null;
  const values = [];
  for (const part of parts) {
    const v = partValue(part);
    if (v === null || !Number.isSafeInteger(v)) return null;
    values.push(v);
  }
  const last = values.pop();
  for (const v of values) if (v > 255) return null;
  if (last >= 256 ** (4 - values.length)) return null;
  const bytes = new Uint8Array(4);
  values.forEach((v, i) => {
    bytes[i] = v;
  });
  let rest = last;
  for (let i = 3; i >= values.length; i--) {
    bytes[i] = rest % 256;
    rest = Math.floor(rest / 256);
  }
  return bytes;
}

/** Strict dotted quad (four decimal parts, no leading zeros), as inside IPv6 text. */
function parseDottedQuad(text) {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  const bytes = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    if (!/^(?:0|[1-9][0-9]{0,2})$/.test(parts[i])) return null;
    const v = Number(parts[i]);
    if (v > 255) return null;
    bytes[i] = v;
  }
  return bytes;
}

/** RFC 4291 text to 16 bytes (Uint8Array), or null. Zone ids (`%eth0`) are not accepted. */
export function parseIPv6(text) {
  if (typeof text !== 'string' || text.length === 0 || text.length > 45) return null;
  if (!/^[0-9a-fA-F:.]+$/.test(text)) return null;
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const groupsOf = (s) => (s === '' ? [] : s.split(':'));
  const head = groupsOf(halves[0]);
  const tail = halves.length === 2 ? groupsOf(halves[1]) : [];
  const words = [];
  const all = halves.length === 2 ? [head, tail] : [head];
  const parsed = [];
  for (let h = 0; h < all.length; h++) {
    const list = [];
    for (let i = 0; i < all[h].length; i++) {
      const g = all[h][i];
      const isLast = h === all.length - 1 && i === all[h].length - 1;
      if (isLast && g.includes('.')) {
        const quad = parseDottedQuad(g);
        if (!quad) return null;
        list.push((quad[0] << 8) | quad[1], (quad[2] << 8) | quad[3]);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
        list.push(parseInt(g, 16));
      }
    }
    parsed.push(list);
  }
  if (halves.length === 2) {
    const fill = 8 - parsed[0].length - parsed[1].length;
    if (fill < 1) return null;
    words.push(...parsed[0], ...new Array(fill).fill(0), ...parsed[1]);
  } else {
    if (parsed[0].length !== 8) return null;
    words.push(...parsed[0]);
  }
  const bytes = new Uint8Array(16);
  words.forEach((w, i) => {
    bytes[2 * i] = w >> 8;
    bytes[2 * i + 1] = w & 0xff;
  });
  return bytes;
}

export function formatIPv4(bytes) {
  return Array.from(bytes).join('.');
}

/** RFC 5952 text: lower case, no leading zeros, the longest run (>= 2) of zero groups as `::`. */
export function formatIPv6(bytes) {
  const words = [];
  for (let i = 0; i < 16; i += 2) words.push((bytes[i] << 8) | bytes[i + 1]);
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (ws) => ws.map((w) => w.toString(16)).join(':');
  if (bestLen < 2) return hex(words);
  return `${hex(words.slice(0, bestStart))}::${hex(words.slice(bestStart + bestLen))}`;
}

/** Parses an address as Node's dns/net report it: { family: 4|6, bytes } or null. */
export function parseAddress(text) {
  if (typeof text !== 'string') return null;
  if (text.includes(':')) {
    const bytes = parseIPv6(text);
    return bytes ? { family: 6, bytes } : null;
  }
  const bytes = parseDottedQuad(text);
  return bytes ? { family: 4, bytes } : null;
}

export function sameBytes(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
