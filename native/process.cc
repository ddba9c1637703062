// Child processes started with posix_spawn, on a thread of their own. glibc runs posix_spawn as
// clone(CLONE_VM | CLONE_VFORK), so starting a command costs the same whatever the daemon's size
// (libuv's child_process forks, copying the page tables of the whole heap on the JS thread: ~1 ms
// per 30 MiB on a host, ~100 ms for an 80 MiB daemon in UML). The vfork parent waits until the
// child has exec'd (~100 ms of kernel work in UML): that thread waits, not the JS thread. The
// thread then waits for the child's exit.
//   spawn(file, args, env?, nice?) -> Promise<{ pid, stdin, stdout, stderr, exited }>
//     stdin/stdout/stderr: pipe fds, ours to close; exited: Promise<{ code, signal }>
//   nice: added to the daemon's nice value for the child (as `nice -n`; 0: the daemon's own).
//   Linux keeps nice per thread and a child inherits its creating thread's: the spawning thread
//   takes it, so the child runs at it from its first instruction and the daemon's other threads
//   keep theirs.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
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

std::string signalName(int sig) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* abbrev = sigabbrev_np(sig)) return std::string("SIG") + abbrev;
#endif
  return "SIG" + std::to_string(sig);
}

// One command: what to start (copied on the JS thread) and, once started, its pid and our pipe
// ends. Owned by the thread; the JS-thread callbacks run in the order the thread queued them.
struct Child {
  std::string file;
  std::vector<std::string> argv;  // argv[0] is file
  std::vector<std::string> envv;  // the given environment, or a copy of this process's
  int nice = 0;
  Napi::Promise::Deferred started;
  Napi::Promise::Deferred* exited = nullptr;  // made by the started callback, on the JS thread
  int err = 0;                                // posix_spawn's or pipe2's errno, or 0
  pid_t pid = -1;
  int stdinFd = -1, stdoutFd = -1, stderrFd = -1;
  explicit Child(Napi::Env env) : started(Napi::Promise::Deferred::New(env)) {}
};

// The child gets the pipes' far ends as 0/1/2 (dup2 clears their close-on-exec), default signal
// dispositions (Node ignores SIGPIPE, and an ignored signal stays ignored across exec) and an
// empty signal mask, as libuv gives its children. Runs on the child's thread; sets c.err or c.pid.
void start(Child& c) {
  if (c.nice != 0) {  // best effort, as `nice -n`: added to this thread's (the daemon's) value, within -20..19
    const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);
    if (errno == 0) setpriority(PRIO_PROCESS, tid, std::min(19, std::max(-20, now + c.nice)));
  }
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
    c.err = errno;
    closeAll({in[0], in[1], out[0], out[1], err[0], err[1]});
    return;
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
  std::vector<char*> args = pointers(c.argv);
  std::vector<char*> envp = pointers(c.envv);
  int rc = posix_spawnp(&c.pid, c.file.c_str(), &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  closeAll({in[0], out[1], err[1]});
  if (rc != 0) {
    closeAll({in[1], out[0], err[0]});
    c.err = rc;
    return;
  }
  c.stdinFd = in[1];
  c.stdoutFd = out[0];
  c.stderrFd = err[0];
}

// The JS thread is not blocked for the child's exec (posix_spawn's vfork) nor its run: one thread
// per child starts it and then waits in waitpid (a thread-pool worker would hold a slot that
// netlink and fs work need for as long as the command runs). libuv reaps only its own children.
Napi::Value Spawn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) throw Napi::TypeError::New(env, "file: expected a string");
  if (!info[3].IsUndefined() && !info[3].IsNumber()) throw Napi::TypeError::New(env, "nice: expected a number");
  std::vector<std::string> argv = strings(info[1], "args");
  std::vector<std::string> envv;
  if (!info[2].IsUndefined() && !info[2].IsNull()) {
    envv = strings(info[2], "env");
  } else {
    for (char** e = environ; *e != nullptr; e++) envv.emplace_back(*e);  // copied here, not read on the thread
  }
  auto c = std::make_unique<Child>(env);
  c->file = info[0].As<Napi::String>().Utf8Value();
  c->argv = std::move(argv);
  c->argv.insert(c->argv.begin(), c->file);
  c->envv = std::move(envv);
  c->nice = info[3].IsUndefined() ? 0 : info[3].As<Napi::Number>().Int32Value();
  Napi::Promise promise = c->started.Promise();
  auto tsfn = Napi::ThreadSafeFunction::New(env, Napi::Function(), "kip.spawn", 0, 1);
  std::thread([child = c.release(), tsfn]() mutable {
    Child& c = *child;
    start(c);
    const bool failed = c.err != 0;  // once the callback is queued, a failed child is its to delete
    tsfn.BlockingCall([child](Napi::Env env, Napi::Function) {
      Child& c = *child;
      if (c.err != 0) {
        c.started.Reject(spawnError(env, c.err, c.file).Value());
        delete child;
        return;
      }
      c.exited = new Napi::Promise::Deferred(env);
      Napi::Object r = Napi::Object::New(env);
      r.Set("pid", Napi::Number::New(env, c.pid));
      r.Set("stdin", Napi::Number::New(env, c.stdinFd));
      r.Set("stdout", Napi::Number::New(env, c.stdoutFd));
      r.Set("stderr", Napi::Number::New(env, c.stderrFd));
      r.Set("exited", c.exited->Promise());
      c.started.Resolve(r);
    });
    if (failed) {
      tsfn.Release();
      return;
    }
    int status = 0;
    int rc;
    do rc = waitpid(c.pid, &status, 0);
    while (rc < 0 && errno == EINTR);
    int werr = rc < 0 ? errno : 0;
    tsfn.BlockingCall([child, status, werr](Napi::Env env, Napi::Function) {
      std::unique_ptr<Child> owned(child);
      Napi::Promise::Deferred* exited = owned->exited;
      if (werr) {
        Napi::Error e = Napi::Error::New(env, std::string("waitpid: ") + strerror(werr));
        e.Set("code", errnoName(werr));
        exited->Reject(e.Value());
      } else {
        Napi::Object r = Napi::Object::New(env);
        r.Set("code", WIFEXITED(status) ? Napi::Value(Napi::Number::New(env, WEXITSTATUS(status))) : env.Null());
        r.Set("signal", WIFSIGNALED(status) ? Napi::Value(Napi::String::New(env, signalName(WTERMSIG(status)))) : env.Null());
        exited->Resolve(r);
      }
      delete exited;
    });
    tsfn.Release();
  }).detach();
  return promise;
}

}  // namespace

void initProcess(Napi::Env env, Napi::Object exports) {
  exports.Set("spawn", Napi::Function::New<Spawn>(env, "spawn"));
}

}  // namespace kip
