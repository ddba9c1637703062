// JS objects ⇄ netlink messages (codec.h), driven only by the schema tables.
#include "codec.h"

#include <arpa/inet.h>
#include <linux/netlink.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>

#include "errors.h"

namespace kip {
namespace {

// Where a value sits in a message ("service.port", "entries[3]"). Built on the stack as the
// codec descends and rendered to text only when an error names it.
struct Path {
  const Path* parent;
  const char* name;  // nullptr: an array index
  size_t index;
};

std::string render(const Path* p) {
  if (!p) return "";
  std::string head = render(p->parent);
  if (!p->name) return head + "[" + std::to_string(p->index) + "]";
  return head.empty() ? std::string(p->name) : head + "." + p->name;
}

[[noreturn]] void fail(const Path* p, const std::string& what) { throw CodecError(render(p) + ": " + what); }

// JS property keys, created once per KeyScope (one JS->native call) instead of on every
// Get/Set: the encoder's hot path. (Node 20's N-API cannot keep references to strings, so
// the cache cannot outlive the call's handle scope.)
std::unordered_map<const char*, napi_value>* gKeys = nullptr;

const std::vector<std::string>* gOmit = nullptr;

bool omitted(const char* name) {
  if (!gOmit) return false;
  for (const std::string& n : *gOmit)
    if (n == name) return true;
  return false;
}

Napi::String key(Napi::Env env, const char* name) {
  if (!gKeys) return Napi::String::New(env, name);
  auto it = gKeys->find(name);
  if (it != gKeys->end()) return Napi::String(env, it->second);
  Napi::String k = Napi::String::New(env, name);
  gKeys->emplace(name, k);
  return k;
}

uint64_t toUnsigned(Napi::Value v, uint64_t max, const Path* path) {
  if (v.IsBigInt()) {
    bool lossless = false;
    uint64_t n = v.As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless || n > max) fail(path, "integer out of range");
    return n;
  }
  if (!v.IsNumber()) fail(path, "expected a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d < 0 || std::floor(d) != d || d > double(max))
    fail(path, "expected an integer in [0, " + std::to_string(max) + "]");
  return uint64_t(d);
}

void encodeAttrs(Napi::Env env, Builder& b, const Schema& schema, Napi::Object obj, const Path* path);

}  // namespace

uint64_t integerMax(Kind kind) {
  switch (kind) {
    case Kind::U8: return 0xff;
    case Kind::U16:
    case Kind::BE16: return 0xffff;
    case Kind::U32:
    case Kind::BE32: return 0xffffffffu;
    case Kind::U64: return UINT64_MAX;
    default: return 0;
  }
}

size_t integerWidth(Kind kind) {
  switch (kind) {
    case Kind::U8: return 1;
    case Kind::U16:
    case Kind::BE16: return 2;
    case Kind::U32:
    case Kind::BE32: return 4;
    case Kind::U64: return 8;
    default: return 0;
  }
}

bool readInteger(Kind kind, const Attr& a, uint64_t& out) {
  size_t w = integerWidth(kind);
  if (w == 0 || a.len != w) return false;
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  switch (kind) {
    case Kind::U8: std::memcpy(&u8, a.data, 1); out = u8; break;
    case Kind::U16: std::memcpy(&u16, a.data, 2); out = u16; break;
    case Kind::BE16: std::memcpy(&u16, a.data, 2); out = ntohs(u16); break;
    case Kind::U32: std::memcpy(&u32, a.data, 4); out = u32; break;
    case Kind::BE32: std::memcpy(&u32, a.data, 4); out = ntohl(u32); break;
    default: std::memcpy(&out, a.data, 8); break;
  }
  return true;
}

std::string integerLengthError(Kind kind, size_t len) {
  return "expected " + std::to_string(integerWidth(kind)) + " bytes, got " + std::to_string(len);
}

bool binaryLengthOk(const AttrSpec& s, size_t len) { return len >= s.minLen && (s.maxLen == 0 || len <= s.maxLen); }

void putInteger(Builder& b, Kind kind, uint16_t type, uint64_t v) {
  switch (kind) {
    case Kind::U8: { uint8_t x = uint8_t(v); b.put(type, &x, 1); break; }
    case Kind::U16: { uint16_t x = uint16_t(v); b.put(type, &x, 2); break; }
    case Kind::U32: { uint32_t x = uint32_t(v); b.put(type, &x, 4); break; }
    case Kind::U64: b.put(type, &v, 8); break;
    case Kind::BE16: { uint16_t x = htons(uint16_t(v)); b.put(type, &x, 2); break; }
    case Kind::BE32: { uint32_t x = htonl(uint32_t(v)); b.put(type, &x, 4); break; }
    default: throw CodecError("not an integer attribute");
  }
}

namespace {

void encodeValue(Napi::Env env, Builder& b, const AttrSpec& s, uint16_t type, Napi::Value v, const Path* path) {
  type |= s.encodeFlags;
  switch (s.kind) {
    case Kind::U8:
    case Kind::U16:
    case Kind::U32:
    case Kind::U64:
    case Kind::BE16:
    case Kind::BE32: putInteger(b, s.kind, type, toUnsigned(v, integerMax(s.kind), path)); break;
    case Kind::STRING: {
      if (!v.IsString()) fail(path, "expected a string");
      std::string str = v.As<Napi::String>().Utf8Value();
      if (str.find('\0') != std::string::npos) fail(path, "string contains NUL");
      if (s.maxLen && str.size() > s.maxLen)
        fail(path, "longer than " + std::to_string(s.maxLen) + " bytes");
      b.put(type, str.c_str(), str.size() + 1);
      break;
    }
    case Kind::BINARY: {
      if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
        fail(path, "expected a Buffer");
      auto buf = v.As<Napi::Uint8Array>();
      if ((s.maxLen && buf.ByteLength() > s.maxLen) || buf.ByteLength() < s.minLen)
        fail(path, "wrong length " + std::to_string(buf.ByteLength()));
      b.put(type, buf.Data(), buf.ByteLength());
      break;
    }
    case Kind::NESTED: {
      if (!v.IsObject()) fail(path, "expected an object");
      size_t at = b.beginNest(type);
      encodeAttrs(env, b, *s.nested, v.As<Napi::Object>(), path);
      b.endNest(at);
      break;
    }
    case Kind::LIST: {
      if (!v.IsArray() && v.IsObject() && s.element->kind == Kind::NESTED) {
        size_t at = b.beginNest(type);
        encodeColumns(b, *s.element, v.As<Napi::Object>(), render(path));
        b.endNest(at);
        break;
      }
      if (!v.IsArray()) fail(path, "expected an array");
      auto arr = v.As<Napi::Array>();
      size_t at = b.beginNest(type);
      for (uint32_t i = 0; i < arr.Length(); i++) {
        uint16_t et = s.element->type ? s.element->type : uint16_t(i + 1);
        Path item{path, nullptr, i};
        encodeValue(env, b, *s.element, et, arr.Get(i), &item);
      }
      b.endNest(at);
      break;
    }
    case Kind::FLAG: {
      if (!v.IsBoolean()) fail(path, "expected a boolean");
      if (v.As<Napi::Boolean>().Value()) b.put(type, nullptr, 0);
      break;
    }
  }
}

void encodeAttrs(Napi::Env env, Builder& b, const Schema& schema, Napi::Object obj, const Path* path) {
  for (size_t i = 0; i < schema.count; i++) {
    const AttrSpec& s = schema.attrs[i];
    Napi::Value v = obj.Get(key(env, s.name));
    if (v.IsUndefined() || v.IsNull()) continue;
    Path here{path, s.name, 0};
    encodeValue(env, b, s, s.type, v, &here);
  }
}

Napi::Object decodeAttrs(Napi::Env env, const Schema& schema, const uint8_t* p, size_t len, const Path* path);

Napi::Value decodeValue(Napi::Env env, const AttrSpec& s, const Attr& a, const Path* path) {
  switch (s.kind) {
    case Kind::U8:
    case Kind::U16:
    case Kind::U32:
    case Kind::U64:
    case Kind::BE16:
    case Kind::BE32: {
      uint64_t v = 0;
      if (!readInteger(s.kind, a, v)) fail(path, integerLengthError(s.kind, a.len));
      if (s.kind == Kind::U64) return Napi::BigInt::New(env, v);
      return Napi::Number::New(env, double(v));
    }
    case Kind::STRING: {
      const char* c = reinterpret_cast<const char*>(a.data);
      size_t n = strnlen(c, a.len);
      return Napi::String::New(env, c, n);
    }
    case Kind::BINARY: {
      if (!binaryLengthOk(s, a.len)) fail(path, "wrong length " + std::to_string(a.len));
      return Napi::Buffer<uint8_t>::Copy(env, a.data, a.len);
    }
    case Kind::NESTED: return decodeAttrs(env, *s.nested, a.data, a.len, path);
    case Kind::LIST: {
      Napi::Array arr = Napi::Array::New(env);
      AttrReader r(a.data, a.len);
      Attr child;
      uint32_t i = 0;
      while (r.next(child)) {
        if (s.element->type && child.type != s.element->type) continue;
        Path item{path, nullptr, i};
        arr.Set(i, decodeValue(env, *s.element, child, &item));
        i++;
      }
      return arr;
    }
    case Kind::FLAG: return Napi::Boolean::New(env, true);
  }
  return env.Undefined();
}

Napi::Object decodeAttrs(Napi::Env env, const Schema& schema, const uint8_t* p, size_t len, const Path* path) {
  Napi::Object obj = Napi::Object::New(env);
  AttrReader r(p, len);
  Attr a;
  while (r.next(a)) {
    const AttrSpec* s = schema.byType(a.type);
    if (!s) continue;  // newer kernels add attributes: ignore what we do not know
    if (omitted(s->name)) continue;
    Path here{path, s->name, 0};
    obj.Set(key(env, s->name), decodeValue(env, *s, a, &here));
  }
  return obj;
}

void encodeHeader(Builder& b, const HeaderSpec& h, Napi::Value v) {
  size_t at = b.reserve(h.size);
  if (!b.ok() || v.IsUndefined() || v.IsNull()) return;
  if (!v.IsObject()) throw CodecError("header: expected an object");
  Napi::Object obj = v.As<Napi::Object>();
  for (size_t i = 0; i < h.count; i++) {
    const HeaderField& f = h.fields[i];
    Napi::Value fv = obj.Get(key(obj.Env(), f.name));
    if (fv.IsUndefined()) continue;
    Path root{nullptr, "header", 0};
    Path here{&root, f.name, 0};
    const Path* path = &here;
    uint8_t* dst = b.at(at + f.offset);
    switch (f.kind) {
      case Kind::U8: *dst = uint8_t(toUnsigned(fv, 0xff, path)); break;
      case Kind::U16: { uint16_t x = uint16_t(toUnsigned(fv, 0xffff, path)); std::memcpy(dst, &x, 2); break; }
      case Kind::BE16: { uint16_t x = htons(uint16_t(toUnsigned(fv, 0xffff, path))); std::memcpy(dst, &x, 2); break; }
      case Kind::U32: { uint32_t x = uint32_t(toUnsigned(fv, 0xffffffffu, path)); std::memcpy(dst, &x, 4); break; }
      default: fail(path, "unsupported header field kind");
    }
  }
}

uint32_t headerValue(const HeaderField& f, const uint8_t* p) {
  const uint8_t* src = p + f.offset;
  uint32_t val = 0;
  switch (f.kind) {
    case Kind::U8: val = *src; break;
    case Kind::U16: { uint16_t x; std::memcpy(&x, src, 2); val = x; break; }
    case Kind::BE16: { uint16_t x; std::memcpy(&x, src, 2); val = ntohs(x); break; }
    case Kind::U32: std::memcpy(&val, src, 4); break;
    default: break;
  }
  return val;
}

Napi::Object decodeHeader(Napi::Env env, const HeaderSpec& h, const uint8_t* p) {
  Napi::Object obj = Napi::Object::New(env);
  for (size_t i = 0; i < h.count; i++) obj.Set(key(env, h.fields[i].name), Napi::Number::New(env, headerValue(h.fields[i], p)));
  return obj;
}

}  // namespace

uint32_t readHeaderField(const HeaderField& f, const uint8_t* payload) { return headerValue(f, payload); }

const HeaderField* findHeaderField(const RootSchema& root, const std::string& name) {
  for (size_t i = 0; i < root.header->count; i++)
    if (name == root.header->fields[i].name) return &root.header->fields[i];
  return nullptr;
}

bool HeaderFilter::keeps(const RootSchema& root, const std::vector<uint8_t>& msg) const {
  if (field == nullptr) return true;
  MessageReader r(msg.data(), msg.size());
  Message m;
  if (!r.next(m) || m.payloadLen < root.header->size) return true;  // the decoder reports it
  uint32_t v = headerValue(*field, m.payload);
  bool listed = std::find(values.begin(), values.end(), v) != values.end();
  return listed != exclude;
}

void HeaderFilter::apply(const RootSchema& root, std::vector<std::vector<uint8_t>>& msgs) const {
  if (field == nullptr) return;
  msgs.erase(std::remove_if(msgs.begin(), msgs.end(), [&](const std::vector<uint8_t>& m) { return !keeps(root, m); }), msgs.end());
}

OmitScope::OmitScope(const std::vector<std::string>& names) : prev_(gOmit) { gOmit = names.empty() ? prev_ : &names; }
OmitScope::~OmitScope() { gOmit = prev_; }

KeyScope::KeyScope() : owner_(gKeys == nullptr) {
  if (owner_) gKeys = new std::unordered_map<const char*, napi_value>();
}
KeyScope::~KeyScope() {
  if (owner_) {
    delete gKeys;
    gKeys = nullptr;
  }
}

size_t encodeMessage(Napi::Env env, Builder& b, const RootSchema& root, Napi::Object req, uint32_t seq,
                     uint32_t pid) {
  Path typePath{nullptr, "type", 0}, flagsPath{nullptr, "flags", 0};
  uint16_t type = uint16_t(toUnsigned(req.Get(key(env, "type")), 0xffff, &typePath));
  Napi::Value fl = req.Get(key(env, "flags"));
  uint16_t flags = uint16_t(fl.IsUndefined() ? 0 : toUnsigned(fl, 0xffff, &flagsPath));
  size_t at = b.beginMessage(type, uint16_t(flags | NLM_F_REQUEST), seq, pid);
  encodeHeader(b, *root.header, req.Get(key(env, "header")));
  Napi::Value attrs = req.Get(key(env, "attrs"));
  if (!attrs.IsUndefined() && !attrs.IsNull()) {
    if (!attrs.IsObject()) throw CodecError("attrs: expected an object");
    encodeAttrs(env, b, *root.attrs, attrs.As<Napi::Object>(), nullptr);
  }
  if (!b.ok()) throw CodecError("message too large");
  b.endMessage(at);
  return at;
}

Napi::Object decodeMessage(Napi::Env env, const RootSchema& root, const uint8_t* msg, size_t len) {
  MessageReader r(msg, len);
  Message m;
  if (!r.next(m)) throw CodecError("empty message");
  Napi::Object out = Napi::Object::New(env);
  out.Set(key(env, "type"), m.hdr.nlmsg_type);
  out.Set(key(env, "flags"), m.hdr.nlmsg_flags);
  out.Set(key(env, "seq"), m.hdr.nlmsg_seq);
  out.Set(key(env, "pid"), m.hdr.nlmsg_pid);
  if (m.payloadLen < root.header->size) throw CodecError("message shorter than its fixed header");
  out.Set(key(env, "header"), decodeHeader(env, *root.header, m.payload));
  size_t hl = align4(root.header->size);
  const uint8_t* ap = m.payload + std::min(hl, m.payloadLen);
  size_t alen = m.payloadLen - std::min(hl, m.payloadLen);
  out.Set(key(env, "attrs"), decodeAttrs(env, *root.attrs, ap, alen, nullptr));
  return out;
}

Napi::Array decodeStream(Napi::Env env, const RootSchema& root, const uint8_t* p, size_t len) {
  Napi::Array arr = Napi::Array::New(env);
  MessageReader r(p, len);
  Message m;
  uint32_t i = 0;
  while (r.next(m)) {
    const uint8_t* start = m.payload - NLMSG_HDRLEN;
    if (m.hdr.nlmsg_type == NLMSG_ERROR || m.hdr.nlmsg_type == NLMSG_DONE) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("type", m.hdr.nlmsg_type);
      o.Set("flags", m.hdr.nlmsg_flags);
      o.Set("seq", m.hdr.nlmsg_seq);
      o.Set("pid", m.hdr.nlmsg_pid);
      if (m.hdr.nlmsg_type == NLMSG_ERROR) {
        ErrorInfo info = parseError(m);
        o.Set("errno", info.err);
        if (!info.extAck.empty()) o.Set("extAck", info.extAck);
        if (info.echo) o.Set("echo", decodeMessage(env, root, info.echo, info.echoLen));
      } else {
        int32_t st = 0;
        if (m.payloadLen >= 4) std::memcpy(&st, m.payload, 4);
        o.Set("errno", -st);
      }
      arr.Set(i++, o);
      continue;
    }
    arr.Set(i++, decodeMessage(env, root, start, m.hdr.nlmsg_len));
  }
  return arr;
}

}  // namespace kip
