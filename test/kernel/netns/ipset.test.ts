import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { ipsetSuite } from '../lib/ipset-suite.js';

ipsetSuite('the host kernel, in a fresh netns');
