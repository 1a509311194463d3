// A trivial external-auth program, for the login benchmark only (the test profile's accept-all.local
// host, infra/src/servers/ejabberd.ts): "yes" to every auth and isuser question, whoever asks with
// whatever password, and "no" to every other op, at once and without asking anybody. It speaks
// ejabberd's external-auth framing (extauth-protocol.mjs), so that bench/chat-logins.ts can set logins
// decided by the control plane against logins whose check costs next to nothing.
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
