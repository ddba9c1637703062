// Holds ONE TCP connection (HTTP keep-alive) to host:port, from a given source address if any, and
// sends a request on it for every line read from stdin ("again"), printing the backend that
// answered; "close" ends it with a FIN (printing "closed"), "reset" with a RST (printing "reset").
// Used from a client network namespace: ip netns exec NS node held-connection.mjs HOST PORT [SOURCE]
import { connect } from 'node:net';
import { createInterface } from 'node:readline';

const [host, port, source] = [process.argv[2], Number(process.argv[3]), process.argv[4]];
const socket = connect({ host, port, localAddress: source || undefined });
let buffered = '';
const waiting = [];
socket.setEncoding('utf8');
socket.on('data', (d) => {
  buffered += d;
  // One response per request: headers, blank line, body "<backend> <client>\n".
  for (;;) {
    const end = buffered.indexOf('\r\n\r\n');
    if (end < 0) return;
    const len = Number(/content-length: (\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
    if (buffered.length < end + 4 + len) return;
    const body = buffered.slice(end + 4, end + 4 + len);
    buffered = buffered.slice(end + 4 + len);
    waiting.shift()?.(body.split(' ')[0]);
  }
});
socket.on('error', (e) => {
  console.log(`error:${e.code}`);
  process.exit(1);
});
socket.on('close', () => {
  for (const w of waiting.splice(0)) w('error:closed');
});
const ask = () =>
  new Promise((resolve) => {
    waiting.push(resolve);
    socket.write(`GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n`);
  });
socket.on('connect', async () => {
  console.log(await ask());
  let end = 'close';
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'close' || line === 'reset') {
      end = line;
      break;
    }
    console.log(await Promise.race([ask(), new Promise((r) => setTimeout(() => r('error:timeout'), 3000))]));
  }
  if (end === 'reset') socket.resetAndDestroy();
  else socket.end();
  console.log(end === 'reset' ? 'reset' : 'closed');
  setTimeout(() => process.exit(0), 100);
});
setTimeout(() => process.exit(2), 10 * 60_000).unref();
