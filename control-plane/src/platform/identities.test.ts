import { describe, expect, it } from 'vitest';
import { READABLE_NAMES, REAL_APP_IDS, REFUSED_APP_IDS, REFUSED_NAMES } from '../../test/identities.js';
import {
  idOfNode,
  isDisplayName,
  isExternalId,
  isPostText,
  nodeOf,
  orgKeyOfIdentity,
  orgNode,
  orgNodePrefix,
  parseChatIdentity,
  parseOrgNode,
  parseScopedNode,
  scopedNode,
} from './identities.js';

/** Ids apps really have, and a few more edges of the rule. */
const REAL_IDS = {
  ...REAL_APP_IDS,
  'a URN': 'urn:app:user=42',
  'a name with an accent': 'josé',
  '128 ASCII bytes': 'A'.repeat(128),
};

/** A prefix as the control plane mints them: 10 lowercase letters and digits. */
const PREFIX = 'abcde12345';

describe('isExternalId', () => {
  it.each(Object.entries(REAL_IDS))('accepts %s', (_kind, id) => {
    expect(isExternalId(id)).toBe(true);
  });

  it.each(Object.entries(REFUSED_APP_IDS))('refuses %s', (_case, id) => {
    expect(isExternalId(id)).toBe(false);
  });
});

describe('nodeOf and idOfNode', () => {
  it('keep an id that is a valid node as it is: lowercase letters, digits, ".", "_" and "-"', () => {
    for (const id of ['ana', 'ana-1', 'a.b_c', '0', '-x', 'b'.repeat(128)]) {
      expect(nodeOf(id)).toBe(id);
      expect(idOfNode(id)).toBe(id);
    }
  });

  it.each(Object.entries(REAL_IDS))(
    'encode %s reversibly, into a node nodeprep leaves unchanged',
    (_kind, id) => {
      const node = nodeOf(id);
      expect(node).toMatch(/^~[a-z2-7]+$/);
      expect(idOfNode(node)).toBe(id);
    },
  );

  it('give ids that differ only by case nodes of their own', () => {
    const twins = [
      ['Alice', 'alice'],
      ['3F2504E0-4F89-41D3-9A0C-0305E82C3301', '3f2504e0-4f89-41d3-9a0c-0305e82c3301'],
      ['ÉLODIE', 'élodie'],
    ];
    for (const [upper, lower] of twins) {
      expect(nodeOf(upper!)).not.toBe(nodeOf(lower!));
      // A node is folded to lowercase by XMPP; still two nodes after folding.
      expect(nodeOf(upper!).toLowerCase()).not.toBe(nodeOf(lower!).toLowerCase());
    }
  });

  it('never give two ids one node', () => {
    const ids = [...Object.values(REAL_IDS), 'ana', 'Ana', 'ANA', 'a.n.a', '~ana', 'ana~', 'e\u0301', 'é'];
    const nodes = ids.map(nodeOf);
    expect(new Set(nodes).size).toBe(ids.length);
    // An encoded node cannot be a plain id's: plain ids have no `~`.
    expect(idOfNode(nodeOf('~ana'))).toBe('~ana');
  });

  it('answer null for a node no valid id has', () => {
    for (const node of [
      '~mfxgc', // the base32 of "ana", which is plain: its node is "ana"
      '~', // the empty id
      '~mfxgd', // "ana" with stray trailing bits
      '~7777', // not UTF-8
      '~abc!', // outside the alphabet
      'Ana', // not folded, yet not encoded either
      'a b', // a space is never plain
      nodeOf('a\u202Eb'), // the encoding of a refused id
    ]) {
      expect({ node, id: idOfNode(node) }).toEqual({ node, id: null });
    }
  });

  it('fit the longest id with its prefix in a node of at most 1023 bytes', () => {
    const longest = ['a'.repeat(128), '😀'.repeat(32), 'é'.repeat(64), `A${'a'.repeat(127)}`];
    expect(longest.every(isExternalId)).toBe(true);
    const sizes = longest.map((id) => Buffer.byteLength(scopedNode(PREFIX, id)));
    // The prefix, its dot, the marker and 205 base32 characters for 128 bytes.
    expect(Math.max(...sizes)).toBe(PREFIX.length + 1 + 1 + 205);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(1023);
  });
});

describe('scoped nodes', () => {
  it('put the app’s prefix before the id’s node, and read both back', () => {
    expect(scopedNode(PREFIX, 'ana')).toBe(`${PREFIX}.ana`);
    expect(parseScopedNode(`${PREFIX}.ana`)).toEqual({ prefix: PREFIX, id: 'ana' });
    const email = 'Ana.Lopez+chat@example.com';
    expect(parseScopedNode(scopedNode(PREFIX, email))).toEqual({ prefix: PREFIX, id: email });
    // Only the first dot ends the prefix.
    expect(parseScopedNode(`${PREFIX}.a.b`)).toEqual({ prefix: PREFIX, id: 'a.b' });
  });

  it('are null without a prefix or with an id no app can have', () => {
    for (const node of ['nodot', '.ana', `${PREFIX}.`, `${PREFIX}.~mfxgc`]) {
      expect(parseScopedNode(node)).toBeNull();
    }
  });
});

describe('org nodes', () => {
  const KEY = 'k3y0rg5abc12';
  it('never collide with a personal node, and read back with their org', () => {
    for (const id of [...Object.values(REAL_APP_IDS), '+k3y0rg5abc12.ana', 'ana']) {
      const node = orgNode(PREFIX, KEY, id);
      expect(node.startsWith(orgNodePrefix(PREFIX, KEY))).toBe(true);
      expect(parseOrgNode(node)).toEqual({ prefix: PREFIX, chatKey: KEY, name: id });
      expect(parseScopedNode(node)).toBeNull();
      expect(node).not.toBe(scopedNode(PREFIX, id));
      expect(parseChatIdentity(node)).toEqual({
        prefix: PREFIX,
        id: ` ${node.slice(PREFIX.length + 1)}`,
        orgKey: KEY,
      });
    }
    expect(parseChatIdentity(scopedNode(PREFIX, 'ana'))).toEqual({ prefix: PREFIX, id: 'ana', orgKey: null });
    expect(orgKeyOfIdentity(parseChatIdentity(orgNode(PREFIX, KEY, 'Ana'))!.id)).toBe(KEY);
    expect(orgKeyOfIdentity('+ana.b')).toBeNull();
    // An app user whose id looks like an org identity's is still a user of its own.
    expect(orgKeyOfIdentity(parseChatIdentity(scopedNode(PREFIX, `+${KEY}.ana`))!.id)).toBeNull();
  });

  it('are null for a malformed key or ext_id', () => {
    for (const node of [
      `${PREFIX}.+short.ana`,
      `${PREFIX}.+K3Y0RG5ABC12.ana`,
      `${PREFIX}.+${KEY}.`,
      `${PREFIX}.+${KEY}.~mfxgc`,
    ]) {
      expect(parseOrgNode(node)).toBeNull();
      expect(parseChatIdentity(node)).toBeNull();
    }
  });
});

describe('isDisplayName', () => {
  it.each(READABLE_NAMES)('accepts %s', (name) => {
    expect(isDisplayName(name)).toBe(true);
  });

  it.each([['empty', ''], ...Object.entries(REFUSED_NAMES)])('refuses %s', (_case, name) => {
    expect(isDisplayName(name)).toBe(false);
  });
});

describe('text people write', () => {
  it('keeps line breaks and tabs, any script and emoji; refuses other control characters and blank text', () => {
    for (const text of ['Hello\nworld', 'a\tb\r\nc', 'Café ☕ مرحبا 日本', ' padded ']) {
      expect(isPostText(text), JSON.stringify(text)).toBe(true);
    }
    for (const text of ['a\u0000b', 'bell\u0007', 'next\u0085line', '   ', '\n\t']) {
      expect(isPostText(text), JSON.stringify(text)).toBe(false);
    }
  });
});
