// Columnar input for a LIST of nests: one typed array per attribute path, one element per
// row. Same schema tables and writers as the object path (codec.cc), but no N-API call per
// row: the bulk path for large batches (e.g. 50,000 ipset entries in one call).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "codec.h"

namespace kip {
namespace {

// One attribute fed by a column (or a nest whose children are).
struct Column {
  const AttrSpec* spec;
  std::string key;  // the column's path, for error messages
  napi_typedarray_type arrayType = napi_uint8_array;
  const uint8_t* data = nullptr;
  size_t width = 0;  // BINARY: bytes per row
  std::vector<Column> children;
};

bool isIntegerKind(Kind k) { return integerMax(k) != 0; }

void plan(Napi::Env env, const Schema& schema, const std::string& prefix, Napi::Object cols, size_t rows,
          std::vector<Column>& out, uint32_t& used, const std::string& path) {
  for (size_t i = 0; i < schema.count; i++) {
    const AttrSpec& s = schema.attrs[i];
    std::string key = prefix + s.name;
    if (s.kind == Kind::NESTED) {
      Column c{&s, key};
      plan(env, *s.nested, key + ".", cols, rows, c.children, used, path);
      if (!c.children.empty()) out.push_back(std::move(c));
      continue;
    }
    Napi::Value v = cols.Get(key);
    if (v.IsUndefined()) continue;
    used++;
    std::string where = path + ".columns." + key;
    if (!v.IsTypedArray()) throw CodecError(where + ": expected a typed array");
    Column c{&s, key};
    size_t length = 0, offset = 0;
    void* data = nullptr;
    napi_value ab;
    if (napi_get_typedarray_info(env, v, &c.arrayType, &length, &data, &ab, &offset) != napi_ok)
      throw CodecError(where + ": unreadable typed array");
    c.data = static_cast<const uint8_t*>(data);
    if (isIntegerKind(s.kind)) {
      bool ok = c.arrayType == napi_uint8_array || c.arrayType == napi_uint16_array ||
                c.arrayType == napi_uint32_array || c.arrayType == napi_float64_array ||
                c.arrayType == napi_biguint64_array;
      if (!ok) throw CodecError(where + ": expected an unsigned integer, Float64 or BigUint64 array");
      if (length != rows) throw CodecError(where + ": expected " + std::to_string(rows) + " values");
    } else if (s.kind == Kind::BINARY && s.minLen > 0 && s.minLen == s.maxLen) {
      if (c.arrayType != napi_uint8_array) throw CodecError(where + ": expected a Uint8Array");
      c.width = s.minLen;
      if (length != rows * c.width) throw CodecError(where + ": expected " + std::to_string(rows * c.width) + " bytes");
    } else if (s.kind == Kind::FLAG) {
      if (c.arrayType != napi_uint8_array || length != rows) throw CodecError(where + ": expected a Uint8Array of rows");
    } else {
      throw CodecError(where + ": this attribute cannot be a column");
    }
    out.push_back(std::move(c));
  }
}

template <typename T>
T load(const uint8_t* p, size_t row) {
  T x;
  std::memcpy(&x, p + row * sizeof(T), sizeof x);
  return x;
}

void encodeRow(Builder& b, const std::vector<Column>& cols, size_t row, const std::string& path) {
  for (const Column& c : cols) {
    const AttrSpec& s = *c.spec;
    uint16_t type = s.type | s.encodeFlags;
    if (s.kind == Kind::NESTED) {
      size_t at = b.beginNest(type);
      encodeRow(b, c.children, row, path);
      b.endNest(at);
    } else if (s.kind == Kind::BINARY) {
      b.put(type, c.data + row * c.width, c.width);
    } else if (s.kind == Kind::FLAG) {
      if (c.data[row]) b.put(type, nullptr, 0);
    } else {
      uint64_t v = 0;
      switch (c.arrayType) {
        case napi_uint8_array: v = c.data[row]; break;
        case napi_uint16_array: v = load<uint16_t>(c.data, row); break;
        case napi_uint32_array: v = load<uint32_t>(c.data, row); break;
        case napi_biguint64_array: v = load<uint64_t>(c.data, row); break;
        default: {
          double d = load<double>(c.data, row);
          if (std::isnan(d)) continue;  // NaN: no attribute in this row
          if (d < 0 || std::floor(d) != d || d > double(integerMax(s.kind))) v = UINT64_MAX;
          else v = uint64_t(d);
        }
      }
      if (v > integerMax(s.kind))
        throw CodecError(path + "[" + std::to_string(row) + "]." + c.key + ": expected an integer in [0, " +
                         std::to_string(integerMax(s.kind)) + "]");
      putInteger(b, s.kind, type, v);
    }
  }
}

}  // namespace

void encodeColumns(Builder& b, const AttrSpec& element, Napi::Object batch, const std::string& path) {
  Napi::Env env = batch.Env();
  Napi::Value rowsV = batch.Get("rows");
  Napi::Value colsV = batch.Get("columns");
  if (!rowsV.IsNumber() || !colsV.IsObject() || colsV.IsArray())
    throw CodecError(path + ": expected an array or { rows, columns }");
  double rowsD = rowsV.As<Napi::Number>().DoubleValue();
  if (!(rowsD >= 0) || std::floor(rowsD) != rowsD || rowsD > 0xffffffffu)
    throw CodecError(path + ".rows: expected a count");
  size_t rows = size_t(rowsD);
  Napi::Object cols = colsV.As<Napi::Object>();
  std::vector<Column> planned;
  uint32_t used = 0;
  plan(env, *element.nested, "", cols, rows, planned, used, path);
  if (used != cols.GetPropertyNames().Length()) throw CodecError(path + ".columns: unknown column");
  for (size_t row = 0; row < rows && b.ok(); row++) {
    uint16_t et = element.type ? element.type : uint16_t(row + 1);
    size_t at = b.beginNest(et | element.encodeFlags);
    encodeRow(b, planned, row, path);
    b.endNest(at);
  }
}

}  // namespace kip
