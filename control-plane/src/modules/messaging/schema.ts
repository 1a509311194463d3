import { Type } from '@sinclair/typebox';
import { z } from 'zod';
import type { UserLimit } from '../../platform/admission.js';
import { EXTERNAL_ID_MAX_BYTES, externalId, postText } from '../../platform/identities.js';
import { Deleted, literalUnion, Page, PageQueryOf } from '../../platform/schemas.js';

/** Spec: an OTP has six digits and is valid five minutes. */
export const OTP_DIGITS = 6;
export const OTP_VALIDITY_SECONDS = 300;
/** Wrong answers a code survives; the fifth ends it. */
export const OTP_MAX_FAILURES = 5;
export const OTP_TEMPLATE_MAX = 300;
export const PROMO_TEXT_MAX = 1_000;
export const DEFAULT_OTP_TEMPLATE = 'Your {app} code is {code}. It expires in 5 minutes. Never share it.';

/** The spec's messaging limits: sends counted in rolling windows (seconds), per app and key mode. */
export const MESSAGING_LIMITS = {
  otpPerRecipientShort: { limit: 3, windowSeconds: 600 },
  otpPerRecipientDay: { limit: 15, windowSeconds: 86_400 },
  promoPerRecipientFromSender: { limit: 1, windowSeconds: 86_400 },
  promoPerSender: { limit: 1_000, windowSeconds: 86_400 },
} as const;

/** Per user and hour: setting one's own phone and promo preferences. */
export const ME_LIMITS = {
  phone: { name: 'phone', limit: 10, windowSeconds: 3_600 },
  optOuts: { name: 'promo-opt-outs', limit: 100, windowSeconds: 3_600 },
} as const satisfies Record<string, UserLimit>;

/** E.164: a plus, a country code that does not begin with 0, at most 15 digits in all. */
export const E164_PATTERN = '^\\+[1-9][0-9]{1,14}$';

const Recipient = Type.String({
  minLength: 1,
  maxLength: EXTERNAL_ID_MAX_BYTES,
  description:
    'A profile id (the app’s user id) or an E.164 phone number a user registered. Anything that begins with "+" and a digit is read as a phone number and must be valid E.164.',
});

const Reason = Type.Optional(
  literalUnion(['unknown_phone', 'no_chat_account', 'blocked', 'opted_out', 'mailbox_full'], {
    description:
      'Why delivered is false: no user has this phone; the user never had a chat account; the user blocked the sender (XEP-0191); the user opted out of this sender’s promos; the user’s offline store is full',
  }),
);

export const OtpSend = Type.Object(
  {
    to: Recipient,
    template: Type.Optional(
      postText(
        OTP_TEMPLATE_MAX,
        'The message, with {code} (required) and {app} (the app’s name) filled in; default "Your {app} code is {code}. It expires in 5 minutes. Never share it."',
      ),
    ),
  },
  { additionalProperties: false },
);

export const OtpSent = Type.Object(
  {
    id: Type.String({ description: 'The send’s id; also the XMPP message’s id' }),
    status: Type.Literal('sent'),
    channel: Type.Literal('in_app'),
    cost_usd: Type.Number({ description: 'What the send cost, as X-Svc-Cost-Usd says' }),
    delivered: Type.Boolean({
      description:
        'The chat server took the message for the recipient’s account (online, or kept for the next login)',
    }),
    reason: Reason,
    expires_at: Type.Optional(
      Type.String({ format: 'date-time', description: 'When the code stops working' }),
    ),
  },
  { additionalProperties: false },
);

export const OtpVerify = Type.Object(
  {
    to: Recipient,
    code: Type.String({ pattern: `^[0-9]{${OTP_DIGITS}}$`, description: 'The six digits the user typed' }),
  },
  { additionalProperties: false },
);

export const OtpVerified = Type.Object(
  {
    verified: Type.Boolean({
      description: 'True once per code; false for a wrong, expired, used or dead code, without saying which',
    }),
  },
  { additionalProperties: false },
);

export const PromoSend = Type.Object(
  {
    to: Recipient,
    text: postText(PROMO_TEXT_MAX, 'The message'),
    via: Type.Optional(
      literalUnion(['account', 'profile'] as const, {
        description:
          'account (default): the app’s own identity; profile: the identity of the profile named by `from`',
      }),
    ),
    from: Type.Optional(
      externalId('The sending profile’s id (the app’s user id); required with via profile'),
    ),
  },
  { additionalProperties: false },
);

export const PromoSent = Type.Object(
  {
    id: Type.String(),
    status: Type.Literal('sent'),
    channel: literalUnion(['account', 'profile'] as const),
    cost_usd: Type.Number({ description: 'What the send cost, as X-Svc-Cost-Usd says' }),
    delivered: Type.Boolean(),
    reason: Reason,
  },
  { additionalProperties: false },
);

export const PhoneWrite = Type.Object(
  { phone: Type.String({ pattern: E164_PATTERN, description: 'E.164, e.g. +14155550123' }) },
  { additionalProperties: false },
);

export const Phone = Type.Object(
  {
    user_id: Type.String(),
    phone: Type.String(),
    set_by: literalUnion(['app', 'user'] as const, {
      description: 'Who registered it: the app’s server or the user',
    }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const UserParams = Type.Object(
  { user_id: externalId('The app’s user id') },
  { additionalProperties: false },
);

export const PhoneDeleted = Deleted();

/** `account`, or `@` and a profile's username. */
export const SENDER_PATTERN = '^(account|@[A-Za-z0-9_.]{3,30})$';

export const SenderParams = Type.Object(
  {
    sender: Type.String({
      pattern: SENDER_PATTERN,
      description: '`account` (the app’s own promos) or `@` and a profile’s username (that profile’s promos)',
    }),
  },
  { additionalProperties: false },
);

export const OptOut = Type.Object(
  {
    sender: Type.String({ description: '`account` or `@username`' }),
    source: literalUnion(['chat', 'api'] as const, { description: 'A STOP reply in the chat, or this API' }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const OptOutPage = Page(OptOut, 'Newest first');
export const OptOutQuery = PageQueryOf(100, 20);
export const OptOutDeleted = Deleted();

export const PhoneRow = z.object({
  user_id: z.string(),
  phone: z.string(),
  set_by: z.enum(['app', 'user']),
  updated_at: z.date(),
});

export const CodeRow = z.object({
  message_id: z.string(),
  code_hash: z.instanceof(Buffer),
  expires_at: z.date(),
  failed_attempts: z.number().int(),
});

export const SentMessageRow = z.object({
  app_id: z.string(),
  mode: z.enum(['live', 'test']),
  kind: z.enum(['otp', 'promo']),
  recipient: z.string(),
  user_id: z.string().nullable(),
  sender: z.string(),
});

export const OptOutRow = z.object({
  sender: z.string(),
  username: z.string().nullable(),
  source: z.enum(['chat', 'api']),
  created_at: z.date(),
});
