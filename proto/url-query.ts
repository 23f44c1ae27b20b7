// The agentIdentifiers header is a URL query, and the Go agent and proxy-server read it with Go's
// url.ParseQuery, which is stricter than URLSearchParams: both sides here read it the same way.

/** url.QueryUnescape: `+` is a space, and a bad escape is an error (URLSearchParams would let it pass). */
function queryUnescape(text: string): string {
  const bad = /%(?![0-9A-Fa-f]{2})(.{0,2})/s.exec(text);
  if (bad) throw new Error(`invalid URL escape "%${bad[1]}"`);
  const bytes = Buffer.from(
    text.replace(/\+/g, ' ').replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))),
    'latin1',
  );
  return bytes.toString('utf8');
}

/** url.ParseQuery: repeated keys accumulate in order; a `;` is an error since Go 1.17. */
export function parseQueryString(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const part of text.split('&')) {
    if (part === '') continue;
    if (part.includes(';')) throw new Error('invalid semicolon separator in query');
    const eq = part.indexOf('=');
    const key = queryUnescape(eq === -1 ? part : part.slice(0, eq));
    const value = queryUnescape(eq === -1 ? '' : part.slice(eq + 1));
    out.set(key, [...(out.get(key) ?? []), value]);
  }
  return out;
}
