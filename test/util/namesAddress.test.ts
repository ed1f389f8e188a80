import { describe, expect, it } from 'vitest';
import { looksLikeAddress, namesAddress } from '../../src/util/namesAddress.js';

describe('namesAddress', () => {
  const names = (text: string) => namesAddress(text, 'an@example.org');

  it('finds the address as a whole, ignoring case, beside punctuation, mailto: and a sentence end', () => {
    for (const text of ['{"email":"an@example.org"}', 'AN@Example.ORG', '<mailto:an@example.org>', 'write to an@example.org.', 'an@example.org', '(an@example.org,x)']) {
      expect(names(text), text).toBe(true);
    }
  });

  it('does not take a longer address for it', () => {
    for (const text of ['joan@example.org', 'jo.an@example.org', 'x_an@example.org', 'an@example.org.uk', 'an@example.organic', 'an@example.org-x.com', 'x+an@example.org']) {
      expect(names(text), text).toBe(false);
    }
  });

  it('finds it escaped by JSON or in a URL', () => {
    for (const text of ['an\\u0040example\\u002eorg', '"an\\u0040EXAMPLE.org"', 'https://crm.example/find?q=an%40example.org&x=1', 'line one\\nan@example.org', 'an%40example%2Eorg']) {
      expect(names(text), text).toBe(true);
    }
    // An escaped newline is not a letter of the name before it.
    expect(names('\\njoan@example.org')).toBe(false);
  });

  it('takes Unicode capitals, composed or not, and either form of an internationalized domain for the same address, and no other', () => {
    const jose = (text: string) => namesAddress(text, 'josé@bücher.example');
    for (const text of ['JOSÉ@BÜCHER.EXAMPLE', 'jose\u0301@bu\u0308cher.example', '"JOS\\u00c9@xn--bcher-kva.example"', 'jos%C3%A9%40B%C3%BCcher.example', 'José@XN--BCHER-KVA.EXAMPLE']) {
      expect(jose(text), text).toBe(true);
    }
    for (const text of ['jose@bucher.example', 'joséé@bücher.example', 'ajosé@bücher.example', 'josé@bücher.example.org']) {
      expect(jose(text), text).toBe(false);
    }
    expect(namesAddress('MARÍA@EXAMPLE.ORG', 'maría@example.org')).toBe(true);
  });

  it('compares the domain written as a domain: fullwidth letters and dots, a soft hyphen, a trailing dot; not a longer one', () => {
    const taro = (text: string) => namesAddress(text, 'tarō@example.jp');
    for (const text of ['{"email":"tarō@ｅｘａｍｐｌｅ.jp"}', 'tarō@example。jp', 'TARŌ@ＥＸＡＭＰＬＥ．ＪＰ', 'tarō@exam\u00adple.jp', 'tarō@example.jp。', 'tarō@example.jp\u200e']) {
      expect(taro(text), text).toBe(true);
    }
    for (const text of ['tarō@example.jp.co', 'tarō@example.jp。co', 'tarō@example.jp\u00adx', 'tarō@example.jp𠮷', 'tarō@ｅｘａｍｐｌｅ.jpn', 'tarō@example.jp-x.com', 'tarō@exampl.jp']) {
      expect(taro(text), text).toBe(false);
    }
    expect(namesAddress('tarō@ｅｘａｍｐｌｅ.jp', 'tarō@ｅｘａｍｐｌｅ.jp')).toBe(true);
  });

  it('folds a final sigma, and takes a letter outside the BMP before the name for a letter', () => {
    const cases: [text: string, address: string, names: boolean][] = [
      ['mailto:ΑΣ@x.gr', 'ασ@x.gr', true],
      ['mailto:Σ@x.gr', 'σ@x.gr', true],
      ['𠮷田@example.jp', '田@example.jp', false],
      ['"田@example.jp"', '田@example.jp', true],
      ['"an@[192.0.2.1]"', 'an@[192.0.2.1]', true],
      ['an@[192.0.2.10]', 'an@[192.0.2.1]', false],
    ];
    for (const [text, address, names] of cases) expect(namesAddress(text, address), text).toBe(names);
  });

  it('knows an address from a fragment of one', () => {
    expect(['an@example.org', 'a@b'].every(looksLikeAddress)).toBe(true);
    expect(['', ' ', '.org', 'example.org', '@example.org', 'an@', 'an @example.org', 'a@b@c'].some(looksLikeAddress)).toBe(false);
  });
});
