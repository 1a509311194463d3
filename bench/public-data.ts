/**
 * Public data at scale, through the whole HTTP pipeline of one process on the test stack: buzz lists
 * and search on an app holding `profiles` profiles and `buzzes` buzzes, and publishing against
 * floor (a) of bench/core.ts.
 *
 * The data is generated in SQL, into a fresh app called with a live key (no sandbox is seeded), by
 * INSERT … SELECT FROM generate_series in batches: usernames user000001…, full names from a small list
 * of names with accents, 1% verified; buzzes over the last year, their authors skewed (a few with
 * thousands, most with a handful), their texts from word lists of five languages with accents, and a
 * third of them ending in a rarer tag (#café42). The apps of earlier runs stay in the tables, as other
 * apps would.
 *
 * Then, with `concurrency` calls in flight:
 *   lists: GET /v1/buzzes?author=… of heavy and light authors, and second pages by their cursors, in
 *     turns with floor (a) (four rounds, after a warm-up long enough for the JIT);
 *   search: GET /v1/search of names, typos, partial usernames and words, each kind also apart;
 *   publishing: POST /v1/me/buzzes with user tokens, and floor (a) (one INSERT in one transaction),
 *   measured in turns (four rounds each) so that the drift of a shared machine hits both alike.
 * Lists and search are measured again with one call in flight: their latency without a queue.
 *
 *   npm run stack -- up --profile test && npx tsx bench/public-data.ts [profiles] [buzzes] [calls] [concurrency]
 */
import { randomInt } from 'node:crypto';
import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { statement } from '../control-plane/src/db/transaction.js';
import { USER_LIMITS } from '../control-plane/src/modules/social/schema.js';
import { inTransaction } from '../control-plane/src/platform/transaction.js';
import { mountFloors } from '../control-plane/test/floors.js';
import { createCustomer } from '../control-plane/test/support.js';
import { cpuLine, cpuMeter, noCpu } from './cpu.js';
import {
  type Figures,
  figures,
  injectOk,
  inTurns,
  latencyLine,
  oneAtATime,
  p95Goal,
  percentiles,
  secondsSince,
  timed,
  useTestStackSettings,
} from './support.js';

useTestStackSettings();
const profiles = Number(process.argv[2] ?? 100_000);
const buzzes = Number(process.argv[3] ?? 1_000_000);
const calls = Number(process.argv[4] ?? 3_000);
const concurrency = Number(process.argv[5] ?? 16);
const container = await createContainer(loadSettings(process.env));
const app = await buildApp(container, { logger: false });
await mountFloors(app, container);
await app.ready();

const words = (text: string) => text.split(' ');
const FIRST_NAMES = words(
  'José María Zoë François Jürgen Søren Ana João Chloé Renée Björn Inés Andrés Lucía Noémie Matthäus Ángel Hélène Raúl Oskar',
);
const LAST_NAMES = words(
  'García Müller Lefèvre Gonçalves Núñez Schröder Dubois Peña Åberg Jiménez Fernández Brontë Łukasiewicz Ødegaard' +
    ' Rodríguez Silva Martín Köhler Bélanger Sánchez',
);
const NAMES = [...FIRST_NAMES, ...LAST_NAMES];
/** Most profiles say nothing of what they are. */
const CATEGORIES = ['', '', '', 'musician', 'athlete', 'café', 'developer', 'writer', 'photographer', 'chef'];
/** What people write, per language, as many words each: the first words are drawn most often. */
const LANGUAGES = [
  words(
    'the and coffee morning music friends weekend city coding game tonight finally new summer rain book garden' +
      ' train office dinner photo sunset release concert football bread market river mountain holiday café naïve' +
      ' résumé jalapeño fiancée piñata school project bicycle festival',
  ),
  words(
    'de el café mañana canción fútbol ciudad niños música corazón playa días año está también después camión' +
      ' jardín película pequeño sueño árbol lección fácil rápido cumpleaños montaña río tortilla paella sevilla' +
      ' león ratón cómo qué allí jamás pingüino búho baño',
  ),
  words(
    'le la été café très où garçon château forêt fenêtre élève déjà noël hôpital théâtre crème brûlée pâtisserie' +
      ' français être même fête île hôtel première rivière bibliothèque marché cœur sœur naïf maïs goût août écran' +
      ' soirée journée musée réunion voilà',
  ),
  words(
    'de não coração ação café manhã pão irmão mãe avó você está também música praia cidade saudade lição canção' +
      ' atenção três açúcar maçã órgão ônibus sábado domingo férias futebol português obrigado amanhã país razão' +
      ' feijão árvore água céu estação sorvete',
  ),
  words(
    'der die und schön müde grün straße mädchen über für größe bäcker brötchen käse frühstück fußball küche' +
      ' zürich köln münchen österreich ärger glück hände tür schüler gemütlich wochenende wanderung regen sonne' +
      ' übung lösung prüfung bücher fräulein äpfel öffnen würde müller',
  ),
];
const PER_LANGUAGE = LANGUAGES[0]!.length;
if (LANGUAGES.some((language) => language.length !== PER_LANGUAGE))
  throw new Error('languages differ in length');
/** The SQL picks a buzz's words by offset into this list: its language's block. */
const WORDS = LANGUAGES.flat();
/** A list as one parameter, which the SQL splits again: no value holds a comma. */
const listParameter = (values: readonly string[]) => values.join(',');
/** Tags end in a number below this: each tag is in a few dozen buzzes. */
const TAG_NUMBERS = 100;

const owner = await createCustomer(container, {
  mode: 'live',
  plan: 'scale',
  dailyRequestCap: 100_000_000,
  balanceMicros: 1_000_000_000_000,
});
const appId = owner.app.id;
const secretKey = { authorization: `Bearer ${owner.token}` };
const userNumber = (n: number) => String(n).padStart(6, '0');

// ----- loading ----------------------------------------------------------------------------------

/** Rows per statement: one transaction each, so that the load prints its progress. */
const BATCH = 200_000;

/** A statement of the load, in a transaction of its own, past the pool's timeout (set for API calls). */
const unbounded = (query: ReturnType<typeof statement>) =>
  inTransaction(container.pool, async (tx) => {
    await tx.query(statement`set local statement_timeout = 0`);
    await tx.query(query);
  });

async function load(
  label: string,
  total: number,
  insert: (from: number, to: number) => ReturnType<typeof statement>,
) {
  const started = performance.now();
  for (let from = 1; from <= total; from += BATCH) {
    const to = Math.min(total, from + BATCH - 1);
    await unbounded(insert(from, to));
    console.log(`  ${label}: ${to} of ${total} (${secondsSince(started)} s)`);
  }
}

console.log(
  `public data: ${profiles} profiles, ${buzzes} buzzes; ${calls} calls a measure, ${concurrency} in flight, node ${process.version}`,
);
console.log(`loading into app ${appId} (live)`);
const loadStarted = performance.now();
await load(
  'profiles',
  profiles,
  (from, to) => statement`
    insert into profiles (app_id, mode, user_id, username, full_name, category, verified, created_at, updated_at)
    select ${appId}, 'live', 'u' || n, 'user' || n,
           (string_to_array(${listParameter(FIRST_NAMES)}, ','))[1 + floor(random() * ${FIRST_NAMES.length})::int]
             || ' ' ||
             (string_to_array(${listParameter(LAST_NAMES)}, ','))[1 + floor(random() * ${LAST_NAMES.length})::int],
           (string_to_array(${listParameter(CATEGORIES)}, ','))[1 + floor(random() * ${CATEGORIES.length})::int],
           i % 100 = 0, at, at
    from (select i, lpad(i::text, 6, '0') as n, now() - interval '1 year' - random() * interval '1 year' as at
          from generate_series(${from}::int, ${to}::int) i) numbered`,
);
// Buzzes in the order of their times, as a service writes them: the newest sit together in the heap,
// which the newest-first scans of lists and search rely on. Authors: the cube of a uniform draw piles
// buzzes onto the first usernames (user000001 has some 2% of them) and leaves a few to each other one.
// The subquery draws once per buzz (random() keeps the planner from flattening it); the correlated one
// draws each word, its `order by k` making string_agg an aggregate of the inner query (of outer
// columns only, it would aggregate the outer one).
await load(
  'buzzes',
  buzzes,
  (from, to) => statement`
    with vocabulary as (select string_to_array(${listParameter(WORDS)}, ',') as words)
    insert into buzzes (id, app_id, mode, author_pk, type, text, created_at)
    select 'bz_' || left(md5(${appId} || ':' || g), 20), ${appId}, 'live', p.pk, 'text',
           (select string_agg(words[language + 1 + floor(power(random(), 2) * ${PER_LANGUAGE})::int], ' '
                              order by k)
            from generate_series(1, length) k) ||
             case when g % 3 = 0
               then ' #' || words[language + 1 + floor(random() * ${PER_LANGUAGE})::int] || (g % ${TAG_NUMBERS})
               else '' end,
           at
    from (select g, ${PER_LANGUAGE} * floor(random() * ${LANGUAGES.length})::int as language,
                 4 + floor(random() * 20)::int as length,
                 'u' || lpad((1 + floor(${profiles} * power(random(), 3)))::int::text, 6, '0') as author,
                 now() - (1 - (g - random()) / ${buzzes}) * interval '1 year' as at
          from generate_series(${from}::int, ${to}::int) g) drawn
    cross join vocabulary
    join profiles p on p.app_id = ${appId} and p.mode = 'live' and p.user_id = drawn.author
    order by g`,
);
const countersStarted = performance.now();
await unbounded(statement`
  update profiles p set buzzes = counted.buzzes
  from (select author_pk, count(*)::int as buzzes from buzzes
        where app_id = ${appId} and mode = 'live' and deleted_at is null group by author_pk) counted
  where p.pk = counted.author_pk`);
// VACUUM rather than ANALYZE alone: it also empties the search index's pending list (which every
// search would otherwise scan) and sets the visibility map, as autovacuum soon would, so that
// autovacuum does not start on the new rows in the middle of the measures. The names' words, pairs
// and vocabulary too (their triggers wrote them): until analyzed, the new app looks small in them,
// and search was planned for a small app (PostgreSQL 18 ms a search instead of 5).
await container.pool.connect(async (connection) => {
  await connection.query(statement`set statement_timeout = 0`);
  await connection.query(
    statement`vacuum (analyze) profiles, buzzes, profile_words, profile_word_pairs, profile_vocabulary`,
  );
  await connection.query(statement`reset statement_timeout`);
});
console.log(`  counters, vacuum and analyze (${secondsSince(countersStarted)} s)`);

const counts: { profiles: number; buzzes: number; all_profiles: number; all_buzzes: number } =
  await container.pool.one(statement`
    select (select count(*) from profiles where app_id = ${appId}) as profiles,
           (select count(*) from buzzes where app_id = ${appId}) as buzzes,
           (select count(*) from profiles) as all_profiles,
           (select count(*) from buzzes) as all_buzzes`);
const spread: { thousands: number; most: number; median: number } = await container.pool.one(statement`
  select count(*) filter (where buzzes >= 1000) as thousands, max(buzzes) as most,
         percentile_disc(0.5) within group (order by buzzes) as median
  from profiles where app_id = ${appId} and mode = 'live'`);
console.log(
  `loaded in ${secondsSince(loadStarted)} s: the app holds ${counts.profiles} profiles and ${counts.buzzes} buzzes` +
    ` (${spread.thousands} authors with 1000 or more, the most ${spread.most}, the median ${spread.median});` +
    ` the tables hold ${counts.all_profiles} profiles and ${counts.all_buzzes} buzzes`,
);

// ----- measuring ----------------------------------------------------------------------------------

const WARM_UP = Math.min(200, calls);
const LIST_WARM_UP = 2_000;
/** Rounds in which a path and its floor take turns, so that the machine's drift hits both alike. */
const ROUNDS = 4;
const { charged } = cpuMeter();
/** A measured run with `concurrency` calls in flight. */
const measure = (count: number, request: () => Promise<unknown>) => timed(count, concurrency, request);
const line = (label: string, f: Figures) =>
  `  ${label.padEnd(46)} ${f.perSecond.toFixed(0).padStart(6)}/s  ${latencyLine(f)}`;

/** A call through the app from an address of its own; anything but a success ends the bench. */
const call = injectOk.bind(null, app);

const pickOne = <T>(list: readonly T[]) => list[randomInt(list.length)]!;
/** What a user types: no accents, lower case. */
const fold = (text: string) =>
  text
    .normalize('NFD')
    .replace(/\p{Mn}/gu, '')
    .toLowerCase();
/** Two neighbouring letters swapped. */
function typo(word: string) {
  const at = randomInt(word.length - 1);
  return word.slice(0, at) + word.charAt(at + 1) + word.charAt(at) + word.slice(at + 2);
}

const heavy: readonly string[] = await container.pool.anyFirst(statement`
  select username from profiles where app_id = ${appId} and mode = 'live' order by buzzes desc limit 20`);
const light: readonly string[] = await container.pool.anyFirst(statement`
  select username from profiles where app_id = ${appId} and mode = 'live' order by random() limit 1000`);

// Lists: heavy and light authors in turns; the second pages follow the cursors the first ones gave.
const secondPages: { author: string; cursor: string }[] = [];
let listed = 0;
const firstPage = async () => {
  const author = pickOne(listed++ % 2 === 0 ? heavy : light);
  const page: { next_cursor: string | null } = (
    await call('GET', `/v1/buzzes?author=${author}&limit=20`, secretKey)
  ).json();
  if (page.next_cursor) secondPages.push({ author, cursor: page.next_cursor });
};
let paged = 0;
const secondPage = () => {
  const { author, cursor } = secondPages[paged++ % secondPages.length]!;
  return call('GET', `/v1/buzzes?author=${author}&limit=20&cursor=${cursor}`, secretKey);
};

const floor = () => call('POST', '/bench/floor/insert', {});

/**
 * Paths measured in turns (`ROUNDS` rounds of `perRound` calls each) after a warm-up of each, printed
 * with the CPU a call took. Their figures, in order.
 */
async function measuredInTurns(paths: [label: string, request: () => Promise<unknown>][], warmUp = WARM_UP) {
  const perRound = Math.ceil(calls / ROUNDS);
  for (const [, request] of paths) await measure(warmUp, request);
  const taken = await inTurns(
    Object.fromEntries(paths.map(([label, request]) => [label, () => measure(perRound, request)])),
    ROUNDS,
  );
  return paths.map(([label]) => {
    const result = figures(taken[label]!.runs);
    console.log(line(label, result));
    console.log(cpuLine(taken[label]!.cpu, perRound * ROUNDS, 3));
    return result;
  });
}

// The absolute goals are for an idle machine: the floor in the same turns says what this one gives.
// The lists' warm-up is longer: a list is a few microseconds of JIT-compiled code once warm, and a
// server that lists has long been warm.
console.log(`\nlists, in turns with their floor (${ROUNDS} rounds, ${LIST_WARM_UP} calls of warm-up each)`);
const [, firstPages, nextPages] = await measuredInTurns(
  [
    ['floor (a) one INSERT in one transaction', floor],
    ['GET /v1/buzzes?author, first page', firstPage],
    ['GET /v1/buzzes?author&cursor, second page', secondPage],
  ],
  LIST_WARM_UP,
);
console.log(`${p95Goal(firstPages!, 10)} (first pages)`);
console.log(`${p95Goal(nextPages!, 10)} (second pages)`);

console.log(`\nsearch (${WARM_UP} calls of warm-up)`);
// Search: the kinds in turns, both groups (profiles and buzzes) each time, as an app's search box.
const SEARCHES: [kind: string, query: () => string][] = [
  ['name', () => fold(pickOne(NAMES))],
  ['name with a typo', () => typo(fold(pickOne(NAMES)))],
  ['partial username (user0421)', () => `user${userNumber(randomInt(1, profiles + 1)).slice(0, 4)}`],
  ['word', () => fold(pickOne(WORDS))],
  [
    'two words',
    () => {
      const language = pickOne(LANGUAGES);
      return `${fold(pickOne(language))} ${fold(pickOne(language))}`;
    },
  ],
  ['rare word (a tag: cafe42)', () => `${fold(pickOne(WORDS))}${randomInt(TAG_NUMBERS)}`],
];
/** A search task that records each call's latency under its kind in `byKind`. */
const searchOf = (byKind: Map<string, number[]>) => {
  let searched = 0;
  return async () => {
    const [kind, query] = SEARCHES[searched++ % SEARCHES.length]!;
    const started = performance.now();
    await call('GET', `/v1/search?q=${encodeURIComponent(query())}&limit=20`, secretKey);
    byKind.get(kind)?.push(performance.now() - started);
  };
};
const kinds = () => new Map(SEARCHES.map(([kind]) => [kind, [] as number[]]));
await measure(WARM_UP, searchOf(kinds()));
/** Search's figures, with its latencies by kind. */
async function searched(label: string, count: number, inFlight: number) {
  const byKind = kinds();
  const spent = noCpu();
  const result = figures([await charged(spent, () => timed(count, inFlight, searchOf(byKind)))]);
  console.log(line(label, result));
  console.log(cpuLine(spent, count, 3));
  console.log(p95Goal(result, 50));
  for (const [kind, latencies] of byKind) {
    console.log(`    ${kind.padEnd(44)} ${latencyLine(percentiles(latencies))}`);
  }
}
await searched('GET /v1/search', calls, concurrency);

// The same calls one at a time: their latency without a queue.
const alone = Math.ceil(calls / 3);
console.log(`\none call in flight (${alone} calls each)`);
for (const [label, result] of await oneAtATime(alone, [
  ['GET /v1/buzzes?author, first page', firstPage],
  ['GET /v1/buzzes?author&cursor, second page', secondPage],
])) {
  console.log(line(label, result));
  console.log(p95Goal(result, 10));
}
await searched('GET /v1/search', alone, 1);

// Publishing: each user may publish USER_LIMITS.buzzes.limit buzzes an hour, so the calls are spread
// over enough of the loaded profiles' users.
const publishCalls = WARM_UP + ROUNDS * Math.ceil(calls / ROUNDS);
const publishers = Math.max(64, Math.ceil(publishCalls / USER_LIMITS.buzzes.limit));
const userTokens = await Promise.all(
  Array.from({ length: publishers }, async (_, k) => {
    const userId = `u${userNumber(1 + Math.floor((k * profiles) / publishers))}`;
    const minted: { token: string } = (
      await call('POST', `/v1/users/${userId}/tokens`, secretKey, {})
    ).json();
    return { authorization: `Bearer ${minted.token}` };
  }),
);
const sentence = () => {
  const language = pickOne(LANGUAGES);
  return Array.from({ length: 12 }, () => pickOne(language)).join(' ');
};
let published = 0;
const publish = () =>
  call('POST', '/v1/me/buzzes', userTokens[published++ % publishers]!, { text: sentence() });
console.log(`\npublishing, ${publishers} users, in turns with its floor (${ROUNDS} rounds)`);
const [publishing, floorFigures] = (await measuredInTurns([
  ['POST /v1/me/buzzes', publish],
  ['  its floor (a) one INSERT in one transaction', floor],
])) as [Figures, Figures];
console.log(
  `    ratio ${(publishing.perSecond / floorFigures.perSecond).toFixed(2)}× (a) throughput (≥ 0.5 wanted);` +
    ` p99 ${(publishing.p99 / floorFigures.p99).toFixed(2)}× the floor's`,
);

await app.close();
await container.close();
