/**
 * Upload throughput through the API's presigned URL (a plain HTTP PUT) beside a direct MinIO PUT of
 * the same bytes with the SDK and the root credentials, in one run: the ratio is the figure. Then
 * signed read URLs issued per second through GET /v1/storage/objects/{id}.
 *
 *   npm run stack -- up --profile test && npx tsx bench/storage.ts [MiB per upload] [uploads] [urls]
 */
import { DeleteObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { TEST_OBJECT_DAYS } from '../control-plane/src/modules/storage/schema.js';
import { createCustomer } from '../control-plane/test/support.js';
import { report, runConcurrently, useTestStackSettings } from './support.js';

useTestStackSettings();
const mebibytes = Number(process.argv[2] ?? 256);
const uploads = Number(process.argv[3] ?? 4);
const urls = Number(process.argv[4] ?? 2_000);
const settings = loadSettings(process.env);
const container = await createContainer(settings);
await container.objects.ensureBucket({ testPrefix: 'test/', testObjectDays: TEST_OBJECT_DAYS });
const app = await buildApp(container, { logger: false });
await app.ready();
const { token } = await createCustomer(container, {
  mode: 'live',
  balanceMicros: 1_000_000_000,
  plan: 'scale',
});
const bytes = Buffer.alloc(mebibytes * 1024 * 1024, 42);
const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
  app.inject({ method, url, headers: { authorization: `Bearer ${token}` }, ...(payload ? { payload } : {}) });

async function throughput(label: string, put: () => Promise<void>): Promise<number> {
  let seconds = 0;
  for (let i = 0; i < uploads; i += 1) {
    const started = performance.now();
    await put();
    seconds += (performance.now() - started) / 1000;
  }
  const rate = (mebibytes * uploads) / seconds;
  console.log(
    `${label}: ${uploads} × ${mebibytes} MiB in ${seconds.toFixed(2)} s = ${rate.toFixed(0)} MiB/s`,
  );
  return rate;
}

console.log(`storage: ${uploads} uploads of ${mebibytes} MiB, ${urls} signed URLs`);
const ids: string[] = [];
const presigned = await throughput('PUT through the presigned URL', async () => {
  const upload = (
    await call('POST', '/v1/storage/uploads', {
      name: 'b.zip',
      content_type: 'application/zip',
      size_bytes: bytes.length,
    })
  ).json();
  const response = await fetch(upload.upload_url, {
    method: 'PUT',
    headers: { 'content-type': 'application/zip' },
    body: bytes,
  });
  if (response.status !== 200) throw new Error(`upload failed: ${response.status}`);
  ids.push(upload.object.id);
});
const s3 = new S3Client({
  endpoint: settings.SVC_S3_ENDPOINT,
  region: settings.SVC_S3_REGION,
  forcePathStyle: true,
  credentials: { accessKeyId: settings.SVC_S3_ACCESS_KEY, secretAccessKey: settings.SVC_S3_SECRET_KEY },
  requestChecksumCalculation: 'WHEN_REQUIRED',
});
const direct = await throughput('direct PUT with the SDK', async () => {
  await s3.send(
    new PutObjectCommand({ Bucket: settings.SVC_S3_BUCKET, Key: 'test/bench/direct', Body: bytes }),
  );
});
console.log(`ratio of upload throughput, presigned / direct: ${(presigned / direct).toFixed(2)}`);
await s3.send(new DeleteObjectCommand({ Bucket: settings.SVC_S3_BUCKET, Key: 'test/bench/direct' }));

const id = ids[0]!;
await call('POST', `/v1/storage/objects/${id}/complete`);
const started = performance.now();
const latencies = await runConcurrently(urls, 16, async () => {
  const response = await call('GET', `/v1/storage/objects/${id}`);
  if (response.statusCode !== 200) throw new Error(`read failed: ${response.body}`);
});
console.log(
  report('signed read URLs issued (GET /v1/storage/objects/{id})', latencies, performance.now() - started),
);
for (const objectId of ids) await call('DELETE', `/v1/storage/objects/${objectId}`);
await app.close();
await container.close();
