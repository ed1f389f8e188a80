import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/sandbox/clock.js';
import { DEFAULT_CV_MAX_BYTES, detectCvType } from '../../src/sandbox/cvFile.js';
import { cvFixtures, GLOBEX_KEY, postForm, startReceiver, startSandbox, subscribe, type Receiver, type Running } from './helpers.js';

const multipart = (bytes: Buffer, name: string, type = 'application/octet-stream', field = 'cv_file'): FormData => {
  const form = new FormData();
  form.append(field, new Blob([new Uint8Array(bytes)], { type }), name);
  return form;
};

describe('CV type detection by content (spec 4.2)', () => {
  it('4.2: PDF by %PDF-, .docx by a ZIP with word/, .doc by an OLE file with a WordDocument stream', () => {
    expect(detectCvType(cvFixtures.pdf())).toBe('pdf');
    expect(detectCvType(cvFixtures.docx())).toBe('docx');
    expect(detectCvType(cvFixtures.doc())).toBe('doc');
  });

  it('4.2: a PNG, a ZIP without word/ (.xlsx), an OLE file without WordDocument (.xls), text and nothing are refused', () => {
    for (const bytes of [cvFixtures.png(), cvFixtures.xlsx(), cvFixtures.xls(), Buffer.from('hello'), Buffer.alloc(0), Buffer.from('PK\u0003\u0004 truncated')]) {
      expect(detectCvType(bytes)).toBeNull();
    }
  });

  it('8: the default upload limit is 10 MiB', () => {
    expect(DEFAULT_CV_MAX_BYTES).toBe(10 * 1024 * 1024);
  });
});

describe('CV upload (spec 2.9, 4.2)', () => {
  let run: Running;
  let receiver: Receiver;
  beforeEach(async () => {
    run = await startSandbox({ clock: createManualClock(), resultDelayMs: 60_000, cvMaxBytes: 4096 });
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await run.sandbox.stop();
    await receiver.close();
  });
  const newApplication = () => {
    const job = run.sandbox.control.createJob({ title: 'Picker' });
    return run.sandbox.control.createApplication({ jobId: job.id }).id;
  };
  const cvPath = (id: string) => `/api/v2/applications/${id}/cv`;

  it('2.9: a PDF in multipart cv_file answers 202 {job_application_id, cv_processing_started: true}', async () => {
    const id = newApplication();
    const res = await postForm(run, cvPath(id), multipart(cvFixtures.pdf(), 'cv.pdf', 'application/pdf'));
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ job_application_id: id, cv_processing_started: true });
    const app = await run.api(`/api/v2/applications/${id}`);
    expect(app.body.cv).toMatchObject({ file_name: 'cv.pdf', file_type: 'pdf', size_bytes: cvFixtures.pdf().length });
  });

  it('4.2: Word (.docx and .doc) is accepted, and the type comes from the content, not the name', async () => {
    const id = newApplication();
    expect((await postForm(run, cvPath(id), multipart(cvFixtures.docx(), 'resume.docx'))).status).toBe(202);
    expect((await run.api(`/api/v2/applications/${id}`)).body.cv.file_type).toBe('docx');
    expect((await postForm(run, cvPath(id), multipart(cvFixtures.doc(), 'resume.doc', 'application/msword'))).status).toBe(202);
    expect((await run.api(`/api/v2/applications/${id}`)).body.cv.file_type).toBe('doc');
    // A real PDF under a misleading name is still a PDF.
    expect((await postForm(run, cvPath(id), multipart(cvFixtures.pdf(), 'notes.txt', 'text/plain'))).status).toBe(202);
    expect((await run.api(`/api/v2/applications/${id}`)).body.cv.file_type).toBe('pdf');
  });

  it('4.2, 7: a PNG renamed .pdf (or an .xlsx renamed .docx) is 400 invalid_file_type', async () => {
    const id = newApplication();
    for (const [bytes, name] of [[cvFixtures.png(), 'cv.pdf'], [cvFixtures.xlsx(), 'cv.docx'], [cvFixtures.xls(), 'cv.doc']] as const) {
      const res = await postForm(run, cvPath(id), multipart(bytes, name, 'application/pdf'));
      expect(res.status).toBe(400);
      expect(res.body).toEqual([{ code: 'invalid_file_type', detail: expect.any(String), attr: 'cv_file' }]);
    }
    expect((await run.api(`/api/v2/applications/${id}`)).body.cv).toBeNull();
  });

  it('7, 8: a file over the configured limit is 413 file_too_large; exactly the limit is accepted', async () => {
    const id = newApplication();
    const atLimit = Buffer.concat([cvFixtures.pdf(), Buffer.alloc(4096 - cvFixtures.pdf().length, 0x20)]);
    expect((await postForm(run, cvPath(id), multipart(atLimit, 'cv.pdf'))).status).toBe(202);
    const over = Buffer.concat([atLimit, Buffer.from(' ')]);
    const res = await postForm(run, cvPath(id), multipart(over, 'cv.pdf'));
    expect(res.status).toBe(413);
    expect(res.body[0]).toMatchObject({ code: 'file_too_large', attr: 'cv_file' });
    // Far over the limit: refused from Content-Length before the body is parsed.
    const huge = await postForm(run, cvPath(id), multipart(Buffer.concat([atLimit, Buffer.alloc(200_000)]), 'cv.pdf'));
    expect(huge.status).toBe(413);
    expect(huge.body[0].code).toBe('file_too_large');
  });

  it('7: a missing cv_file is 400 required with attr cv_file; a text value in multipart is invalid_input', async () => {
    const id = newApplication();
    const wrongField = await postForm(run, cvPath(id), multipart(cvFixtures.pdf(), 'cv.pdf', 'application/pdf', 'file'));
    expect(wrongField.status).toBe(400);
    expect(wrongField.body).toEqual([{ code: 'required', detail: expect.any(String), attr: 'cv_file' }]);
    const text = new FormData();
    text.append('cv_file', 'not a file');
    expect((await postForm(run, cvPath(id), text)).body[0]).toMatchObject({ code: 'invalid_input', attr: 'cv_file' });
    const broken = await run.api(cvPath(id), { method: 'POST', rawBody: 'garbage', headers: { 'content-type': 'multipart/form-data; boundary=xyz' } });
    expect(broken.body[0].code).toBe('parse_error');
    const json = await run.api(cvPath(id), { method: 'POST', body: { cv_file: 'x' } });
    expect(json.status).toBe(400);
    expect(json.body[0].code).toBe('invalid_input');
  });

  it('4.2: form-urlencoded works with cv_file as base64 content (and the same content checks)', async () => {
    const id = newApplication();
    const ok = await postForm(run, cvPath(id), new URLSearchParams({ cv_file: cvFixtures.docx().toString('base64'), cv_file_name: 'cv.docx' }));
    expect(ok.status).toBe(202);
    expect((await run.api(`/api/v2/applications/${id}`)).body.cv).toMatchObject({ file_name: 'cv.docx', file_type: 'docx' });
    const png = await postForm(run, cvPath(id), new URLSearchParams({ cv_file: cvFixtures.png().toString('base64') }));
    expect(png.body[0].code).toBe('invalid_file_type');
    const missing = await postForm(run, cvPath(id), new URLSearchParams({ other: '1' }));
    expect(missing.body[0]).toMatchObject({ code: 'required', attr: 'cv_file' });
  });

  it('4.2: an unknown or another organization\'s application is 404', async () => {
    const id = newApplication();
    expect((await postForm(run, cvPath(id), multipart(cvFixtures.pdf(), 'cv.pdf'), GLOBEX_KEY)).status).toBe(404);
    expect((await postForm(run, cvPath('00000000-0000-4000-8000-000000000000'), multipart(cvFixtures.pdf(), 'cv.pdf'))).body[0].code).toBe('not_found');
  });

  it('2.9, 3.6, 6.4: the CV evaluation stays processing for the result delay, then is ready and cv_evaluation.completed is sent', async () => {
    await subscribe(run, receiver, { event_types: ['cv_evaluation.completed'] });
    const id = newApplication();
    expect((await postForm(run, cvPath(id), multipart(cvFixtures.pdf(), 'cv.pdf'))).status).toBe(202);
    await run.sandbox.control.idle();
    expect((await run.api(`/api/v2/applications/${id}/cv-evaluation`)).body).toEqual({ status: 'processing', reason: 'cv_processing', result: null });
    await run.sandbox.control.advance(59_999);
    expect(receiver.requests).toHaveLength(0);
    expect((await run.api(`/api/v2/applications/${id}/cv-evaluation`)).body.status).toBe('processing');
    await run.sandbox.control.advance(1);
    expect(receiver.requests).toHaveLength(1);
    const event = receiver.requests[0]!.body;
    expect(event.event_type).toBe('cv_evaluation.completed');
    const read = await run.api(`/api/v2/applications/${id}/cv-evaluation`);
    expect(read.body).toMatchObject({ application_id: id, status: 'completed' });
    expect(event.payload).toEqual({ application: expect.objectContaining({ id }), cv_evaluation: { id: read.body.id, overall_score: read.body.overall_score } });
    await run.sandbox.control.waitForDeliveries();
    expect(receiver.requests).toHaveLength(1);
  });

  it('2.9: a second upload while the first is processing supersedes it: one evaluation, one event', async () => {
    await subscribe(run, receiver, { event_types: ['cv_evaluation.completed'] });
    const id = newApplication();
    await postForm(run, cvPath(id), multipart(cvFixtures.pdf(), 'cv.pdf'));
    await run.sandbox.control.advance(30_000);
    await postForm(run, cvPath(id), multipart(cvFixtures.docx(), 'cv.docx'));
    await run.sandbox.control.advance(30_000);
    expect(receiver.requests).toHaveLength(0);
    await run.sandbox.control.advance(30_000);
    expect(receiver.requests).toHaveLength(1);
    await run.sandbox.control.waitForDeliveries();
    expect(receiver.requests).toHaveLength(1);
  });
});
