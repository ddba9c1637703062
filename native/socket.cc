#include "socket.h"

#include <errno.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "codec.h"
#include "errors.h"

namespace kip {
namespace {

constexpr size_t kSlots = 64;            // datagrams per recvmmsg
constexpr size_t kSlotSize = 64 * 1024;  // > the kernel's largest dump skb (32 KiB)
constexpr int kMaxRcvbuf = 128 << 20;
constexpr int kDumpRetries = 10;
// Waits before an interrupted dump is tried again: 1 ms doubling, at most 100 ms (0.33 s in all).
// NOTE: the kernel finishes some address changes in a workqueue after acknowledging them (IPv6:
// addrconf_dad_work → addrconf_dad_completed, net/ipv6/addrconf.c), each bumping the generation a
// dump checks: right after thousands of them, back-to-back retries all came back interrupted.
constexpr int kDumpBackoffMaxMs = 100;
constexpr int kTimeoutSeconds = 30;

void setInt(int fd, int level, int opt, int val) { setsockopt(fd, level, opt, &val, sizeof val); }

nlmsghdr* headerAt(std::vector<uint8_t>& buf, size_t off) { return reinterpret_cast<nlmsghdr*>(&buf[off]); }

}  // namespace

NlSocket::NlSocket(int protocol) : protocol_(protocol), rxlen_(kSlots) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  seq_ = uint32_t(ts.tv_nsec) & 0x7fffffff;
  open();
}

NlSocket::~NlSocket() {
  if (fd_ >= 0) ::close(fd_);
}

void NlSocket::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void NlSocket::open() {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol_);
  if (fd < 0) throw SysError(errno, "socket");
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
    int e = errno;
    ::close(fd);
    throw SysError(e, "bind");
  }
  socklen_t alen = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) < 0) {
    int e = errno;
    ::close(fd);
    throw SysError(e, "getsockname");
  }
  // Large buffers: a batch chunk's acks and a dump's skbs must fit. FORCE needs CAP_NET_ADMIN;
  // without it the plain option still raises the buffer up to rmem_max.
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf_, sizeof rcvbuf_) < 0)
    setInt(fd, SOL_SOCKET, SO_RCVBUF, rcvbuf_);
  int sndbuf = 4 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) < 0)
    setInt(fd, SOL_SOCKET, SO_SNDBUF, sndbuf);
  setInt(fd, SOL_NETLINK, NETLINK_EXT_ACK, 1);
  setInt(fd, SOL_NETLINK, NETLINK_CAP_ACK, 1);  // errors echo only the header, not the request
  // rtnetlink: the kernel applies a dump request's filters (a route dump's table, protocol, type
  // and link) instead of dumping everything, and rejects GET fields it would ignore. Kernels
  // before 4.20 do not know the option; their dumps are unfiltered, and the client filters again.
  if (protocol_ == NETLINK_ROUTE) setInt(fd, SOL_NETLINK, NETLINK_GET_STRICT_CHK, 1);
  timeval tv{kTimeoutSeconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  fd_ = fd;
  portid_ = addr.nl_pid;
}

bool NlSocket::growReceiveBuffer() {
  if (rcvbuf_ >= kMaxRcvbuf) return false;
  rcvbuf_ *= 2;
  if (setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf_, sizeof rcvbuf_) < 0)
    setInt(fd_, SOL_SOCKET, SO_RCVBUF, rcvbuf_);
  return true;
}

void NlSocket::send(const uint8_t* p, size_t len) {
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  iovec iov{const_cast<uint8_t*>(p), len};
  msghdr mh{};
  mh.msg_name = &kernel;
  mh.msg_namelen = sizeof kernel;
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  for (;;) {
    ssize_t n = sendmsg(fd_, &mh, 0);
    if (n >= 0) return;
    if (errno != EINTR) throw SysError(errno, "sendmsg");
  }
}

size_t NlSocket::receive(bool wait, bool& overrun) {
  mmsghdr msgs[kSlots];
  iovec iov[kSlots];
  sockaddr_nl from[kSlots];
  if (!rxbuf_) rxbuf_.reset(new uint8_t[kSlots * kSlotSize]);  // default-initialised: not zeroed
  for (size_t i = 0; i < kSlots; i++) {
    iov[i] = {&rxbuf_[i * kSlotSize], kSlotSize};
    std::memset(&msgs[i], 0, sizeof msgs[i]);
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_name = &from[i];
    msgs[i].msg_hdr.msg_namelen = sizeof from[i];
  }
  for (;;) {
    // Block for the first datagram (wait), then take whatever else is queued.
    int n = recvmmsg(fd_, msgs, kSlots, wait ? MSG_WAITFORONE : MSG_DONTWAIT, nullptr);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        overrun = true;
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      throw SysError(errno, "recvmmsg");
    }
    size_t kept = 0;
    for (int i = 0; i < n; i++) {
      if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) throw SysError(EMSGSIZE, "recvmmsg");
      if (from[i].nl_pid != 0) continue;  // not from the kernel
      if (size_t(i) != kept) std::memmove(&rxbuf_[kept * kSlotSize], &rxbuf_[i * kSlotSize], msgs[i].msg_len);
      rxlen_[kept++] = msgs[i].msg_len;
    }
    if (kept == 0 && n > 0) continue;
    return kept;
  }
}

void NlSocket::batch(std::vector<uint8_t>& buf, const std::vector<size_t>& offsets, std::vector<OpResult>& out,
                     const BatchLimits& limits) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) throw SysError(EBADF, "closed");
  out.assign(offsets.size(), OpResult{});
  size_t i = 0;
  while (i < offsets.size()) {
    // One chunk: consecutive messages, bounded in count and bytes.
    size_t first = i, start = offsets[i], end = start;
    uint32_t base = seq_ + 1;
    while (i < offsets.size() && i - first < limits.maxMessages) {
      nlmsghdr* h = headerAt(buf, offsets[i]);
      size_t next = offsets[i] + align4(h->nlmsg_len);
      if (i > first && next - start > limits.maxBytes) break;
      h->nlmsg_seq = ++seq_;
      h->nlmsg_pid = portid_;
      if (limits.errorsOnly) h->nlmsg_flags &= uint16_t(~NLM_F_ACK);
      end = next;
      i++;
    }
    size_t count = i - first, pending = count;
    if (limits.errorsOnly) {
      // Only the last message is acked; the others answer only on failure. The kernel handles
      // the chunk in order, so once the last ack is in, every earlier answer is too.
      headerAt(buf, offsets[i - 1])->nlmsg_flags |= NLM_F_ACK;
      pending = 1;
    }
    try {
      send(&buf[start], end - start);
    } catch (const SysError& e) {
      for (size_t k = first; k < i; k++) out[k].err = e.err;
      continue;
    }
    // The kernel handles the whole chunk inside sendmsg, so every ack is already queued
    // (or was dropped on overrun): read until all are matched or the queue is empty.
    bool overrun = false;
    while (pending > 0) {
      size_t n = receive(!overrun, overrun);
      if (n == 0) break;
      for (size_t d = 0; d < n; d++) {
        MessageReader r(&rxbuf_[d * kSlotSize], rxlen_[d]);
        Message m;
        while (r.next(m)) {
          uint32_t s = m.hdr.nlmsg_seq - base;
          if (s >= count) continue;  // stale answer to an earlier call
          OpResult& res = out[first + s];
          if (m.hdr.nlmsg_type == NLMSG_ERROR) {
            if (res.err >= 0) continue;
            ErrorInfo info = parseError(m);
            res.err = info.err;
            res.extAck = info.extAck;
            if (info.echo) res.echo.assign(info.echo, info.echo + info.echoLen);
            if (!limits.errorsOnly || s == count - 1) pending--;
          } else if (m.hdr.nlmsg_type != NLMSG_DONE && m.hdr.nlmsg_type != NLMSG_NOOP) {
            const uint8_t* p = m.payload - NLMSG_HDRLEN;
            res.replies.emplace_back(p, p + m.hdr.nlmsg_len);
          }
        }
      }
    }
    if (limits.errorsOnly && pending == 0 && !overrun)
      for (size_t k = first; k < i; k++)
        if (out[k].err < 0) out[k].err = 0;  // not answered before the last ack: succeeded
    if (pending > 0 || (limits.errorsOnly && overrun)) {
      // Answers lost to a receive-buffer overrun: never reported as success.
      for (size_t k = first; k < i; k++)
        if (out[k].err < 0) out[k].err = overrun ? ENOBUFS : ETIMEDOUT;
      if (overrun) growReceiveBuffer();
    }
  }
}

std::vector<std::vector<uint8_t>> NlSocket::dump(std::vector<uint8_t>& buf) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) throw SysError(EBADF, "closed");
  nlmsghdr* h = headerAt(buf, 0);
  for (int attempt = 0; attempt < kDumpRetries; attempt++) {
    std::vector<std::vector<uint8_t>> msgs;
    h->nlmsg_seq = ++seq_;
    h->nlmsg_pid = portid_;
    uint32_t seq = h->nlmsg_seq;
    send(buf.data(), h->nlmsg_len);
    bool done = false, interrupted = false, overrun = false;
    int failure = 0;
    while (!done) {
      size_t n = receive(true, overrun);
      if (n == 0) throw SysError(ETIMEDOUT, "recvmmsg");
      for (size_t d = 0; d < n && !done; d++) {
        MessageReader r(&rxbuf_[d * kSlotSize], rxlen_[d]);
        Message m;
        while (r.next(m)) {
          if (m.hdr.nlmsg_seq != seq) continue;
          if (m.hdr.nlmsg_flags & NLM_F_DUMP_INTR) interrupted = true;
          if (m.hdr.nlmsg_type == NLMSG_DONE) {
            int32_t st = 0;
            if (m.payloadLen >= 4) std::memcpy(&st, m.payload, 4);
            failure = -st;
            done = true;
            break;
          }
          if (m.hdr.nlmsg_type == NLMSG_ERROR) {
            failure = parseError(m).err;
            done = true;
            break;
          }
          const uint8_t* p = m.payload - NLMSG_HDRLEN;
          msgs.emplace_back(p, p + m.hdr.nlmsg_len);
        }
      }
    }
    if (failure) throw SysError(failure, "dump");
    if (overrun) {
      if (!growReceiveBuffer()) throw SysError(ENOBUFS, "dump");
      continue;
    }
    if (!interrupted) return msgs;
    if (attempt + 1 == kDumpRetries) break;
    int waitMs = std::min(1 << attempt, kDumpBackoffMaxMs);
    struct timespec ts = {0, waitMs * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  throw SysError(EINTR, "dump");
}

}  // namespace kip
