import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { createSandbox, type Sandbox, type SandboxOptions } from '../../src/sandbox/createSandbox.js';

export const ACME_KEY = 'sk-acme0001.sandboxAcmeKeyOne0000000000';
export const ACME_KEY_2 = 'sk-acme0002.sandboxAcmeKeyTwo0000000000';
export const GLOBEX_KEY = 'sk-globex01.sandboxGlobexKeyOne000000000';
export const ACME_ORG = '5f0c6a52-4a1e-4c39-9a57-1f3d2c8e9a01';
export const GLOBEX_ORG = '5f0c6a52-4a1e-4c39-9a57-1f3d2c8e9a02';

export interface Running {
  sandbox: Sandbox;
  url: string;
  /** Calls the sandbox over real HTTP; `key: null` sends no Authorization header. */
  api(path: string, init?: { method?: string; body?: unknown; rawBody?: string; key?: string | null; headers?: Record<string, string> }): Promise<{ status: number; headers: Headers; body: any }>;
}

export async function startSandbox(opts: SandboxOptions = {}): Promise<Running> {
  const sandbox = createSandbox(opts);
  const { url } = await sandbox.start(0, '127.0.0.1');
  const api: Running['api'] = async (path, init = {}) => {
    const headers: Record<string, string> = { ...init.headers };
    const key = init.key === undefined ? ACME_KEY : init.key;
    if (key !== null) headers['authorization'] = `Bearer ${key}`;
    let body: string | undefined = init.rawBody;
    if (init.body !== undefined) {
      body = JSON.stringify(init.body);
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(`${url}${path}`, { method: init.method ?? 'GET', headers, body, redirect: 'manual' });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text === '' ? null : JSON.parse(text) };
  };
  return { sandbox, url, api };
}

export interface ReceivedRequest {
  headers: IncomingHttpHeaders;
  raw: string;
  body: any;
  /** Result of standardwebhooks' verify with the current secret (null when no secret was given). */
  verified: boolean | null;
}

export interface Receiver {
  url: string;
  requests: ReceivedRequest[];
  /** Secret used to verify incoming deliveries; a failing signature answers 400. */
  secret: string | null;
  respond: (req: ReceivedRequest, res: ServerResponse) => void;
  close(): Promise<void>;
}

/** A small webhook receiver on 127.0.0.1 that verifies each delivery with the standardwebhooks package. */
export async function startReceiver(respond?: Receiver['respond']): Promise<Receiver> {
  const receiver: Receiver = {
    url: '',
    requests: [],
    secret: null,
    respond: respond ?? ((_req, res) => res.writeHead(204).end()),
    close: async () => undefined,
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let verified: boolean | null = null;
      if (receiver.secret !== null) {
        try {
          new Webhook(receiver.secret).verify(raw, req.headers as Record<string, string>);
          verified = true;
        } catch {
          verified = false;
        }
      }
      const entry: ReceivedRequest = { headers: req.headers, raw, body: raw === '' ? null : JSON.parse(raw), verified };
      receiver.requests.push(entry);
      if (verified === false) return void res.writeHead(400).end();
      receiver.respond(entry, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return receiver;
}

/** Registers the receiver as a webhook endpoint and remembers its secret for verification. */
export async function subscribe(run: Running, receiver: Receiver, body: Record<string, unknown> = {}, key = ACME_KEY): Promise<{ id: string; secret: string }> {
  const res = await run.api('/api/v2/webhooks', { method: 'POST', key, body: { url: receiver.url, ...body } });
  if (res.status !== 201) throw new Error(`subscribe failed: ${res.status} ${JSON.stringify(res.body)}`);
  receiver.secret = res.body.secret;
  return { id: res.body.id, secret: res.body.secret };
}

/** Registers `url` as a webhook endpoint of a sandbox that is not listening (in-process, `app.request`). */
export async function subscribeInProcess(sandbox: Sandbox, url: string): Promise<void> {
  const hook = await sandbox.app.request('/api/v2/webhooks', {
    method: 'POST',
    headers: { authorization: `Bearer ${ACME_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url }),
  });
  if (hook.status !== 201) throw new Error(`subscribe failed: ${hook.status} ${await hook.text()}`);
}

/** Sends a form (multipart for FormData, urlencoded for URLSearchParams) over real HTTP. */
export async function postForm(run: Running, path: string, form: FormData | URLSearchParams, key: string | null = ACME_KEY): Promise<{ status: number; headers: Headers; body: any }> {
  const headers: Record<string, string> = key === null ? {} : { authorization: `Bearer ${key}` };
  const res = await fetch(`${run.url}${path}`, { method: 'POST', headers, body: form });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? null : JSON.parse(text) };
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(data: Buffer): number {
  let c = 0xffffffff;
  for (const byte of data) c = CRC_TABLE[(c ^ byte) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A minimal valid ZIP (stored entries, central directory, end record). */
export function zipOf(entries: Record<string, string>): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const [name, content] of Object.entries(entries)) {
    const nameBytes = Buffer.from(name, 'utf8');
    const data = Buffer.from(content, 'utf8');
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(nameBytes.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(nameBytes.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, nameBytes, data);
    centrals.push(central, nameBytes);
    offset += 30 + nameBytes.length + data.length;
  }
  const centralDir = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  const count = Object.keys(entries).length;
  end.writeUInt16LE(count, 8);
  end.writeUInt16LE(count, 10);
  end.writeUInt32LE(centralDir.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, centralDir, end]);
}

/** Tiny files whose first bytes are what real ones start with. */
export const cvFixtures = {
  pdf: (): Buffer => Buffer.from('%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n', 'latin1'),
  docx: (): Buffer => zipOf({ '[Content_Types].xml': '<Types/>', 'word/document.xml': '<w:document/>' }),
  xlsx: (): Buffer => zipOf({ '[Content_Types].xml': '<Types/>', 'xl/workbook.xml': '<workbook/>' }),
  doc: (): Buffer => Buffer.concat([Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]), Buffer.alloc(504), Buffer.from('Root Entry', 'utf16le'), Buffer.alloc(16), Buffer.from('WordDocument', 'utf16le'), Buffer.alloc(64)]),
  xls: (): Buffer => Buffer.concat([Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]), Buffer.alloc(504), Buffer.from('Workbook', 'utf16le'), Buffer.alloc(64)]),
  png: (): Buffer => Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(64)]),
};
