// prom-client's classes, loaded without its index: the index also loads the default (process and
// Node.js) metrics and, through them, @opentelemetry/api — ~1,400 page faults and a few hundred
// milliseconds of a cold start in UML, before the first object is programmed. The default
// metrics are loaded when first asked for (collectDefaultMetrics).
import { createRequire } from 'node:module';

import type * as Prom from 'prom-client';

const require = createRequire(import.meta.url);

export const Registry: typeof Prom.Registry = require('prom-client/lib/registry');
export type Registry = Prom.Registry;
export const Counter: typeof Prom.Counter = require('prom-client/lib/counter');
export type Counter<T extends string = string> = Prom.Counter<T>;
export const Gauge: typeof Prom.Gauge = require('prom-client/lib/gauge');
export type Gauge<T extends string = string> = Prom.Gauge<T>;
export const Histogram: typeof Prom.Histogram = require('prom-client/lib/histogram');
export type Histogram<T extends string = string> = Prom.Histogram<T>;
export const { exponentialBuckets, linearBuckets } = require('prom-client/lib/bucketGenerators') as Pick<typeof Prom, 'exponentialBuckets' | 'linearBuckets'>;

/** prom-client's collectDefaultMetrics, its module loaded on the first call. */
export function collectDefaultMetrics(config: Prom.DefaultMetricsCollectorConfiguration<Prom.RegistryContentType>): void {
  (require('prom-client/lib/defaultMetrics') as typeof Prom.collectDefaultMetrics)(config);
}
