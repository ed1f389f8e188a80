/**
 * A Host (with an optional port) whose last label the URL parser reads as a number, or with an
 * `xn--` label: the parser rewrites such a host (`127.1` is 127.0.0.1) or refuses it (`999.1.1.1`;
 * `xn--a`, no punycode, on Node.js 22, whose parser checks the label: Node.js 24's keeps it as it
 * is, and so does this check there). @hono/node-server 1.x built every URL with `new URL()` and
 * refused a host it rewrote or refused; 2.x makes the URL of a lower-case `[a-z0-9._-]` host by
 * concatenation, so these came through to the app, in a URL `new URL()` cannot read (the
 * sandbox's pagination answered 500) or with another host than the parser's. Only these hosts are parsed here; a dotted quad, the
 * common one, is not.
 */
const PARSER_REWRITES_HOST = /(?:^|\.)xn--|(?:^|\.)(?:\d+|0x[0-9a-f]*)\.?(?::\d*)?$/i;
const DOTTED_QUAD = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?::\d*)?$/;

/** Whether `host` is one the URL parser refuses or reads as another host (see PARSER_REWRITES_HOST). */
export function parserRewritesHost(host: string | undefined): boolean {
  if (!host || DOTTED_QUAD.test(host) || !PARSER_REWRITES_HOST.test(host)) return false;
  try {
    return new URL(`http://${host}/`).hostname !== host.replace(/:\d*$/, '').toLowerCase();
  } catch {
    return true;
  }
}
