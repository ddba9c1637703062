// A client that opens a new TCP connection (one HTTP GET) to host:port every INTERVAL ms for
// DURATION ms, each with its own deadline, and prints every attempt as one JSON line when done:
// {"t": start (epoch ms), "ms": how long it took, "ok": true, "body": "api 10.249.0.1"} or
// {"t", "ms", "ok": false, "err": "ECONNREFUSED" | "EHOSTUNREACH" | "ETIMEDOUT" | ...}.
// usage: node connect-loop.mjs HOST PORT INTERVAL_MS DURATION_MS TIMEOUT_MS
import { request } from 'node:http';

const [host, port, intervalMs, durationMs, timeoutMs] = process.argv.slice(2);
const results = [];

function once() {
  const t = Date.now();
  return new Promise((resolve) => {
    const done = (r) => resolve({ t, ms: Date.now() - t, ...r });
    const req = request({ host, port: Number(port), path: '/', agent: false, timeout: Number(timeoutMs) }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => done({ ok: true, body: body.trim() }));
      res.on('error', (e) => done({ ok: false, err: e.code ?? e.message }));
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
    req.on('error', (e) => done({ ok: false, err: e.code ?? e.message }));
    req.end();
  });
}

const end = Date.now() + Number(durationMs);
const pending = [];
while (Date.now() < end) {
  pending.push(once().then((r) => results.push(r)));
  await new Promise((r) => setTimeout(r, Number(intervalMs)));
}
await Promise.all(pending);
results.sort((a, b) => a.t - b.t);
process.stdout.write(results.map((r) => JSON.stringify(r)).join('\n') + '\n');
