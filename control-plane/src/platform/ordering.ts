/** Strings in code-unit order, not the locale's: the same order on every replica, whatever its locale. */
export const inCodeUnitOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
