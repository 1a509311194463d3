import { Type } from '@sinclair/typebox';

export const CheckStatus = Type.Union([Type.Literal('ok'), Type.Literal('down')]);

const Checks = Type.Record(Type.String(), CheckStatus, {
  description: 'One entry per dependency: postgres, redis, ejabberd, livekit, minio',
});

export const HealthResponse = Type.Object(
  {
    status: Type.Union([Type.Literal('ok'), Type.Literal('degraded')], {
      description:
        'ok: every dependency answers; degraded: the process serves, but `down` names what does not',
    }),
    down: Type.Array(Type.String(), { description: 'The dependencies that did not answer, by name' }),
    checks: Checks,
  },
  { additionalProperties: false },
);

export const ReadinessResponse = Type.Object(
  {
    status: Type.Union([Type.Literal('ready'), Type.Literal('unavailable')]),
    checks: Checks,
  },
  { additionalProperties: false },
);
