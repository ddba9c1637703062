// Netlink's answers as errors: the NLMSG_ERROR payload parsed, and errno names (ipset's
// private codes included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "buffer.h"

namespace kip {

// Parsed NLMSG_ERROR payload: errno (0 = ack) and the kernel's extended-ack text, if any.
struct ErrorInfo {
  int err = 0;
  std::string extAck;
  int64_t extAckOffset = -1;
  // The request echoed in full (only when not NLM_F_CAPPED, e.g. ipset's call_ad() errors).
  const uint8_t* echo = nullptr;
  size_t echoLen = 0;
};
ErrorInfo parseError(const Message& m);

// The symbolic name for an errno, including ipset's private codes (>= 4096).
std::string errnoName(int err);

}  // namespace kip
