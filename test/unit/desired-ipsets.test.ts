import { describe, expect, it } from 'vitest';

import { OWNED_SETS, SET, ownedSet, setName, setsForFamily } from '../../src/proxy/ipvs/ipsets.js';

describe('OWNED_SETS', () => {
  it('lists kube-proxy\'s 17 sets per family, IPv6 named KUBE-6- and cut to 31 characters', () => {
    expect(OWNED_SETS.map((s) => `${s.spec.name} ${s.spec.type} ${s.spec.family ?? '-'}`)).toEqual([
      'KUBE-LOOP-BACK hash:ip,port,ip inet',
      'KUBE-CLUSTER-IP hash:ip,port inet',
      'KUBE-EXTERNAL-IP hash:ip,port inet',
      'KUBE-EXTERNAL-IP-LOCAL hash:ip,port inet',
      'KUBE-LOAD-BALANCER hash:ip,port inet',
      'KUBE-LOAD-BALANCER-FW hash:ip,port inet',
      'KUBE-LOAD-BALANCER-LOCAL hash:ip,port inet',
      'KUBE-LOAD-BALANCER-SOURCE-IP hash:ip,port,ip inet',
      'KUBE-LOAD-BALANCER-SOURCE-CIDR hash:ip,port,net inet',
      'KUBE-NODE-PORT-TCP bitmap:port -',
      'KUBE-NODE-PORT-LOCAL-TCP bitmap:port -',
      'KUBE-NODE-PORT-UDP bitmap:port -',
      'KUBE-NODE-PORT-LOCAL-UDP bitmap:port -',
      'KUBE-NODE-PORT-SCTP-HASH hash:ip,port inet',
      'KUBE-NODE-PORT-LOCAL-SCTP-HASH hash:ip,port inet',
      'KUBE-HEALTH-CHECK-NODE-PORT bitmap:port -',
      'KUBE-IPVS-IPS hash:ip inet',
      'KUBE-6-LOOP-BACK hash:ip,port,ip inet6',
      'KUBE-6-CLUSTER-IP hash:ip,port inet6',
      'KUBE-6-EXTERNAL-IP hash:ip,port inet6',
      'KUBE-6-EXTERNAL-IP-LOCAL hash:ip,port inet6',
      'KUBE-6-LOAD-BALANCER hash:ip,port inet6',
      'KUBE-6-LOAD-BALANCER-FW hash:ip,port inet6',
      'KUBE-6-LOAD-BALANCER-LOCAL hash:ip,port inet6',
      'KUBE-6-LOAD-BALANCER-SOURCE-IP hash:ip,port,ip inet6',
      'KUBE-6-LOAD-BALANCER-SOURCE-CID hash:ip,port,net inet6',
      'KUBE-6-NODE-PORT-TCP bitmap:port -',
      'KUBE-6-NODE-PORT-LOCAL-TCP bitmap:port -',
      'KUBE-6-NODE-PORT-UDP bitmap:port -',
      'KUBE-6-NODE-PORT-LOCAL-UDP bitmap:port -',
      'KUBE-6-NODE-PORT-SCTP-HASH hash:ip,port inet6',
      'KUBE-6-NODE-PORT-LOCAL-SCTP-HAS hash:ip,port inet6',
      'KUBE-6-HEALTH-CHECK-NODE-PORT bitmap:port -',
      'KUBE-6-IPVS-IPS hash:ip inet6',
    ]);
  });

  it('uses kube-proxy\'s sizes: hashsize 1024 maxelem 65536, bitmap:port range 0-65535', () => {
    for (const { spec } of OWNED_SETS) {
      expect(spec.name.length).toBeLessThanOrEqual(31);
      if (spec.type === 'bitmap:port') expect(spec.range).toEqual({ from: 0, to: 65535 });
      else expect([spec.hashSize, spec.maxElem]).toEqual([1024, 65536]);
    }
    expect(new Set(OWNED_SETS.map((s) => s.spec.name)).size).toBe(OWNED_SETS.length);
  });

  it('keeps kube-proxy\'s comments', () => {
    expect(ownedSet('KUBE-CLUSTER-IP')!.comment).toBe('Kubernetes service cluster ip + port for masquerade purpose');
    expect(ownedSet('KUBE-6-IPVS-IPS')!.comment).toBe('Addresses on the ipvs interface');
    expect(ownedSet('KUBE-NODE-PORT-SCTP-HASH')!.comment).toBe("Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'");
  });

  it('setsForFamily and setName agree with OWNED_SETS', () => {
    const names = (f: 'ipv4' | 'ipv6'): string[] => setsForFamily(f).map((s) => s.spec.name).sort();
    expect(names('ipv4')).toEqual(Object.values(SET).sort());
    expect(names('ipv6')).toEqual(Object.values(SET).map((b) => setName(b, 'ipv6')).sort());
    expect(setName(SET.LOAD_BALANCER_SOURCE_CIDR, 'ipv6')).toBe('KUBE-6-LOAD-BALANCER-SOURCE-CID');
    expect(ownedSet('KUBE-FOO')).toBeUndefined();
  });
});
