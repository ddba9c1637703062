// A netlink socket: batched requests with per-op acks, and dumps. No N-API here.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "buffer.h"

namespace kip {

// A failed system call on the socket itself (not a per-op kernel answer).
struct SysError : std::runtime_error {
  SysError(int e, const char* call) : std::runtime_error(call), err(e), syscall(call) {}
  int err;
  const char* syscall;
};

// The kernel's answer to one op of a batch.
struct OpResult {
  int err = -1;  // -1 = no answer yet; 0 = ok; >0 = errno
  std::string extAck;
  std::vector<std::vector<uint8_t>> replies;  // data messages answered to this op (doit GET)
  std::vector<uint8_t> echo;                  // the request as echoed in full by the error, if it was
};

// Limits of one batch chunk (one sendmsg); acks of a chunk must fit the receive buffer.
struct BatchLimits {
  size_t maxMessages = 1024;
  size_t maxBytes = 512 * 1024;
  // Ack only the last message of each chunk: the kernel answers the others only if they fail, so
  // a chunk of N changes costs one ack, not N (each an skb the kernel allocates and queues).
  bool errorsOnly = false;
};

// One netlink socket. Thread-safe: every public call takes `mu` (one owner at a time).
class NlSocket {
 public:
  explicit NlSocket(int protocol);
  ~NlSocket();
  NlSocket(const NlSocket&) = delete;
  NlSocket& operator=(const NlSocket&) = delete;

  // Sends the messages (starting at `offsets` in `buf`; seq and pid are patched here) in as
  // few sendmsg calls as the limits allow and fills one OpResult per message.
  void batch(std::vector<uint8_t>& buf, const std::vector<size_t>& offsets, std::vector<OpResult>& out,
             const BatchLimits& limits);

  // Runs one dump request (the first message of `buf`) and returns every data message.
  // Retries on NLM_F_DUMP_INTR and receive-buffer overruns, bounded. Throws SysError.
  std::vector<std::vector<uint8_t>> dump(std::vector<uint8_t>& buf);

  uint32_t portId() const { return portid_; }
  void close();

 private:
  void open();
  void send(const uint8_t* p, size_t len);
  // Receives up to a batch of datagrams; returns their count (0 on timeout). Sets `overrun` on ENOBUFS.
  size_t receive(bool wait, bool& overrun);
  bool growReceiveBuffer();

  std::mutex mu_;
  int protocol_;
  int fd_ = -1;
  uint32_t portid_ = 0;
  uint32_t seq_ = 0;
  int rcvbuf_ = 8 << 20;
  // kSlots datagram slots, allocated on the first receive and never zeroed: only the pages the
  // kernel writes into are ever touched (a page fault is costly in UML; most sockets see acks).
  std::unique_ptr<uint8_t[]> rxbuf_;
  std::vector<size_t> rxlen_;
};

}  // namespace kip
