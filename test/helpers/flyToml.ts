/**
 * fly.toml as flyctl reads it, for the subset it uses: tables (`[a]`, `[a.b]`), arrays of tables
 * (`[[a]]`, `[[a.b]]`), and keys whose values are strings, numbers or booleans. Comments are
 * dropped first, so a line commented out (`# destination = "/data"`) is not configuration, as it
 * is not to flyctl; a regular expression over the text took it for one.
 */
export type TomlTable = { [key: string]: unknown };

/** The line without its comment: from a `#` outside a string. */
function withoutComment(line: string): string {
  let inString = false;
  for (let i = 0; i < line.length; i++) {
    if (line[i] === '\\' && inString) i++;
    else if (line[i] === '"') inString = !inString;
    else if (line[i] === '#' && !inString) return line.slice(0, i);
  }
  return line;
}

export function readFlyToml(text: string): TomlTable {
  const root: TomlTable = {};
  let table = root;
  for (const [n, raw] of text.split(/\r?\n/).entries()) {
    const line = withoutComment(raw).trim();
    if (!line) continue;
    const header = /^(\[\[?)\s*([\w.-]+)\s*\]\]?$/.exec(line);
    if (header) {
      const keys = header[2]!.split('.');
      let at = root;
      // A dotted header goes into the last table of an array of tables (`[[http_service.checks]]`).
      for (const k of keys.slice(0, -1)) {
        const v = (at[k] ??= {}) as TomlTable | TomlTable[];
        at = Array.isArray(v) ? v.at(-1)! : v;
      }
      const last = keys.at(-1)!;
      if (header[1] === '[[') {
        table = {};
        ((at[last] ??= []) as TomlTable[]).push(table);
      } else table = (at[last] ??= {}) as TomlTable;
      continue;
    }
    const kv = /^([\w-]+)\s*=\s*(.+)$/.exec(line);
    if (!kv) throw new Error(`fly.toml line ${n + 1}: cannot read ${JSON.stringify(raw)}`);
    // Basic strings, integers and booleans are written alike in TOML and JSON.
    table[kv[1]!] = JSON.parse(kv[2]!);
  }
  return root;
}
