#include "constants.h"

#include <linux/genetlink.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/ip_vs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace kip {
namespace {

Napi::Object netlinkConstants(Napi::Env env) {
  Napi::Object o = Napi::Object::New(env);
  KIP_CONST(o, NETLINK_ROUTE);
  KIP_CONST(o, NETLINK_NETFILTER);
  KIP_CONST(o, NETLINK_GENERIC);
  KIP_CONST(o, NLM_F_REQUEST);
  KIP_CONST(o, NLM_F_MULTI);
  KIP_CONST(o, NLM_F_ACK);
  KIP_CONST(o, NLM_F_ECHO);
  KIP_CONST(o, NLM_F_DUMP_INTR);
  KIP_CONST(o, NLM_F_ROOT);
  KIP_CONST(o, NLM_F_MATCH);
  KIP_CONST(o, NLM_F_DUMP);
  KIP_CONST(o, NLM_F_REPLACE);
  KIP_CONST(o, NLM_F_EXCL);
  KIP_CONST(o, NLM_F_CREATE);
  KIP_CONST(o, NLM_F_APPEND);
  KIP_CONST(o, NLMSG_ERROR);
  KIP_CONST(o, NLMSG_DONE);
  KIP_CONST(o, AF_INET);
  KIP_CONST(o, AF_INET6);
  KIP_CONST(o, AF_UNSPEC);
  KIP_CONST(o, IPPROTO_TCP);
  KIP_CONST(o, IPPROTO_UDP);
  KIP_CONST(o, IPPROTO_SCTP);
  return o;
}

Napi::Object genlConstants(Napi::Env env) {
  Napi::Object o = Napi::Object::New(env);
  KIP_CONST(o, GENL_ID_CTRL);
  KIP_CONST(o, CTRL_CMD_GETFAMILY);
  KIP_CONST(o, CTRL_CMD_NEWFAMILY);
  return o;
}

Napi::Object ipvsConstants(Napi::Env env) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("IPVS_GENL_NAME", IPVS_GENL_NAME);
  KIP_CONST(o, IPVS_GENL_VERSION);
  KIP_CONST(o, IP_VS_VERSION_CODE);
  KIP_CONST(o, IPVS_CMD_NEW_SERVICE);
  KIP_CONST(o, IPVS_CMD_SET_SERVICE);
  KIP_CONST(o, IPVS_CMD_DEL_SERVICE);
  KIP_CONST(o, IPVS_CMD_GET_SERVICE);
  KIP_CONST(o, IPVS_CMD_NEW_DEST);
  KIP_CONST(o, IPVS_CMD_SET_DEST);
  KIP_CONST(o, IPVS_CMD_DEL_DEST);
  KIP_CONST(o, IPVS_CMD_GET_DEST);
  KIP_CONST(o, IPVS_CMD_NEW_DAEMON);
  KIP_CONST(o, IPVS_CMD_DEL_DAEMON);
  KIP_CONST(o, IPVS_CMD_GET_DAEMON);
  KIP_CONST(o, IPVS_CMD_SET_CONFIG);
  KIP_CONST(o, IPVS_CMD_GET_CONFIG);
  KIP_CONST(o, IPVS_CMD_SET_INFO);
  KIP_CONST(o, IPVS_CMD_GET_INFO);
  KIP_CONST(o, IPVS_CMD_ZERO);
  KIP_CONST(o, IPVS_CMD_FLUSH);
  KIP_CONST(o, IP_VS_SVC_F_PERSISTENT);
  KIP_CONST(o, IP_VS_SVC_F_HASHED);
  KIP_CONST(o, IP_VS_SVC_F_ONEPACKET);
  KIP_CONST(o, IP_VS_SVC_F_SCHED1);
  KIP_CONST(o, IP_VS_SVC_F_SCHED2);
  KIP_CONST(o, IP_VS_SVC_F_SCHED3);
  KIP_CONST(o, IP_VS_SVC_F_SCHED_SH_FALLBACK);
  KIP_CONST(o, IP_VS_SVC_F_SCHED_SH_PORT);
  KIP_CONST(o, IP_VS_CONN_F_FWD_MASK);
  KIP_CONST(o, IP_VS_CONN_F_MASQ);
  KIP_CONST(o, IP_VS_CONN_F_LOCALNODE);
  KIP_CONST(o, IP_VS_CONN_F_TUNNEL);
  KIP_CONST(o, IP_VS_CONN_F_DROUTE);
  KIP_CONST(o, IP_VS_SCHEDNAME_MAXLEN);
  KIP_CONST(o, IP_VS_PENAME_MAXLEN);
  return o;
}

Napi::Object rtnlConstants(Napi::Env env) {
  Napi::Object o = Napi::Object::New(env);
  KIP_CONST(o, RTM_NEWLINK);
  KIP_CONST(o, RTM_DELLINK);
  KIP_CONST(o, RTM_GETLINK);
  KIP_CONST(o, RTM_NEWADDR);
  KIP_CONST(o, RTM_DELADDR);
  KIP_CONST(o, RTM_GETADDR);
  KIP_CONST(o, IFF_UP);
  KIP_CONST(o, IFF_LOOPBACK);
  KIP_CONST(o, IFF_NOARP);
  KIP_CONST(o, IFNAMSIZ);
  KIP_CONST(o, RTEXT_FILTER_SKIP_STATS);
  KIP_CONST(o, RT_SCOPE_UNIVERSE);
  KIP_CONST(o, RT_SCOPE_SITE);
  KIP_CONST(o, RT_SCOPE_LINK);
  KIP_CONST(o, RT_SCOPE_HOST);
  KIP_CONST(o, RT_SCOPE_NOWHERE);
  KIP_CONST(o, IFA_F_SECONDARY);
  KIP_CONST(o, IFA_F_NODAD);
  KIP_CONST(o, IFA_F_OPTIMISTIC);
  KIP_CONST(o, IFA_F_DADFAILED);
  KIP_CONST(o, IFA_F_DEPRECATED);
  KIP_CONST(o, IFA_F_TENTATIVE);
  KIP_CONST(o, IFA_F_PERMANENT);
  KIP_CONST(o, IFA_F_NOPREFIXROUTE);
  return o;
}

}  // namespace

Napi::Object constants(Napi::Env env) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("netlink", netlinkConstants(env));
  o.Set("genl", genlConstants(env));
  o.Set("ipvs", ipvsConstants(env));
  o.Set("rtnl", rtnlConstants(env));
  return o;
}

}  // namespace kip
