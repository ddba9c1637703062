// Generic netlink: the genlmsghdr header and the controller family (CTRL_CMD_GETFAMILY).
#include <linux/genetlink.h>

#include "schemas.h"

namespace kip {

static const HeaderField kGenlFields[] = {
    {"cmd", 0, Kind::U8},
    {"version", 1, Kind::U8},
};
const HeaderSpec kGenlHeader = {"genlmsghdr", GENL_HDRLEN, kGenlFields, 2};

static const AttrSpec kCtrlMcastAttrs[] = {
    KIP_ATTR(CTRL_ATTR_MCAST_GRP_NAME, STRING, "name"),
    KIP_ATTR(CTRL_ATTR_MCAST_GRP_ID, U32, "id"),
};
KIP_SCHEMA(kCtrlMcast, "ctrl.mcastGroup", kCtrlMcastAttrs);
static const AttrSpec kCtrlMcastElement = KIP_NEST(0, "group", kCtrlMcast, 0);

static const AttrSpec kCtrlAttrs[] = {
    KIP_ATTR(CTRL_ATTR_FAMILY_ID, U16, "familyId"),
    KIP_ATTR(CTRL_ATTR_FAMILY_NAME, STRING, "familyName"),
    KIP_ATTR(CTRL_ATTR_VERSION, U32, "version"),
    KIP_ATTR(CTRL_ATTR_HDRSIZE, U32, "hdrSize"),
    KIP_ATTR(CTRL_ATTR_MAXATTR, U32, "maxAttr"),
    KIP_LIST(CTRL_ATTR_MCAST_GROUPS, "mcastGroups", kCtrlMcastElement, 0),
};
KIP_SCHEMA(kCtrl, "ctrl", kCtrlAttrs);

const RootSchema kGenlCtrlRoot = {"genl.ctrl", &kGenlHeader, &kCtrl};

}  // namespace kip
