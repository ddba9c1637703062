// The JS class Socket: a netlink socket whose batches and dumps run off the JS thread.
#pragma once

#include <napi.h>

namespace kip {

// The Socket constructor, for the addon's exports.
Napi::Function initSocketClass(Napi::Env env);

}  // namespace kip
