import { Type } from '@sinclair/typebox';
import { displayName, externalId } from '../../platform/identities.js';
import { Deleted } from '../../platform/schemas.js';

export const MIN_CHAT_TTL = 60;
export const MAX_CHAT_TTL = 86_400;
export const DEFAULT_CHAT_TTL = 21_600;

export const ChatTokenRequest = Type.Object(
  {
    user_id: externalId('Your user id'),
    name: Type.Optional(displayName(64, 'Room nickname; default the user id')),
    ttl_seconds: Type.Integer({ minimum: MIN_CHAT_TTL, maximum: MAX_CHAT_TTL, default: DEFAULT_CHAT_TTL }),
  },
  { additionalProperties: false },
);

export const ChatCredential = Type.Object(
  {
    jid: Type.String({ description: '<user>@<domain>' }),
    user: Type.String({
      description:
        'The JID local part: the app’s prefix, a dot, then user_id as it is when that is lowercase letters, digits, ".", "_" and "-", otherwise "~" and the base32 (RFC 4648, lowercase, unpadded) of its UTF-8',
    }),
    domain: Type.String(),
    password: Type.String({
      description: 'Use with SASL PLAIN over the WebSocket; replaced by the next credential',
    }),
    ws: Type.String({ description: 'XMPP over WebSocket (RFC 7395) URL' }),
    muc: Type.String({ description: 'Multi-user chat service domain' }),
    room_prefix: Type.String({ description: 'Every room address of the app starts with it' }),
    nickname: Type.String(),
    mam: Type.Boolean({ description: 'Whether messages are archived (XEP-0313, urn:xmpp:mam:2)' }),
    expires_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const ChatUserParams = Type.Object(
  { user_id: externalId('Your user id') },
  { additionalProperties: false },
);

/** The delete shape (`id` is the user id), then what the revocation did. */
export const RevokeResponse = Deleted({
  jid: Type.String(),
  revoked: Type.Boolean({
    description: 'Whether a live credential existed (the call succeeds either way)',
  }),
  sessions_closed: Type.Integer({ description: 'Open sessions of the user that were disconnected' }),
});

export const RoomRequest = Type.Object(
  { room: externalId('Your room name') },
  { additionalProperties: false },
);

export const RoomResponse = Type.Object(
  {
    room: Type.String({
      description:
        'The full room address, <room_prefix><room>@<muc domain>, the room name turned into a JID node as user_id is in a credential’s `user`: use it as given',
    }),
    name: Type.String({ description: 'Your room name' }),
    max_occupants: Type.Integer({ description: 'The app’s max_room_size' }),
    mam: Type.Boolean(),
  },
  { additionalProperties: false },
);

/** ejabberd's question (ejabberd/ejabberd_auth_svc_control_plane.erl). */
export const AuthCallbackRequest = Type.Object(
  {
    op: Type.Union([Type.Literal('auth'), Type.Literal('isuser')]),
    user: Type.String({ maxLength: 1023 }),
    server: Type.String({ maxLength: 1023 }),
    password: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);

export const AuthCallbackResponse = Type.Object({ ok: Type.Boolean() }, { additionalProperties: false });
