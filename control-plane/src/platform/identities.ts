import { type StringOptions, Type } from '@sinclair/typebox';

/**
 * The one rule for the ids an app brings of its own (its user ids, as chat `user_id` and live
 * `identity`, and the names it gives rooms), for every product, and for the names people read
 * (nicknames, file names). Also how such an id becomes part of a JID: see `nodeOf`.
 */

/** UTF-8 bytes, not characters: LiveKit limits identities and room names by bytes (256 by default). */
export const EXTERNAL_ID_MAX_BYTES = 128;

/** Letters, marks, digits, punctuation and symbols; a space only between them. */
const VISIBLE = '\\p{L}\\p{M}\\p{N}\\p{P}\\p{S}';
const EXTERNAL_ID = new RegExp(`^[${VISIBLE}](?:[${VISIBLE} ]*[${VISIBLE}])?$`, 'u');

/**
 * What a name people read may not hold: controls (NUL, tabs, line feeds, C1), bidi marks, embeddings,
 * overrides and isolates (they can make `exe.txt` show as `txt.exe`), line and paragraph
 * separators, and lone surrogates (not text at all).
 */
const UNSAFE_IN_NAMES = '\\p{Cc}\\p{Cs}\\u061C\\u200E\\u200F\\u202A-\\u202E\\u2066-\\u2069\\u2028\\u2029';
const DISPLAY_NAME = new RegExp(
  `^[^\\s${UNSAFE_IN_NAMES}](?:[^${UNSAFE_IN_NAMES}]*[^\\s${UNSAFE_IN_NAMES}])?$`,
  'u',
);

/**
 * An app's own id: 1-128 bytes of UTF-8 made of letters (either case, any script), marks, digits,
 * punctuation and symbols, with single spaces allowed inside. So Firebase and Auth0 ids, emails and
 * UUIDs in either case pass as they are; control, format (bidi, zero-width) and other space
 * characters never do. Ids are compared exactly as sent: no case folding, no normalization.
 */
export function isExternalId(value: string): boolean {
  return EXTERNAL_ID.test(value) && Buffer.byteLength(value, 'utf8') <= EXTERNAL_ID_MAX_BYTES;
}

/** A name people read: no control, bidi-control or line-separator characters, no blank at either end. */
export function isDisplayName(value: string): boolean {
  return DISPLAY_NAME.test(value);
}

/** Control characters other than tab, line feed and carriage return. */
const CONTROL_BUT_LINE_BREAKS = /(?![\t\n\r])\p{Cc}/u;

/** Text people write (a post, a comment): line breaks allowed, other control characters and blank text not. */
export function isPostText(value: string): boolean {
  return !CONTROL_BUT_LINE_BREAKS.test(value) && value.trim() !== '';
}

/**
 * JSON Schema formats for these rules, each with the message a failing field gets. The HTTP layer
 * registers them with its validator.
 */
export const TEXT_FORMATS = {
  'external-id': {
    validate: isExternalId,
    message:
      'must be 1-128 bytes (UTF-8) of letters, digits, punctuation and symbols, with spaces only between them: no control, bidi or other invisible characters',
  },
  'display-name': {
    validate: isDisplayName,
    message:
      'must not hold control, bidi-control or line-separator characters, nor begin or end with a space',
  },
  'post-text': {
    validate: isPostText,
    message: 'must not hold control characters other than line breaks and tabs, nor be blank',
  },
} as const satisfies Record<string, { validate: (value: string) => boolean; message: string }>;

/** The schema of an app's own id (a user id, a room name), with what it names. */
export const externalId = (description: string) =>
  Type.String({
    format: 'external-id',
    minLength: 1,
    maxLength: EXTERNAL_ID_MAX_BYTES,
    description: `${description}: 1-${EXTERNAL_ID_MAX_BYTES} bytes (UTF-8) of letters of any case, digits, punctuation and symbols (e.g. a Firebase or Auth0 id, an email, a UUID), spaces only between them; case matters`,
  });

/** The schema of a name people read (a nickname, a file name); `more` adds rules of its own. */
export const displayName = (maxLength: number, description: string, more: StringOptions = {}) =>
  Type.String({
    format: 'display-name',
    minLength: 1,
    maxLength,
    description: `${description}: 1-${maxLength} characters, no control, bidi-control or line-separator characters, no space at either end`,
    ...more,
  });

/** The schema of text people write (a post, a comment), up to `maxLength` characters. */
export const postText = (maxLength: number, description: string) =>
  Type.String({
    format: 'post-text',
    minLength: 1,
    maxLength,
    description: `${description}: 1-${maxLength} characters; line breaks allowed, other control characters not`,
  });

// ---------------------------------------------------------------------------------------------------
// JID nodes
// ---------------------------------------------------------------------------------------------------

/**
 * Ids kept as they are in a JID node: what nodeprep leaves unchanged and every XMPP URI carries
 * without escaping. JIDs minted before other ids were accepted are all of this form.
 */
const PLAIN_NODE = /^[a-z0-9._-]+$/;
/** Starts every other id's node; plain ids cannot contain it, so the two forms never meet. */
export const ENCODED_NODE_MARKER = '~';
/** RFC 4648 base32 in lowercase (nodeprep lowercases), without padding. */
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
const utf8 = new TextDecoder('utf-8', { fatal: true });

function toBase32(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = ((value << 8) | byte) & 0xffff;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/** The bytes of base32 text, or null when it holds anything outside the alphabet. */
function fromBase32(text: string): Uint8Array | null {
  const bytes: number[] = [];
  let bits = 0;
  let value = 0;
  for (const char of text) {
    const digit = BASE32.indexOf(char);
    if (digit < 0) return null;
    value = ((value << 5) | digit) & 0xfff;
    bits += 5;
    if (bits >= 8) {
      bytes.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Uint8Array.from(bytes);
}

/**
 * The JID node of an app's id: the id itself when it is lowercase `[a-z0-9._-]`, otherwise `~` and
 * the base32 of its UTF-8. XMPP folds nodes to lowercase, so `Alice` kept as is would log in as
 * `alice`; encoded, every id has a node of its own. The longest (128 bytes) takes 206 characters,
 * far below a node's 1023 bytes with the app's prefix.
 */
export function nodeOf(id: string): string {
  return PLAIN_NODE.test(id) ? id : ENCODED_NODE_MARKER + toBase32(Buffer.from(id, 'utf8'));
}

/**
 * The app's id of a JID node, or null when no valid id has this node: the inverse of `nodeOf`,
 * strict, so that one id never answers to two nodes (e.g. `~` and the base32 of `ana`).
 */
export function idOfNode(node: string): string | null {
  let id: string;
  if (node.startsWith(ENCODED_NODE_MARKER)) {
    const bytes = fromBase32(node.slice(ENCODED_NODE_MARKER.length));
    if (!bytes) return null;
    try {
      id = utf8.decode(bytes);
    } catch {
      return null;
    }
  } else {
    id = node;
  }
  return isExternalId(id) && nodeOf(id) === node ? id : null;
}

/** An app's user or room in the chat server: `<prefix>.<node of the id>`. */
export const scopedNode = (prefix: string, id: string) => `${prefix}.${nodeOf(id)}`;

/**
 * The prefix and the app's id of a scoped node, or null when it is none. Prefixes hold no dot, so
 * the first dot ends the prefix (mod_svc_scope reads nodes the same way).
 */
export function parseScopedNode(node: string): { prefix: string; id: string } | null {
  const dot = node.indexOf('.');
  if (dot <= 0) return null;
  const id = idOfNode(node.slice(dot + 1));
  return id === null ? null : { prefix: node.slice(0, dot), id };
}

/**
 * Marks an org's part of a node: `<prefix>.+<org chat key>.<name>`, the name being a member's
 * identity key (its chat identity) or the node of a team's ext_id (its room). No app id's node
 * starts with it (plain nodes hold no `+`, encoded ones start with `~`), so an org identity never
 * answers to a user's personal address, and mod_svc_scope reads the org from it.
 */
export const ORG_IDENTITY_MARKER = '+';

/** A node of an org (a member's identity, a team's room): distinct from every personal node. */
export const orgNode = (prefix: string, chatKey: string, name: string) =>
  `${prefix}.${ORG_IDENTITY_MARKER}${chatKey}.${nodeOf(name)}`;

/** The part of every node of an org: its identities' and its rooms' nodes start with it. */
export const orgNodePrefix = (prefix: string, chatKey: string) =>
  `${prefix}.${ORG_IDENTITY_MARKER}${chatKey}.`;

/** The app prefix, org chat key and name of an org node, or null when it is none. */
export function parseOrgNode(node: string): { prefix: string; chatKey: string; name: string } | null {
  const match = /^([^.]+)\.\+([a-z0-9]{12})\.(.+)$/.exec(node);
  const name = match ? idOfNode(match[3]!) : null;
  return match && name !== null ? { prefix: match[1]!, chatKey: match[2]!, name } : null;
}

/**
 * Who a chat login is, for the checks every identity shares (the credential, the spend gate, the
 * monthly active count): the app prefix and an id unique within the app, the user's own id for a
 * personal node and ` +<chat key>.<node>` for an org identity, with the org's chat key. The leading
 * space keeps the two apart: no app id begins with a space, whatever else it holds. Null for
 * anything else.
 */
export function parseChatIdentity(
  node: string,
): { prefix: string; id: string; orgKey: string | null } | null {
  const user = parseScopedNode(node);
  if (user) return { ...user, orgKey: null };
  const member = parseOrgNode(node);
  return (
    member && {
      prefix: member.prefix,
      id: ` ${node.slice(member.prefix.length + 1)}`,
      orgKey: member.chatKey,
    }
  );
}

/** The org chat key of an identity id as parseChatIdentity gives it (` +<key>.<node>`), or null. */
export const orgKeyOfIdentity = (id: string) => /^ \+([a-z0-9]{12})\./.exec(id)?.[1] ?? null;
