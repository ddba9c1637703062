// Declarations of the schema tables defined in schemas_*.cc (registered in schemas.cc).
#pragma once

#include "schema.h"

namespace kip {

extern const HeaderSpec kGenlHeader;
extern const RootSchema kGenlCtrlRoot;
extern const RootSchema kIpvsRoot;
extern const RootSchema kIpvsInfoRoot;

}  // namespace kip
