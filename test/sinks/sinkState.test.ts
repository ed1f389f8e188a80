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
      // Each round later than the last (an enable stamped after an attempt was sent wins over its 410).
      const t = T + delay * 10_000;
      expect(await disableSink(database.db, 'crm', gone('first'), t)).toBe(true);
      // An attempt in flight answered 410 while the CLI enables the sink: its upsert finds it
      // disabled, the enable clears it, then its update of the latest answer runs. The attempt
      // was sent (t + 1000, by default its `now`) after the enable's stamp (t + 500): it stands.
      const disabling = disableSink(database.db, 'crm', gone('second'), t + 1000).then((disabled) => ({ disabled, state: stateNow() }));
      const enabling = async () => {
        for (let i = 0; i < delay; i++) await Promise.resolve();
        return enableSink(database.db, 'crm', t + 500);
      };
      const [seen, enabled] = await Promise.all([disabling, enabling()]);
      expect(enabled).toBe(true);
      expect(seen, `delay ${delay}`).toEqual({ disabled: true, state: [{ disabled_at: new Date(t + 1000).toISOString(), disabled_reason: 'second', disabled_status: 410 }] });
      expect(await enableSink(database.db, 'crm', t + 2000)).toBe(true);
      expect(stateNow()).toEqual([{ disabled_at: null, disabled_reason: null, disabled_status: null }]);
    }
  });

  it('still says "disabled already" when it was, keeping the first disabled_at and the latest answer', async () => {
    expect(await disableSink(database.db, 'crm', gone('first'), T)).toBe(true);
    expect(await disableSink(database.db, 'crm', gone('second'), T + 1000)).toBe(false);
    expect(stateNow()).toEqual([{ disabled_at: new Date(T).toISOString(), disabled_reason: 'second', disabled_status: 410 }]);
  });

  it('an enable stamped after the failed attempt was sent wins, whichever of the 410\'s statements it lands between', async () => {
    for (let delay = 0; delay < 4; delay++) {
      const t = T + delay * 10_000;
      expect(await disableSink(database.db, 'crm', gone('first'), t)).toBe(true);
      // Sent at t + 100, before the enable at t + 500; answered 410 (and recorded) at t + 1000.
      const disabling = disableSink(database.db, 'crm', gone('second'), t + 1000, t + 100);
      const enabling = async () => {
        for (let i = 0; i < delay; i++) await Promise.resolve();
        return enableSink(database.db, 'crm', t + 500);
      };
      const [disabled, enabled] = await Promise.all([disabling, enabling()]);
      expect({ disabled, enabled }, `delay ${delay}`).toEqual({ disabled: false, enabled: true });
      expect(stateNow(), `delay ${delay}`).toEqual([{ disabled_at: null, disabled_reason: null, disabled_status: null }]);
      // A 410 to an attempt sent after the enable disables it again.
      expect(await disableSink(database.db, 'crm', gone('third'), t + 2000, t + 1500)).toBe(true);
      expect(await enableSink(database.db, 'crm', t + 3000)).toBe(true);
    }
  });
});
