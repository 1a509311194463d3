/** A request as ejabberd frames it ({packet, 2}): 2-byte big-endian length, then UTF-8. */
export function frame(text: string): Buffer {
  const body = Buffer.from(text, 'utf8');
  const header = Buffer.alloc(2);
  header.writeUInt16BE(body.length);
  return Buffer.concat([header, body]);
}
