// IPVS generic netlink attribute tables.
// NOTE: types and widths follow the kernel's policies in net/netfilter/ipvs/ip_vs_ctl.c
// (ip_vs_cmd_policy, ip_vs_svc_policy, ip_vs_dest_policy, ip_vs_daemon_policy):
// ports are big-endian, every other integer is host order; addresses
// are a 16-byte union nf_inet_addr (IPv4 zero-padded) qualified by AF / ADDR_FAMILY;
// FLAGS is a struct ip_vs_flags {flags, mask}. NETMASK is read as a raw __be32: for IPv4 it
// is the mask's bytes, for IPv6 ip_vs_add_service() casts it to a host-order prefix length
// (1..128) — so it is 4 raw bytes here and src/kernel/ipvs/codec.ts lays them out per family.
#include <linux/ip_vs.h>

#include "schemas.h"

namespace kip {

constexpr uint16_t kInetAddrLen = 16;  // sizeof(union nf_inet_addr)

static const AttrSpec kStatsAttrs[] = {
    KIP_ATTR(IPVS_STATS_ATTR_CONNS, U32, "conns"),     KIP_ATTR(IPVS_STATS_ATTR_INPKTS, U32, "inPkts"),
    KIP_ATTR(IPVS_STATS_ATTR_OUTPKTS, U32, "outPkts"), KIP_ATTR(IPVS_STATS_ATTR_INBYTES, U64, "inBytes"),
    KIP_ATTR(IPVS_STATS_ATTR_OUTBYTES, U64, "outBytes"), KIP_ATTR(IPVS_STATS_ATTR_CPS, U32, "cps"),
    KIP_ATTR(IPVS_STATS_ATTR_INPPS, U32, "inPps"),     KIP_ATTR(IPVS_STATS_ATTR_OUTPPS, U32, "outPps"),
    KIP_ATTR(IPVS_STATS_ATTR_INBPS, U32, "inBps"),     KIP_ATTR(IPVS_STATS_ATTR_OUTBPS, U32, "outBps"),
};
KIP_SCHEMA(kStats, "ipvs.stats", kStatsAttrs);

// STATS64 carries the same attributes, every one 64 bits wide.
static const AttrSpec kStats64Attrs[] = {
    KIP_ATTR(IPVS_STATS_ATTR_CONNS, U64, "conns"),     KIP_ATTR(IPVS_STATS_ATTR_INPKTS, U64, "inPkts"),
    KIP_ATTR(IPVS_STATS_ATTR_OUTPKTS, U64, "outPkts"), KIP_ATTR(IPVS_STATS_ATTR_INBYTES, U64, "inBytes"),
    KIP_ATTR(IPVS_STATS_ATTR_OUTBYTES, U64, "outBytes"), KIP_ATTR(IPVS_STATS_ATTR_CPS, U64, "cps"),
    KIP_ATTR(IPVS_STATS_ATTR_INPPS, U64, "inPps"),     KIP_ATTR(IPVS_STATS_ATTR_OUTPPS, U64, "outPps"),
    KIP_ATTR(IPVS_STATS_ATTR_INBPS, U64, "inBps"),     KIP_ATTR(IPVS_STATS_ATTR_OUTBPS, U64, "outBps"),
};
KIP_SCHEMA(kStats64, "ipvs.stats64", kStats64Attrs);

static const AttrSpec kServiceAttrs[] = {
    KIP_ATTR(IPVS_SVC_ATTR_AF, U16, "af"),
    KIP_ATTR(IPVS_SVC_ATTR_PROTOCOL, U16, "protocol"),
    KIP_ATTR_LEN(IPVS_SVC_ATTR_ADDR, BINARY, "addr", 4, kInetAddrLen),
    KIP_ATTR(IPVS_SVC_ATTR_PORT, BE16, "port"),
    KIP_ATTR(IPVS_SVC_ATTR_FWMARK, U32, "fwmark"),
    KIP_ATTR_LEN(IPVS_SVC_ATTR_SCHED_NAME, STRING, "schedName", 0, IP_VS_SCHEDNAME_MAXLEN - 1),
    KIP_ATTR_LEN(IPVS_SVC_ATTR_FLAGS, BINARY, "flags", sizeof(struct ip_vs_flags), sizeof(struct ip_vs_flags)),
    KIP_ATTR(IPVS_SVC_ATTR_TIMEOUT, U32, "timeout"),
    KIP_ATTR_LEN(IPVS_SVC_ATTR_NETMASK, BINARY, "netmask", 4, 4),
    KIP_NEST(IPVS_SVC_ATTR_STATS, "stats", kStats, 0),
    KIP_ATTR_LEN(IPVS_SVC_ATTR_PE_NAME, STRING, "peName", 0, IP_VS_PENAME_MAXLEN - 1),
    KIP_NEST(IPVS_SVC_ATTR_STATS64, "stats64", kStats64, 0),
};
KIP_SCHEMA(kService, "ipvs.service", kServiceAttrs);

static const AttrSpec kDestAttrs[] = {
    KIP_ATTR_LEN(IPVS_DEST_ATTR_ADDR, BINARY, "addr", 4, kInetAddrLen),
    KIP_ATTR(IPVS_DEST_ATTR_PORT, BE16, "port"),
    KIP_ATTR(IPVS_DEST_ATTR_FWD_METHOD, U32, "fwdMethod"),
    KIP_ATTR(IPVS_DEST_ATTR_WEIGHT, U32, "weight"),
    KIP_ATTR(IPVS_DEST_ATTR_U_THRESH, U32, "uThresh"),
    KIP_ATTR(IPVS_DEST_ATTR_L_THRESH, U32, "lThresh"),
    KIP_ATTR(IPVS_DEST_ATTR_ACTIVE_CONNS, U32, "activeConns"),
    KIP_ATTR(IPVS_DEST_ATTR_INACT_CONNS, U32, "inactConns"),
    KIP_ATTR(IPVS_DEST_ATTR_PERSIST_CONNS, U32, "persistConns"),
    KIP_NEST(IPVS_DEST_ATTR_STATS, "stats", kStats, 0),
    KIP_ATTR(IPVS_DEST_ATTR_ADDR_FAMILY, U16, "addrFamily"),
    KIP_NEST(IPVS_DEST_ATTR_STATS64, "stats64", kStats64, 0),
    KIP_ATTR(IPVS_DEST_ATTR_TUN_TYPE, U8, "tunType"),
    KIP_ATTR(IPVS_DEST_ATTR_TUN_PORT, BE16, "tunPort"),
    KIP_ATTR(IPVS_DEST_ATTR_TUN_FLAGS, U16, "tunFlags"),
};
KIP_SCHEMA(kDest, "ipvs.dest", kDestAttrs);

static const AttrSpec kDaemonAttrs[] = {
    KIP_ATTR(IPVS_DAEMON_ATTR_STATE, U32, "state"),
    KIP_ATTR_LEN(IPVS_DAEMON_ATTR_MCAST_IFN, STRING, "mcastIfn", 0, IP_VS_IFNAME_MAXLEN - 1),
    KIP_ATTR(IPVS_DAEMON_ATTR_SYNC_ID, U32, "syncId"),
    KIP_ATTR(IPVS_DAEMON_ATTR_SYNC_MAXLEN, U16, "syncMaxLen"),
    KIP_ATTR_LEN(IPVS_DAEMON_ATTR_MCAST_GROUP, BINARY, "mcastGroup", 4, 4),
    KIP_ATTR_LEN(IPVS_DAEMON_ATTR_MCAST_GROUP6, BINARY, "mcastGroup6", 16, 16),
    KIP_ATTR(IPVS_DAEMON_ATTR_MCAST_PORT, BE16, "mcastPort"),
    KIP_ATTR(IPVS_DAEMON_ATTR_MCAST_TTL, U8, "mcastTtl"),
};
KIP_SCHEMA(kDaemon, "ipvs.daemon", kDaemonAttrs);

static const AttrSpec kCmdAttrs[] = {
    KIP_NEST(IPVS_CMD_ATTR_SERVICE, "service", kService, 0),
    KIP_NEST(IPVS_CMD_ATTR_DEST, "dest", kDest, 0),
    KIP_NEST(IPVS_CMD_ATTR_DAEMON, "daemon", kDaemon, 0),
    KIP_ATTR(IPVS_CMD_ATTR_TIMEOUT_TCP, U32, "timeoutTcp"),
    KIP_ATTR(IPVS_CMD_ATTR_TIMEOUT_TCP_FIN, U32, "timeoutTcpFin"),
    KIP_ATTR(IPVS_CMD_ATTR_TIMEOUT_UDP, U32, "timeoutUdp"),
};
KIP_SCHEMA(kCmd, "ipvs", kCmdAttrs);

// IPVS_CMD_GET_INFO replies (as IPVS_CMD_SET_INFO) with IPVS_INFO_ATTR_* at the top level,
// whose numbers overlap IPVS_CMD_ATTR_*: a separate root schema.
static const AttrSpec kInfoAttrs[] = {
    KIP_ATTR(IPVS_INFO_ATTR_VERSION, U32, "version"),
    KIP_ATTR(IPVS_INFO_ATTR_CONN_TAB_SIZE, U32, "connTabSize"),
};
KIP_SCHEMA(kInfo, "ipvs.info", kInfoAttrs);

const RootSchema kIpvsRoot = {"ipvs", &kGenlHeader, &kCmd};
const RootSchema kIpvsInfoRoot = {"ipvs.info", &kGenlHeader, &kInfo};

}  // namespace kip
