// UAPI constants exported to TypeScript, so no number is ever re-typed by hand.
#pragma once

#include <napi.h>

namespace kip {

// { netlink: {...}, genl: {...}, ipvs: {...}, ... } — one group per protocol.
Napi::Object constants(Napi::Env env);

}  // namespace kip

// Sets obj[#name] = name.
#define KIP_CONST(obj, name) (obj).Set(#name, Napi::Number::New((obj).Env(), double(name)))
