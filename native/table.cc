// Columnar dump output (table.h): runs on the worker thread except toJs().
#include "table.h"

#include <cstring>

#include "codec.h"

namespace kip {

bool Table::omitted(const char* name) const {
  for (const std::string& n : omit_)
    if (n == name) return true;
  return false;
}

// Pads a column with absent slots up to `rows`.
void Table::fill(TableColumn& c, size_t rows) {
  if (c.present.size() >= rows) return;
  c.present.resize(rows, 0);
  switch (c.kind) {
    case Kind::STRING: c.codes.resize(rows, 0); break;
    case Kind::BINARY: c.offsets.resize(rows, uint32_t(c.bytes.size())); break;
    case Kind::FLAG: break;
    default: c.numbers.resize(rows, 0); break;
  }
}

TableColumn& Table::column(const std::string& path, Kind kind) {
  auto it = byPath_.find(path);
  if (it != byPath_.end()) return columns_[it->second].second;
  byPath_.emplace(path, columns_.size());
  columns_.emplace_back(path, TableColumn{kind, {}, {}, {}, {}, {}, {}, {}});
  return columns_.back().second;
}

void Table::setLeaf(const AttrSpec& s, const Attr& a, const std::string& path) {
  TableColumn& c = column(path, s.kind);
  fill(c, rows_);
  if (c.present.size() > rows_) throw CodecError(path + ": repeated attribute");
  c.present.push_back(1);
  switch (s.kind) {
    case Kind::STRING: {
      std::string v(reinterpret_cast<const char*>(a.data), strnlen(reinterpret_cast<const char*>(a.data), a.len));
      auto [it, fresh] = c.dictIndex.emplace(v, uint32_t(c.dict.size()));
      if (fresh) c.dict.push_back(v);
      c.codes.push_back(it->second);
      break;
    }
    case Kind::BINARY:
      if (!binaryLengthOk(s, a.len)) throw CodecError(path + ": wrong length " + std::to_string(a.len));
      c.offsets.push_back(uint32_t(c.bytes.size()));
      c.bytes.insert(c.bytes.end(), a.data, a.data + a.len);
      break;
    case Kind::FLAG: break;
    default: {
      uint64_t v = 0;
      if (!readInteger(s.kind, a, v)) throw CodecError(path + ": " + integerLengthError(s.kind, a.len));
      c.numbers.push_back(double(v));
    }
  }
}

void Table::addAttrs(const Schema& schema, const uint8_t* p, size_t len, std::string& path) {
  AttrReader r(p, len);
  Attr a;
  size_t base = path.size();
  while (r.next(a)) {
    const AttrSpec* s = schema.byType(a.type);
    if (!s || omitted(s->name)) continue;  // unknown attributes are ignored, as by the object decoder
    path.resize(base);
    if (base) path += '.';
    path += s->name;
    if (s->kind == Kind::NESTED) {
      addAttrs(*s->nested, a.data, a.len, path);
    } else if (s->kind == Kind::LIST) {
      Table& t = list(path);
      AttrReader elements(a.data, a.len);
      Attr e;
      try {
        while (elements.next(e))
          if (!s->element->type || e.type == s->element->type) t.addElement(*s->element, e, uint32_t(rows_));
      } catch (const CodecError& err) {
        throw CodecError(path + err.what());  // adt[3].port: ...
      }
    } else {
      setLeaf(*s, a, path);
    }
  }
  path.resize(base);
}

Table& Table::list(const std::string& path) {
  for (auto& [p, t] : lists_)
    if (p == path) return *t;
  lists_.emplace_back(path, std::make_unique<Table>(nullptr, omit_));
  return *lists_.back().second;
}

// One element of a list: a nest's attributes are its columns, any other kind one column named after it.
void Table::addElement(const AttrSpec& element, const Attr& a, uint32_t parent) {
  try {
    std::string path;
    if (element.kind == Kind::NESTED) addAttrs(*element.nested, a.data, a.len, path);
    else if (element.kind == Kind::LIST) throw CodecError("a list of lists cannot be a table");
    else setLeaf(element, a, element.name);
  } catch (const CodecError& e) {
    throw CodecError("[" + std::to_string(rows_) + "]" + (element.kind == Kind::NESTED ? "." : ": ") + e.what());
  }
  parent_.push_back(parent);
  rows_++;
}

void Table::addMessages(const std::vector<std::vector<uint8_t>>& msgs) {
  std::string path;
  path.reserve(64);
  for (const std::vector<uint8_t>& msg : msgs) {
    try {
      MessageReader r(msg.data(), msg.size());
      Message m;
      if (!r.next(m)) throw CodecError("empty message");
      const HeaderSpec& h = *root_->header;
      if (m.payloadLen < h.size) throw CodecError("message shorter than its fixed header");
      for (size_t i = 0; i < h.count; i++) {
        TableColumn& c = column(std::string("header.") + h.fields[i].name, h.fields[i].kind);
        fill(c, rows_);
        c.present.push_back(1);
        c.numbers.push_back(readHeaderField(h.fields[i], m.payload));
      }
      size_t hl = std::min(align4(h.size), m.payloadLen);
      path.clear();
      addAttrs(*root_->attrs, m.payload + hl, m.payloadLen - hl, path);
    } catch (const CodecError& e) {
      throw CodecError("row " + std::to_string(rows_) + ": " + e.what());
    }
    rows_++;
  }
}

namespace {

template <typename T, typename A>
A typedCopy(Napi::Env env, const std::vector<T>& v) {
  Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(ab.Data(), v.data(), v.size() * sizeof(T));
  return A::New(env, v.size(), ab, 0);
}

}  // namespace

Napi::Object Table::toJs(Napi::Env env) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("rows", double(rows_));
  if (!starts_.empty()) {
    starts_.push_back(uint32_t(rows_));
    out.Set("starts", typedCopy<uint32_t, Napi::Uint32Array>(env, starts_));
  }
  Napi::Object cols = Napi::Object::New(env);
  for (auto& [path, c] : columns_) {
    fill(c, rows_);
    Napi::Object o = Napi::Object::New(env);
    o.Set("present", typedCopy<uint8_t, Napi::Uint8Array>(env, c.present));
    switch (c.kind) {
      case Kind::STRING: {
        o.Set("kind", "string");
        o.Set("codes", typedCopy<uint32_t, Napi::Uint32Array>(env, c.codes));
        Napi::Array dict = Napi::Array::New(env, c.dict.size());
        for (size_t i = 0; i < c.dict.size(); i++) dict.Set(uint32_t(i), c.dict[i]);
        o.Set("dict", dict);
        break;
      }
      case Kind::BINARY:
        o.Set("kind", "bytes");
        c.offsets.push_back(uint32_t(c.bytes.size()));
        o.Set("offsets", typedCopy<uint32_t, Napi::Uint32Array>(env, c.offsets));
        o.Set("bytes", typedCopy<uint8_t, Napi::Uint8Array>(env, c.bytes));
        break;
      case Kind::FLAG: o.Set("kind", "flag"); break;
      default:
        o.Set("kind", "number");
        o.Set("numbers", typedCopy<double, Napi::Float64Array>(env, c.numbers));
    }
    cols.Set(path, o);
  }
  out.Set("columns", cols);
  if (!root_) out.Set("parent", typedCopy<uint32_t, Napi::Uint32Array>(env, parent_));
  if (!lists_.empty()) {
    Napi::Object lists = Napi::Object::New(env);
    for (auto& [path, t] : lists_) lists.Set(path, t->toJs(env));
    out.Set("lists", lists);
  }
  return out;
}

}  // namespace kip
