// The floor under the cluster benchmark's one-change latency: a node process that watches the
// fake API server's EndpointSlices from resourceVersion argv[4] and, for each change, parses the
// event and adds the slice's endpoints to its virtual server in one netlink batch through the
// addon (EEXIST for those already there). No tracker, plan or min interval: what any Node.js
// proxy pays in that boot between the event and the kernel. Prints "ready" once it watches.
// Usage (inside UML, from the repository): node bench/change-floor.mjs URL TOKEN RESOURCE_VERSION
import { get } from 'node:http';

import { NetlinkIpvsClient } from '../dist/src/kernel/ipvs/client.js';
import { readLines } from '../dist/src/source/kube-http.js';
import { vip } from './objects.mjs';

const [url, token, rv] = process.argv.slice(2);
const a = await NetlinkIpvsClient.open();
if (!a.available) throw new Error(`IPVS: ${a.reason}`);
const ipvs = a.client;

/** The ops that put every endpoint of `slice` (the bench's `app-NNNNN` Services, TCP 80 -> 8080) into the kernel. */
function adds(slice) {
  const service = { family: 'ipv4', protocol: 'tcp', address: vip(Number(slice.metadata.labels['kubernetes.io/service-name'].slice(4))), port: 80, fwmark: null };
  return slice.endpoints.map((e) => ({ kind: 'addDestination', service, destination: { address: e.addresses[0], port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0 } }));
}

get(`${url}/apis/discovery.k8s.io/v1/endpointslices?watch=true&resourceVersion=${rv}`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
  if (res.statusCode !== 200) throw new Error(`watch: HTTP ${res.statusCode}`);
  process.stdout.write('ready\n');
  // The daemon's own line reader (JSON.parse per line), then straight to the kernel.
  void readLines(res, (e) => {
    if (e.type === 'MODIFIED') void ipvs.apply(adds(e.object));
  });
});
