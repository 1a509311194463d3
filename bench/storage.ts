import { randomUUID } from 'node:crypto';
import { setTimeout } from 'node:timers/promises';
/**
 * Upload throughput through the API (reserve, PUT to the presigned URL, complete) beside a direct PUT
 * of the same bytes to MinIO with the same HTTP client (fetch) and a URL presigned by the AWS SDK
 * itself: like with like, so the ratio is what the API's steps cost. Runs alternate between the two,
 * so that the machine's noise falls on both. Signed read URLs are measured by bench/core.ts.
 *
 * A single PUT here varies by a third and more from one to the next (MinIO's disk writes on a shared
 * machine), far more than the API's steps cost, so a dozen pairs do not settle a 5% goal either way.
 * The figure that does: the API path is the same PUT (same client, bytes and URL form, only the
 * signature differs) plus a reservation and a completion, timed on their own. So the bench also
 * prints the two PUTs' medians side by side (they should agree within the noise) and the ratio the
 * steps allow: median PUT / (median PUT + median reservation + median completion).
 *
 * Last, a reservation's latency one at a time with nothing else running, then while direct PUTs of
 * the same size follow each other: a reservation commits (a WAL flush), and where PostgreSQL and MinIO
 * share a disk, that flush waits behind the uploads' writeback (docs/scaling.md).
 *
 *   npm run stack -- up --profile test && npx tsx bench/storage.ts [MiB per upload] [uploads of each]
 */
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { TEST_OBJECT_DAYS } from '../control-plane/src/modules/storage/schema.js';
import { createCustomer } from '../control-plane/test/support.js';
import { percentiles, useTestStackSettings } from './support.js';

useTestStackSettings();
const mebibytes = Number(process.argv[2] ?? 256);
const uploads = Number(process.argv[3] ?? 12);
/** Reservations timed one at a time in each state of the disk. */
const RESERVATIONS = 40;
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
const call = (method: 'POST' | 'DELETE', url: string, payload?: object) =>
  app.inject({ method, url, headers: { authorization: `Bearer ${token}` }, ...(payload ? { payload } : {}) });
const s3 = new S3Client({
  endpoint: settings.SVC_S3_PUBLIC_ENDPOINT,
  region: settings.SVC_S3_REGION,
  forcePathStyle: true,
  credentials: { accessKeyId: settings.SVC_S3_ACCESS_KEY, secretAccessKey: settings.SVC_S3_SECRET_KEY },
  requestChecksumCalculation: 'WHEN_REQUIRED',
});

/** The PUT an integrator sends with upload_headers: the type, and write-once (fetch sets the length). */
async function put(url: string): Promise<void> {
  const response = await fetch(url, {
    method: 'PUT',
    headers: { 'content-type': 'application/zip', 'if-none-match': '*' },
    body: bytes,
  });
  if (response.status !== 200) throw new Error(`upload failed: ${response.status} ${await response.text()}`);
}

const ids: string[] = [];
/** Reserves an upload of `bytes`; the object is deleted at the end. */
async function reserveUpload() {
  const reserved = await call('POST', '/v1/storage/uploads', {
    name: 'b.zip',
    content_type: 'application/zip',
    size_bytes: bytes.length,
  });
  if (reserved.statusCode !== 201) throw new Error(`reserve failed: ${reserved.body}`);
  const upload = reserved.json() as { upload_url: string; object: { id: string } };
  ids.push(upload.object.id);
  return upload;
}
/** Milliseconds of each step, per upload: the API path's three, and the direct path's PUT. */
const steps = {
  reserve: [] as number[],
  apiPut: [] as number[],
  complete: [] as number[],
  directPut: [] as number[],
};
const directKeys: string[] = [];
const paths = {
  /** What an integrator does: reserve, PUT, complete. */
  api: async () => {
    const started = performance.now();
    const upload = await reserveUpload();
    const putStarted = performance.now();
    await put(upload.upload_url);
    const completeStarted = performance.now();
    const completed = await call('POST', `/v1/storage/objects/${upload.object.id}/complete`);
    if (completed.statusCode !== 200) throw new Error(`complete failed: ${completed.body}`);
    steps.reserve.push(putStarted - started);
    steps.apiPut.push(completeStarted - putStarted);
    steps.complete.push(performance.now() - completeStarted);
  },
  /** The floor: the same PUT of the same bytes, to a URL the SDK presigned, no API in between. */
  direct: async () => {
    // A fresh key each time: write-once URLs never replace bytes.
    const key = `test/bench/direct-${randomUUID()}`;
    directKeys.push(key);
    const url = await getSignedUrl(
      s3,
      new PutObjectCommand({
        Bucket: settings.SVC_S3_BUCKET,
        Key: key,
        ContentType: 'application/zip',
        ContentLength: bytes.length,
        IfNoneMatch: '*',
      }),
      { expiresIn: 900, signableHeaders: new Set(['content-type', 'content-length', 'if-none-match']) },
    );
    const putStarted = performance.now();
    await put(url);
    steps.directPut.push(performance.now() - putStarted);
  },
};

const seconds = { api: 0, direct: 0 };
/** Per pair of uploads (one each way, back to back): the API's throughput over the direct PUT's. */
const pairRatios: number[] = [];
await paths.direct(); // warm-up: connections, MinIO's first write
steps.directPut.length = 0;
for (let i = 0; i < uploads; i += 1) {
  const took = { api: 0, direct: 0 };
  for (const name of i % 2 === 0 ? (['api', 'direct'] as const) : (['direct', 'api'] as const)) {
    const started = performance.now();
    await paths[name]();
    took[name] = (performance.now() - started) / 1000;
    seconds[name] += took[name];
  }
  pairRatios.push(took.direct / took.api);
}
const rate = (name: 'api' | 'direct') => (mebibytes * uploads) / seconds[name];
const median = (values: number[]) => percentiles(values).p50;
const [reserve, apiPut, complete, directPut] = [
  steps.reserve,
  steps.apiPut,
  steps.complete,
  steps.directPut,
].map(median) as [number, number, number, number];
const putMs = median([...steps.apiPut, ...steps.directPut]);
const apiPutSlower = steps.apiPut.filter((ms, i) => ms > steps.directPut[i]!).length;
console.log(`storage uploads: ${uploads} of ${mebibytes} MiB each way, alternating`);
console.log(`  through the API (reserve, PUT, complete): ${rate('api').toFixed(0)} MiB/s`);
console.log(`  direct PUT, SDK-presigned URL, same fetch: ${rate('direct').toFixed(0)} MiB/s`);
console.log(`  ratio API / direct: ${(rate('api') / rate('direct')).toFixed(3)} (≥ 0.95 wanted)`);
console.log(
  `  ratio per pair: median ${median(pairRatios).toFixed(3)}, from ${Math.min(...pairRatios).toFixed(3)} to ${Math.max(...pairRatios).toFixed(3)}`,
);
console.log(
  `  the PUT alone, median: ${apiPut.toFixed(0)} ms to the API's URL, ${directPut.toFixed(0)} ms to the SDK's` +
    ` (the same request but for its signature); the API's the slower in ${apiPutSlower} of ${uploads} pairs`,
);
console.log(
  `  the API's own steps, median: reservation ${reserve.toFixed(1)} ms, completion ${complete.toFixed(1)} ms`,
);
console.log(
  `  ratio the steps allow: ${putMs.toFixed(0)} / (${putMs.toFixed(0)} + ${(reserve + complete).toFixed(1)})` +
    ` = ${(putMs / (putMs + reserve + complete)).toFixed(3)} (≥ 0.95 wanted)`,
);

/** Milliseconds of `count` reservations one at a time, a pause between them. */
async function reservations(count: number) {
  const took: number[] = [];
  for (let i = 0; i < count; i += 1) {
    const started = performance.now();
    await reserveUpload();
    took.push(performance.now() - started);
    await setTimeout(50);
  }
  return took;
}
const idle = await reservations(RESERVATIONS);
let uploading = true;
const backToBack = (async () => {
  while (uploading) await paths.direct();
})();
await setTimeout(1_000); // the first PUT's writeback under way
const busy = await reservations(RESERVATIONS);
uploading = false;
await backToBack;
console.log(
  `reservations, one at a time (${RESERVATIONS} each): p50 ${median(idle).toFixed(1)} ms with nothing else running;` +
    ` p50 ${median(busy).toFixed(1)} ms, highest ${Math.max(...busy).toFixed(0)} ms, while ${mebibytes} MiB PUTs follow each other`,
);

for (const id of ids) await call('DELETE', `/v1/storage/objects/${id}`);
await container.objects.removeMany(directKeys);
await app.close();
await container.close();
