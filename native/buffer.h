// The one message builder and the one attribute reader.
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace kip {

// A malformed message (from the kernel or from a caller): never a crash, always this.
struct CodecError : std::runtime_error {
  explicit CodecError(const std::string& m) : std::runtime_error(m) {}
};

constexpr size_t align4(size_t n) { return (n + 3u) & ~size_t(3); }

// Appends netlink messages and attributes to a growable buffer bounded by `limit`.
// Overflow is sticky: once set, further writes are ignored and ok() is false.
class Builder {
 public:
  explicit Builder(size_t limit = 64u << 20) : limit_(limit) {}

  bool ok() const { return !overflow_; }
  size_t size() const { return buf_.size(); }
  std::vector<uint8_t>& bytes() { return buf_; }

  // Starts a message; returns its offset for endMessage().
  size_t beginMessage(uint16_t type, uint16_t flags, uint32_t seq, uint32_t pid) {
    size_t at = reserve(NLMSG_HDRLEN);
    if (overflow_) return at;
    nlmsghdr h{};
    h.nlmsg_type = type;
    h.nlmsg_flags = flags;
    h.nlmsg_seq = seq;
    h.nlmsg_pid = pid;
    std::memcpy(&buf_[at], &h, sizeof h);
    return at;
  }
  void endMessage(size_t at) {
    if (overflow_) return;
    uint32_t len = uint32_t(buf_.size() - at);
    std::memcpy(&buf_[at], &len, sizeof len);
  }

  // Raw zeroed space (fixed headers); returns its offset.
  size_t reserve(size_t n) {
    size_t at = buf_.size();
    if (overflow_ || at + align4(n) > limit_) {
      overflow_ = true;
      return at;
    }
    buf_.resize(at + align4(n), 0);
    return at;
  }
  uint8_t* at(size_t offset) { return &buf_[offset]; }

  void put(uint16_t type, const void* data, size_t len) {
    if (len > 0xffff - NLA_HDRLEN) {
      overflow_ = true;
      return;
    }
    size_t at = reserve(NLA_HDRLEN + len);
    if (overflow_) return;
    nlattr a{uint16_t(NLA_HDRLEN + len), type};
    std::memcpy(&buf_[at], &a, sizeof a);
    if (len) std::memcpy(&buf_[at + NLA_HDRLEN], data, len);
  }
  size_t beginNest(uint16_t type) {
    size_t at = reserve(NLA_HDRLEN);
    if (!overflow_) {
      nlattr a{0, type};
      std::memcpy(&buf_[at], &a, sizeof a);
    }
    return at;
  }
  void endNest(size_t at) {
    if (overflow_) return;
    size_t len = buf_.size() - at;
    if (len > 0xffff) {
      overflow_ = true;
      return;
    }
    uint16_t l = uint16_t(len);
    std::memcpy(&buf_[at], &l, sizeof l);
  }

 private:
  std::vector<uint8_t> buf_;
  size_t limit_;
  bool overflow_ = false;
};

// One attribute as seen by the reader.
struct Attr {
  uint16_t type;  // flags stripped
  uint16_t rawType;
  const uint8_t* data;
  size_t len;
};

// Iterates the attributes in [p, p+len) with every length checked.
class AttrReader {
 public:
  AttrReader(const uint8_t* p, size_t len) : p_(p), end_(p + len) {}
  // Returns false at the end; throws CodecError on a truncated or overlong attribute.
  bool next(Attr& out) {
    if (p_ == end_) return false;
    size_t left = size_t(end_ - p_);
    if (left < NLA_HDRLEN) throw CodecError("truncated attribute header");
    nlattr a;
    std::memcpy(&a, p_, sizeof a);
    if (a.nla_len < NLA_HDRLEN || a.nla_len > left) throw CodecError("attribute length out of bounds");
    out.rawType = a.nla_type;
    out.type = a.nla_type & NLA_TYPE_MASK;
    out.data = p_ + NLA_HDRLEN;
    out.len = a.nla_len - NLA_HDRLEN;
    size_t step = align4(a.nla_len);
    p_ = step >= left ? end_ : p_ + step;
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// One netlink message inside a received buffer.
struct Message {
  nlmsghdr hdr;
  const uint8_t* payload;
  size_t payloadLen;
};

// Iterates the netlink messages in a datagram with every length checked.
class MessageReader {
 public:
  MessageReader(const uint8_t* p, size_t len) : p_(p), end_(p + len) {}
  bool next(Message& out) {
    if (p_ == end_) return false;
    size_t left = size_t(end_ - p_);
    if (left < NLMSG_HDRLEN) throw CodecError("truncated netlink header");
    std::memcpy(&out.hdr, p_, sizeof out.hdr);
    if (out.hdr.nlmsg_len < NLMSG_HDRLEN || out.hdr.nlmsg_len > left)
      throw CodecError("netlink message length out of bounds");
    out.payload = p_ + NLMSG_HDRLEN;
    out.payloadLen = out.hdr.nlmsg_len - NLMSG_HDRLEN;
    size_t step = align4(out.hdr.nlmsg_len);
    p_ = step >= left ? end_ : p_ + step;
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace kip
