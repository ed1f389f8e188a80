const REDACTED = '[redacted]';

/**
 * What looks like a credential in the service's text: a key of spec 5's form
 * (`sk-<segment>.<segment>`), a `whsec_` signing secret (spec 2.11), or a token after `Bearer` or
 * `Basic` (8 characters or more, a digit among them: not "Bearer token"). The text may name
 * another key than the one a request sent (the key it replaced after a rotation, a colleague's):
 * none goes to a log line, a `last_error` column or a CLI command's error (a CI log). A key's
 * first segment is a short name (at most 100 characters here): unbounded, each `sk-` of a long word was a match attempt that ran to the
 * word's end looking for its dot, in time that grew with the square of the text (300 KB of `sk-`
 * in an error detail held the event loop 30 s; a body may have 5 MB). Not a key: an `sk-` inside a
 * URL or a longer name (after `/`, `.`, `@` or `-`: `https://sk-eu.hiring.example`, a redirect's
 * Location, came out `https://[redacted]`), nor one whose second segment is shorter than 8
 * characters (a locale `sk-SK.UTF-8`, a version `sk-1.2`).
 */
const CREDENTIAL = /(?<![\w/.@-])sk-[^\s."'<>,;()[\]{}]{1,100}\.[^\s"'<>,;()[\]{}]{8,}|\bwhsec_[A-Za-z0-9+/=]+|\b(Bearer|Basic) +(?=[^\s"'<>,;()[\]{}]*\d)[^\s"'<>,;()[\]{}]{8,}/g;

/**
 * `text` with every credential CREDENTIAL finds replaced by `[redacted]` (`Bearer [redacted]` for a
 * token after its scheme), and first `ownKey`, the key the request sent, wherever it stands (a
 * proxy echoing the Authorization header; inside a URL, where CREDENTIAL leaves an `sk-` alone).
 */
export function redactCredentials(text: string, ownKey = ''): string {
  const withoutOwn = ownKey !== '' && text.includes(ownKey) ? text.split(ownKey).join(REDACTED) : text;
  return withoutOwn.replace(CREDENTIAL, (_m, scheme?: string) => (scheme === undefined ? REDACTED : `${scheme} ${REDACTED}`));
}
