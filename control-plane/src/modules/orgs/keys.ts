import { randomBase62 } from '../../platform/ids.js';

/**
 * The chat server's name of an org: 12 lowercase letters and digits (JID nodes are lowercase), drawn
 * afresh for every org, so that a re-created org never shares its identities or rooms with the old one.
 */
export const newChatKey = () => randomBase62(12).toLowerCase();

/**
 * A name within an org's nodes: a member identity's (on the chat server and in calls) or a business
 * conversation room's, 10 lowercase letters and digits.
 */
export const newNodeKey = () => randomBase62(10).toLowerCase();
