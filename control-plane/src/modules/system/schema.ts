import { Type } from '@sinclair/typebox';

export const CheckStatus = Type.Union([Type.Literal('ok'), Type.Literal('down')]);

export const HealthResponse = Type.Object({ status: Type.Literal('ok') }, { additionalProperties: false });

export const ReadinessResponse = Type.Object(
  {
    status: Type.Union([Type.Literal('ready'), Type.Literal('unavailable')]),
    checks: Type.Record(Type.String(), CheckStatus, {
      description: 'One entry per dependency: postgres, redis, ejabberd, livekit, minio',
    }),
  },
  { additionalProperties: false },
);
