import type { Redis } from 'ioredis';
import { type DatabasePool, UniqueIntegrityConstraintViolationError } from 'slonik';
import { redisScript } from '../../adapters/redis.js';
import { clientNetwork } from '../../platform/addresses.js';
import { type Clock, fixedWindow } from '../../platform/clock.js';
import { errors, ServiceError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import { pruneInBatches } from '../../platform/pruning.js';
import { newSecret, sha256 } from '../../platform/secrets.js';
import { inTransaction } from '../../platform/transaction.js';
import { hashPassword, nobodysHash, verifyPassword } from './passwords.js';
import {
  can,
  EMAIL_MAX,
  INVITE_TTL_MS,
  LOGIN_FAILURES_PER_ADDRESS,
  LOGIN_FAILURES_PER_EMAIL,
  LOGIN_WINDOW_SECONDS,
  NAME_MAX,
  PASSWORD_MAX,
  PASSWORD_MIN,
  type Right,
  type Role,
  SESSION_IDLE_MS,
  SESSION_TOUCH_MS,
  SESSION_TTL_MS,
  type UserRow,
} from './schema.js';
import { dashboardStore } from './store.js';

/** Who acts in the dashboard: a signed-in person of an account, with a role. */
export type Member = UserRow;

export interface Client {
  address: string;
  userAgent: string;
}

const SESSION_PREFIX = 'dsess_';
const INVITE_PREFIX = 'dinv_';
/** Looks like an email: one @, something on each side, no spaces. Delivery is the operator's business. */
const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+$/;

function normalEmail(email: string): string {
  const normal = email.trim().toLowerCase();
  if (normal.length > EMAIL_MAX || !EMAIL_PATTERN.test(normal))
    throw errors.invalidField('body', 'email', `must be an email address of at most ${EMAIL_MAX} characters`);
  return normal;
}

function checkPassword(password: string) {
  if ([...password].length < PASSWORD_MIN || [...password].length > PASSWORD_MAX)
    throw errors.invalidField('body', 'password', `must be ${PASSWORD_MIN}-${PASSWORD_MAX} characters`);
}

function checkName(name: string): string {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > NAME_MAX)
    throw errors.invalidField('body', 'name', `must be 1-${NAME_MAX} characters`);
  return trimmed;
}

const inviteGone = () =>
  new ServiceError(
    'not_found',
    'This invitation link has expired, was used or was withdrawn; ask for a new one',
  );

const refused = (right: Right) =>
  errors.forbidden(
    {
      read: 'You cannot see this account',
      build: 'Your role (viewer) can look but not change anything; ask an owner to make you a developer',
      reveal_secrets: 'Your role (viewer) cannot see secrets; ask an owner to make you a developer',
      manage_team: 'Only an owner can manage the people of the account',
      manage_billing: 'Only an owner can change billing settings',
    }[right],
  );

/** How long sessions and invitations are kept once expired (a month: who signed in lately, and from where). */
const EXPIRED_KEPT_MS = 30 * 86_400_000;

/**
 * A successful sign-in's take-back: clears the email's failures and returns the network's attempt,
 * unless its window ended meanwhile (a DECR would make a counter of -1 with no expiry, never deleted).
 */
const TAKE_BACK = `
redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('DECR', KEYS[2]) end
return 1`;

/**
 * The dashboard's people: invitations (the only way in), passwords (scrypt), sessions (opaque
 * tokens, stored hashed, revocable), sign-in limits (Redis counters shared by every replica) and
 * roles. The pages call this and the other modules' services, never an API route.
 */
export function createDashboardService(deps: { pool: DatabasePool; redis: Redis; clock: Clock }) {
  const store = dashboardStore(deps.pool);

  async function startSession(userId: string, client: Client) {
    const token = newSecret(SESSION_PREFIX);
    const at = deps.clock.now();
    await store.insertSession({
      id: newId('dses'),
      userId,
      tokenHash: sha256(token),
      userAgent: client.userAgent.slice(0, 256),
      address: client.address,
      at,
      expiresAt: new Date(at.getTime() + SESSION_TTL_MS),
    });
    return token;
  }

  const takeBack = redisScript<number>(deps.redis, TAKE_BACK);

  /**
   * Sign-in attempts counted per email and per client network (an IPv6 /64 is one), in fixed
   * windows, before the password is checked: a burst of concurrent guesses is counted as it arrives.
   */
  async function countAttempt(email: string, address: string) {
    const { index, secondsLeft } = fixedWindow(deps.clock.now(), LOGIN_WINDOW_SECONDS);
    const emailKey = `svc:dash:login:email:${sha256(email).toString('hex').slice(0, 32)}:${index}`;
    const addressKey = `svc:dash:login:addr:${clientNetwork(address)}:${index}`;
    const counted = await deps.redis
      .multi()
      .incr(emailKey)
      .expire(emailKey, secondsLeft)
      .incr(addressKey)
      .expire(addressKey, secondsLeft)
      .exec();
    const [byEmail, byAddress] = [Number(counted?.[0]?.[1]), Number(counted?.[2]?.[1])];
    if (byEmail > LOGIN_FAILURES_PER_EMAIL || byAddress > LOGIN_FAILURES_PER_ADDRESS)
      throw errors.rateLimited(
        `Too many failed sign-ins; try again in ${Math.ceil(secondsLeft / 60)} minutes`,
        secondsLeft,
      );
    /** A success takes its attempt back and clears the email's failures. */
    return () => takeBack(2, emailKey, addressKey);
  }

  async function issueInvite(accountId: string, email: string, role: Role, invitedBy: string | null) {
    const token = newSecret(INVITE_PREFIX);
    const at = deps.clock.now();
    const invite = await store.insertInvite({
      id: newId('dinv'),
      accountId,
      email: normalEmail(email),
      role,
      tokenHash: sha256(token),
      invitedBy,
      at,
      expiresAt: new Date(at.getTime() + INVITE_TTL_MS),
    });
    return { invite, token };
  }

  const sessionWindow = () => {
    const at = deps.clock.now();
    return { at, idleSince: new Date(at.getTime() - SESSION_IDLE_MS) };
  };

  return {
    /** Throws the page's 403 when the member's role lacks the right. */
    require(member: Member, right: Right) {
      if (!can(member.role, right)) throw refused(right);
    },

    can: (member: Member, right: Right) => can(member.role, right),

    /** The operator's way in for an account (the admin CLI): an invitation to become an owner. */
    inviteOwner: async (accountId: string, email: string) => {
      const taken = await store.userWithPassword(normalEmail(email));
      if (taken)
        throw errors.conflict(`${taken.email} already has a dashboard account (in ${taken.account_id})`);
      return issueInvite(accountId, email, 'owner', null);
    },

    /**
     * An owner's invitation of someone: the link is shown to the owner once, to pass on. An address
     * taken in another account is refused without naming the account: the owner learns only that the
     * address is taken, as anyone would by trying to sign up with it.
     */
    invite: async (member: Member, input: { email: string; role: Role }) => {
      if (!can(member.role, 'manage_team')) throw refused('manage_team');
      const taken = await store.userWithPassword(normalEmail(input.email));
      if (taken)
        throw errors.conflict(
          taken.account_id === member.account_id
            ? `${taken.email} is already in this account`
            : `${taken.email} cannot be invited: ask them for another address`,
        );
      return issueInvite(member.account_id, input.email, input.role, member.id);
    },

    /** The invitation a link stands for, while it works. */
    openInvite: (token: string) => store.openInvite(sha256(token), deps.clock.now()),

    /** Accepting makes the person and signs them in; the link then stops working. */
    acceptInvite: async (token: string, input: { name: string; password: string }, client: Client) => {
      const name = checkName(input.name);
      checkPassword(input.password);
      // Checked before the costly hash, so that made-up links cost the server nothing.
      if (!(await store.openInvite(sha256(token), deps.clock.now()))) throw inviteGone();
      const passwordHash = await hashPassword(input.password);
      const user = await inTransaction(deps.pool, async (tx) => {
        const txStore = dashboardStore(tx);
        const invite = await txStore.openInvite(sha256(token), deps.clock.now(), true);
        if (!invite) throw inviteGone();
        await txStore.acceptInvite(invite.id, deps.clock.now());
        return txStore
          .insertUser({
            id: newId('duser'),
            accountId: invite.account_id,
            email: invite.email,
            name,
            role: invite.role,
            passwordHash,
            at: deps.clock.now(),
          })
          .catch((error: unknown) => {
            if (error instanceof UniqueIntegrityConstraintViolationError)
              throw errors.conflict(`${invite.email} already has a dashboard account; sign in instead`);
            throw error;
          });
      });
      return { user, sessionToken: await startSession(user.id, client) };
    },

    /** Sessions and invitations that expired a month ago and before: nothing reads them once they stop working. */
    pruneExpired: () => {
      const before = new Date(deps.clock.now().getTime() - EXPIRED_KEPT_MS);
      return pruneInBatches((limit) => store.pruneExpired(before, limit));
    },

    /**
     * Signs in by email and password. A wrong email costs the same time as a wrong password and gets
     * the same answer; past the limits, every attempt is refused (429) until the window ends.
     */
    signIn: async (input: { email: string; password: string }, client: Client) => {
      const email = input.email.trim().toLowerCase();
      const succeeded = await countAttempt(email, client.address);
      const user = email.length <= EMAIL_MAX ? await store.userWithPassword(email) : null;
      const password = input.password.slice(0, PASSWORD_MAX * 4);
      const matches = await verifyPassword(password, user?.password_hash ?? (await nobodysHash()));
      if (!user || !matches) throw new ServiceError('authentication_error', 'Wrong email or password');
      await succeeded();
      const { password_hash: _, ...member } = user;
      return { user: member, sessionToken: await startSession(user.id, client) };
    },

    /** The session a cookie's token stands for and its person, or null when it ended. */
    sessionOf: async (token: string) => {
      if (!token.startsWith(SESSION_PREFIX)) return null;
      const { at, idleSince } = sessionWindow();
      const found = await store.sessionByTokenHash(sha256(token), at, idleSince);
      if (!found) return null;
      if (at.getTime() - found.session.last_seen_at.getTime() > SESSION_TOUCH_MS)
        await store.touchSession(found.session.id, at);
      return { session: found.session, member: found.user };
    },

    sessions: (member: Member) => {
      const { at, idleSince } = sessionWindow();
      return store.sessions(member.id, at, idleSince);
    },

    /**
     * A new password, given the current one: every other session of the member ends. A wrong current
     * password counts as a failed sign-in of the member's email, so that a session in someone else's
     * hands cannot guess it without end.
     */
    changePassword: async (
      member: Member,
      sessionId: string,
      input: { current: string; next: string },
      client: Client,
    ) => {
      checkPassword(input.next);
      const succeeded = await countAttempt(member.email, client.address);
      const stored = await store.passwordHash(member.id);
      if (!(await verifyPassword(input.current.slice(0, PASSWORD_MAX * 4), stored)))
        throw errors.invalidField('body', 'current_password', 'is not your current password');
      await succeeded();
      await store.setPassword(member.id, await hashPassword(input.next));
      await store.revokeSessionsOf(member.id, sessionId, deps.clock.now());
    },

    /** Signs the member out everywhere but here. */
    revokeOtherSessions: (member: Member, sessionId: string) =>
      store.revokeSessionsOf(member.id, sessionId, deps.clock.now()),

    /** Ends one of the member's own sessions (signing out is ending the current one). */
    revokeSession: async (member: Member, sessionId: string) => {
      const revoked = await store.revokeSession(member.id, sessionId, deps.clock.now());
      if (!revoked) throw errors.notFound(`Session ${sessionId}`);
      return revoked;
    },

    team: async (member: Member) => ({
      users: await store.users(member.account_id),
      invites: await store.openInvites(member.account_id, deps.clock.now()),
    }),

    revokeInvite: async (member: Member, inviteId: string) => {
      if (!can(member.role, 'manage_team')) throw refused('manage_team');
      const revoked = await store.revokeInvite(member.account_id, inviteId, deps.clock.now());
      if (!revoked) throw errors.notFound(`Invitation ${inviteId}`);
      return revoked;
    },

    /** Changes someone's role; an account always keeps an owner. Their sessions carry on with the new role. */
    setRole: (member: Member, userId: string, role: Role) => {
      if (!can(member.role, 'manage_team')) throw refused('manage_team');
      return inTransaction(deps.pool, async (tx) => {
        const txStore = dashboardStore(tx);
        const owners = await txStore.lockOwners(member.account_id);
        if (role !== 'owner' && owners.length === 1 && owners[0] === userId)
          throw errors.conflict('The account needs an owner: make someone else an owner first');
        const changed = await txStore.setRole(member.account_id, userId, role);
        if (!changed) throw errors.notFound(`Person ${userId}`);
        // Invitations are an owner's act: a former owner's links stop working.
        if (role !== 'owner') await txStore.revokeInvitesBy(userId, deps.clock.now());
        return changed;
      });
    },

    /** Removes someone from the account: their sessions end with them. */
    removeUser: (member: Member, userId: string) => {
      if (!can(member.role, 'manage_team')) throw refused('manage_team');
      return inTransaction(deps.pool, async (tx) => {
        const txStore = dashboardStore(tx);
        const owners = await txStore.lockOwners(member.account_id);
        if (owners.length === 1 && owners[0] === userId)
          throw errors.conflict('The account needs an owner: make someone else an owner first');
        await txStore.revokeInvitesBy(userId, deps.clock.now());
        const removed = await txStore.deleteUser(member.account_id, userId);
        if (!removed) throw errors.notFound(`Person ${userId}`);
        return removed;
      });
    },
  };
}

export type DashboardService = ReturnType<typeof createDashboardService>;
