// The demo's client: N fresh connections to each address, tallied by the backend that answered.
// usage: node client.mjs COUNT proto:host:port[=label] ...     (proto: tcp = HTTP GET, udp)
import { createSocket } from 'node:dgram';
import { request } from 'node:http';

const TIMEOUT_MS = 2000;

function httpOnce(host, port) {
  return new Promise((resolve) => {
    const req = request({ host, port, path: '/', agent: false, timeout: TIMEOUT_MS }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(body.split(' ')[0] || 'empty'));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve(`error:${e.code ?? e.message}`));
    req.end();
  });
}

function udpOnce(host, port) {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    const done = (v) => {
      clearTimeout(timer);
      s.close();
      resolve(v);
    };
    const timer = setTimeout(() => done('error:timeout'), TIMEOUT_MS);
    s.on('message', (m) => done(m.toString().split(' ')[0]));
    s.on('error', (e) => done(`error:${e.code}`));
    s.send('ping', port, host);
  });
}

/** Sends `count` requests to `target` ("tcp:10.96.0.10:80"); returns { backend: count }. */
export async function tally(count, target) {
  const [proto, host, port] = target.split(':');
  const counts = {};
  for (let i = 0; i < count; i++) {
    const who = await (proto === 'udp' ? udpOnce(host, Number(port)) : httpOnce(host, Number(port)));
    counts[who] = (counts[who] ?? 0) + 1;
  }
  return counts;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const count = Number(process.argv[2]);
  const results = {};
  for (const arg of process.argv.slice(3)) {
    const [target, label] = arg.split('=');
    results[label ?? target] = await tally(count, target);
  }
  console.log(JSON.stringify(results));
}
