// Child processes started with posix_spawn: glibc runs it as clone(CLONE_VM | CLONE_VFORK), so
// starting a command costs the same whatever the daemon's size. libuv (child_process) forks,
// which copies the page tables of the whole heap on the JS thread: ~1 ms per 30 MiB on a host,
// ~100 ms for an 80 MiB daemon in UML, and iptables-save/-restore run on every sync.
//   spawn(file, args, env?) -> { pid, stdin, stdout, stderr }   pipe fds, ours to close
//   waitExit(pid) -> Promise<{ code, signal }>                    waited on a thread of its own
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "process.h"

#include "codec.h"  // errnoName

extern char** environ;

namespace kip {
namespace {

Napi::Error spawnError(Napi::Env env, int err, const std::string& file) {
  Napi::Error e = Napi::Error::New(env, "spawn " + file + ": " + strerror(err));
  e.Set("code", errnoName(err));
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("syscall", "posix_spawn");
  e.Set("path", file);
  return e;
}

std::vector<std::string> strings(const Napi::Value& v, const char* what) {
  std::vector<std::string> out;
  if (!v.IsArray()) throw Napi::TypeError::New(v.Env(), std::string(what) + ": expected an array of strings");
  Napi::Array a = v.As<Napi::Array>();
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value s = a.Get(i);
    if (!s.IsString()) throw Napi::TypeError::New(v.Env(), std::string(what) + ": expected an array of strings");
    out.push_back(s.As<Napi::String>().Utf8Value());
  }
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& v) {
  std::vector<char*> p;
  for (auto& s : v) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

void closeAll(std::initializer_list<int> fds) {
  for (int fd : fds)
    if (fd >= 0) close(fd);
}

// The child gets the pipes' far ends as 0/1/2 (dup2 clears their close-on-exec), default signal
// dispositions (Node ignores SIGPIPE, and an ignored signal stays ignored across exec) and an
// empty signal mask, as libuv gives its children.
Napi::Value Spawn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) throw Napi::TypeError::New(env, "file: expected a string");
  std::string file = info[0].As<Napi::String>().Utf8Value();
  std::vector<std::string> argv = strings(info[1], "args");
  argv.insert(argv.begin(), file);
  bool ownEnv = !info[2].IsUndefined() && !info[2].IsNull();
  std::vector<std::string> envv = ownEnv ? strings(info[2], "env") : std::vector<std::string>{};

  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
    int e = errno;
    closeAll({in[0], in[1], out[0], out[1], err[0], err[1]});
    throw spawnError(env, e, file);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args = pointers(argv);
  std::vector<char*> envp = pointers(envv);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, file.c_str(), &actions, &attr, args.data(), ownEnv ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  closeAll({in[0], out[1], err[1]});
  if (rc != 0) {
    closeAll({in[1], out[0], err[0]});
    throw spawnError(env, rc, file);
  }
  Napi::Object r = Napi::Object::New(env);
  r.Set("pid", Napi::Number::New(env, pid));
  r.Set("stdin", Napi::Number::New(env, in[1]));
  r.Set("stdout", Napi::Number::New(env, out[0]));
  r.Set("stderr", Napi::Number::New(env, err[0]));
  return r;
}

std::string signalName(int sig) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* abbrev = sigabbrev_np(sig)) return std::string("SIG") + abbrev;
#endif
  return "SIG" + std::to_string(sig);
}

// One thread per child, blocked in waitpid (a thread-pool worker would hold a slot that netlink
// and fs work need for as long as the command runs). libuv reaps only the children it started.
Napi::Value WaitExit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber()) throw Napi::TypeError::New(env, "pid: expected a number");
  pid_t pid = info[0].As<Napi::Number>().Int32Value();
  auto* deferred = new Napi::Promise::Deferred(env);
  Napi::Promise promise = deferred->Promise();
  auto tsfn = Napi::ThreadSafeFunction::New(env, Napi::Function(), "kip.waitExit", 0, 1);
  std::thread([pid, deferred, tsfn]() mutable {
    int status = 0;
    int rc;
    do rc = waitpid(pid, &status, 0);
    while (rc < 0 && errno == EINTR);
    int werr = rc < 0 ? errno : 0;
    tsfn.BlockingCall([deferred, status, werr](Napi::Env env, Napi::Function) {
      if (werr) {
        Napi::Error e = Napi::Error::New(env, std::string("waitpid: ") + strerror(werr));
        e.Set("code", errnoName(werr));
        deferred->Reject(e.Value());
      } else {
        Napi::Object r = Napi::Object::New(env);
        r.Set("code", WIFEXITED(status) ? Napi::Value(Napi::Number::New(env, WEXITSTATUS(status))) : env.Null());
        r.Set("signal", WIFSIGNALED(status) ? Napi::Value(Napi::String::New(env, signalName(WTERMSIG(status)))) : env.Null());
        deferred->Resolve(r);
      }
      delete deferred;
    });
    tsfn.Release();
  }).detach();
  return promise;
}

}  // namespace

void initProcess(Napi::Env env, Napi::Object exports) {
  exports.Set("spawn", Napi::Function::New<Spawn>(env, "spawn"));
  exports.Set("waitExit", Napi::Function::New<WaitExit>(env, "waitExit"));
}

}  // namespace kip
