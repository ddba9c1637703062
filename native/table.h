// Columnar output of dumps: the replies decoded on the worker thread into one column per
// attribute path, handed to JavaScript as a few typed arrays. The object path (codec.cc)
// builds ~10 JS objects and buffers per reply on the JS thread: at 10,000 replies that held
// the event loop 0.3–2 s in UML, most of it page faults of freshly grown heap.
#pragma once

#include <napi.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "buffer.h"
#include "schema.h"

namespace kip {

// One attribute path's values, one slot per row (present[row] = 0: the reply lacked it).
struct TableColumn {
  Kind kind;
  std::vector<uint8_t> present;
  std::vector<double> numbers;        // integer kinds (U64 as a double, as JS numbers are)
  std::vector<uint32_t> codes;        // STRING: index into dict
  std::vector<std::string> dict;      // STRING: distinct values, in order of first use
  std::unordered_map<std::string, uint32_t> dictIndex;
  std::vector<uint32_t> offsets;      // BINARY: start of each row's bytes (rows + 1 at the end)
  std::vector<uint8_t> bytes;
};

// Rows are reply messages, in order; dumpMany's dumps follow one another (startDump marks
// where each begins). A list attribute becomes a table of its own (one row per element, with
// the row it belongs to). Attributes named in `omit` are skipped at any depth, as by OmitScope.
class Table {
 public:
  // root: the message schema (its fixed header becomes `header.<field>` columns); null for a list's table.
  Table(const RootSchema* root, std::vector<std::string> omit) : root_(root), omit_(std::move(omit)) {}
  void startDump() { starts_.push_back(uint32_t(rows_)); }
  // Adds one row per message; throws CodecError naming the row and the attribute.
  void addMessages(const std::vector<std::vector<uint8_t>>& msgs);
  // { rows, starts?: Uint32Array, columns: { "<path>": column }, lists?: { "<path>": table + parent } }
  // (see src/native/binding.ts).
  Napi::Object toJs(Napi::Env env);

 private:
  void addAttrs(const Schema& schema, const uint8_t* p, size_t len, std::string& path);
  void addElement(const AttrSpec& element, const Attr& a, uint32_t parent);
  void setLeaf(const AttrSpec& s, const Attr& a, const std::string& path);
  TableColumn& column(const std::string& path, Kind kind);
  Table& list(const std::string& path);
  void fill(TableColumn& c, size_t rows);
  bool omitted(const char* name) const;

  const RootSchema* root_;
  std::vector<std::string> omit_;
  std::vector<uint32_t> starts_;
  size_t rows_ = 0;  // rows done; the row being added is rows_
  std::vector<std::pair<std::string, TableColumn>> columns_;
  std::unordered_map<std::string, size_t> byPath_;
  std::vector<std::pair<std::string, std::unique_ptr<Table>>> lists_;
  std::vector<uint32_t> parent_;  // a list's table: the row of the table above that each element belongs to
};

}  // namespace kip
