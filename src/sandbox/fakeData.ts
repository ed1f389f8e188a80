/**
 * Seeded fake candidate data: realistic names, example-domain emails (RFC 2606) and phone numbers
 * from ranges reserved for fiction (US 555-01xx, UK 07700 900xxx), so nothing reaches a real person.
 */

export interface Random {
  next(): number;
  int(min: number, max: number): number;
  pick<T>(items: readonly T[]): T;
}

/** mulberry32: tiny, fast, and good enough for fixtures. */
export function createRandom(seed: number): Random {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (min: number, max: number): number => min + Math.floor(next() * (max - min + 1));
  const pick = <T>(items: readonly T[]): T => {
    const item = items[int(0, items.length - 1)];
    if (item === undefined) throw new Error('pick from an empty list');
    return item;
  };
  return { next, int, pick };
}

const FIRST_NAMES = [
  'Amara', 'Lukas', 'Sofia', 'Mateo', 'Hannah', 'Kenji', 'Priya', 'Jonas', 'Fatima', 'Liam',
  'Chloé', 'Emeka', 'Ingrid', 'Diego', 'Mei', 'Noah', 'Zainab', 'Felix', 'Aisha', 'Tomás',
] as const;
const LAST_NAMES = [
  'Okafor', 'Müller', 'García', 'Nakamura', 'Sharma', 'Johansson', 'Haddad', 'Kowalski', 'Murphy', "O'Brien",
  'Schmidt', 'Nguyen', 'Fischer', 'Rossi', 'Adeyemi', 'Novak', 'Dubois', 'Silva', 'Chen', 'Weber',
] as const;
const US_AREA_CODES = ['212', '312', '415', '617', '713'] as const;
const DOMAINS = ['example.com', 'example.org', 'example.net'] as const;

export interface FakePerson {
  first_name: string;
  last_name: string;
  email: string;
  phone_number: string;
}

function emailLocalPart(name: string): string {
  return name
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^A-Za-z]/g, '')
    .toLowerCase();
}

export function fakePerson(random: Random): FakePerson {
  const first = random.pick(FIRST_NAMES);
  const last = random.pick(LAST_NAMES);
  const email = `${emailLocalPart(first)}.${emailLocalPart(last)}${random.int(1, 99)}@${random.pick(DOMAINS)}`;
  const phone =
    random.next() < 0.5
      ? `+1${random.pick(US_AREA_CODES)}5550${random.int(100, 199)}`
      : `+447700900${String(random.int(0, 999)).padStart(3, '0')}`;
  return { first_name: first, last_name: last, email, phone_number: phone };
}

const JOB_TITLES = [
  ['Warehouse Associate', 'Pick, pack and ship orders in a fast-paced fulfilment centre.'],
  ['Customer Support Specialist', 'Help customers by phone and chat; resolve billing and account questions.'],
  ['Registered Nurse', 'Provide patient care on a 30-bed medical-surgical ward.'],
  ['Delivery Driver', 'Deliver parcels on a local route with a company van.'],
  ['Barista', 'Prepare coffee and serve guests in a busy city-centre café.'],
  ['Junior Software Engineer', 'Build and test features for our TypeScript web platform.'],
] as const;

export function fakeJobTitle(random: Random): { title: string; description: string } {
  const [title, description] = random.pick(JOB_TITLES);
  return { title, description };
}
