// One UDP flow (a fixed source port) that sends a datagram every 100 ms and prints, per reply,
// the backend that answered. usage: node udp-flow.mjs HOST PORT SOURCE_PORT
import { createSocket } from 'node:dgram';

const [host, port, sport] = process.argv.slice(2);
const s = createSocket('udp4');
s.on('message', (m) => process.stdout.write(`${m.toString().split(' ')[0]}\n`));
s.bind(Number(sport), () => setInterval(() => s.send('ping', Number(port), host), 100));
process.stdin.on('end', () => process.exit(0)).resume();
