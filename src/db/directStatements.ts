import type BetterSqlite3 from 'better-sqlite3';
import type { Transaction } from 'kysely';
import type { Database } from './schema.js';
import { oncePerConnection } from './sqliteHelpers.js';

type Params = readonly unknown[] | [Record<string, unknown>];

/**
 * Fixed SQL run as prepared better-sqlite3 statements on kysely's own connection, for the
 * processing layer's hot statements, inside the transactions kysely holds.
 *
 * Processing from a backlog spent about half its CPU in kysely building, freezing and compiling
 * the same dozen queries for every event, and about a quarter running them (bench/README.md,
 * "Fifteenth round"). Each text here is prepared once per connection; a call binds and runs it.
 *
 * Only inside a transaction that this caller holds through kysely (immediateTransaction, or
 * db.transaction().execute): the connection's mutex keeps kysely's other queries out meanwhile,
 * and better-sqlite3 runs each statement to completion synchronously, so nothing interleaves.
 * The caller's Transaction is asked for as its proof (the type system then keeps a caller
 * without one out), and a statement run while the connection is in no transaction at all is
 * refused with an error. What neither can tell is whose transaction is open: a flow that
 * smuggled statements out of its transaction's callback could write into another flow's.
 * Only fixed texts belong here (no IN lists of varying length): the cache is not bounded.
 */
export interface DirectStatements {
  get<T>(sql: string, ...params: Params): T | undefined;
  all<T>(sql: string, ...params: Params): T[];
  run(sql: string, ...params: Params): BetterSqlite3.RunResult;
}

const statementsOn = oncePerConnection((sqlite): DirectStatements => {
  const cache = new Map<string, BetterSqlite3.Statement>();
  const stmt = (sql: string): BetterSqlite3.Statement => {
    if (!sqlite.inTransaction) throw new Error(`a processing statement ran outside a transaction: ${sql.slice(0, 60)}`);
    let s = cache.get(sql);
    if (!s) {
      s = sqlite.prepare(sql);
      cache.set(sql, s);
    }
    return s;
  };
  return {
    get: <T>(sql: string, ...params: Params) => stmt(sql).get(...params) as T | undefined,
    all: <T>(sql: string, ...params: Params) => stmt(sql).all(...params) as T[],
    run: (sql: string, ...params: Params) => stmt(sql).run(...params),
  };
});

export function directStatements(sqlite: BetterSqlite3.Database, _held: Transaction<Database>): DirectStatements {
  return statementsOn(sqlite);
}
