// Attribute schema tables: one table per netlink attribute nest, shared by the
// encoder and the decoder. See native/README.md for the data flow.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kip {

// How one attribute's payload is laid out on the wire and shown to JavaScript.
enum class Kind : uint8_t {
  U8,
  U16,      // host byte order
  U32,
  U64,      // JS bigint
  BE16,     // network byte order on the wire, plain number in JS
  BE32,
  STRING,   // NUL-terminated on the wire (added on encode, required on decode)
  BINARY,   // raw bytes: JS Buffer
  NESTED,   // JS object described by `nested`
  LIST,     // JS array; every child is `element` (type = element->type, or index+1 when 0)
  FLAG,     // zero-length attribute: JS true
};

struct Schema;

// One attribute of a nest.
struct AttrSpec {
  uint16_t type;          // attribute type from the UAPI header
  Kind kind;
  const char* name;       // the JS property name
  const Schema* nested;   // NESTED: the nest's schema
  const struct AttrSpec* element;  // LIST: the element's spec
  uint16_t encodeFlags;   // NLA_F_NESTED / NLA_F_NET_BYTEORDER set on encode
  uint16_t minLen;        // BINARY: required payload length on decode (0 = any)
  uint16_t maxLen;        // STRING/BINARY: max payload length on encode and decode (0 = no limit)
};

// One nest: its attributes, looked up by type when decoding and by name when encoding.
struct Schema {
  const char* name;
  const AttrSpec* attrs;
  size_t count;
  const AttrSpec* byType(uint16_t type) const {
    for (size_t i = 0; i < count; i++)
      if (attrs[i].type == type) return &attrs[i];
    return nullptr;
  }
};

// A field of a message's fixed header (genlmsghdr, nfgenmsg, ifinfomsg, ifaddrmsg).
struct HeaderField {
  const char* name;
  uint8_t offset;
  Kind kind;  // U8, U16, U32, BE16 only
};

// The fixed header that follows struct nlmsghdr in one protocol's messages.
struct HeaderSpec {
  const char* name;
  uint8_t size;
  const HeaderField* fields;
  size_t count;
};

// A message schema: fixed header + top-level attributes. Looked up by name from JS.
struct RootSchema {
  const char* name;
  const HeaderSpec* header;
  const Schema* attrs;
};

// All message schemas compiled into the addon (registry in schemas.cc).
const RootSchema* findRootSchema(const char* name);
const RootSchema* const* allRootSchemas(size_t* count);

}  // namespace kip

// Helpers for writing tables tersely.
#define KIP_ATTR(type, kind, name) \
  { type, ::kip::Kind::kind, name, nullptr, nullptr, 0, 0, 0 }
#define KIP_ATTR_LEN(type, kind, name, minLen, maxLen) \
  { type, ::kip::Kind::kind, name, nullptr, nullptr, 0, minLen, maxLen }
#define KIP_ATTR_F(type, kind, name, flags) \
  { type, ::kip::Kind::kind, name, nullptr, nullptr, flags, 0, 0 }
#define KIP_NEST(type, name, schema, flags) \
  { type, ::kip::Kind::NESTED, name, &schema, nullptr, flags, 0, 0 }
#define KIP_LIST(type, name, element, flags) \
  { type, ::kip::Kind::LIST, name, nullptr, &element, flags, 0, 0 }
#define KIP_SCHEMA(var, label, table) \
  const ::kip::Schema var = {label, table, sizeof(table) / sizeof(table[0])}
