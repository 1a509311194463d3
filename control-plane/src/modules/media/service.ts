import { pipeline, type Readable, Transform } from 'node:stream';
import type { Redis } from 'ioredis';
import { type DatabasePool, ForeignKeyIntegrityConstraintViolationError } from 'slonik';
import type { MediaProbe, MediaTools } from '../../adapters/media-tools.js';
import { redisScript } from '../../adapters/redis.js';
import type { ObjectStore } from '../../adapters/s3.js';
import type { Accrual } from '../../platform/accrual.js';
import { clientNetwork } from '../../platform/addresses.js';
import type { Principal } from '../../platform/caller.js';
import { type Clock, fixedWindow } from '../../platform/clock.js';
import { errors, ServiceError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import { inTransaction, type Transaction } from '../../platform/transaction.js';
import type { StorageService } from '../storage/service.js';
import { sandboxClips } from './sandbox.js';
import {
  MEDIA_MAX_AGE_SECONDS,
  MEDIA_PREFIX,
  type MediaDraft,
  type MediaRules,
  THUMBNAIL_SIDE,
} from './schema.js';

import { mediaStore } from './store.js';

/** How long the signed URL ffprobe and ffmpeg read a file through stays valid. */
const TOOL_URL_SECONDS = 300;
/** A thumbnail is stored a moment before its write commits: one not kept by then is left over. */
const ORPHAN_AGE_MS = 3_600_000;
/** Thumbnails removed in one request to the object store (S3's most), in one sweep's transaction. */
const SWEEP_BATCH = 1_000;
/**
 * A deleted medium's thumbnail is removed right after the commit; the sweep takes it over when that
 * has not happened within this (a removal that failed), rather than race the removal in flight.
 */
const REMOVAL_GRACE_MS = 300_000;
const HOUR_MS = 3_600_000;
/**
 * Reserves bytes of a download (A1) in the address's hour (K1) before they are sent, so that downloads
 * at once count each other: granted (1) while what the hour held before is under the cap (A2), so a
 * download may end past it by a slice at most; refused (0, nothing kept) once it is not. The hour's
 * counter expires after A3 seconds.
 */
const RESERVE_BYTES = `
local used = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3], 'NX')
if used - tonumber(ARGV[1]) >= tonumber(ARGV[2]) then
  redis.call('DECRBY', KEYS[1], ARGV[1])
  return 0
end
return 1`;
/** Gives back reserved bytes (A1) that were not sent, unless the hour's counter (K1) has expired. */
const GIVE_BACK_BYTES = `
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('DECRBY', KEYS[1], ARGV[1]) end
return 0`;
/**
 * A download reserves its bytes a slice at a time as it sends them: a long stream (a player's
 * `bytes=0-`) holds no more of the budget than it is about to send.
 */
const RESERVED_SLICE_BYTES = 8 * 1024 ** 2;
/** One range of bytes, as browsers ask for a video's (`bytes=0-`, `bytes=100-199`, `bytes=-500`). */
const SINGLE_RANGE = /^bytes=(\d+-\d*|-\d+)$/;

/**
 * Soft-deletes, as its own delete does, what a product shows of media (moments, studio assets) that
 * storage took down with their objects.
 */
export type DeleteShowing = (tx: Transaction, mediaIds: readonly string[], at: Date) => Promise<void>;

/** Where a request named the file, for the 422's field. */
export interface FileField {
  in: 'body';
  name: string;
}

/** The type browsers are told, from what ffprobe found (never from what the uploader declared alone). */
function contentTypeOf(probe: MediaProbe, codec: string, declared: string): string {
  if (probe.format.startsWith('mov')) return declared === 'video/quicktime' ? declared : 'video/mp4';
  if (probe.format.startsWith('matroska')) return declared === 'video/x-matroska' ? declared : 'video/webm';
  return { png: 'image/png', mjpeg: 'image/jpeg', webp: 'image/webp', gif: 'image/gif' }[codec] ?? declared;
}

/**
 * Public media: videos and photos made from storage objects, checked with ffprobe, with a thumbnail
 * made by ffmpeg, served without a key at /media/{id} while what shows them exists. Their bytes stay
 * the storage object's (billed as stored bytes); what is served counts as bandwidth of their app.
 */
export function createMediaService(deps: {
  pool: DatabasePool;
  clock: Clock;
  objects: ObjectStore;
  tools: MediaTools;
  accrual: Accrual;
  storage: StorageService;
  publicUrl: string;
  redis: Redis;
  /** Bytes one client address may download an hour; 0 for no limit. */
  bytesPerAddressHour: number;
  onError?: (error: unknown) => void;
}) {
  const base = deps.publicUrl.replace(/\/$/, '');
  /** A time `ms` after the clock's now. */
  const fromNow = (ms: number) => new Date(deps.clock.now().getTime() + ms);
  const onError = deps.onError ?? (() => {});

  /** Checks a file against the rules: its picture, sound, length and size, as ffprobe reads them. */
  async function inspect(
    url: string,
    objectId: string,
    declaredType: string,
    rules: MediaRules,
    field: FileField,
  ) {
    const refuse = (why: string) => errors.invalidField(field.in, field.name, why);
    const what = rules.kind === 'video' ? 'a video' : 'a photo';
    const probe = await deps.tools.probe(url, rules.demuxers);
    if ('missing' in probe) throw errors.notFound(`Object ${objectId}`);
    if ('unreadable' in probe) {
      throw refuse(`is not ${what} this API accepts: ${rules.containers} only`);
    }
    const picture = probe.streams.find((stream) => stream.type === 'video');
    if (!picture?.width || !picture.height) throw refuse(`is not ${what}: it has no picture`);
    if (!rules.codecs.includes(picture.codec)) {
      throw refuse(`has a ${picture.codec} picture; accepted: ${rules.codecs.join(', ')}`);
    }
    for (const sound of probe.streams.filter((stream) => stream.type === 'audio')) {
      if (!rules.audioCodecs.includes(sound.codec)) {
        throw refuse(`has ${sound.codec} sound; accepted: ${rules.audioCodecs.join(', ') || 'none'}`);
      }
    }
    let durationMs: number | null = null;
    if (rules.kind === 'video') {
      if (probe.duration === null) throw refuse('is a video whose length cannot be read');
      if (rules.maxSeconds !== undefined && probe.duration > rules.maxSeconds) {
        throw refuse(`is ${probe.duration.toFixed(1)} s long; at most ${rules.maxSeconds} s`);
      }
      durationMs = Math.max(1, Math.round(probe.duration * 1000));
    }
    // Shown upright: a phone's portrait video is stored sideways with a quarter turn to apply.
    const sideways = Math.abs(picture.rotation ?? 0) % 180 === 90;
    const width = sideways ? picture.height : picture.width;
    const height = sideways ? picture.width : picture.height;
    if (Math.max(width, height) > rules.maxSide) {
      throw refuse(`is ${width}×${height}; at most ${rules.maxSide} pixels a side`);
    }
    const thumbnail = await deps.tools.thumbnail(url, rules.demuxers, {
      // Past a fade-in from black, well inside even a short clip.
      atSeconds: durationMs === null ? 0 : Math.min(1, durationMs / 4_000),
      maxSide: THUMBNAIL_SIDE,
    });
    if ('undecodable' in thumbnail) throw refuse(`is ${what} none of whose pictures decodes`);
    return {
      contentType: contentTypeOf(probe, picture.codec, declaredType),
      width,
      height,
      durationMs,
      thumbnail,
    };
  }

  /**
   * The address's downloads this hour: its Redis counter and the seconds left in the hour. Per network,
   * as the lockout counts: an IPv6 /64 is one client's, however it rotates its addresses.
   */
  function addressHour(address: string) {
    const hour = fixedWindow(deps.clock.now(), HOUR_MS / 1000);
    return { key: `svc:media-bytes:${hour.index}:${clientNetwork(address)}`, secondsLeft: hour.secondsLeft };
  }

  const reserveBytes = redisScript<number>(deps.redis, RESERVE_BYTES);
  const giveBackBytes = redisScript<number>(deps.redis, GIVE_BACK_BYTES);
  /** Reserves up to a slice more of a download's `total`; answers how many bytes, or 0 when refused. */
  const reserveSlice = async (key: string, total: number, reserved: number) => {
    const bytes = Math.min(RESERVED_SLICE_BYTES, total - reserved);
    const granted = await reserveBytes(1, key, bytes, deps.bytesPerAddressHour, HOUR_MS / 1000);
    return granted === 1 ? bytes : 0;
  };
  const overCap = (hour: { secondsLeft: number }) =>
    errors.rateLimited(
      'This address downloaded its hour’s share of media; try again in the next hour',
      hour.secondsLeft,
    );

  /**
   * Bytes streamed to a client, counted as they go and accrued as bandwidth once the stream ends. A
   * capped download holds `reserved` of its `total`, reserves a slice more before it sends past it
   * (cut short when the address's hour is spent), and gives back what it did not send at its end.
   */
  function metered(
    body: Readable,
    payer: { accountId: string; appId: string; mode: 'live' | 'test' },
    budget: { key: string; total: number; reserved: number } | null,
  ) {
    let bytes = 0;
    // Counted as each chunk passes (a 'data' listener would let the stream flow before it is sent).
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        const sent = bytes + chunk.length;
        const pass = () => {
          bytes = sent;
          done(null, chunk);
        };
        if (!budget || sent <= budget.reserved) return pass();
        void (async () => {
          while (sent > budget.reserved) {
            const granted = await reserveSlice(budget.key, budget.total, budget.reserved);
            // Past the first slice, which covers the first chunks, the answer has begun: cut short.
            if (granted === 0) throw new Error('the address’s hour of media is spent');
            budget.reserved += granted;
          }
        })().then(pass, (error: Error) => done(error));
      },
    });
    counter.on('close', () => {
      if (bytes > 0)
        deps.accrual.add(payer, { product: 'bandwidth', metric: 'gb', quantity: bytes }).catch(onError);
      if (budget && budget.reserved > bytes)
        giveBackBytes(1, budget.key, budget.reserved - bytes).catch(onError);
    });
    // pipeline, not pipe: a client that goes away destroys MinIO's response too, freeing its socket.
    pipeline(body, counter, () => {});
    return counter;
  }

  /** Removes thumbnails scheduled for removal, and takes them off the schedule. */
  async function removeThumbnails(keys: readonly string[]) {
    await deps.objects.removeMany(keys);
    await mediaStore(deps.pool).unschedule(keys);
  }

  /**
   * Deletes media and schedules their thumbnails' removal in the transaction; removes them after the
   * commit (or the sweep does, should that fail). Answers the ids of the media deleted.
   */
  async function release(
    tx: Transaction,
    at: Date,
    by: { ids: readonly string[] } | { objectIds: readonly string[] },
  ): Promise<string[]> {
    const store = mediaStore(tx);
    const released = await store.release(at, by);
    // The sandbox's clips are shared by every test app: only a medium's own thumbnail goes with it.
    const own = released.map((media) => media.thumbnail_key).filter((key) => key.startsWith(MEDIA_PREFIX));
    if (own.length > 0) {
      await store.scheduleRemoval(own, fromNow(REMOVAL_GRACE_MS));
      tx.afterCommit(() => removeThumbnails(own));
    }
    return released.map((media) => media.id);
  }

  /** The products showing media, registered as they are made. */
  const showing: DeleteShowing[] = [];

  return {
    /** The sandbox's clips: the parts of moments and studio assets show them. */
    sandboxClips: sandboxClips({ objects: deps.objects, tools: deps.tools }),

    /** ffprobe's and ffmpeg's versions; throws when either cannot run. */
    checkTools: () => deps.tools.versions(),

    urls: (id: string) => ({ url: `${base}/media/${id}`, thumbnail_url: `${base}/media/${id}/thumbnail` }),

    /**
     * Checks a ready storage object as media of the rules' kind and stores its thumbnail; nothing is
     * recorded yet. Runs before the write's transaction takes a connection: ffmpeg takes a while.
     */
    async prepare(
      principal: Principal,
      source: { objectId: string; ownerUserId?: string },
      rules: MediaRules,
      field: FileField,
    ): Promise<MediaDraft> {
      const object = await deps.storage.readyObject(principal, source.objectId, source.ownerUserId);
      const url = await deps.objects.presignInternalGet(object.storageKey, TOOL_URL_SECONDS);
      const checked = await inspect(url, object.id, object.contentType, rules, field);
      const id = newId('med');
      const thumbnailKey = `${MEDIA_PREFIX}${principal.mode}/${principal.appId}/${id}.jpg`;
      // Scheduled first: removed unless its write keeps it within the hour, whatever becomes of this process.
      await mediaStore(deps.pool).scheduleRemoval([thumbnailKey], fromNow(ORPHAN_AGE_MS));
      await deps.objects.put(thumbnailKey, checked.thumbnail, 'image/jpeg');
      return {
        id,
        kind: rules.kind,
        objectId: object.id,
        storageKey: object.storageKey,
        contentType: checked.contentType,
        sizeBytes: object.sizeBytes,
        width: checked.width,
        height: checked.height,
        durationMs: checked.durationMs,
        thumbnailKey,
        thumbnailBytes: checked.thumbnail.length,
      };
    },

    /**
     * Records prepared media in the write's transaction, keeping its thumbnail; its object removed
     * meanwhile is a 404.
     */
    async record(tx: Transaction, principal: Principal, draft: MediaDraft): Promise<void> {
      const store = mediaStore(tx);
      // Past the hour the sweep may have removed it; the write then fails rather than show none.
      if (!(await store.keep(draft.thumbnailKey, deps.clock.now())))
        throw new Error(`Thumbnail ${draft.thumbnailKey} was swept before its media was recorded`);
      try {
        await store.insert({
          ...draft,
          appId: principal.appId,
          accountId: principal.accountId,
          mode: principal.mode,
          at: deps.clock.now(),
        });
      } catch (error) {
        if (error instanceof ForeignKeyIntegrityConstraintViolationError)
          throw errors.notFound(`Object ${draft.objectId}`);
        throw error;
      }
    },

    /**
     * Drops a draft whose write failed: its thumbnail. Its removal stays scheduled: the write's
     * transaction, still open, may hold the row (the sweep finds the object gone, which is no error).
     */
    discard: (draft: MediaDraft) => deps.objects.removeMany([draft.thumbnailKey]).catch(onError),

    /** Deletes media: its URLs answer 404 at once, its object may be removed, its thumbnail goes. */
    release: (tx: Transaction, ids: readonly string[]) => release(tx, deps.clock.now(), { ids }),

    /** Registers a product that shows media, so that what it shows goes with the objects storage takes. */
    registerShowing: (deleteShowing: DeleteShowing) => {
      showing.push(deleteShowing);
    },

    /**
     * Removes the thumbnails whose removal is due: those of writes that did not keep theirs within the
     * hour, and of deletions whose removal after the commit failed. Reads only those, a batch a
     * transaction; `under` narrows it to one app's (`media/{mode}/{app}/`). A batch the object store
     * refuses is put off an hour, so that it holds up no other; the first such failure is thrown at
     * the end.
     */
    async sweepThumbnails(under = MEDIA_PREFIX): Promise<number> {
      if (!under.startsWith(MEDIA_PREFIX)) throw new Error(`${under} is not under ${MEDIA_PREFIX}`);
      let removed = 0;
      let failure: unknown;
      for (;;) {
        const due = await inTransaction(deps.pool, async (tx) => {
          const store = mediaStore(tx);
          const keys = await store.dueRemovals(deps.clock.now(), under, SWEEP_BATCH);
          if (keys.length === 0) return keys;
          try {
            await deps.objects.removeMany(keys);
            await store.unschedule(keys);
            removed += keys.length;
          } catch (error) {
            failure ??= error;
            await store.postpone(keys, fromNow(HOUR_MS));
          }
          return keys;
        });
        if (due.length < SWEEP_BATCH) break;
      }
      if (failure !== undefined) throw failure;
      return removed;
    },

    /**
     * Deletes the media made from objects that are going (storage's sweep and expiries), and the
     * moments and studio assets showing them: nothing else would delete those, which reads hide but
     * the listings' indexes would keep.
     */
    async releaseObjects(tx: Transaction, objectIds: readonly string[]): Promise<void> {
      if (objectIds.length === 0) return;
      const at = deps.clock.now();
      const mediaIds = await release(tx, at, { objectIds });
      if (mediaIds.length === 0) return;
      for (const deleteShowing of showing) await deleteShowing(tx, mediaIds, at);
    },

    /**
     * Serves media or its thumbnail to anyone with the URL: one range when asked (206), metered as
     * bandwidth of the media's app. Deleted media, or media whose bytes are gone, is a 404; an address
     * past its hour's bytes a 429 (across replicas: each download reserves its bytes as it starts, and
     * gives back what it did not send when it ends).
     */
    async serve(id: string, variant: 'file' | 'thumbnail', rangeHeader: string | undefined, address: string) {
      const hour = addressHour(address);
      const capped = deps.bytesPerAddressHour > 0;
      // Refused before anything is read when it is already past; the reservation below decides.
      if (capped && Number((await deps.redis.get(hour.key)) ?? 0) >= deps.bytesPerAddressHour)
        throw overCap(hour);
      const media = await mediaStore(deps.pool).live(id);
      if (!media) throw errors.notFound(`Media ${id}`);
      const thumbnail = variant === 'thumbnail';
      // Several ranges at once are rare from players; the whole file is a correct answer to them.
      const range = rangeHeader !== undefined && SINGLE_RANGE.test(rangeHeader) ? rangeHeader : undefined;
      const read = await deps.objects.read(thumbnail ? media.thumbnail_key : media.storage_key, range);
      if (read === null) throw errors.notFound(`Media ${id}`);
      if ('unsatisfiable' in read) {
        throw new ServiceError('invalid_request', `The range ${rangeHeader} is outside the file`, {
          status: 416,
          headers: { 'content-range': `bytes */${read.unsatisfiable}` },
        });
      }
      // The first slice is the admission: refused, nothing is sent. The read is closed either way.
      const reserved = capped
        ? await reserveSlice(hour.key, read.length, 0).catch((error: unknown) => {
            read.body.destroy();
            throw error;
          })
        : 0;
      if (capped && reserved === 0 && read.length > 0) {
        read.body.destroy();
        throw overCap(hour);
      }
      return {
        status: read.contentRange ? 206 : 200,
        headers: {
          'content-type': thumbnail ? 'image/jpeg' : media.content_type,
          'content-length': String(read.length),
          ...(read.contentRange ? { 'content-range': read.contentRange } : {}),
          'accept-ranges': 'bytes',
          // The bytes of an id never change; a deletion must reach browsers within a minute.
          'cache-control': `public, max-age=${MEDIA_MAX_AGE_SECONDS}`,
          etag: `"${id}${thumbnail ? '-t' : ''}"`,
          'x-content-type-options': 'nosniff',
          'access-control-allow-origin': '*',
          'cross-origin-resource-policy': 'cross-origin',
        },
        body: metered(
          read.body,
          { accountId: media.account_id, appId: media.app_id, mode: media.mode },
          capped ? { key: hour.key, total: read.length, reserved } : null,
        ),
      };
    },
  };
}

export type MediaService = ReturnType<typeof createMediaService>;
