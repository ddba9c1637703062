// Schema-driven conversion between JS objects and netlink messages.
#pragma once

#include <napi.h>

#include <string>
#include <vector>

#include "buffer.h"
#include "schema.h"

namespace kip {

// The largest value an integer kind holds (0 for non-integer kinds).
uint64_t integerMax(Kind kind);
// Bytes an integer kind takes on the wire (0 for non-integer kinds).
size_t integerWidth(Kind kind);
// Reads an integer attribute (U8…U64, BE16, BE32) into host order; false when its length is
// not the kind's width (integerLengthError says so).
bool readInteger(Kind kind, const Attr& a, uint64_t& out);
std::string integerLengthError(Kind kind, size_t len);
// Whether a BINARY attribute's payload length is within its spec's minLen..maxLen.
bool binaryLengthOk(const AttrSpec& s, size_t len);
// Appends one integer attribute (`type` includes its flags), in the kind's width and byte order.
void putInteger(Builder& b, Kind kind, uint16_t type, uint64_t v);

// Encodes a LIST of NESTED elements given as columns (columns.cc):
// { rows, columns: { "<js name>[.<js name>...]": TypedArray } }, one element per row.
void encodeColumns(Builder& b, const AttrSpec& element, Napi::Object batch, const std::string& path);

// Caches JS property-name strings while alive; open one around a call that encodes or
// decodes many messages (JS thread only; nested scopes share the outermost cache).
class KeyScope {
 public:
  KeyScope();
  ~KeyScope();
  KeyScope(const KeyScope&) = delete;
  KeyScope& operator=(const KeyScope&) = delete;

 private:
  bool owner_;
};

// While alive, the decoder skips attributes with these names at any depth (e.g. counters a
// caller does not need: building JS objects is most of a large dump's cost).
class OmitScope {
 public:
  explicit OmitScope(const std::vector<std::string>& names);
  ~OmitScope();
  OmitScope(const OmitScope&) = delete;
  OmitScope& operator=(const OmitScope&) = delete;

 private:
  const std::vector<std::string>* prev_;
};

// Keeps the messages of a dump whose fixed-header field is one of `values` (or, with
// `exclude`, none of them), before any is decoded: off the JS thread, and a dump of 10,000
// addresses of which a caller wants a handful builds no JS object for the rest.
struct HeaderFilter {
  const HeaderField* field = nullptr;  // null: keep everything
  std::vector<uint32_t> values;
  bool exclude = false;
  bool keeps(const RootSchema& root, const std::vector<uint8_t>& msg) const;
  void apply(const RootSchema& root, std::vector<std::vector<uint8_t>>& msgs) const;
};
// A fixed-header field's value, read from the start of a message's payload.
uint32_t readHeaderField(const HeaderField& f, const uint8_t* payload);
// The header field named `name` of a message schema, or null.
const HeaderField* findHeaderField(const RootSchema& root, const std::string& name);

// Encodes `req` = { type, flags?, header?: {...}, attrs?: {...} } as one message.
// Throws CodecError naming the offending field. Returns the message's offset.
size_t encodeMessage(Napi::Env env, Builder& b, const RootSchema& root, Napi::Object req, uint32_t seq,
                     uint32_t pid);

// Decodes one data message into { type, flags, seq, pid, header, attrs }. Throws CodecError.
Napi::Object decodeMessage(Napi::Env env, const RootSchema& root, const uint8_t* msg, size_t len);

// Decodes a datagram (one or more messages, including NLMSG_ERROR / NLMSG_DONE) to an array.
Napi::Array decodeStream(Napi::Env env, const RootSchema& root, const uint8_t* p, size_t len);

}  // namespace kip
