// ipset (nfnetlink subsystem NFNL_SUBSYS_IPSET) tables: struct nfgenmsg + IPSET_ATTR_*; at the end, nf_tables' generation.
// NOTE: byte orders and flags follow net/netfilter/ipset/ip_set_core.c and the set types
// (ip_set_hash_gen.h, ip_set_bitmap_port.c): every multi-byte integer is big-endian and the
// kernel rejects it (IPSET_ERR_PROTOCOL) unless NLA_F_NET_BYTEORDER is set
// (ip_set_attr_netorder / ip_set_optattr_netorder); every nest must carry NLA_F_NESTED
// (flag_nested). Set types parse nested data with strict validation, so an attribute the
// type does not know is an error: encode only what the set type takes.
// NOTE: IPSET_ATTR_DATA holds create-data attributes (HASHSIZE, MAXELEM, ...) in CREATE
// requests and LIST/HEADER replies, but ADT-data attributes (ETHER, NAME, IP2, ...) in
// ADD/DEL/TEST: types 17..26 mean different things in the two enums, hence two roots.
// NOTE: LINENO is copied back verbatim by call_ad() (ip_set_core.c), so its byte order is
// ours to choose; we send it big-endian with NLA_F_NET_BYTEORDER, as ipset(8) does.
#include <linux/if.h>
#include <linux/netfilter/ipset/ip_set.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <cstddef>

#include "schemas.h"

namespace kip {

constexpr uint16_t kNbo = NLA_F_NET_BYTEORDER;

// An attribute with both encode flags and a length bound.
#define KIP_ATTR_LEN_F(type, kind, name, flags, minLen, maxLen) \
  { type, ::kip::Kind::kind, name, nullptr, nullptr, flags, minLen, maxLen }

static const HeaderField kNfgenFields[] = {
    {"family", offsetof(nfgenmsg, nfgen_family), Kind::U8},
    {"version", offsetof(nfgenmsg, version), Kind::U8},
    {"resId", offsetof(nfgenmsg, res_id), Kind::BE16},
};
const HeaderSpec kNfgenHeader = {"nfgenmsg", sizeof(nfgenmsg), kNfgenFields, 3};

// IPSET_ATTR_IP / IP_TO / IP2 / IP2_TO: an address nest. IPv4 is a number (host order in JS).
static const AttrSpec kIpAddrAttrs[] = {
    KIP_ATTR_F(IPSET_ATTR_IPADDR_IPV4, BE32, "v4", kNbo),
    KIP_ATTR_LEN_F(IPSET_ATTR_IPADDR_IPV6, BINARY, "v6", kNbo, 16, 16),
};
KIP_SCHEMA(kIpAddr, "ipset.ipaddr", kIpAddrAttrs);

// Create-time attributes (CREATE) and the set header (LIST, HEADER replies).
static const AttrSpec kCreateDataAttrs[] = {
    KIP_NEST(IPSET_ATTR_IP, "ip", kIpAddr, NLA_F_NESTED),
    KIP_NEST(IPSET_ATTR_IP_TO, "ipTo", kIpAddr, NLA_F_NESTED),
    KIP_ATTR(IPSET_ATTR_CIDR, U8, "cidr"),
    KIP_ATTR_F(IPSET_ATTR_PORT, BE16, "port", kNbo),
    KIP_ATTR_F(IPSET_ATTR_PORT_TO, BE16, "portTo", kNbo),
    KIP_ATTR_F(IPSET_ATTR_TIMEOUT, BE32, "timeout", kNbo),
    KIP_ATTR(IPSET_ATTR_PROTO, U8, "proto"),
    KIP_ATTR_F(IPSET_ATTR_CADT_FLAGS, BE32, "cadtFlags", kNbo),
    KIP_ATTR_F(IPSET_ATTR_MARKMASK, BE32, "markMask", kNbo),
    KIP_ATTR_F(IPSET_ATTR_INITVAL, BE32, "initVal", kNbo),
    KIP_ATTR_F(IPSET_ATTR_HASHSIZE, BE32, "hashSize", kNbo),
    KIP_ATTR_F(IPSET_ATTR_MAXELEM, BE32, "maxElem", kNbo),
    KIP_ATTR(IPSET_ATTR_NETMASK, U8, "netmask"),
    KIP_ATTR(IPSET_ATTR_BUCKETSIZE, U8, "bucketSize"),
    KIP_ATTR(IPSET_ATTR_RESIZE, U8, "resize"),
    KIP_ATTR_F(IPSET_ATTR_SIZE, BE32, "size", kNbo),
    KIP_ATTR_F(IPSET_ATTR_ELEMENTS, BE32, "elements", kNbo),
    KIP_ATTR_F(IPSET_ATTR_REFERENCES, BE32, "references", kNbo),
    KIP_ATTR_F(IPSET_ATTR_MEMSIZE, BE32, "memSize", kNbo),
};
KIP_SCHEMA(kCreateData, "ipset.createData", kCreateDataAttrs);

// One element (ADD/DEL/TEST, and the members of a LIST reply). Counters and skbmark are
// 64-bit big-endian: raw 8-byte buffers here, converted in TypeScript.
static const AttrSpec kAdtDataAttrs[] = {
    KIP_NEST(IPSET_ATTR_IP, "ip", kIpAddr, NLA_F_NESTED),
    KIP_NEST(IPSET_ATTR_IP_TO, "ipTo", kIpAddr, NLA_F_NESTED),
    KIP_ATTR(IPSET_ATTR_CIDR, U8, "cidr"),
    KIP_ATTR_F(IPSET_ATTR_PORT, BE16, "port", kNbo),
    KIP_ATTR_F(IPSET_ATTR_PORT_TO, BE16, "portTo", kNbo),
    KIP_ATTR_F(IPSET_ATTR_TIMEOUT, BE32, "timeout", kNbo),
    KIP_ATTR(IPSET_ATTR_PROTO, U8, "proto"),
    KIP_ATTR_F(IPSET_ATTR_CADT_FLAGS, BE32, "cadtFlags", kNbo),
    KIP_ATTR_F(IPSET_ATTR_CADT_LINENO, BE32, "lineno", kNbo),
    KIP_ATTR_F(IPSET_ATTR_MARK, BE32, "mark", kNbo),
    KIP_ATTR_LEN(IPSET_ATTR_ETHER, BINARY, "ether", 6, 6),
    KIP_ATTR_LEN(IPSET_ATTR_NAME, STRING, "setName", 0, IPSET_MAXNAMELEN - 1),
    KIP_ATTR_LEN(IPSET_ATTR_NAMEREF, STRING, "nameRef", 0, IPSET_MAXNAMELEN - 1),
    KIP_NEST(IPSET_ATTR_IP2, "ip2", kIpAddr, NLA_F_NESTED),
    KIP_ATTR(IPSET_ATTR_CIDR2, U8, "cidr2"),
    KIP_NEST(IPSET_ATTR_IP2_TO, "ip2To", kIpAddr, NLA_F_NESTED),
    KIP_ATTR_LEN(IPSET_ATTR_IFACE, STRING, "iface", 0, IFNAMSIZ - 1),
    KIP_ATTR_LEN_F(IPSET_ATTR_BYTES, BINARY, "bytes", kNbo, 8, 8),
    KIP_ATTR_LEN_F(IPSET_ATTR_PACKETS, BINARY, "packets", kNbo, 8, 8),
    KIP_ATTR_LEN(IPSET_ATTR_COMMENT, STRING, "comment", 0, IPSET_MAX_COMMENT_SIZE),
    KIP_ATTR_LEN_F(IPSET_ATTR_SKBMARK, BINARY, "skbMark", kNbo, 8, 8),
    KIP_ATTR_F(IPSET_ATTR_SKBPRIO, BE32, "skbPrio", kNbo),
    KIP_ATTR_F(IPSET_ATTR_SKBQUEUE, BE16, "skbQueue", kNbo),
};
KIP_SCHEMA(kAdtData, "ipset.adtData", kAdtDataAttrs);
static const AttrSpec kAdtElement = KIP_NEST(IPSET_ATTR_DATA, "data", kAdtData, NLA_F_NESTED);

// Command-level attributes, in the order ipset(8) writes them (LINENO before ADT). NOTE: IPSET_ATTR_SETNAME2 == IPSET_ATTR_TYPENAME: RENAME and SWAP
// put the second set name in "typeName"; IPSET_ATTR_REVISION_MIN == IPSET_ATTR_PROTOCOL_MIN:
// TYPE replies carry the minimum revision in "protocolMin".
#define KIP_IPSET_CMD_ATTRS(dataSchema)                                                    \
  KIP_ATTR(IPSET_ATTR_PROTOCOL, U8, "protocol"),                                           \
      KIP_ATTR_LEN(IPSET_ATTR_SETNAME, STRING, "name", 0, IPSET_MAXNAMELEN - 1),           \
      KIP_ATTR_LEN(IPSET_ATTR_TYPENAME, STRING, "typeName", 0, IPSET_MAXNAMELEN - 1),      \
      KIP_ATTR(IPSET_ATTR_REVISION, U8, "revision"), KIP_ATTR(IPSET_ATTR_FAMILY, U8, "family"), \
      KIP_ATTR_F(IPSET_ATTR_FLAGS, BE32, "flags", kNbo),                                   \
      KIP_ATTR_F(IPSET_ATTR_LINENO, BE32, "lineno", kNbo),                                 \
      KIP_NEST(IPSET_ATTR_DATA, "data", dataSchema, NLA_F_NESTED),                         \
      KIP_LIST(IPSET_ATTR_ADT, "adt", kAdtElement, NLA_F_NESTED),                          \
      KIP_ATTR(IPSET_ATTR_PROTOCOL_MIN, U8, "protocolMin"),                                \
      KIP_ATTR_F(IPSET_ATTR_INDEX, BE16, "index", kNbo)

// PROTOCOL, CREATE, DESTROY, FLUSH, RENAME, SWAP, LIST, HEADER, TYPE: DATA is create data.
static const AttrSpec kCmdAttrs[] = {KIP_IPSET_CMD_ATTRS(kCreateData)};
KIP_SCHEMA(kCmd, "ipset", kCmdAttrs);
// ADD, DEL, TEST: DATA is one element.
static const AttrSpec kAdtCmdAttrs[] = {KIP_IPSET_CMD_ATTRS(kAdtData)};
KIP_SCHEMA(kAdtCmd, "ipset.adt", kAdtCmdAttrs);

const RootSchema kIpsetRoot = {"ipset", &kNfgenHeader, &kCmd};
const RootSchema kIpsetAdtRoot = {"ipset.adt", &kNfgenHeader, &kAdtCmd};

// nf_tables' GETGEN / NEWGEN (the other nfnetlink subsystem read here): the ruleset generation.
static const AttrSpec kNftGenAttrs[] = {
    KIP_ATTR(NFTA_GEN_ID, BE32, "id"),
    KIP_ATTR(NFTA_GEN_PROC_PID, BE32, "procPid"),
    KIP_ATTR(NFTA_GEN_PROC_NAME, STRING, "procName"),
};
KIP_SCHEMA(kNftGen, "nft.gen", kNftGenAttrs);
const RootSchema kNftGenRoot = {"nft.gen", &kNfgenHeader, &kNftGen};

}  // namespace kip
