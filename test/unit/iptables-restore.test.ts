import { describe, expect, it } from 'vitest';
import {
  IptablesError,
  comment,
  defaultIsOwned,
  batchChains,
  parseSave,
  planRestore,
  restoreError,
  type TableSpec,
} from '../../src/kernel/iptables.js';

const opts = { isOwned: defaultIsOwned };

const NAT_SPEC: TableSpec = {
  table: 'nat',
  chains: [
    {
      name: 'KUBE-SERVICES',
      rules: [
        [...comment('Kubernetes service cluster ip + port for masquerade purpose'), '-m', 'set', '--match-set', 'KUBE-CLUSTER-IP', 'dst,dst', '-j', 'KUBE-MARK-MASQ'],
        ['-m', 'addrtype', '--dst-type', 'LOCAL', '-j', 'KUBE-NODE-PORT'],
      ],
    },
    { name: 'KUBE-NODE-PORT', rules: [['-p', 'tcp', '-m', 'tcp', '--dport', '30080', ...comment('default/web:http'), '-j', 'KUBE-MARK-MASQ']] },
    { name: 'KUBE-MARK-MASQ', rules: [['-j', 'MARK', '--or-mark', '0x4000']] },
    { name: 'KUBE-EMPTY', rules: [] },
  ],
  jumps: [
    { chain: 'PREROUTING', rule: [...comment('kubernetes service portals'), '-j', 'KUBE-SERVICES'] },
    { chain: 'OUTPUT', rule: [...comment('kubernetes service portals'), '-j', 'KUBE-SERVICES'] },
    { chain: 'POSTROUTING', rule: ['-j', 'KUBE-MARK-MASQ'], position: 'last' },
  ],
};

describe('planRestore', () => {
  it('renders a fresh table (golden)', () => {
    const plan = planRestore(NAT_SPEC, undefined, opts);
    expect(plan.text).toBe(`*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-EMPTY - [0:0]
-I OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-NODE-PORT -p tcp -m tcp --dport 30080 -m comment --comment default/web:http -j KUBE-MARK-MASQ
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
COMMIT
`);
    expect(plan.deletedChains).toEqual([]);
    expect(plan.addedJumps).toHaveLength(3);
  });

  it('skips present jumps, deletes stale owned chains and the foreign jumps into them, keeps foreign state (golden)', () => {
    const [current] = parseSave(`*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:DOCKER - [0:0]
:KUBE-MARK-DROP - [0:0]
:KUBE-OLD - [0:0]
:KUBE-OLDER - [0:0]
:KUBE-SERVICES - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A OUTPUT -m comment --comment "old \\"portal\\"" -j KUBE-OLD
-A POSTROUTING -j KUBE-OLD
-A DOCKER -j KUBE-OLDER
-A KUBE-MARK-DROP -j MARK --set-xmark 0x8000/0x8000
-A KUBE-OLD -j KUBE-OLDER
-A KUBE-SERVICES -j RETURN
COMMIT
`);
    const spec: TableSpec = {
      table: 'nat',
      chains: [{ name: 'KUBE-SERVICES', rules: [['-j', 'RETURN']] }],
      jumps: [{ chain: 'PREROUTING', rule: [...comment('kubernetes service portals'), '-j', 'KUBE-SERVICES'] }],
    };
    const plan = planRestore(spec, current, opts);
    expect(plan.text).toBe(`*nat
:KUBE-SERVICES - [0:0]
:KUBE-OLD - [0:0]
:KUBE-OLDER - [0:0]
-D OUTPUT -m comment --comment "old \\"portal\\"" -j KUBE-OLD
-D POSTROUTING -j KUBE-OLD
-D DOCKER -j KUBE-OLDER
-A KUBE-SERVICES -j RETURN
-X KUBE-OLD
-X KUBE-OLDER
COMMIT
`);
    expect(plan.deletedChains).toEqual(['KUBE-OLD', 'KUBE-OLDER']);
    expect(plan.addedJumps).toEqual([]);
    expect(plan.removedRules).toEqual([
      '-A OUTPUT -m comment --comment "old \\"portal\\"" -j KUBE-OLD',
      '-A POSTROUTING -j KUBE-OLD',
      '-A DOCKER -j KUBE-OLDER',
    ]);
    // KUBE-MARK-DROP in nat is kubelet's: neither flushed nor deleted.
    expect(plan.text).not.toContain('KUBE-MARK-DROP');
  });

  it('renders an empty spec as a cleanup of every owned chain', () => {
    const [current] = parseSave(`*filter
:INPUT ACCEPT [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-FIREWALL - [0:0]
-A INPUT -j KUBE-FORWARD
COMMIT
`);
    expect(planRestore({ table: 'filter', chains: [] }, current, opts).text).toBe(`*filter
:KUBE-FORWARD - [0:0]
-D INPUT -j KUBE-FORWARD
-X KUBE-FORWARD
COMMIT
`);
  });

  it('lets an injected hasJump decide (iptables -C), and inserts a duplicate jump once', () => {
    const jump = { chain: 'INPUT', rule: ['-j', 'KUBE-A'] };
    const spec: TableSpec = { table: 'filter', chains: [{ name: 'KUBE-A', rules: [] }], jumps: [jump, { ...jump }] };
    expect(planRestore(spec, undefined, { ...opts, hasJump: () => true }).text).toBe('*filter\n:KUBE-A - [0:0]\nCOMMIT\n');
    expect(planRestore(spec, undefined, opts).text).toBe('*filter\n:KUBE-A - [0:0]\n-I INPUT -j KUBE-A\nCOMMIT\n');
  });

  it('honours a custom ownership predicate', () => {
    const [current] = parseSave('*nat\n:KUBE-SERVICES - [0:0]\n:KIP-OLD - [0:0]\nCOMMIT\n');
    const plan = planRestore({ table: 'nat', chains: [{ name: 'KIP-NEW', rules: [] }] }, current, {
      isOwned: (c) => c.startsWith('KIP-'),
    });
    expect(plan.text).toBe('*nat\n:KIP-NEW - [0:0]\n:KIP-OLD - [0:0]\n-X KIP-OLD\nCOMMIT\n');
  });

  it.each([
    [{ table: 'nat', chains: [{ name: 'DOCKER', rules: [] }] }, /not owned/],
    [{ table: 'nat', chains: [{ name: 'KUBE-A', rules: [] }, { name: 'KUBE-A', rules: [] }] }, /twice/],
    [{ table: 'nat', chains: [{ name: 'KUBE-' + 'X'.repeat(30), rules: [] }] }, /invalid chain name/],
    [{ table: 'nat', chains: [{ name: 'KUBE-A B', rules: [] }] }, /invalid chain name/],
    [{ table: 'nat', chains: [{ name: 'KUBE-A', rules: [['-j', 'RETURN\n-A INPUT']] }] }, /control character/],
    [{ table: 'nat', chains: [], jumps: [{ chain: 'KUBE-A', rule: ['-j', 'RETURN'] }] }, /jump into owned chain/],
  ] as [TableSpec, RegExp][])('refuses %j', (spec, why) => {
    expect(() => planRestore(spec, undefined, opts)).toThrow(why);
    try {
      planRestore(spec, undefined, opts);
    } catch (e) {
      expect(e).toBeInstanceOf(IptablesError);
      expect((e as IptablesError).code).toBe('EINVAL');
    }
  });
});

describe('batchChains', () => {
  const chain = (name: string, targets: string[], extra = 0) => ({
    name,
    rules: [...targets.map((t) => ['-j', t]), ...Array.from({ length: extra }, () => ['-j', 'ACCEPT'])],
  });
  const names = (groups: ReturnType<typeof batchChains>) => groups.map((g) => g.map((c) => c.name));

  it('keeps chains that fit in one group, in their order', () => {
    const chains = [chain('KUBE-SERVICES', ['KUBE-SVC-A']), chain('KUBE-SVC-A', ['KUBE-SEP-A'])];
    expect(names(batchChains(chains, 2))).toEqual([['KUBE-SERVICES', 'KUBE-SVC-A']]);
    expect(names(batchChains(chains))).toEqual([['KUBE-SERVICES', 'KUBE-SVC-A']]);
  });

  it('puts every chain after the owned chains it jumps to, groups at most maxRules rules (a bigger chain alone)', () => {
    const chains = [
      chain('KUBE-SERVICES', ['KUBE-SVC-A', 'KUBE-SVC-B', 'KUBE-MARK-MASQ']),
      chain('KUBE-SVC-A', ['KUBE-SEP-A1', 'KUBE-SEP-A2']),
      chain('KUBE-SVC-B', ['KUBE-SEP-B1']),
      chain('KUBE-SEP-A1', ['KUBE-MARK-MASQ', 'DNAT']),
      chain('KUBE-SEP-A2', ['KUBE-MARK-MASQ', 'DNAT']),
      chain('KUBE-SEP-B1', ['KUBE-MARK-MASQ'], 5),
      chain('KUBE-MARK-MASQ', ['MARK']),
    ];
    const groups = batchChains(chains, 4);
    expect(names(groups)).toEqual([
      ['KUBE-MARK-MASQ', 'KUBE-SEP-A1'],
      ['KUBE-SEP-A2', 'KUBE-SVC-A'],
      ['KUBE-SEP-B1'],
      ['KUBE-SVC-B', 'KUBE-SERVICES'],
    ]);
    expect(groups.flat()).toHaveLength(chains.length);
    const at = new Map(groups.flatMap((g, i) => g.map((c) => [c.name, i] as const)));
    for (const c of chains) for (const r of c.rules) if (at.has(r[1]!)) expect(at.get(r[1]!)!).toBeLessThanOrEqual(at.get(c.name)!);
  });

  it('keeps one group when the chains jump in a loop', () => {
    const chains = [chain('KUBE-A', ['KUBE-B'], 3), chain('KUBE-B', ['KUBE-A'], 3)];
    expect(names(batchChains(chains, 2))).toEqual([['KUBE-A', 'KUBE-B']]);
  });
});

describe('planRestore in batches', () => {
  it('commits the chains in dependency order; deletions, foreign -D and jumps in the last commit (golden)', () => {
    const [current] = parseSave(`*nat
:PREROUTING ACCEPT [0:0]
:KUBE-OLD - [0:0]
-A PREROUTING -j KUBE-OLD
COMMIT
`);
    const plan = planRestore(NAT_SPEC, current, { ...opts, batchRules: 2 });
    expect(plan.text).toBe(`*nat
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODE-PORT - [0:0]
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-NODE-PORT -p tcp -m tcp --dport 30080 -m comment --comment default/web:http -j KUBE-MARK-MASQ
COMMIT
*nat
:KUBE-SERVICES - [0:0]
:KUBE-EMPTY - [0:0]
:KUBE-OLD - [0:0]
-D PREROUTING -j KUBE-OLD
-I OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-X KUBE-OLD
COMMIT
`);
    expect(plan.deletedChains).toEqual(['KUBE-OLD']);
  });
});

describe('restoreError', () => {
  const input = '*filter\n:KUBE-R - [0:0]\n-A KUBE-R -p tcp --dport 99999 -j ACCEPT\nCOMMIT\n';

  it.each([
    [
      "iptables-restore v1.8.9 (legacy): invalid port/service `99999' specified\nError occurred at line: 3\nTry `iptables-restore -h' or 'iptables-restore --help' for more information.\n",
      3,
    ],
    ['iptables-restore: line 3 failed\n', 3],
    ['iptables-nft-restore v1.8.9 (nf_tables): \nline 2: CHAIN_DEL failed (Device or resource busy): chain KUBE-R\n', 2],
    ['something odd\n', undefined],
  ])('names table, line and message for %j', (stderr, line) => {
    const e = restoreError('iptables-restore', 'filter', input, 2, stderr);
    expect(e).toBeInstanceOf(IptablesError);
    expect(e.code).toBe('ERESTORE');
    expect(e.table).toBe('filter');
    expect(e.line).toBe(line);
    expect(e.exitCode).toBe(2);
    expect(e.stderr).toBe(stderr);
    expect(e.message).toContain('table filter');
    expect(e.message).not.toContain('Try `');
    if (line !== undefined) expect(e.lineText).toBe(input.split('\n')[line - 1]);
  });
});
