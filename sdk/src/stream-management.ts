import type { Client } from '@xmpp/client';

/** How long to wait for stream management (XEP-0198) to be enabled. */
const STREAM_MANAGEMENT_WAIT_MS = 5_000;

/**
 * Waits until stream management (XEP-0198) is on, or 5 s, before a session's first stanza. xmpp.js
 * counts a stanza that arrives just before `<enabled/>` after it resets its counter, then
 * acknowledges one stanza too many and ejabberd closes the stream ("Client acknowledged more stanzas
 * than sent by server"). Not part of the package's API; the e2e support shares it.
 */
export async function streamManagementEnabled(xmpp: Client): Promise<void> {
  const management = (xmpp as unknown as { streamManagement?: { enabled: boolean } }).streamManagement;
  for (let waited = 0; management && !management.enabled && waited < STREAM_MANAGEMENT_WAIT_MS; waited += 10)
    await new Promise((resolve) => setTimeout(resolve, 10));
}
