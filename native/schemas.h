// Declarations of the schema tables defined in schemas_*.cc (registered in schemas.cc).
#pragma once

#include "schema.h"

namespace kip {

extern const HeaderSpec kGenlHeader;
extern const RootSchema kGenlCtrlRoot;
extern const RootSchema kIpvsRoot;
extern const RootSchema kIpvsInfoRoot;
extern const RootSchema kIpsetRoot;
extern const RootSchema kIpsetAdtRoot;
extern const RootSchema kNftGenRoot;
extern const RootSchema kRtnlLinkRoot;
extern const RootSchema kRtnlAddrRoot;
extern const RootSchema kRtnlRouteRoot;

}  // namespace kip
