import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it } from 'vitest';
import { s3Client } from './s3.js';
import { createPresigner } from './sigv4.js';

const settings = {
  endpoint: 'http://files.example.test:9000',
  region: 'us-east-1',
  accessKey: 'AKIDEXAMPLE',
  secretKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
  bucket: 'svc-objects',
};
const sdk = s3Client(settings.endpoint, settings);
const at = new Date('2026-11-23T10:20:30Z');

describe('presigned URLs', () => {
  const presign = createPresigner();

  it('sign a PUT with its Content-Type exactly as the AWS SDK does', async () => {
    const key = 'live/app_1/obj a+b~(c)';
    const expected = await getSignedUrl(
      sdk,
      new PutObjectCommand({ Bucket: settings.bucket, Key: key, ContentType: 'video/mp4' }),
      { expiresIn: 900, signableHeaders: new Set(['content-type']), signingDate: at },
    );
    const url = presign({
      ...settings,
      method: 'PUT',
      key,
      expiresInSeconds: 900,
      signedHeaders: { 'content-type': 'video/mp4' },
      query: { 'x-id': 'PutObject' },
      at,
    });
    expect(url).toBe(expected);
  });

  it('sign a GET with a download disposition exactly as the AWS SDK does', async () => {
    const disposition = `attachment; filename*=UTF-8''${encodeURIComponent('résumé 1.pdf')}`;
    const expected = await getSignedUrl(
      sdk,
      new GetObjectCommand({
        Bucket: settings.bucket,
        Key: 'test/app_2/obj_x',
        ResponseContentDisposition: disposition,
      }),
      { expiresIn: 604_800, signingDate: at },
    );
    const url = presign({
      ...settings,
      method: 'GET',
      key: 'test/app_2/obj_x',
      expiresInSeconds: 604_800,
      query: { 'response-content-disposition': disposition, 'x-id': 'GetObject' },
      at,
    });
    expect(url).toBe(expected);
  });

  it('change with every signed part', () => {
    const base = { ...settings, method: 'GET' as const, key: 'k', expiresInSeconds: 60, at };
    const urls = new Set([
      presign(base),
      presign({ ...base, key: 'l' }),
      presign({ ...base, expiresInSeconds: 61 }),
      presign({ ...base, method: 'PUT' }),
      presign({ ...base, secretKey: 'other' }),
      presign({ ...base, at: new Date(at.getTime() + 1_000) }),
    ]);
    expect(urls.size).toBe(6);
  });
});
