// Netlink's answers as errors (errors.h).
#include "errors.h"

#include <linux/netfilter/ipset/ip_set.h>
#include <linux/netlink.h>

#include <cstddef>
#include <cstring>
#include <string>

namespace kip {

ErrorInfo parseError(const Message& m) {
  ErrorInfo info;
  if (m.payloadLen < sizeof(nlmsgerr)) throw CodecError("truncated NLMSG_ERROR");
  nlmsgerr e;
  std::memcpy(&e, m.payload, sizeof e);
  info.err = -e.error;
  // NOTE: ipset's call_ad() (net/netfilter/ipset/ip_set_core.c) builds its own NLMSG_ERROR,
  // ignoring NETLINK_CAP_ACK: the whole request, with the failing entry's LINENO written in.
  size_t echoed = m.payloadLen - offsetof(nlmsgerr, msg);
  if (!(m.hdr.nlmsg_flags & NLM_F_CAPPED) && e.msg.nlmsg_len > NLMSG_HDRLEN && e.msg.nlmsg_len <= echoed) {
    info.echo = m.payload + offsetof(nlmsgerr, msg);
    info.echoLen = e.msg.nlmsg_len;
  }
  if (!(m.hdr.nlmsg_flags & NLM_F_ACK_TLVS)) return info;
  size_t off = sizeof(nlmsgerr);
  if (!(m.hdr.nlmsg_flags & NLM_F_CAPPED)) off += e.msg.nlmsg_len >= NLMSG_HDRLEN ? e.msg.nlmsg_len - NLMSG_HDRLEN : 0;
  off = align4(off);
  if (off > m.payloadLen) throw CodecError("NLMSG_ERROR TLVs out of bounds");
  AttrReader r(m.payload + off, m.payloadLen - off);
  Attr a;
  while (r.next(a)) {
    if (a.type == NLMSGERR_ATTR_MSG)
      info.extAck.assign(reinterpret_cast<const char*>(a.data), strnlen(reinterpret_cast<const char*>(a.data), a.len));
    else if (a.type == NLMSGERR_ATTR_OFFS && a.len == 4) {
      uint32_t o;
      std::memcpy(&o, a.data, 4);
      info.extAckOffset = o;
    }
  }
  return info;
}

std::string errnoName(int err) {
  if (err == 0) return "OK";
  switch (err) {
#define IPSET_NAME(x) \
  case x: return #x;
    IPSET_NAME(IPSET_ERR_PROTOCOL)
    IPSET_NAME(IPSET_ERR_FIND_TYPE)
    IPSET_NAME(IPSET_ERR_MAX_SETS)
    IPSET_NAME(IPSET_ERR_BUSY)
    IPSET_NAME(IPSET_ERR_EXIST_SETNAME2)
    IPSET_NAME(IPSET_ERR_TYPE_MISMATCH)
    IPSET_NAME(IPSET_ERR_EXIST)
    IPSET_NAME(IPSET_ERR_INVALID_CIDR)
    IPSET_NAME(IPSET_ERR_INVALID_NETMASK)
    IPSET_NAME(IPSET_ERR_INVALID_FAMILY)
    IPSET_NAME(IPSET_ERR_TIMEOUT)
    IPSET_NAME(IPSET_ERR_REFERENCED)
    IPSET_NAME(IPSET_ERR_IPADDR_IPV4)
    IPSET_NAME(IPSET_ERR_IPADDR_IPV6)
    IPSET_NAME(IPSET_ERR_COUNTER)
    IPSET_NAME(IPSET_ERR_COMMENT)
    IPSET_NAME(IPSET_ERR_INVALID_MARKMASK)
    IPSET_NAME(IPSET_ERR_SKBINFO)
#undef IPSET_NAME
    default: break;
  }
  // Set-type-specific codes overlap between types; the TS ipset layer names them with the set's type.
  if (err >= IPSET_ERR_TYPE_SPECIFIC) return "IPSET_ERR_TYPE_SPECIFIC_" + std::to_string(err - IPSET_ERR_TYPE_SPECIFIC);
  if (err >= IPSET_ERR_PRIVATE) return "IPSET_ERR_" + std::to_string(err);
  const char* n = strerrorname_np(err);
  return n ? n : "E" + std::to_string(err);
}

}  // namespace kip
