import { describe, expect, it } from 'vitest';
import { hashPassword, verifyPassword } from './passwords.js';
import { can, RIGHTS, ROLES } from './schema.js';

describe('passwords', () => {
  it('are salted scrypt hashes that verify only the same password', async () => {
    const [one, two] = await Promise.all([hashPassword('correct horse'), hashPassword('correct horse')]);
    expect(one).toMatch(/^scrypt\$32768\$8\$4\$[\w-]{22}\$[\w-]{43}$/);
    expect(one).not.toBe(two);
    expect(await verifyPassword('correct horse', one)).toBe(true);
    expect(await verifyPassword('correct horse ', one)).toBe(false);
    expect(await verifyPassword('Correct horse', two)).toBe(false);
  });

  it('compare the same text in either Unicode form, and never match a malformed hash', async () => {
    const stored = await hashPassword('caf\u00e9 au lait');
    expect(await verifyPassword('cafe\u0301 au lait', stored)).toBe(true);
    expect(await verifyPassword('x', 'bcrypt$whatever')).toBe(false);
    expect(await verifyPassword('x', '')).toBe(false);
  });
});

describe('roles', () => {
  it('give owners everything, developers all but the team and billing, viewers reading', () => {
    const table = Object.fromEntries(
      ROLES.map((role) => [role, Object.keys(RIGHTS).filter((right) => can(role, right as never))]),
    );
    expect(table).toEqual({
      owner: ['read', 'build', 'reveal_secrets', 'manage_team', 'manage_billing'],
      developer: ['read', 'build', 'reveal_secrets'],
      viewer: ['read'],
    });
  });
});
