import { describe, expect, it } from 'vitest';
import { MAX_INPUT, redactPersonalData } from '../../src/util/redactPersonalData.js';

describe('redactPersonalData (text from the service, on its way to logs and last_error)', () => {
  it.each([
    ['candidate cand.leak@example.com, +15559998888', 'candidate [email], [phone]'],
    ['jürgen.müller@example.de wrote', '[email] wrote'],
    ['call +44 7700 900123.', 'call [phone].'],
    ['+1 (555) 999-8888 / 0044 7700 900123: invalid', '[phone] / [phone]: invalid'],
    ['(555) 010-1234', '[phone]'],
    ['+1-555-123-4567x89 or 555 123 4567 ext. 12', '[phone] or [phone]'],
    ['01 23 45 67 89', '[phone]'],
    ['tel:+15551234567, Phone:555-123-4567', 'tel:[phone], Phone:[phone]'],
    ['call tel:+44 20 7946 0958 now', 'call tel:[phone] now'],
    ['invalid phone 5551234567; phone_number "07700900123"', 'invalid phone [phone]; phone_number "[phone]"'],
    ['2024-01-15 555 1234', '2024-01-15 [phone]'],
    ['call 555.123.4567 or 06.12.34.56.78', 'call [phone] or [phone]'],
    // Shaped like a decimal, but after a word that says it is a phone number.
    ['phone: 555.1234, mobile 0044.7700', 'phone: [phone], mobile [phone]'],
    ['phone number: 555.1234, Telephone 5551234, mobile_no 5551234', 'phone number: [phone], Telephone [phone], mobile_no [phone]'],
    // The phone word as part of an identifier: snake_case, camelCase, plural.
    ['{"candidate_phone": "4155551234", "mobilePhone": 4155551234}, phones: 4155551234', '{"candidate_phone": "[phone]", "mobilePhone": [phone]}, phones: [phone]'],
    ['contact_phone: 4155551234; home_phone 555.1234; cellular 4155551234; phoneNumber=4155551234', 'contact_phone: [phone]; home_phone [phone]; cellular [phone]; phoneNumber=[phone]'],
    // An address with its @ encoded (URL, JSON escape, HTML entity).
    ['No application for siobhan.q%2BC%40example.io', 'No application for [email]'],
    ['jane\\u0040example.com, jane&#64;example.com, jane&#x40;example.com', '[email], [email], [email]'],
    // The phone word after the number, or more separators between the word and the number.
    ['2025551234 is not a valid phone number', '[phone] is not a valid phone number'],
    ['{"phone_number": ["2025551234"]}', '{"phone_number": ["[phone]"]}'],
  ])('takes out %j', (text, redacted) => {
    expect(redactPersonalData(text)).toBe(redacted);
  });

  it.each([
    'Application 0f8fad5b-d9cb-469f-a165-708677289501 not found',
    'id evt_0123456789012',
    'at 2026-11-25T10:00:00Z, after 2026-11-21 10:00:00',
    'from 192.168.100.200, port 127.0.0.1:8080',
    'timestamp 1763719200, body exceeds 1048576 bytes',
    'ratio 0.123456789, retry after 30000 ms, HTTP 500, v1.2.3',
    'phone 3.50 dollars a minute, tel 10.0.0.1',
    // Words that only contain a phone word are not one.
    'hotel 1234.5678, Intel 10.10.100.200, telnet 192.168.100.200:23, telemetry 0.1234567, cells 10.10.10.10',
  ])('keeps %j as it is', (text) => {
    expect(redactPersonalData(text)).toBe(text);
  });

  it.each([
    ['x '.repeat(995) + 'jane.candidate@example.com', 'jane'],
    ['x '.repeat(996) + '+1 555 123 4567', '555'],
  ])('cuts a long text before an address or a number that crosses the cut', (text, part) => {
    const out = redactPersonalData(text);
    expect(out.endsWith('…')).toBe(true);
    expect(out).not.toContain(part);
  });

  it('looks only at a bounded prefix of a long text (a 600 KB body of " 1-" took seconds of backtracking before)', () => {
    const out = redactPersonalData(' 1-'.repeat(200_000) + 'x');
    expect(out.length).toBeLessThanOrEqual(MAX_INPUT + 1);
    expect(out.endsWith('…')).toBe(true);
  });
});
