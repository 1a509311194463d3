// A trivial external-auth program, for the login benchmark only (the test profile's accept-all.local
// host, infra/src/servers/ejabberd.ts): "yes" to every auth and isuser question, whoever asks with
// whatever password, and "no" to every other op, at once and without asking anybody. It speaks the
// bridge's own framing (extauth-protocol.mjs), so that bench/chat-logins.ts can set logins through the
// bridge against logins through ejabberd's external auth that cost nothing beyond the protocol.
// Never for a real host.
//
//   node accept-all-auth.mjs
import { ASKED_OPS, createFrameReader, encodeReply, parseRequest } from './extauth-protocol.mjs';

// Every answer is immediate, so replies leave in request order.
const readFrames = createFrameReader();
process.stdin.on('data', (chunk) => {
  for (const frame of readFrames(chunk))
    process.stdout.write(encodeReply(ASKED_OPS.has(parseRequest(frame).op)));
});
// ejabberd closes the port when it stops or restarts this worker.
process.stdin.on('end', () => process.exit(0));
process.stdout.on('error', () => process.exit(0));
