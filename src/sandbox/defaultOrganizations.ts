import type { MemberInput } from './organization.js';

/** Who the sandbox serves unless told otherwise; fixed so docs and demos can name the keys. */
export interface OrganizationSeed {
  id?: string;
  name: string;
  /** Keys of the form `sk-<segment>.<segment>` (spec 5.2); one is generated when omitted. */
  apiKeys?: string[];
  /** Organization members (spec 2.8); default: four people, see `defaultMembers` in organization.ts. */
  members?: MemberInput[];
}

export const DEFAULT_ORGANIZATIONS: readonly OrganizationSeed[] = Object.freeze([
  {
    id: '5f0c6a52-4a1e-4c39-9a57-1f3d2c8e9a01',
    name: 'Acme Staffing',
    apiKeys: ['sk-acme0001.sandboxAcmeKeyOne0000000000', 'sk-acme0002.sandboxAcmeKeyTwo0000000000'],
  },
  {
    id: '5f0c6a52-4a1e-4c39-9a57-1f3d2c8e9a02',
    name: 'Globex Logistics',
    apiKeys: ['sk-globex01.sandboxGlobexKeyOne000000000'],
  },
]);
