// N-API front of the addon: its exports. The Socket class is in js_socket.cc; here the sync
// encode/decode for tests, errno names, UAPI constants and releaseMemory.
#include <malloc.h>
#include <napi.h>
#include <v8.h>

#include "codec.h"
#include "constants.h"
#include "errors.h"
#include "js_common.h"
#include "js_socket.h"
#include "table.h"
#include "xtables.h"

namespace kip {
namespace {

// encode(schema, requests, firstSeq = 1, pid = 0): Buffer — messages as they would be sent.
Napi::Value Encode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  try {
    const RootSchema& root = rootArg(info[0]);
    if (!info[1].IsArray()) throw CodecError("requests: expected an array");
    uint32_t seq = info[2].IsNumber() ? info[2].As<Napi::Number>().Uint32Value() : 1;
    uint32_t pid = info[3].IsNumber() ? info[3].As<Napi::Number>().Uint32Value() : 0;
    Builder b;
    std::vector<size_t> offsets;
    encodeAll(env, root, info[1].As<Napi::Array>(), b, offsets, 0);
    for (size_t i = 0; i < offsets.size(); i++) {
      auto* h = reinterpret_cast<nlmsghdr*>(b.at(offsets[i]));
      h->nlmsg_seq = seq + uint32_t(i);
      h->nlmsg_pid = pid;
    }
    return Napi::Buffer<uint8_t>::Copy(env, b.bytes().data(), b.size());
  } catch (const CodecError& e) {
    throw makeError(env, "ERR_NETLINK_ENCODE", 0, e.what());
  }
}

// decode(schema, buffer): the messages in a datagram (data, NLMSG_ERROR and NLMSG_DONE).
Napi::Value Decode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  try {
    const RootSchema& root = rootArg(info[0]);
    if (!info[1].IsTypedArray()) throw CodecError("buffer: expected a Buffer");
    auto buf = info[1].As<Napi::Uint8Array>();
    KeyScope keys;
    return decodeStream(env, root, buf.Data(), buf.ByteLength());
  } catch (const CodecError& e) {
    throw makeError(env, "EBADMSG", EBADMSG, std::string("malformed message: ") + e.what());
  }
}

// decodeTable(schema, buffer, omit = []): the data messages of a datagram as a dump table (table.h).
Napi::Value DecodeTable(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  try {
    const RootSchema& root = rootArg(info[0]);
    if (!info[1].IsTypedArray()) throw CodecError("buffer: expected a Buffer");
    auto buf = info[1].As<Napi::Uint8Array>();
    std::vector<std::string> omit;
    if (info[2].IsArray()) {
      Napi::Array arr = info[2].As<Napi::Array>();
      for (uint32_t i = 0; i < arr.Length(); i++) omit.push_back(arr.Get(i).ToString().Utf8Value());
    }
    std::vector<std::vector<uint8_t>> msgs;
    MessageReader r(buf.Data(), buf.ByteLength());
    Message m;
    while (r.next(m)) {
      if (m.hdr.nlmsg_type == NLMSG_ERROR || m.hdr.nlmsg_type == NLMSG_DONE) continue;
      const uint8_t* start = m.payload - NLMSG_HDRLEN;
      msgs.emplace_back(start, start + m.hdr.nlmsg_len);
    }
    Table table(&root, std::move(omit));
    table.addMessages(msgs);
    return table.toJs(env);
  } catch (const CodecError& e) {
    throw makeError(env, "EBADMSG", EBADMSG, std::string("malformed message: ") + e.what());
  }
}

Napi::Value ErrnoName(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), errnoName(info[0].As<Napi::Number>().Int32Value()));
}

Napi::Value SchemaNames(const Napi::CallbackInfo& info) {
  size_t n = 0;
  const RootSchema* const* roots = allRootSchemas(&n);
  Napi::Array arr = Napi::Array::New(info.Env(), n);
  for (size_t i = 0; i < n; i++) arr.Set(uint32_t(i), roots[i]->name);
  return arr;
}

// releaseMemory(full): hands memory the process no longer uses back to the kernel. full: a
// blocking memory-reducing GC (V8 compacts the heap and unmaps its free pages, as under critical
// memory pressure); otherwise V8 starts an incremental memory-reducing GC (moderate pressure)
// and returns at once. Then glibc's malloc_trim returns free heap pages of every arena.
Napi::Value ReleaseMemory(const Napi::CallbackInfo& info) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (info[0].ToBoolean().Value()) isolate->LowMemoryNotification();
  else isolate->MemoryPressureNotification(v8::MemoryPressureLevel::kModerate);
#ifdef __GLIBC__
  malloc_trim(0);  // glibc only (the image is Debian); other libcs return memory their own way
#endif
  return info.Env().Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("releaseMemory", Napi::Function::New<ReleaseMemory>(env, "releaseMemory"));
  exports.Set("Socket", initSocketClass(env));
  exports.Set("encode", Napi::Function::New<Encode>(env, "encode"));
  exports.Set("decode", Napi::Function::New<Decode>(env, "decode"));
  exports.Set("decodeTable", Napi::Function::New<DecodeTable>(env, "decodeTable"));
  exports.Set("errnoName", Napi::Function::New<ErrnoName>(env, "errnoName"));
  exports.Set("schemaNames", Napi::Function::New<SchemaNames>(env, "schemaNames"));
  exports.Set("xtablesTable", initXtables(env));
  exports.Set("constants", constants(env));
  return exports;
}

}  // namespace
}  // namespace kip

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return kip::Init(env, exports); }
NODE_API_MODULE(kube_ipvs_proxy, InitModule)
