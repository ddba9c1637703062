// What the addon's N-API calls share: JS error objects, the schema argument, and requests
// encoded into one buffer of messages.
#pragma once

#include <napi.h>

#include <string>
#include <vector>

#include "buffer.h"
#include "schema.h"
#include "socket.h"

namespace kip {

// An Error with `code` (and `errno` when nonzero), like Node's SystemError.
Napi::Error makeError(Napi::Env env, const std::string& code, int err, const std::string& message);
// A failed system call as an Error: code, errno, syscall.
Napi::Error sysError(Napi::Env env, const SysError& e);
// The root schema a JS argument names; throws CodecError.
const RootSchema& rootArg(const Napi::Value& v);
// Encodes requests (an array of message objects, or Uint8Arrays of messages already laid out)
// into one buffer; records message offsets (one per message). Throws CodecError.
void encodeAll(Napi::Env env, const RootSchema& root, Napi::Array reqs, Builder& b, std::vector<size_t>& offsets,
               uint16_t extraFlags);
// Data messages decoded into an array of message objects.
Napi::Array decodeReplies(Napi::Env env, const RootSchema& root, const std::vector<std::vector<uint8_t>>& msgs);

}  // namespace kip
