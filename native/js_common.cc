// What the addon's N-API calls share (js_common.h).
#include "js_common.h"

#include <cstring>

#include "codec.h"
#include "errors.h"

namespace kip {
namespace {

// Appends messages laid out by the caller (back to back, e.g. src/kernel/ipvs/wire.ts): each
// header's length is checked, then all of them are copied at once; NLM_F_REQUEST and `extraFlags`
// are set on each, and each gets its offset (its own result).
void appendEncoded(Napi::Uint8Array raw, Builder& b, std::vector<size_t>& offsets, uint16_t extraFlags, uint32_t index) {
  const uint8_t* p = raw.Data();
  const size_t len = raw.ByteLength();
  std::vector<size_t> starts;
  for (size_t pos = 0; pos < len;) {
    nlmsghdr h;
    if (len - pos < sizeof h) throw CodecError("request " + std::to_string(index) + ": truncated message header");
    std::memcpy(&h, p + pos, sizeof h);
    if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > len - pos)
      throw CodecError("request " + std::to_string(index) + ": message length " + std::to_string(h.nlmsg_len) + " out of bounds");
    starts.push_back(pos);
    pos += NLMSG_ALIGN(h.nlmsg_len);
  }
  size_t base = b.reserve(len);
  if (!b.ok()) throw CodecError("request " + std::to_string(index) + ": message too large");
  std::memcpy(b.at(base), p, len);
  for (size_t s : starts) {
    reinterpret_cast<nlmsghdr*>(b.at(base + s))->nlmsg_flags |= uint16_t(NLM_F_REQUEST | extraFlags);
    offsets.push_back(base + s);
  }
}

}  // namespace

Napi::Error makeError(Napi::Env env, const std::string& code, int err, const std::string& message) {
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", code);
  if (err) e.Set("errno", Napi::Number::New(env, err));
  return e;
}

Napi::Error sysError(Napi::Env env, const SysError& e) {
  Napi::Error err = makeError(env, errnoName(e.err), e.err, std::string(e.syscall) + ": " + strerror(e.err));
  err.Set("syscall", e.syscall);
  return err;
}

const RootSchema& rootArg(const Napi::Value& v) {
  if (!v.IsString()) throw CodecError("schema: expected a string");
  std::string name = v.As<Napi::String>().Utf8Value();
  const RootSchema* r = findRootSchema(name.c_str());
  if (!r) throw CodecError("unknown schema " + name);
  return *r;
}

// Encodes requests (an array of message objects, or Uint8Arrays of messages already laid out)
// into one buffer; records message offsets (one per message).
void encodeAll(Napi::Env env, const RootSchema& root, Napi::Array reqs, Builder& b, std::vector<size_t>& offsets,
               uint16_t extraFlags) {
  KeyScope keys;
  offsets.reserve(reqs.Length());
  for (uint32_t i = 0; i < reqs.Length(); i++) {
    Napi::Value v = reqs.Get(i);
    if (v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array) {
      appendEncoded(v.As<Napi::Uint8Array>(), b, offsets, extraFlags, i);
      continue;
    }
    if (!v.IsObject()) throw CodecError("request " + std::to_string(i) + ": expected an object");
    try {
      size_t at = encodeMessage(env, b, root, v.As<Napi::Object>(), 0, 0);
      reinterpret_cast<nlmsghdr*>(b.at(at))->nlmsg_flags |= extraFlags;
      offsets.push_back(at);
    } catch (const CodecError& e) {
      throw CodecError("request " + std::to_string(i) + ": " + e.what());
    }
  }
}

Napi::Array decodeReplies(Napi::Env env, const RootSchema& root, const std::vector<std::vector<uint8_t>>& msgs) {
  KeyScope keys;
  Napi::Array arr = Napi::Array::New(env, msgs.size());
  for (size_t i = 0; i < msgs.size(); i++) arr.Set(uint32_t(i), decodeMessage(env, root, msgs[i].data(), msgs[i].size()));
  return arr;
}

}  // namespace kip
