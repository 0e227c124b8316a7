/** Credit packs (spec: "Account, credits and keys": 30 credits for $3, 120 for $9, 500 for $29). */
export const PACKS = [
  { id: 'p30', credits: 30, cents: 300 },
  { id: 'p120', credits: 120, cents: 900 },
  { id: 'p500', credits: 500, cents: 2900 },
] as const;

export type Pack = (typeof PACKS)[number];
export type PackId = Pack['id'];

export const packById = (id: unknown): Pack | undefined => PACKS.find((pack) => pack.id === id);

/** `$3`, `$9`, `$29`: whole dollars print without cents. */
export const formatPrice = (cents: number): string =>
  cents % 100 === 0 ? `$${cents / 100}` : `$${(cents / 100).toFixed(2)}`;
