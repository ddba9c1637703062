// A demo backend ("pod"): answers HTTP on :8080 and UDP on :5353 with its name and the client's
// address, so a client can see which backend served it. Exits after 30 minutes at the latest.
import { createSocket } from 'node:dgram';
import { createServer } from 'node:http';

const name = process.argv[2] ?? 'backend';
const http = createServer((req, res) => {
  res.setHeader('content-type', 'text/plain');
  res.end(`${name} ${req.socket.remoteAddress}\n`);
});
http.keepAliveTimeout = 10 * 60_000; // tests hold connections open across syncs and restarts
http.listen(8080, '0.0.0.0');
const udp = createSocket('udp4');
udp.on('message', (msg, from) => udp.send(`${name} ${from.address}\n`, from.port, from.address));
udp.bind(5353, '0.0.0.0');
setTimeout(() => process.exit(0), 30 * 60_000).unref();
process.on('SIGTERM', () => process.exit(0));
