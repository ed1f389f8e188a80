import { iso } from './clock.js';
import { invalidInput } from './http/apiError.js';
import { newId } from './ids.js';
import type { SandboxStore } from './store.js';
import { MEMBER_ROLES, type CallPolicy, type InterviewDefaults, type MemberRole, type OrganizationMember } from './types.js';

export interface MemberInput {
  first_name: string;
  last_name: string;
  email: string;
  role?: MemberRole;
}

/** Spec 8: names at most 150 characters, email at most 254. */
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** Emails identify people (spec 2.7: "keyed by email"); they are compared case-insensitively. */
export const sameEmail = (a: string, b: string): boolean => a.trim().toLowerCase() === b.trim().toLowerCase();

/** Members every organization starts with unless its seed lists its own (the sandbox's choice). */
export function defaultMembers(organizationName: string): MemberInput[] {
  const domain = `${organizationName.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') || 'org'}.example.com`;
  return [
    { first_name: 'Dana', last_name: 'Whitfield', email: `dana.whitfield@${domain}`, role: 'owner' },
    { first_name: 'Ravi', last_name: 'Patel', email: `ravi.patel@${domain}`, role: 'admin' },
    { first_name: 'Marta', last_name: 'Kowalczyk', email: `marta.kowalczyk@${domain}`, role: 'editor' },
    { first_name: 'Sam', last_name: 'Lee', email: `sam.lee@${domain}`, role: 'viewer' },
  ];
}

/** Spec 2.4 and 2.5: both singletons are created with the organization. */
export function createOrganizationSettings(store: SandboxStore, organizationId: string, now: number): void {
  const at = iso(now);
  const defaults: InterviewDefaults = {
    id: newId(),
    organizationId,
    prompt_intro: 'Hello {candidate_first_name}, thanks for applying. This short call is about the {job_title} role.',
    prompt_outro: 'Thank you for your time. The hiring team will be in touch about the next steps.',
    prompt_additional_instructions: '',
    interviewer_name_override: '',
    organization_name_override: '',
    created_at: at,
    updated_at: at,
  };
  const policy: CallPolicy = {
    id: newId(),
    organizationId,
    retries_enabled: true,
    max_retries: 3,
    retry_window_days: 7,
    start_time: '09:00:00',
    end_time: '18:00:00',
    weekdays: ['monday', 'tuesday', 'wednesday', 'thursday', 'friday'],
    retry_delay_sequence: ['04:00:00', '1 00:00:00', '2 00:00:00'],
    created_at: at,
    updated_at: at,
  };
  store.interviewDefaults.set(organizationId, defaults);
  store.callPolicies.set(organizationId, policy);
}

/**
 * A person joins the organization (spec 3.5): the membership is created and every pending hiring
 * team row of the organization's jobs with the same email becomes matched at once.
 */
export function addMember(store: SandboxStore, organizationId: string, input: MemberInput, now: number): OrganizationMember {
  store.organization(organizationId);
  const role = input.role ?? 'viewer';
  if (!MEMBER_ROLES.includes(role)) throw invalidInput(`Role must be one of ${MEMBER_ROLES.join(', ')}.`, 'role');
  if (typeof input.first_name !== 'string' || input.first_name.length > 150) throw invalidInput('A string of at most 150 characters.', 'first_name');
  if (typeof input.last_name !== 'string' || input.last_name.length > 150) throw invalidInput('A string of at most 150 characters.', 'last_name');
  const email = typeof input.email === 'string' ? input.email.trim() : '';
  if (!EMAIL.test(email) || email.length > 254) throw invalidInput('Enter a valid email address.', 'email');
  if (store.membersOf(organizationId).some((m) => sameEmail(m.user.email, email))) {
    throw invalidInput('This person is already a member of the organization.', 'email');
  }
  const member: OrganizationMember = {
    id: newId(),
    organizationId,
    role,
    user: { first_name: input.first_name, last_name: input.last_name, email },
    joined_at: iso(now),
  };
  store.members.set(member.id, member);
  for (const row of store.hiringTeam.values()) {
    if (row.organizationId === organizationId && row.organization_member === null && sameEmail(row.email, email)) {
      row.organization_member = member.id;
      row.email = member.user.email;
    }
  }
  return member;
}

/** Spec 2.8 view. */
export function memberView(member: OrganizationMember): Record<string, unknown> {
  return { id: member.id, role: member.role, user: { ...member.user } };
}

/** Spec 4.3: "ordered by name": first name, then last name, then email, case-insensitively. */
export function compareMembersByName(a: OrganizationMember, b: OrganizationMember): number {
  const key = (m: OrganizationMember) => [m.user.first_name, m.user.last_name, m.user.email].map((s) => s.toLowerCase());
  const [ka, kb] = [key(a), key(b)];
  for (let i = 0; i < ka.length; i++) {
    const d = (ka[i] ?? '').localeCompare(kb[i] ?? '');
    if (d !== 0) return d;
  }
  return 0;
}

/** Internal fields dropped. */
export function settingsView<T extends { organizationId: string }>(record: T): Omit<T, 'organizationId'> {
  const { organizationId: _org, ...view } = record;
  return view;
}
