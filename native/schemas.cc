// The registry of message schemas, looked up by name from JavaScript.
#include "schemas.h"

#include <cstring>

namespace kip {

static const RootSchema* const kRoots[] = {
    &kGenlCtrlRoot,
    &kIpvsRoot,
    &kIpvsInfoRoot,
    &kIpsetRoot,
    &kIpsetAdtRoot,
    &kNftGenRoot,
    &kRtnlLinkRoot,
    &kRtnlAddrRoot,
    &kRtnlRouteRoot,
};

const RootSchema* findRootSchema(const char* name) {
  for (const RootSchema* r : kRoots)
    if (std::strcmp(r->name, name) == 0) return r;
  return nullptr;
}

const RootSchema* const* allRootSchemas(size_t* count) {
  *count = sizeof(kRoots) / sizeof(kRoots[0]);
  return kRoots;
}

}  // namespace kip
