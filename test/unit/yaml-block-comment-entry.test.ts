// A fuzz counterexample (seed -624817302 of "declines or agrees on mutated documents"): an entry
// that is only a comment, where the sequence ends right after it.
import { load, CORE_SCHEMA } from 'js-yaml';
import { expect, it } from 'vitest';

import { readBlockYaml, UNSUPPORTED } from '../../src/source/yaml-block.js';

it('leaves `- # comment` entries to js-yaml', () => {
  const text = 'a:\n  - x:\n      - ""\n      - # c ""\n  - y\n';
  expect(readBlockYaml(text, new Map())).toBe(UNSUPPORTED);
  expect(load(text, { schema: CORE_SCHEMA })).toBeDefined();
});
