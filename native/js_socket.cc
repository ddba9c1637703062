// The JS class Socket (js_socket.h): batch, dump and dumpMany as async workers that settle a
// promise, small batches inline on the JS thread; results decoded by the schema tables.
#include "js_socket.h"

#include <memory>

#include "codec.h"
#include "errors.h"
#include "js_common.h"
#include "socket.h"
#include "table.h"

namespace kip {
namespace {

// A socket call off the JS thread; settles a promise.
class SocketWorker : public Napi::AsyncWorker {
 public:
  SocketWorker(Napi::Env env, std::shared_ptr<NlSocket> sock, const RootSchema& root)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), sock_(std::move(sock)), root_(root) {}
  Napi::Promise promise() { return deferred_.Promise(); }
  const RootSchema& root() const { return root_; }
  Builder builder;
  std::vector<size_t> offsets;
  std::vector<std::string> omit;  // attribute names the reply decoder skips
  HeaderFilter where;             // dumps: the replies kept (filtered on this thread's worker)
  bool table = false;             // dumps: columnar result, decoded on the worker (table.h)

 protected:
  void Execute() override {
    try {
      runKeepingSysError();
    } catch (const CodecError& e) {
      SetError(e.what());
    }
  }
  void OnOK() override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    if (failed_) {
      deferred_.Reject(sysError(env, SysError(sysErr_, sysCall_)).Value());
      return;
    }
    try {
      OmitScope skip(omit);
      deferred_.Resolve(result(env));
    } catch (const CodecError& e) {
      deferred_.Reject(makeError(env, "EBADMSG", EBADMSG, std::string("malformed reply: ") + e.what()).Value());
    }
  }
  void OnError(const Napi::Error& e) override {
    deferred_.Reject(makeError(Env(), "EBADMSG", EBADMSG, std::string("malformed reply: ") + e.Message()).Value());
  }
  virtual void run() = 0;
  virtual Napi::Value result(Napi::Env env) = 0;

 public:
  // The call on the JS thread, settling the promise before returning (small batches: the trip to
  // libuv's thread and back costs more than the kernel's work). The caller deletes the worker.
  void runNow() {
    try {
      runKeepingSysError();
    } catch (const CodecError& e) {
      OnError(Napi::Error::New(Env(), e.what()));
      return;
    }
    OnOK();
  }

 protected:
  // run(), a system error kept for OnOK to reject with; a codec error is left to the caller.
  void runKeepingSysError() {
    try {
      run();
    } catch (const SysError& e) {
      failed_ = true;
      sysErr_ = e.err;
      sysCall_ = e.syscall;
    }
  }

  Napi::Promise::Deferred deferred_;
  std::shared_ptr<NlSocket> sock_;
  const RootSchema& root_;

 private:
  bool failed_ = false;
  int sysErr_ = 0;
  const char* sysCall_ = "";
};

class BatchWorker : public SocketWorker {
 public:
  using SocketWorker::SocketWorker;
  BatchLimits limits;

 protected:
  void run() override { sock_->batch(builder.bytes(), offsets, results_, limits); }
  Napi::Value result(Napi::Env env) override {
    KeyScope keys;
    Napi::Array arr = Napi::Array::New(env, results_.size());
    // Every op that succeeded without replies shares one (frozen) object: an object each would be
    // garbage the JS thread must make, per op of a large batch.
    Napi::Object ok;
    for (size_t i = 0; i < results_.size(); i++) {
      const OpResult& r = results_[i];
      if (r.err == 0 && r.replies.empty() && r.echo.empty() && r.extAck.empty()) {
        if (ok.IsEmpty()) {
          ok = Napi::Object::New(env);
          ok.Set("errno", 0);
          ok.Freeze();
        }
        arr.Set(uint32_t(i), ok);
        continue;
      }
      Napi::Object o = Napi::Object::New(env);
      o.Set("errno", r.err);
      if (r.err) o.Set("code", errnoName(r.err));
      if (!r.extAck.empty()) o.Set("extAck", r.extAck);
      if (!r.replies.empty()) o.Set("replies", decodeReplies(env, root_, r.replies));
      if (!r.echo.empty()) o.Set("echo", decodeMessage(env, root_, r.echo.data(), r.echo.size()));
      arr.Set(uint32_t(i), o);
    }
    return arr;
  }

 private:
  std::vector<OpResult> results_;
};

class DumpWorker : public SocketWorker {
 public:
  using SocketWorker::SocketWorker;

 protected:
  void run() override {
    msgs_ = sock_->dump(builder.bytes());
    where.apply(root_, msgs_);
    if (!table) return;
    table_ = std::make_unique<Table>(&root_, omit);
    table_->addMessages(msgs_);
    msgs_.clear();
  }
  Napi::Value result(Napi::Env env) override { return table_ ? Napi::Value(table_->toJs(env)) : decodeReplies(env, root_, msgs_); }

 private:
  std::vector<std::vector<uint8_t>> msgs_;
  std::unique_ptr<Table> table_;
};

// Many dumps in one trip off the JS thread (a full IPVS read is 1 + N destination dumps), their
// replies decoded into one table, dump after dump.
class DumpManyWorker : public SocketWorker {
 public:
  using SocketWorker::SocketWorker;

 protected:
  void run() override {
    table_ = std::make_unique<Table>(&root_, omit);
    for (size_t i = 0; i < offsets.size(); i++) {
      size_t end = i + 1 < offsets.size() ? offsets[i + 1] : builder.size();
      std::vector<uint8_t> one(builder.bytes().begin() + offsets[i], builder.bytes().begin() + end);
      std::vector<std::vector<uint8_t>> replies = sock_->dump(one);
      where.apply(root_, replies);
      table_->startDump();
      table_->addMessages(replies);
    }
  }
  Napi::Value result(Napi::Env env) override { return table_->toJs(env); }

 private:
  std::unique_ptr<Table> table_;
};

// JS class Socket(protocol): batch(schema, requests, limits?), dump(schema, request),
// dumpMany(schema, requests) (always a table), close(); dumps take { omit?: string[],
// where?: { field, in?, notIn? }, table?: boolean }.
class Socket : public Napi::ObjectWrap<Socket> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "Socket",
                       {InstanceMethod<&Socket::Batch>("batch"), InstanceMethod<&Socket::Dump>("dump"),
                        InstanceMethod<&Socket::DumpMany>("dumpMany"),
                        InstanceMethod<&Socket::Close>("close"), InstanceAccessor<&Socket::PortId>("portId")});
  }
  explicit Socket(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Socket>(info) {
    Napi::Env env = info.Env();
    if (!info[0].IsNumber()) {
      makeError(env, "ERR_INVALID_ARG_TYPE", 0, "protocol: expected a number").ThrowAsJavaScriptException();
      return;
    }
    try {
      sock_ = std::make_shared<NlSocket>(info[0].As<Napi::Number>().Int32Value());
    } catch (const SysError& e) {
      sysError(env, e).ThrowAsJavaScriptException();
    }
  }

 private:
  template <typename W>
  W* prepare(const Napi::CallbackInfo& info, uint16_t extraFlags, bool single) {
    Napi::Env env = info.Env();
    if (!sock_) throw makeError(env, "EBADF", EBADF, "socket is closed");
    try {
      const RootSchema& root = rootArg(info[0]);
      auto* w = new W(env, sock_, root);
      try {
        Napi::Array reqs;
        if (single) {
          reqs = Napi::Array::New(env, 1);
          reqs.Set(0u, info[1]);
        } else {
          if (!info[1].IsArray()) throw CodecError("requests: expected an array");
          reqs = info[1].As<Napi::Array>();
        }
        encodeAll(env, root, reqs, w->builder, w->offsets, extraFlags);
      } catch (...) {
        delete w;
        throw;
      }
      return w;
    } catch (const CodecError& e) {
      throw makeError(env, "ERR_NETLINK_ENCODE", 0, e.what());
    }
  }

  Napi::Value Batch(const Napi::CallbackInfo& info) {
    auto* w = prepare<BatchWorker>(info, NLM_F_ACK, false);
    bool inline_ = false;
    if (info[2].IsObject()) {
      Napi::Object o = info[2].As<Napi::Object>();
      if (o.Get("maxMessages").IsNumber()) w->limits.maxMessages = o.Get("maxMessages").As<Napi::Number>().Uint32Value();
      if (o.Get("maxBytes").IsNumber()) w->limits.maxBytes = o.Get("maxBytes").As<Napi::Number>().Uint32Value();
      if (w->limits.maxMessages == 0) w->limits.maxMessages = 1;
      inline_ = o.Get("inline").ToBoolean();
      w->limits.errorsOnly = o.Get("errorsOnly").ToBoolean();
    }
    Napi::Promise p = w->promise();
    if (inline_) {
      w->runNow();
      delete w;
    } else {
      w->Queue();
    }
    return p;
  }
  // Options of dump/dumpMany: { omit?: string[], where?: { field: string, in?: number[], notIn?: number[] },
  // table?: boolean } (table: one columnar result instead of message objects; where: keep the replies whose fixed-header field is in / not in the list). Throws a
  // TypeError on a field the schema's header does not have or a malformed list.
  static void readDumpOptions(const Napi::Value& v, SocketWorker& w) {
    if (!v.IsObject()) return;
    const RootSchema& root = w.root();
    Napi::Object o = v.As<Napi::Object>();
    Napi::Value omit = o.Get("omit");
    if (omit.IsArray()) {
      Napi::Array arr = omit.As<Napi::Array>();
      for (uint32_t i = 0; i < arr.Length(); i++)
        if (arr.Get(i).IsString()) w.omit.push_back(arr.Get(i).As<Napi::String>().Utf8Value());
    }
    w.table = o.Get("table").ToBoolean().Value();
    Napi::Value where = o.Get("where");
    if (where.IsUndefined()) return;
    Napi::Env env = v.Env();
    if (!where.IsObject() || !where.As<Napi::Object>().Get("field").IsString())
      throw Napi::TypeError::New(env, "where: expected { field: string, in?: number[], notIn?: number[] }");
    Napi::Object wo = where.As<Napi::Object>();
    std::string field = wo.Get("field").As<Napi::String>().Utf8Value();
    w.where.field = findHeaderField(root, field);
    if (w.where.field == nullptr) throw Napi::TypeError::New(env, "where.field: " + std::string(root.name) + " has no header field " + field);
    Napi::Value in = wo.Get("in"), notIn = wo.Get("notIn");
    if (in.IsArray() == notIn.IsArray()) throw Napi::TypeError::New(env, "where: expected exactly one of in, notIn (an array of numbers)");
    w.where.exclude = notIn.IsArray();
    Napi::Array arr = (w.where.exclude ? notIn : in).As<Napi::Array>();
    for (uint32_t i = 0; i < arr.Length(); i++) {
      Napi::Value x = arr.Get(i);
      if (!x.IsNumber()) throw Napi::TypeError::New(env, "where: expected numbers");
      w.where.values.push_back(x.As<Napi::Number>().Uint32Value());
    }
  }

  // dump (one request) and dumpMany (an array) share the options and the queueing.
  template <typename W>
  Napi::Value queueDump(const Napi::CallbackInfo& info, bool single) {
    auto* w = prepare<W>(info, NLM_F_DUMP, single);
    try {
      readDumpOptions(info[2], *w);
    } catch (...) {
      delete w;
      throw;
    }
    Napi::Promise p = w->promise();
    w->Queue();
    return p;
  }
  Napi::Value Dump(const Napi::CallbackInfo& info) { return queueDump<DumpWorker>(info, true); }
  Napi::Value DumpMany(const Napi::CallbackInfo& info) { return queueDump<DumpManyWorker>(info, false); }
  Napi::Value Close(const Napi::CallbackInfo& info) {
    if (sock_) sock_->close();
    sock_.reset();
    return info.Env().Undefined();
  }
  Napi::Value PortId(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), sock_ ? sock_->portId() : 0);
  }

  std::shared_ptr<NlSocket> sock_;
};

}  // namespace

Napi::Function initSocketClass(Napi::Env env) { return Socket::Init(env); }

}  // namespace kip
