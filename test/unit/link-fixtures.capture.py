#!/usr/bin/env python3
# Captures the rtnetlink replies in test/unit/link-fixtures.ts. Run inside User-Mode Linux:
#   node test/harness/uml.mjs -- python3 test/unit/link-fixtures.capture.py
# It creates kube-ipvs0 with 10.96.0.1/32 and fd00::1/128, then prints each exchange's datagrams as hex.
import os, socket, struct, subprocess

NETLINK_ROUTE, SOL_NETLINK, NETLINK_EXT_ACK, NETLINK_CAP_ACK = 0, 270, 11, 10
RTM_NEWLINK, RTM_GETLINK, RTM_NEWADDR, RTM_DELADDR, RTM_GETADDR = 16, 18, 20, 21, 22
F_REQUEST, F_ACK, F_DUMP, F_EXCL, F_CREATE = 1, 4, 0x300, 0x200, 0x400


def attr(t, payload):
    n = 4 + len(payload)
    return struct.pack('=HH', n, t) + payload + b'\0' * ((4 - n % 4) % 4)


def exchange(sock, seq, mtype, flags, body):
    msg = struct.pack('=IHHII', 16 + len(body), mtype, F_REQUEST | flags, seq, 0) + body
    sock.send(msg)
    out = []
    while True:
        d = sock.recv(65536)
        out.append(d)
        # Stop at NLMSG_DONE or NLMSG_ERROR for our seq.
        off, done = 0, False
        while off + 16 <= len(d):
            ln, ty, _, sq, _ = struct.unpack_from('=IHHII', d, off)
            if sq == seq and ty in (2, 3):
                done = True
            off += (ln + 3) & ~3
        if done:
            return out


def main():
    for cmd in (['ip', 'link', 'add', 'kube-ipvs0', 'type', 'dummy'],
                ['ip', 'addr', 'add', '10.96.0.1/32', 'dev', 'kube-ipvs0'],
                ['ip', 'addr', 'add', 'fd00::1/128', 'dev', 'kube-ipvs0', 'nodad']):
        subprocess.run(cmd, check=True)
    idx = socket.if_nametoindex('kube-ipvs0')
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
    s.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)
    s.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1)
    s.bind((0, 0))
    print('kernel', os.uname().release, 'index', idx)
    ifinfo = struct.pack('=BxHiII', 0, 0, 0, 0, 0)
    ipv4 = socket.inet_pton(socket.AF_INET, '10.96.0.1')
    cases = [
        ('getLink', RTM_GETLINK, F_ACK, ifinfo + attr(3, b'kube-ipvs0\0') + attr(29, struct.pack('=I', 8))),
        ('dumpAddresses', RTM_GETADDR, F_DUMP, struct.pack('=BBBBI', 0, 0, 0, 0, 0)),
        ('addExisting', RTM_NEWADDR, F_ACK | F_CREATE | F_EXCL,
         struct.pack('=BBBBI', socket.AF_INET, 32, 0, 0, idx) + attr(2, ipv4) + attr(1, ipv4)),
        ('newLinkExisting', RTM_NEWLINK, F_ACK | F_CREATE | F_EXCL,
         ifinfo + attr(3, b'kube-ipvs0\0') + attr(18 | 0x8000, attr(1, b'dummy\0'))),
        ('deleteMissing', RTM_DELADDR, F_ACK,
         struct.pack('=BBBBI', socket.AF_INET, 32, 0, 0, idx) + attr(2, b'\x0a\x60\x00\x63') + attr(1, b'\x0a\x60\x00\x63')),
        ('getMissingLink', RTM_GETLINK, F_ACK, ifinfo + attr(3, b'nosuchlink\0')),
    ]
    for seq, (name, mtype, flags, body) in enumerate(cases, start=1):
        for d in exchange(s, seq, mtype, flags, body):
            print(name, d.hex())
    subprocess.run(['ip', 'link', 'del', 'kube-ipvs0'], check=True)


main()
