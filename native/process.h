// Child processes over posix_spawn (process.cc).
#pragma once

#include <napi.h>

namespace kip {

// Adds spawn(file, args, env?, nice?) to the addon's exports.
void initProcess(Napi::Env env, Napi::Object exports);

}  // namespace kip
