import type { CvFileType } from './types.js';

/** Spec 8: "Maximum CV upload size: not shown". The sandbox's default; `createSandbox({ cvMaxBytes })` changes it. */
export const DEFAULT_CV_MAX_BYTES = 10 * 1024 * 1024;

const PDF_MAGIC = Buffer.from('%PDF-', 'latin1');
const ZIP_LOCAL_HEADER = 0x04034b50;
const ZIP_CENTRAL_HEADER = 0x02014b50;
const ZIP_END_OF_CENTRAL_DIR = 0x06054b50;
const OLE_MAGIC = Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);
/** The stream every Word 97-2003 document has, named in UTF-16LE in the OLE directory. */
const WORD_STREAM = Buffer.from('WordDocument', 'utf16le');

/** Bounds every scan of an untrusted archive. */
const MAX_ZIP_ENTRIES = 10_000;

/** Entry names of a ZIP archive, read from its central directory; null when it is not a readable ZIP. */
function zipEntryNames(bytes: Buffer): string[] | null {
  if (bytes.length < 22 || bytes.readUInt32LE(0) !== ZIP_LOCAL_HEADER) return null;
  // The end-of-central-directory record sits in the last 22 + 65535 (comment) bytes.
  const floor = Math.max(0, bytes.length - 22 - 0xffff);
  let eocd = -1;
  for (let i = bytes.length - 22; i >= floor; i--) {
    if (bytes.readUInt32LE(i) === ZIP_END_OF_CENTRAL_DIR) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) return null;
  const entries = bytes.readUInt16LE(eocd + 10);
  let offset = bytes.readUInt32LE(eocd + 16);
  const names: string[] = [];
  for (let n = 0; n < entries && n < MAX_ZIP_ENTRIES; n++) {
    if (offset + 46 > bytes.length || bytes.readUInt32LE(offset) !== ZIP_CENTRAL_HEADER) return null;
    const nameLength = bytes.readUInt16LE(offset + 28);
    const extraLength = bytes.readUInt16LE(offset + 30);
    const commentLength = bytes.readUInt16LE(offset + 32);
    if (offset + 46 + nameLength > bytes.length) return null;
    names.push(bytes.toString('utf8', offset + 46, offset + 46 + nameLength));
    offset += 46 + nameLength + extraLength + commentLength;
  }
  return names;
}

/**
 * Spec 4.2: "PDF or Word", decided by the bytes, never by the file name or the declared type.
 * - PDF: starts with `%PDF-`.
 * - Word (.docx): a ZIP archive (`PK\x03\x04`) whose central directory has an entry under `word/`
 *   (so an .xlsx or a plain .zip is refused).
 * - Word 97-2003 (.doc): an OLE compound file (`D0 CF 11 E0 A1 B1 1A E1`) with a `WordDocument`
 *   stream (so an .xls or .msg is refused).
 */
export function detectCvType(bytes: Buffer): CvFileType | null {
  if (bytes.subarray(0, PDF_MAGIC.length).equals(PDF_MAGIC)) return 'pdf';
  const names = zipEntryNames(bytes);
  if (names !== null) return names.some((name) => name.startsWith('word/')) ? 'docx' : null;
  if (bytes.subarray(0, OLE_MAGIC.length).equals(OLE_MAGIC)) return bytes.includes(WORD_STREAM) ? 'doc' : null;
  return null;
}
