import { createHash, createHmac } from 'node:crypto';

/**
 * AWS Signature Version 4 for presigned S3 URLs (query-string authentication), as AWS specifies it.
 * The SDK's presigner does the same through its whole middleware stack, about a millisecond of CPU per
 * URL; every upload reservation and signed read signs one, so this signs directly with node:crypto and
 * keeps the day's signing key. A test holds it to the SDK's output, byte for byte.
 */
export interface PresignOptions {
  method: 'GET' | 'PUT';
  /** The endpoint clients reach (scheme, host and port): the signature covers the host. */
  endpoint: string;
  bucket: string;
  key: string;
  region: string;
  accessKey: string;
  secretKey: string;
  expiresInSeconds: number;
  /** Headers the client must send exactly (lowercase names), signed with the host. */
  signedHeaders?: Record<string, string>;
  /** Extra query parameters, signed too (response-content-disposition…). */
  query?: Record<string, string>;
  /** The signing time: real time, since the server checks it against its own clock. */
  at?: Date;
}

/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters, '/' kept in paths. */
const UNRESERVED = /^[A-Za-z0-9._~-]*$/;
const encode = (text: string) =>
  UNRESERVED.test(text)
    ? text
    : encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const encodePath = (path: string) => path.split('/').map(encode).join('/');

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data, 'utf8').digest();
const sha256Hex = (data: string) => createHash('sha256').update(data, 'utf8').digest('hex');

export function createPresigner() {
  let cached: { scope: string; key: Buffer } | undefined;

  function signingKey(secretKey: string, date: string, region: string): Buffer {
    const scope = `${secretKey}/${date}/${region}`;
    if (cached?.scope !== scope) {
      const kDate = hmac(`AWS4${secretKey}`, date);
      cached = { scope, key: hmac(hmac(hmac(kDate, region), 's3'), 'aws4_request') };
    }
    return cached.key;
  }

  // The ISO 8601 basic form AWS wants (20240101T000000Z), formatted once a second.
  let lastSecond = Number.NaN;
  let lastAmzDate = '';
  function amzDateOf(at: Date): string {
    const second = Math.floor(at.getTime() / 1000);
    if (second !== lastSecond) {
      lastSecond = second;
      lastAmzDate = at
        .toISOString()
        .replace(/[-:]/g, '')
        .replace(/\.\d{3}/, '');
    }
    return lastAmzDate;
  }

  // URL's getters are slow enough to show on a hot path: each endpoint's parts are read once.
  const endpoints = new Map<string, { origin: string; host: string; pathname: string }>();
  return (options: PresignOptions): string => {
    let url = endpoints.get(options.endpoint);
    if (!url) {
      const { origin, host, pathname } = new URL(options.endpoint);
      url = { origin, host, pathname };
      endpoints.set(options.endpoint, url);
    }
    const amzDate = amzDateOf(options.at ?? new Date());
    const date = amzDate.slice(0, 8);
    const scope = `${date}/${options.region}/s3/aws4_request`;
    const headers: Record<string, string> = { ...options.signedHeaders, host: url.host };
    const headerNames = Object.keys(headers).sort();
    const signedHeaders = headerNames.join(';');
    const query: Record<string, string> = {
      ...options.query,
      'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
      'X-Amz-Content-Sha256': 'UNSIGNED-PAYLOAD',
      'X-Amz-Credential': `${options.accessKey}/${scope}`,
      'X-Amz-Date': amzDate,
      'X-Amz-Expires': String(options.expiresInSeconds),
      'X-Amz-SignedHeaders': signedHeaders,
    };
    const queryString = (parameters: Record<string, string>) =>
      Object.keys(parameters)
        .sort()
        .map((name) => `${encode(name)}=${encode(parameters[name]!)}`)
        .join('&');
    const canonicalQuery = queryString(query);
    const path = encodePath(`${url.pathname.replace(/\/$/, '')}/${options.bucket}/${options.key}`);
    const canonicalRequest = [
      options.method,
      path,
      canonicalQuery,
      headerNames.map((name) => `${name}:${headers[name]!.trim()}\n`).join(''),
      signedHeaders,
      'UNSIGNED-PAYLOAD',
    ].join('\n');
    const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
    const signature = createHmac('sha256', signingKey(options.secretKey, date, options.region))
      .update(stringToSign, 'utf8')
      .digest('hex');
    return `${url.origin}${path}?${queryString({ ...query, 'X-Amz-Signature': signature })}`;
  };
}
