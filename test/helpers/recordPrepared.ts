import type BetterSqlite3 from 'better-sqlite3';

/** Every SQL text prepared on this connection from now on, in order (kysely's statements too). */
export function recordPrepared(sqlite: BetterSqlite3.Database): string[] {
  const prepared: string[] = [];
  const prepare = sqlite.prepare.bind(sqlite);
  sqlite.prepare = ((source: string) => {
    prepared.push(source);
    return prepare(source);
  }) as typeof sqlite.prepare;
  return prepared;
}
