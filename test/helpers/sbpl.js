// A small reader for the Seatbelt profile language (an s-expression syntax), written for
// the tests from the language's surface syntax, independently of the builder: it turns a
// profile into nested arrays so that tests can check rules rather than substrings.

/** Parses `text` into top-level forms: arrays of symbols (strings), { str } and forms. */
export function parseSbpl(text) {
  const forms = [];
  const stack = [forms];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === ';') {
      while (i < text.length && text[i] !== '\n') i++;
    } else if (c === '(') {
      const form = [];
      stack.at(-1).push(form);
      stack.push(form);
      i++;
    } else if (c === ')') {
      if (stack.length === 1) throw new Error(`unbalanced ) at ${i}`);
      stack.pop();
      i++;
    } else if (c === '"') {
      let s = '';
      i++;
      while (i < text.length && text[i] !== '"') {
        if (text[i] === '\\') i++;
        s += text[i++];
      }
      if (i >= text.length) throw new Error('unterminated string');
      i++;
      stack.at(-1).push({ str: s });
    } else if (/\s/.test(c)) {
      i++;
    } else {
      let sym = '';
      while (i < text.length && !/[\s()";]/.test(text[i])) sym += text[i++];
      stack.at(-1).push(sym);
    }
  }
  if (stack.length !== 1) throw new Error('unbalanced (');
  return forms;
}

/** For a rule form: { action, ops, filters (forms), params (names referenced) }. */
export function describeRule(form) {
  const [action, ...rest] = form;
  const ops = rest.filter((x) => typeof x === 'string');
  const filters = rest.filter((x) => Array.isArray(x));
  return { action, ops, filters, params: paramsIn(filters) };
}

/** Every (param "NAME") name inside `x`, in order. */
export function paramsIn(x) {
  const out = [];
  const walk = (y) => {
    if (!Array.isArray(y)) return;
    if (y[0] === 'param' && y[1]?.str !== undefined) out.push(y[1].str);
    else y.forEach(walk);
  };
  walk(x);
  return out;
}

/** Every string literal inside `x`. */
export function stringsIn(x) {
  const out = [];
  const walk = (y) => {
    if (Array.isArray(y)) y.forEach(walk);
    else if (y && typeof y === 'object' && 'str' in y) out.push(y.str);
  };
  walk(x);
  return out;
}
