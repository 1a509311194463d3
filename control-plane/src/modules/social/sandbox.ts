import { sql } from 'slonik';
import { type SandboxPart, sandboxIds } from '../../platform/sandbox.js';
import type { Db } from '../../platform/transaction.js';
import { REACTION_KINDS } from './schema.js';

/**
 * The test mode's sandbox: the same public data in every app, so a developer can build a feed, a
 * profile page and search before any user exists. Only the ids (they are unique across apps) and
 * the times (relative to the seeding) differ from one app to another.
 */

/**
 * A language's sandbox profiles, and what people of that language write. Buzzes join whole
 * sentences, so each reads right in its language; the accents give accent-folded search something
 * to find ("cafe" finds "café").
 */
interface Language {
  /** [name (the user id is `sandbox-<name>`), username, full name, category, verified] */
  profiles: readonly (readonly [
    name: string,
    username: string,
    fullName: string,
    category: string,
    verified?: true,
  ])[];
  posts: readonly string[];
  replies: readonly string[];
  tags: readonly string[];
}

const LANGUAGES = {
  en: {
    profiles: [
      ['ada', 'ada_codes', 'Ada Lovelace', 'developer', true],
      ['grace', 'grace.hopper', 'Grace Hopper', 'developer'],
      ['marcus', 'marcus_beats', 'Marcus Reed', 'musician', true],
      ['lily', 'lilybakes', 'Lily Chen', 'bakery'],
      ['oliver', 'oliver.runs', 'Oliver Grant', 'athlete'],
      ['nora', 'nora_reads', 'Nora Whitfield', 'writer'],
      ['sam', 'sam.photos', 'Sam Okafor', 'photographer'],
      ['riverside', 'riverside_high', 'Riverside High School', 'school', true],
    ],
    posts: [
      'Just pushed a fix that took me three days to find.',
      'Coffee first, code second.',
      'New song drops on Friday, stay tuned!',
      'Who else is watching the match tonight?',
      'Finally tried the café on the corner: the croissants are worth the queue.',
      'Rainy Sunday, good book, no plans.',
      'Morning run done: 10 km before breakfast.',
      'Our students built a weather station this week!',
      'Sourdough number 42 came out perfect.',
      'Golden hour at the harbour never gets old.',
      'Refactoring is just tidying up for a future you.',
      'Rehearsal ran late but the new chorus is finally there.',
    ],
    replies: ['Love this!', 'So true.', 'Congrats!', 'Where is this?', 'Can’t wait!', 'Haha, same here.'],
    tags: ['#weekend', '#coding', '#music', '#coffee', '#photography'],
  },
  es: {
    profiles: [
      ['lucia', 'lucia.garcia', 'Lucía García', 'musician', true],
      ['mateo', 'mateo_futbol', 'Mateo Hernández', 'athlete'],
      ['cafe-del-sol', 'cafe_del_sol', 'Café del Sol', 'cafe'],
      ['sofia', 'sofia.design', 'Sofía Ramírez', 'designer'],
      ['javier', 'javi_cocina', 'Javier Muñoz', 'chef'],
    ],
    posts: [
      'Buenos días desde el café de la esquina ☕',
      'Mañana tocamos en Sevilla, ¡os esperamos!',
      '¿Alguien sabe dónde comprar pan de verdad en Madrid?',
      'El partido de anoche fue increíble.',
      'Nueva receta: tortilla de patatas con cebolla, obviamente.',
      'Hoy aprendí algo nuevo sobre TypeScript y estoy feliz.',
      'La música en directo siempre me emociona.',
      'Qué día más bonito para pasear por el Retiro.',
      'Por fin terminé el diseño del cartel.',
      'Un café con leche y a trabajar.',
    ],
    replies: ['¡Qué bonito!', '¡Enhorabuena!', 'Me encanta.', '¿Dónde es eso?', '¡Totalmente de acuerdo!'],
    tags: ['#música', '#café', '#fútbol', '#diseño', '#mañana'],
  },
  fr: {
    profiles: [
      ['amelie', 'amelie_dessine', 'Amélie Lefèvre', 'artist'],
      ['theo', 'theo.velo', 'Théo Girard', 'athlete'],
      ['boulangerie', 'boulangerie_etoile', 'Boulangerie de l’Étoile', 'bakery', true],
      ['chloe', 'chloe.code', 'Chloé Dubois', 'developer'],
      ['ecole', 'ecole_st_exupery', 'École Saint-Exupéry', 'school'],
    ],
    posts: [
      'Rien de tel qu’un café crème en terrasse.',
      'Nouvelle fournée de pains au chocolat ce matin !',
      'La crème brûlée du jour est prête.',
      'Répétition ce soir, on prépare le concert de décembre.',
      'Quelle belle journée pour une balade à vélo le long de la Loire.',
      'J’ai enfin corrigé ce bug, quelle délivrance.',
      'Les élèves ont présenté leurs exposés, très fière d’eux.',
      'Exposition à Montréal la semaine prochaine, venez nombreux.',
      'Un peu de pluie à Paris, mais le marché reste animé.',
      'Déjeuner au soleil, ça fait du bien.',
    ],
    replies: ['Magnifique !', 'Bravo !', 'J’adore.', 'C’est où ?', 'Trop bien !'],
    tags: ['#café', '#pâtisserie', '#vélo', '#été', '#musique'],
  },
  de: {
    profiles: [
      ['jonas', 'jonas.muller', 'Jonas Müller', 'developer'],
      ['lena', 'lena_wandert', 'Lena Schäfer', 'traveler'],
      ['konditorei', 'konditorei_kuehn', 'Konditorei Kühn', 'cafe'],
      ['felix', 'felix_gross', 'Felix Groß', 'musician'],
    ],
    posts: [
      'Frische Brötchen und ein großer Kaffee – so fängt der Tag gut an.',
      'Heute Abend spielen wir im Café Müller in Köln.',
      'Endlich Wochenende! Ab in die Berge.',
      'Der neue Käsekuchen ist da, schnell sein lohnt sich.',
      'Schon wieder Stau auf der Brücke, ab morgen nehme ich das Fahrrad.',
      'Unser Team hat die Tests endlich grün bekommen.',
      'Wanderung über den Grat, die Aussicht war unglaublich schön.',
      'Gemütlicher Abend mit Tee und einem guten Buch.',
      'Übermorgen beginnt das Straßenfest in München.',
      'Die Probe lief großartig, das neue Lied sitzt.',
    ],
    replies: ['Wunderschön!', 'Glückwunsch!', 'Sehr cool.', 'Wo ist das?', 'Ich bin dabei!'],
    tags: ['#Kaffee', '#Wochenende', '#Musik', '#Wandern', '#Frühling'],
  },
  pt: {
    profiles: [
      ['joao', 'joao.surf', 'João Conceição', 'athlete'],
      ['beatriz', 'bia_musica', 'Beatriz Araújo', 'musician'],
      ['padaria', 'padaria_sao_jorge', 'Padaria São Jorge', 'bakery'],
    ],
    posts: [
      'Bom dia! Um café e um pão de queijo, por favor.',
      'O mar estava perfeito hoje de manhã em Florianópolis.',
      'Ensaio aberto sexta-feira, venham cantar com a gente.',
      'Pão fresquinho saindo do forno agora mesmo.',
      'Que saudade de São Paulo em dia de chuva.',
      'Terminei o projeto e vou comemorar com um açaí.',
      'A vista do Pão de Açúcar não cansa nunca.',
      'Fim de semana de música, praia e amigos.',
    ],
    replies: ['Que lindo!', 'Parabéns!', 'Adorei.', 'Onde é isso?', 'Bora!'],
    tags: ['#café', '#praia', '#música', '#verão'],
  },
  ja: {
    profiles: [
      ['kenji', 'kenji_tanaka', '田中 健二', 'developer', true],
      ['yuki', 'yuki.snow', '佐藤 由紀', 'photographer'],
      ['sakura', 'sakura_cafe', 'さくらカフェ', 'cafe'],
      ['haruto', 'haruto.music', '山本 陽翔', 'musician'],
    ],
    posts: [
      '今日は新しいカフェに行ってきました。',
      '朝のコーヒーが一番おいしい。',
      '新曲のレコーディングが終わりました！',
      '桜がきれいに咲いています。',
      'バグを直すのに三時間かかった…',
      '週末は京都で写真を撮ります。',
      'ライブに来てくれてありがとう！',
      '雨の日は家で読書。',
    ],
    replies: ['すごい！', 'おめでとう！', 'いいね！', 'どこですか？', '行きたい！'],
    tags: ['#カフェ', '#写真', '#音楽', '#東京'],
  },
  ar: {
    profiles: [
      ['layla', 'layla.writes', 'ليلى حسن', 'writer'],
      ['omar', 'omar_chef', 'عمر الفاسي', 'chef', true],
      ['nour', 'madrasat_alnour', 'مدرسة النور', 'school'],
      ['karim', 'karim.dev', 'كريم منصور', 'developer'],
    ],
    posts: [
      'صباح الخير من المقهى ☕',
      'طبق اليوم: كسكس بالخضار.',
      'أجمل غروب شمس على البحر اليوم.',
      'أنهيت أخيرا قراءة الرواية الجديدة.',
      'طلابنا فازوا في مسابقة العلوم!',
      'التطبيق الجديد جاهز للتجربة.',
      'قهوة عربية مع الهيل، لا شيء أفضل.',
      'عطلة نهاية أسبوع سعيدة للجميع.',
    ],
    replies: ['رائع!', 'مبروك!', 'جميل جدا', 'أين هذا؟', 'أتفق تماما'],
    tags: ['#قهوة', '#سفر', '#طبخ', '#كتب'],
  },
  hi: {
    profiles: [
      ['priya', 'priya.sharma', 'प्रिया शर्मा', 'musician', true],
      ['arjun', 'arjun_cricket', 'अर्जुन मेहता', 'athlete'],
      ['chai', 'chai_adda', 'चाय अड्डा', 'cafe'],
      ['ananya', 'ananya.codes', 'अनन्या गुप्ता', 'developer'],
    ],
    posts: [
      'सुबह की चाय के बिना दिन शुरू नहीं होता।',
      'आज शाम को नया गाना रिलीज़ होगा!',
      'कल का मैच शानदार था।',
      'बारिश में पकौड़े और चाय, बस और क्या चाहिए।',
      'नया ऐप लॉन्च हो गया, ज़रूर आज़माएँ।',
      'दिल्ली की सर्दियाँ सबसे अच्छी होती हैं।',
      'रियाज़ के बाद मन शांत हो जाता है।',
      'आज कोडिंग में बहुत मज़ा आया।',
    ],
    replies: ['बहुत बढ़िया!', 'बधाई हो!', 'शानदार!', 'यह कहाँ है?', 'मैं भी!'],
    tags: ['#चाय', '#संगीत', '#क्रिकेट', '#दिल्ली'],
  },
  ko: {
    profiles: [['minji', 'minji.kim', '김민지', 'designer']],
    posts: [
      '오늘 새로 생긴 카페에 다녀왔어요.',
      '디자인 시안 드디어 완성!',
      '주말에는 한강에서 자전거 타기.',
      '비 오는 날엔 따뜻한 라떼.',
      '새 전시회 준비 중입니다.',
    ],
    replies: ['멋져요!', '축하해요!', '좋아요!', '어디예요?'],
    tags: ['#카페', '#디자인', '#서울'],
  },
  ru: {
    profiles: [['ivan', 'ivan_petrov', 'Иван Петров', 'developer']],
    posts: [
      'Доброе утро! Кофе и код.',
      'Наконец-то починил этот баг.',
      'В Москве сегодня первый снег.',
      'Новый релиз уже на сервере.',
      'Вечером иду на концерт в консерваторию.',
    ],
    replies: ['Отлично!', 'Поздравляю!', 'Класс!', 'Где это?'],
    tags: ['#кофе', '#разработка', '#Москва'],
  },
  zh: {
    profiles: [['wei', 'wei.tea', '王伟', 'tea house']],
    posts: [
      '今天的乌龙茶特别香。',
      '新茶到货，欢迎来店里品尝。',
      '周末去西湖散步。',
      '下雨天最适合喝一杯热茶。',
      '谢谢大家的支持！',
    ],
    replies: ['太棒了！', '恭喜！', '好喜欢！', '在哪里？'],
    tags: ['#茶', '#杭州', '#周末'],
  },
} satisfies Record<string, Language>;

interface SandboxProfile {
  name: string;
  username: string;
  fullName: string;
  category: string;
  verified: boolean;
  language: Language;
}

const PROFILES: readonly SandboxProfile[] = Object.values(LANGUAGES).flatMap((language: Language) =>
  language.profiles.map(([name, username, fullName, category, verified]) => ({
    name,
    username,
    fullName,
    category,
    verified: verified ?? false,
    language,
  })),
);

/** The sandbox profiles' user ids, in a fixed order. */
export const SANDBOX_USER_IDS = PROFILES.map((profile) => `sandbox-${profile.name}`);

/** The sandbox's sizes. What is drawn (who posts, reacts, comments, follows whom) comes from one seed. */
export const SANDBOX = {
  /** Profiles, user ids `sandbox-<name>`: 40, in 11 languages. */
  profiles: PROFILES.length,
  /** Of them verified: 8. */
  verified: PROFILES.filter((profile) => profile.verified).length,
  /** Text buzzes, spread over the last `days` before the seeding. */
  buzzes: 3_000,
  days: 90,
  /** Other profiles reacting to one buzz, at most: this many for a verified author, a third for others. */
  maxReactions: 20,
  /** Comments on one buzz, at most. */
  maxComments: 5,
  /** Profiles each profile follows. */
  minFollowing: 4,
  maxFollowing: 20,
} as const;

const DAY_SECONDS = 86_400;
/** Any constant: the same seed gives every app the same fixtures. */
const SEED = 0x5a4db0;
/** How often each reaction kind is drawn, in the order of REACTION_KINDS. */
const KIND_WEIGHTS = [50, 20, 12, 8, 6, 4];

/** A sandbox profile with what is drawn for it, and the counts of its rows. */
interface DrawnProfile extends SandboxProfile {
  /** Seconds before the seeding, as every age below: each profile is older than all buzzes. */
  age: number;
  followers: number;
  following: number;
  buzzes: number;
}

interface DrawnBuzz {
  /** 1 for the oldest: ids count up with time. */
  number: number;
  author: DrawnProfile;
  text: string;
  age: number;
  reactions: number;
  comments: number;
}

/** mulberry32: a tiny seeded generator of numbers in [0, 1), the same on every platform. */
function mulberry32(seed: number): () => number {
  let state = seed | 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

type Draw = ReturnType<typeof drawer>;

function drawer(seed: number) {
  const random = mulberry32(seed);
  const below = (n: number) => Math.floor(random() * n);
  return {
    random,
    below,
    pick: <T>(items: readonly T[]) => items[below(items.length)]!,
    weighted: <T>(items: readonly T[], weights: readonly number[]) => {
      let left = random() * weights.reduce((sum, weight) => sum + weight, 0);
      for (const [index, item] of items.entries()) {
        left -= weights[index]!;
        if (left < 0) return item;
      }
      return items.at(-1)!;
    },
    /**
     * `count` distinct items, likelier the heavier (Efraimidis–Spirakis: the largest random^(1/weight)).
     * None costs no draws: most buzzes draw no reaction.
     */
    sample: <T>(items: readonly T[], count: number, weight: (item: T) => number) =>
      count === 0
        ? []
        : items
            .map((item) => ({ item, key: random() ** (1 / weight(item)) }))
            .sort((a, b) => b.key - a.key)
            .slice(0, count)
            .map(({ item }) => item),
    /** An age soon after `age` (less than `window` seconds later), never after the seeding. */
    soonAfter: (age: number, window: number) => age - below(Math.min(age, window)),
  };
}

/** One or two sentences, sometimes a hashtag. */
function buzzText(draw: Draw, language: Language): string {
  const first = draw.pick(language.posts);
  const parts = [first];
  if (draw.random() < 0.4) parts.push(draw.pick(language.posts.filter((post) => post !== first)));
  if (draw.random() < 0.3) parts.push(draw.pick(language.tags));
  return parts.join(' ');
}

/** The sandbox's rows, the same on every call; ages in seconds before the seeding. */
function drawFixtures() {
  const draw = drawer(SEED);
  const profiles: DrawnProfile[] = PROFILES.map((profile) => ({
    ...profile,
    age: (SANDBOX.days + 1) * DAY_SECONDS + draw.below(30 * DAY_SECONDS),
    followers: 0,
    following: 0,
    buzzes: 0,
  }));
  const othersThan = new Map(
    profiles.map((profile) => [profile, profiles.filter((other) => other !== profile)] as const),
  );

  // The verified are followed more, as people follow known names.
  const follows = profiles.flatMap((follower) => {
    const count = SANDBOX.minFollowing + draw.below(SANDBOX.maxFollowing - SANDBOX.minFollowing + 1);
    const followees = draw.sample(othersThan.get(follower)!, count, (other) => (other.verified ? 4 : 1));
    follower.following = followees.length;
    return followees.map((followee) => {
      followee.followers++;
      return { follower, followee, age: draw.below(SANDBOX.days * DAY_SECONDS) };
    });
  });

  // Some profiles post much more than others, the verified most.
  const activity = profiles.map((profile) => (profile.verified ? 3 : 0.5) + 2 * draw.random());
  const ages = Array.from({ length: SANDBOX.buzzes }, () => draw.below(SANDBOX.days * DAY_SECONDS));
  const buzzes: DrawnBuzz[] = ages
    .sort((a, b) => b - a)
    .map((age, index) => {
      const author = draw.weighted(profiles, activity);
      author.buzzes++;
      const text = buzzText(draw, author.language);
      return { number: index + 1, author, text, age, reactions: 0, comments: 0 };
    });

  // Few buzzes draw many reactions; people react more to buzzes in their own language.
  const reactions = buzzes.flatMap((buzz) => {
    const most = buzz.author.verified ? SANDBOX.maxReactions : SANDBOX.maxReactions / 3;
    const count = Math.floor(draw.random() ** 4 * (most + 1));
    const sameLanguageFirst = (profile: DrawnProfile) => (profile.language === buzz.author.language ? 3 : 1);
    const reactors = draw.sample(othersThan.get(buzz.author)!, count, sameLanguageFirst);
    buzz.reactions = reactors.length;
    return reactors.map((profile) => ({
      buzz,
      profile,
      kind: draw.weighted(REACTION_KINDS, KIND_WEIGHTS),
      age: draw.soonAfter(buzz.age, 3 * DAY_SECONDS),
    }));
  });

  // Each comments in their own language; an author may answer under their own buzz.
  const comments = buzzes.flatMap((buzz) => {
    buzz.comments = Math.floor(draw.random() ** 4 * (SANDBOX.maxComments + 1));
    return Array.from({ length: buzz.comments }, () => {
      const author = draw.pick(profiles);
      const text = draw.pick(author.language.replies);
      return { buzz, author, text, age: draw.soonAfter(buzz.age, DAY_SECONDS) };
    });
  });

  return { profiles, follows, buzzes, reactions, comments };
}

/**
 * Seeds the test-mode sandbox of an app in a few statements, every counter set to what its rows
 * count. The sandbox makes sure it runs once per app.
 */
async function seedSandbox(db: Db, appId: string, at: Date): Promise<void> {
  const { profiles, follows, buzzes, reactions, comments } = drawFixtures();
  // Ages travel as seconds and become times in SQL: thousands of dates cost more in JavaScript.
  const seededAt = sql.timestamp(at);
  const userId = (profile: SandboxProfile) => `sandbox-${profile.name}`;
  const numbered = sandboxIds(appId);
  const buzzId = (buzz: DrawnBuzz) => numbered('bz', buzz.number);

  await db.query(sql.unsafe`
    insert into profiles (app_id, mode, user_id, username, full_name, category, verified, followers, following,
                          buzzes, sandbox, created_at, updated_at)
    select ${appId}, 'test', user_id, username, full_name, category, verified, followers, following, buzzes, true,
           ${seededAt} - make_interval(secs => age), ${seededAt} - make_interval(secs => age)
    from ${sql.unnest(
      profiles.map((profile) => [
        userId(profile),
        profile.username,
        profile.fullName,
        profile.category,
        profile.verified,
        profile.followers,
        profile.following,
        profile.buzzes,
        profile.age,
      ]),
      ['text', 'text', 'text', 'text', 'bool', 'int4', 'int4', 'int4', 'int4'],
    )} as p (user_id, username, full_name, category, verified, followers, following, buzzes, age)`);

  // The rows below find their profiles and buzzes by user id and buzz id, through the unique indexes.
  await db.query(sql.unsafe`
    insert into follows (follower_pk, followee_pk, created_at)
    select follower.pk, followee.pk, ${seededAt} - make_interval(secs => f.age)
    from ${sql.unnest(
      follows.map((follow) => [userId(follow.follower), userId(follow.followee), follow.age]),
      ['text', 'text', 'int4'],
    )} as f (follower_id, followee_id, age)
    join profiles follower
      on follower.app_id = ${appId} and follower.mode = 'test' and follower.user_id = f.follower_id
    join profiles followee
      on followee.app_id = ${appId} and followee.mode = 'test' and followee.user_id = f.followee_id`);

  await db.query(sql.unsafe`
    insert into buzzes (id, app_id, mode, author_pk, type, text, reactions, comments, created_at)
    select b.id, ${appId}, 'test', author.pk, 'text', b.text, b.reactions, b.comments,
           ${seededAt} - make_interval(secs => b.age)
    from ${sql.unnest(
      buzzes.map((buzz) => [
        buzzId(buzz),
        userId(buzz.author),
        buzz.text,
        buzz.reactions,
        buzz.comments,
        buzz.age,
      ]),
      ['text', 'text', 'text', 'int4', 'int4', 'int4'],
    )} as b (id, author_id, text, reactions, comments, age)
    join profiles author on author.app_id = ${appId} and author.mode = 'test' and author.user_id = b.author_id`);

  await db.query(sql.unsafe`
    insert into buzz_reactions (buzz_pk, profile_pk, kind, created_at)
    select b.pk, reactor.pk, r.kind, ${seededAt} - make_interval(secs => r.age)
    from ${sql.unnest(
      reactions.map((reaction) => [
        buzzId(reaction.buzz),
        userId(reaction.profile),
        reaction.kind,
        reaction.age,
      ]),
      ['text', 'text', 'text', 'int4'],
    )} as r (buzz_id, reactor_id, kind, age)
    join buzzes b on b.id = r.buzz_id
    join profiles reactor
      on reactor.app_id = ${appId} and reactor.mode = 'test' and reactor.user_id = r.reactor_id`);

  await db.query(sql.unsafe`
    insert into buzz_comments (id, buzz_pk, author_pk, text, created_at)
    select c.id, b.pk, author.pk, c.text, ${seededAt} - make_interval(secs => c.age)
    from ${sql.unnest(
      comments.map((comment, index) => [
        numbered('cmt', index + 1),
        buzzId(comment.buzz),
        userId(comment.author),
        comment.text,
        comment.age,
      ]),
      ['text', 'text', 'text', 'text', 'int4'],
    )} as c (id, buzz_id, author_id, text, age)
    join buzzes b on b.id = c.buzz_id
    join profiles author on author.app_id = ${appId} and author.mode = 'test' and author.user_id = c.author_id`);
}

/** Profiles, follows, buzzes, reactions and comments: the part every other part's fixtures build on. */
export const socialSandbox: SandboxPart = { name: 'social', seed: seedSandbox };
