// The legacy iptables table reader (xtables.cc).
#pragma once

#include <napi.h>

namespace kip {

// xtablesTable(family, table): Promise<Buffer>, see xtables.cc.
Napi::Function initXtables(Napi::Env env);

}  // namespace kip
