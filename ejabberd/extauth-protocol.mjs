// ejabberd's external-auth wire format (extauth.erl opens the program with {packet, 2}): each
// request is a 2-byte big-endian length, then UTF-8 "op:user:host[:password]"; each reply is the
// length 2, then a big-endian 16-bit 0 (no) or 1 (yes). Pure functions, so they can be unit tested.

/** The ops whose answer comes from the control plane; every other op is refused without asking. */
export const ASKED_OPS = new Set(['auth', 'isuser']);

/**
 * Collects stdin chunks and returns the complete request frames they finish, as strings, in order.
 * A frame may arrive split over chunks, and one chunk may carry several frames.
 */
export function createFrameReader() {
  /** @type {Buffer} */
  let pending = Buffer.alloc(0);
  /** @param {Buffer} chunk @returns {string[]} */
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    const frames = [];
    while (pending.length >= 2) {
      const end = 2 + pending.readUInt16BE(0);
      if (pending.length < end) break;
      frames.push(pending.toString('utf8', 2, end));
      pending = pending.subarray(end);
    }
    return frames;
  };
}

/**
 * Splits "op:user:host[:password]" on its first three colons only: the password may contain colons,
 * user and host cannot (ejabberd nodepreps them). Missing fields are undefined.
 * @param {string} text
 * @returns {{ op: string, user?: string, server?: string, password?: string }}
 */
export function parseRequest(text) {
  const parts = text.split(':');
  const [op = '', user, server] = parts;
  const password = parts.length > 3 ? parts.slice(3).join(':') : undefined;
  return { op, user, server, password };
}

/** The reply frame: length 2, then 0 or 1. @param {boolean} yes */
export function encodeReply(yes) {
  return Buffer.from([0, 2, 0, yes ? 1 : 0]);
}
