import { beforeEach, describe, expect, it } from 'vitest';
import type { OpenDatabase } from '../../src/db/openDatabase.js';
import { disableSink, enableSink } from '../../src/sinks/deliveryRecords.js';
import { scratchDatabase } from '../helpers/database.js';

let database: OpenDatabase;
beforeEach(() => {
  database = scratchDatabase();
});

const T = Date.parse('2026-11-01T00:00:00Z');
const gone = (reason: string) => ({ reason, status: 410, target: 'https://hooks.example' });
/** The sink's state as it is the moment a call returns (a synchronous read of the file). */
const stateNow = () => database.sqlite.prepare('SELECT disabled_at, disabled_reason, disabled_status FROM sink_state').all();

describe('a sink disabled (410) while the operator enables it', () => {
  it('never ends enabled with a reason set: a 410 whose update found it enabled disables it again and says so', async () => {
    for (let delay = 0; delay < 4; delay++) {
      expect(await disableSink(database.db, 'crm', gone('first'), T)).toBe(true);
      // An attempt in flight answered 410 while the CLI enables the sink: its upsert finds it
      // disabled, the enable clears it, then its update of the latest answer runs.
      const disabling = disableSink(database.db, 'crm', gone('second'), T + 1000).then((disabled) => ({ disabled, state: stateNow() }));
      const enabling = async () => {
        for (let i = 0; i < delay; i++) await Promise.resolve();
        return enableSink(database.db, 'crm', T + 500);
      };
      const [seen, enabled] = await Promise.all([disabling, enabling()]);
      expect(enabled).toBe(true);
      expect(seen, `delay ${delay}`).toEqual({ disabled: true, state: [{ disabled_at: new Date(T + 1000).toISOString(), disabled_reason: 'second', disabled_status: 410 }] });
      expect(await enableSink(database.db, 'crm', T + 2000)).toBe(true);
      expect(stateNow()).toEqual([{ disabled_at: null, disabled_reason: null, disabled_status: null }]);
    }
  });

  it('still says "disabled already" when it was, keeping the first disabled_at and the latest answer', async () => {
    expect(await disableSink(database.db, 'crm', gone('first'), T)).toBe(true);
    expect(await disableSink(database.db, 'crm', gone('second'), T + 1000)).toBe(false);
    expect(stateNow()).toEqual([{ disabled_at: new Date(T).toISOString(), disabled_reason: 'second', disabled_status: 410 }]);
  });
});
