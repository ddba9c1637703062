// Objects as Go clients write them: the EndpointSlice controller creates a slice for a Service
// with no ready Pods yet as `endpoints: null, ports: null` (nil slices). Both decoders (the
// zod-free one and zod's) read those as empty lists, not as a malformed object.
import { describe, expect, it } from 'vitest';

import { endpointSliceSchema } from '../../src/model/k8s-schemas.js';
import { validate } from '../../src/source/validate.js';

const EMPTY_SLICE = {
  apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
  metadata: { name: 'web-np-btdc2', namespace: 'demo', labels: { 'kubernetes.io/service-name': 'web-np', 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io' } },
  addressType: 'IPv4', endpoints: null, ports: null,
};

describe('Go nil slices', () => {
  it('an EndpointSlice with endpoints: null and ports: null is an empty slice', () => {
    const r = validate('EndpointSlice', EMPTY_SLICE);
    expect(r.ok).toBe(true);
    expect(r.ok && [r.value.endpoints, r.value.ports]).toEqual([[], []]);
  });

  it('zod alone reads it the same way', () => {
    const r = endpointSliceSchema.safeParse({ ...EMPTY_SLICE, metadata: { ...EMPTY_SLICE.metadata, annotations: { x: 'y' } } });
    expect(r.success && [r.data.endpoints, r.data.ports]).toEqual([[], []]);
  });
});
