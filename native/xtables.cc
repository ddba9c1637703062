// xtablesTable(family, table): one legacy iptables table as the kernel holds it (the getsockopt
// IPT_SO_GET_INFO / IPT_SO_GET_ENTRIES pair iptables-legacy-save reads), with every rule's packet
// and byte counters zeroed, so two reads are equal exactly when no rule, chain or policy changed.
// Read on the libuv thread pool; no process. Layout of the Buffer: the getinfo header's
// valid_hooks, hook_entry[], underflow[], num_entries and size (u32 each, host order), then the
// entries.
// glibc's headers before the kernel's: linux/libc-compat.h then skips what glibc defined.
#include <netinet/in.h>
#include <sys/socket.h>
// clang-format off
#include <linux/netfilter_ipv4/ip_tables.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
// clang-format on
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "js_common.h"
#include "xtables.h"

namespace kip {
namespace {

// What differs between the IPv4 and IPv6 calls; the getinfo/get_entries structs share a layout.
struct FamilyOps {
  int domain;
  int level;
  int getInfo;
  int getEntries;
  size_t countersOffset;  // of the entry's xt_counters
  size_t nextOffset;      // of the entry's __u16 next_offset
};

const FamilyOps kIpv4 = {AF_INET, IPPROTO_IP, IPT_SO_GET_INFO, IPT_SO_GET_ENTRIES, offsetof(ipt_entry, counters),
                         offsetof(ipt_entry, next_offset)};
const FamilyOps kIpv6 = {AF_INET6, IPPROTO_IPV6, IP6T_SO_GET_INFO, IP6T_SO_GET_ENTRIES,
                         offsetof(ip6t_entry, counters), offsetof(ip6t_entry, next_offset)};
static_assert(sizeof(ipt_getinfo) == sizeof(ip6t_getinfo), "getinfo layouts differ");
static_assert(offsetof(ipt_get_entries, entrytable) == offsetof(ip6t_get_entries, entrytable), "get_entries layouts differ");

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::vector<uint8_t> readTable(const FamilyOps& ops, const std::string& table) {
  Fd s{::socket(ops.domain, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW)};
  if (s.fd < 0) throw SysError(errno, "socket");
  // The table may be replaced between the two calls: the kernel then refuses the stale size (EAGAIN).
  for (int attempt = 0;; attempt++) {
    ipt_getinfo info{};
    std::strncpy(info.name, table.c_str(), sizeof(info.name) - 1);
    socklen_t len = sizeof(info);
    if (::getsockopt(s.fd, ops.level, ops.getInfo, &info, &len) != 0) throw SysError(errno, "getsockopt(SO_GET_INFO)");
    const size_t head = offsetof(ipt_get_entries, entrytable);
    std::vector<uint8_t> buf(head + info.size);
    auto* req = reinterpret_cast<ipt_get_entries*>(buf.data());
    std::strncpy(req->name, table.c_str(), sizeof(req->name) - 1);
    req->size = info.size;
    len = socklen_t(buf.size());
    if (::getsockopt(s.fd, ops.level, ops.getEntries, buf.data(), &len) != 0) {
      if (errno == EAGAIN && attempt < 8) continue;
      throw SysError(errno, "getsockopt(SO_GET_ENTRIES)");
    }
    std::vector<uint8_t> out;
    auto put = [&out](uint32_t v) { out.insert(out.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4); };
    put(info.valid_hooks);
    for (unsigned h = 0; h < NF_INET_NUMHOOKS; h++) put(info.hook_entry[h]);
    for (unsigned h = 0; h < NF_INET_NUMHOOKS; h++) put(info.underflow[h]);
    put(info.num_entries);
    put(info.size);
    size_t start = out.size();
    out.insert(out.end(), buf.begin() + head, buf.end());
    uint8_t* entries = out.data() + start;
    for (size_t at = 0; at + ops.countersOffset + sizeof(xt_counters) <= info.size;) {
      std::memset(entries + at + ops.countersOffset, 0, sizeof(xt_counters));
      uint16_t next;
      std::memcpy(&next, entries + at + ops.nextOffset, sizeof(next));
      if (next == 0) break;
      at += next;
    }
    return out;
  }
}

class TableWorker : public Napi::AsyncWorker {
 public:
  TableWorker(Napi::Env env, const FamilyOps& ops, std::string table)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), ops_(ops), table_(std::move(table)) {}
  Napi::Promise promise() { return deferred_.Promise(); }

  void Execute() override {
    try {
      out_ = readTable(ops_, table_);
    } catch (const SysError& e) {
      err_ = e.err;
      call_ = e.syscall;
    }
  }
  void OnOK() override {
    Napi::Env env = Env();
    if (call_ != nullptr) {
      Napi::Error e = sysError(env, SysError(err_, call_));
      e.Set("table", Napi::String::New(env, table_));
      deferred_.Reject(e.Value());
    } else {
      deferred_.Resolve(Napi::Buffer<uint8_t>::Copy(env, out_.data(), out_.size()));
    }
  }

 private:
  Napi::Promise::Deferred deferred_;
  const FamilyOps& ops_;
  std::string table_;
  std::vector<uint8_t> out_;
  int err_ = 0;
  const char* call_ = nullptr;
};

// xtablesTable(family: 4 | 6, table: string): Promise<Buffer>
Napi::Value XtablesTable(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber() || !info[1].IsString()) throw Napi::TypeError::New(env, "xtablesTable(family: 4 | 6, table: string)");
  int family = info[0].As<Napi::Number>().Int32Value();
  std::string table = info[1].As<Napi::String>().Utf8Value();
  if ((family != 4 && family != 6) || table.empty() || table.size() >= XT_TABLE_MAXNAMELEN)
    throw Napi::TypeError::New(env, "xtablesTable: family 4 or 6, a table name of 1.." + std::to_string(XT_TABLE_MAXNAMELEN - 1) + " bytes");
  auto* w = new TableWorker(env, family == 4 ? kIpv4 : kIpv6, table);
  Napi::Promise p = w->promise();
  w->Queue();
  return p;
}

}  // namespace

Napi::Function initXtables(Napi::Env env) { return Napi::Function::New<XtablesTable>(env, "xtablesTable"); }

}  // namespace kip
