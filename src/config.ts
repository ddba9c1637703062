// The daemon's configuration: kube-proxy-compatible flags and KubeProxyConfiguration files,
// normalised into one validated Config. Implementation in src/config/ (checked by rules.ts,
// not zod: see there).

export { parseArgs, type Command, type ParsedArgs, type ParseArgsOptions } from './config/args.js';
export { formatDuration, parseDuration } from './config/duration.js';
export { KUBE_PROXY_API_VERSION, parseKubeProxyConfiguration, type FileLayer, type KubeProxyConfiguration } from './config/file.js';
export { FLAGS, UNSUPPORTED_KUBE_PROXY_FLAGS, formatHelp, type FlagKind, type FlagSpec } from './config/flags.js';
export { ConfigError, type Layer, type Origin } from './config/layer.js';
export { cidrFamily, ipFamily, isUnspecified, parseHostPort, type HostPort } from './config/net.js';
export {
  ADDRESS_BINDINGS, ConfigSchema, HEALTHZ_PORT, METRICS_PORT, PROXY_MODES, SCHEDULERS, defaultConfig,
  type AddressBinding, type Config, type ConfigInput, type Scheduler,
} from './config/schema.js';
