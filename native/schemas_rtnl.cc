// rtnetlink (NETLINK_ROUTE) tables: links (struct ifinfomsg + IFLA_*), addresses
// (struct ifaddrmsg + IFA_*) and routes (struct rtmsg + RTA_*). Only what the proxy reads or writes; unknown attributes
// (stats, AF_SPEC, XDP, ...) are skipped by the decoder.
// NOTE: widths follow the kernel's ifla_policy (net/core/rtnetlink.c), ifa_ipv4_policy /
// ifa_ipv6_policy (net/ipv4/devinet.c, net/ipv6/addrconf.c) and rtm_ipv4_policy /
// rtm_ipv6_policy (net/ipv4/fib_frontend.c, net/ipv6/route.c). ifi_index is a C int: read as
// U32, which is exact for every real (positive) index.
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <cstddef>

#include "schemas.h"

namespace kip {

constexpr uint16_t kMaxAddrLen = 32;  // MAX_ADDR_LEN in <linux/netdevice.h>

static const HeaderField kIfinfoFields[] = {
    {"family", offsetof(ifinfomsg, ifi_family), Kind::U8},
    {"type", offsetof(ifinfomsg, ifi_type), Kind::U16},
    {"index", offsetof(ifinfomsg, ifi_index), Kind::U32},
    {"flags", offsetof(ifinfomsg, ifi_flags), Kind::U32},
    {"change", offsetof(ifinfomsg, ifi_change), Kind::U32},
};
const HeaderSpec kIfinfoHeader = {"ifinfomsg", sizeof(ifinfomsg), kIfinfoFields, 5};

static const HeaderField kIfaddrFields[] = {
    {"family", offsetof(ifaddrmsg, ifa_family), Kind::U8},
    {"prefixLen", offsetof(ifaddrmsg, ifa_prefixlen), Kind::U8},
    {"flags", offsetof(ifaddrmsg, ifa_flags), Kind::U8},
    {"scope", offsetof(ifaddrmsg, ifa_scope), Kind::U8},
    {"index", offsetof(ifaddrmsg, ifa_index), Kind::U32},
};
const HeaderSpec kIfaddrHeader = {"ifaddrmsg", sizeof(ifaddrmsg), kIfaddrFields, 5};

// IFLA_INFO_DATA is kind-specific (veth, vlan, ...): kept as raw bytes; a dummy has none.
static const AttrSpec kLinkInfoAttrs[] = {
    KIP_ATTR(IFLA_INFO_KIND, STRING, "kind"),
    KIP_ATTR(IFLA_INFO_DATA, BINARY, "data"),
    KIP_ATTR(IFLA_INFO_SLAVE_KIND, STRING, "slaveKind"),
    KIP_ATTR(IFLA_INFO_SLAVE_DATA, BINARY, "slaveData"),
};
KIP_SCHEMA(kLinkInfo, "rtnl.linkinfo", kLinkInfoAttrs);

static const AttrSpec kAltNameElement = KIP_ATTR_LEN(IFLA_ALT_IFNAME, STRING, "altName", 0, ALTIFNAMSIZ - 1);

static const AttrSpec kLinkAttrs[] = {
    KIP_ATTR_LEN(IFLA_ADDRESS, BINARY, "address", 0, kMaxAddrLen),
    KIP_ATTR_LEN(IFLA_BROADCAST, BINARY, "broadcast", 0, kMaxAddrLen),
    KIP_ATTR_LEN(IFLA_IFNAME, STRING, "ifname", 0, IFNAMSIZ - 1),
    KIP_ATTR(IFLA_MTU, U32, "mtu"),
    KIP_ATTR(IFLA_LINK, U32, "link"),
    KIP_ATTR(IFLA_QDISC, STRING, "qdisc"),
    KIP_ATTR(IFLA_MASTER, U32, "master"),
    KIP_ATTR(IFLA_TXQLEN, U32, "txqLen"),
    KIP_ATTR(IFLA_OPERSTATE, U8, "operState"),
    KIP_ATTR(IFLA_LINKMODE, U8, "linkMode"),
    KIP_NEST(IFLA_LINKINFO, "linkInfo", kLinkInfo, NLA_F_NESTED),
    KIP_ATTR(IFLA_IFALIAS, STRING, "ifAlias"),
    KIP_ATTR(IFLA_GROUP, U32, "group"),
    KIP_ATTR(IFLA_EXT_MASK, U32, "extMask"),
    KIP_ATTR(IFLA_PROMISCUITY, U32, "promiscuity"),
    KIP_ATTR(IFLA_NUM_TX_QUEUES, U32, "numTxQueues"),
    KIP_ATTR(IFLA_NUM_RX_QUEUES, U32, "numRxQueues"),
    KIP_ATTR(IFLA_CARRIER, U8, "carrier"),
    KIP_ATTR(IFLA_MIN_MTU, U32, "minMtu"),
    KIP_ATTR(IFLA_MAX_MTU, U32, "maxMtu"),
    KIP_LIST(IFLA_PROP_LIST, "altNames", kAltNameElement, NLA_F_NESTED),
    KIP_ATTR_LEN(IFLA_PERM_ADDRESS, BINARY, "permAddress", 0, kMaxAddrLen),
};
KIP_SCHEMA(kLink, "rtnl.link", kLinkAttrs);

// NOTE: IFA_LOCAL is the interface's own address and IFA_ADDRESS the prefix (or the peer on
// point-to-point links); IPv6 replies carry IFA_LOCAL only when a peer is set
// (inet_fill_ifaddr in net/ipv4/devinet.c, inet6_fill_ifaddr in net/ipv6/addrconf.c).
// IFA_FLAGS (u32) supersedes the u8 ifa_flags when present. LOCAL comes first on encode, as in iproute2.
static const AttrSpec kAddrAttrs[] = {
    KIP_ATTR_LEN(IFA_LOCAL, BINARY, "local", 4, 16),
    KIP_ATTR_LEN(IFA_ADDRESS, BINARY, "address", 4, 16),
    KIP_ATTR_LEN(IFA_LABEL, STRING, "label", 0, IFNAMSIZ - 1),
    KIP_ATTR_LEN(IFA_BROADCAST, BINARY, "broadcast", 4, 4),
    KIP_ATTR_LEN(IFA_ANYCAST, BINARY, "anycast", 4, 16),
    KIP_ATTR_LEN(IFA_CACHEINFO, BINARY, "cacheInfo", sizeof(ifa_cacheinfo), sizeof(ifa_cacheinfo)),
    KIP_ATTR_LEN(IFA_MULTICAST, BINARY, "multicast", 4, 16),
    KIP_ATTR(IFA_FLAGS, U32, "flags"),
    KIP_ATTR(IFA_RT_PRIORITY, U32, "rtPriority"),
    KIP_ATTR(IFA_PROTO, U8, "proto"),
};
KIP_SCHEMA(kAddr, "rtnl.addr", kAddrAttrs);

static const HeaderField kRtmsgFields[] = {
    {"family", offsetof(rtmsg, rtm_family), Kind::U8},
    {"dstLen", offsetof(rtmsg, rtm_dst_len), Kind::U8},
    {"srcLen", offsetof(rtmsg, rtm_src_len), Kind::U8},
    {"tos", offsetof(rtmsg, rtm_tos), Kind::U8},
    {"table", offsetof(rtmsg, rtm_table), Kind::U8},
    {"protocol", offsetof(rtmsg, rtm_protocol), Kind::U8},
    {"scope", offsetof(rtmsg, rtm_scope), Kind::U8},
    {"type", offsetof(rtmsg, rtm_type), Kind::U8},
    {"flags", offsetof(rtmsg, rtm_flags), Kind::U32},
};
const HeaderSpec kRtmsgHeader = {"rtmsg", sizeof(rtmsg), kRtmsgFields, 9};

// Routes: only what a local route through the dummy link needs, and what a dump of the local
// table is read by. Multipath, metrics and encapsulation nests are kept as raw bytes.
// NOTE: RTA_TABLE (u32) supersedes rtm_table, which holds RT_TABLE_COMPAT for ids over 255.
static const AttrSpec kRouteAttrs[] = {
    KIP_ATTR_LEN(RTA_DST, BINARY, "dst", 4, 16),
    KIP_ATTR_LEN(RTA_SRC, BINARY, "src", 4, 16),
    KIP_ATTR(RTA_IIF, U32, "iif"),
    KIP_ATTR(RTA_OIF, U32, "oif"),
    KIP_ATTR_LEN(RTA_GATEWAY, BINARY, "gateway", 4, 16),
    KIP_ATTR(RTA_PRIORITY, U32, "priority"),
    KIP_ATTR_LEN(RTA_PREFSRC, BINARY, "prefsrc", 4, 16),
    KIP_ATTR(RTA_METRICS, BINARY, "metrics"),
    KIP_ATTR(RTA_MULTIPATH, BINARY, "multipath"),
    KIP_ATTR(RTA_CACHEINFO, BINARY, "cacheInfo"),
    KIP_ATTR(RTA_TABLE, U32, "table"),
    KIP_ATTR(RTA_MARK, U32, "mark"),
    KIP_ATTR(RTA_PREF, U8, "pref"),
};
KIP_SCHEMA(kRoute, "rtnl.route", kRouteAttrs);

const RootSchema kRtnlLinkRoot = {"rtnl.link", &kIfinfoHeader, &kLink};
const RootSchema kRtnlAddrRoot = {"rtnl.addr", &kIfaddrHeader, &kAddr};
const RootSchema kRtnlRouteRoot = {"rtnl.route", &kRtmsgHeader, &kRoute};

}  // namespace kip
