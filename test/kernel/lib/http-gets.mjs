// HTTP GETs from the network namespace it runs in, a new connection each: COUNT in turn to
// HOST:PORT from every SOURCE address given (or from the kernel's choice). Prints a line per GET:
// the body ("be1 10.250.0.2": the backend and the client address it saw) or error:CODE.
// usage: node http-gets.mjs HOST PORT COUNT TIMEOUT_MS [SOURCE...]
import { request } from 'node:http';

const [host, port, count, timeoutMs, ...sources] = process.argv.slice(2);
const once = (localAddress) =>
  new Promise((resolve) => {
    const req = request({ host, port: Number(port), path: '/', agent: false, localAddress, timeout: Number(timeoutMs) }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(body.trim()));
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
    req.on('error', (e) => resolve(`error:${e.code ?? e.message}`));
    req.end();
  });
for (const source of sources.length ? sources : [undefined]) {
  for (let i = 0; i < Number(count); i++) console.log(await once(source));
}
