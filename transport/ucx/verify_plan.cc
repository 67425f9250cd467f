// transport/ucx/verify_plan.cc: descriptor exchange and the send/recv protocol as plan
// steps.
#include "transport/ucx/verify_plan.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mxmaca::transport::ucx {
namespace {

// A non-null address for zero-byte transfers.
char kEmpty[1];

}  // namespace

void AddDescriptorExchange(const Members& m, const Descriptor& mine, Plan* plan) {
  // Every member sends its descriptor to every other member.
  const int n = m.size();
  const std::string encoded = mine.Encode();
  char* out = plan->Scratch(static_cast<int64_t>(encoded.size()));
  std::memcpy(out, encoded.data(), encoded.size());
  const int64_t slot = Descriptor::MaxEncodedSize(n);
  char* slots = plan->Scratch(slot * n);
  Step step;
  for (int k = 0; k < n; ++k) {
    if (k == m.me) continue;
    Xfer s;
    s.peer = m.ranks[k];
    s.buffer = out;
    s.bytes = static_cast<int64_t>(encoded.size());
    step.sends.push_back(s);
    Xfer r;
    r.peer = m.ranks[k];
    r.buffer = slots + k * slot;
    r.bytes = slot;
    r.exact_length = false;
    step.recvs.push_back(r);
  }
  // The verdict: decode every member's descriptor; the same on every member.
  step.after = [plan, mine, n, slots, slot]() -> absl::Status {
    std::vector<Descriptor> all(n);
    const std::vector<Xfer>& recvs = plan->steps[0].recvs;  // members k != me, in order
    size_t next = 0;
    for (int k = 0; k < n; ++k) {
      if (next < recvs.size() && recvs[next].buffer == slots + k * slot) {
        auto d = Descriptor::Decode(slots + k * slot, recvs[next].received);
        ++next;
        if (!d.ok()) {
          return absl::FailedPreconditionError(
              absl::StrCat("UcxCommunicator: mismatch on ", mine.info.group_name, " seq ",
                           mine.info.sequence, ": member ", k, " sent a ", d.status().message()));
        }
        all[k] = std::move(*d);
      } else {
        all[k] = mine;  // this rank's own slot
      }
    }
    return VerifyCollective(all);
  };
  plan->steps.push_back(std::move(step));
}

void BuildPointToPoint(const Descriptor& mine, const void* send_buffer, void* recv_buffer,
                       bool verify, Plan* plan) {
  const int peer = mine.info.peer;
  const bool send = mine.info.op == CollectiveOp::kSend;
  const bool valid = mine.invalid.empty();
  auto data_xfer = [&](void* buffer, int64_t bytes) {
    Xfer x;
    x.peer = peer;
    x.tag_step = 1;
    x.buffer = (buffer == nullptr || bytes == 0) ? kEmpty : buffer;
    x.bytes = bytes;
    return x;
  };
  if (!verify) {
    Step step;
    if (send) {
      step.sends.push_back(data_xfer(const_cast<void*>(send_buffer), mine.info.bytes));
    } else {
      step.recvs.push_back(data_xfer(recv_buffer, mine.info.bytes));
    }
    plan->steps.push_back(std::move(step));
    return;
  }
  const std::string encoded = mine.Encode();
  const int64_t max_desc = Descriptor::MaxEncodedSize(2);
  if (send) {
    // One step: descriptor (tag 0) and data (tag 1) out, the receiver's verdict (tag 2) in.
    char* desc = plan->Scratch(static_cast<int64_t>(encoded.size()));
    std::memcpy(desc, encoded.data(), encoded.size());
    char* verdict = plan->Scratch(1 + max_desc);
    Step step;
    Xfer d;
    d.peer = peer;
    d.tag_step = 0;
    d.buffer = desc;
    d.bytes = static_cast<int64_t>(encoded.size());
    step.sends.push_back(d);
    step.sends.push_back(data_xfer(const_cast<void*>(send_buffer), valid ? mine.info.bytes : 0));
    Xfer v;
    v.peer = peer;
    v.tag_step = 2;
    v.buffer = verdict;
    v.bytes = 1 + max_desc;
    v.exact_length = false;
    step.recvs.push_back(v);
    step.after = [plan, mine, verdict]() -> absl::Status {
      const int64_t got = plan->steps[0].recvs[0].received;
      if (got >= 1 && verdict[0] == 1) return absl::OkStatus();
      auto theirs = Descriptor::Decode(verdict + 1, got - 1);
      if (!theirs.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("UcxCommunicator: ", mine.info.ToString(),
                         ": receiver's verdict unreadable: ", theirs.status().message()));
      }
      absl::Status s = VerifyPointToPoint(mine, *theirs);
      return s.ok() ? absl::InternalError("UcxCommunicator: receiver refused a matching send") : s;
    };
    plan->steps.push_back(std::move(step));
    return;
  }
  // Receiver: step 0 takes the sender's descriptor and decides; step 1 receives the data
  // (into the caller's buffer, or drains it on a mismatch) and answers with the verdict.
  struct State {
    absl::Status verdict;
    std::string answer;
  };
  auto state = std::make_shared<State>();
  char* desc = plan->Scratch(max_desc);
  Step first;
  Xfer d;
  d.peer = peer;
  d.tag_step = 0;
  d.buffer = desc;
  d.bytes = max_desc;
  d.exact_length = false;
  first.recvs.push_back(d);
  void* user = recv_buffer;
  first.after = [plan, mine, desc, state, user, valid]() -> absl::Status {
    Xfer& data = plan->steps[1].recvs[0];
    Xfer& answer = plan->steps[1].sends[0];
    auto sender = Descriptor::Decode(desc, plan->steps[0].recvs[0].received);
    int64_t incoming = 0;
    if (!sender.ok()) {
      state->verdict = absl::FailedPreconditionError(
          absl::StrCat("UcxCommunicator: ", mine.info.ToString(),
                       ": sender's descriptor unreadable: ", sender.status().message()));
    } else {
      state->verdict = VerifyPointToPoint(*sender, mine);
      incoming = sender->invalid.empty() ? sender->info.bytes : 0;
    }
    if (state->verdict.ok() && valid) {
      data.buffer = (user == nullptr || mine.info.bytes == 0) ? kEmpty : user;
      data.bytes = mine.info.bytes;
      state->answer = std::string(1, '\1');
    } else {
      data.buffer = plan->Scratch(incoming);
      data.bytes = incoming;
      data.exact_length = false;
      state->answer = std::string(1, '\0') + mine.Encode();
    }
    answer.buffer = state->answer.data();
    answer.bytes = static_cast<int64_t>(state->answer.size());
    return absl::OkStatus();
  };
  plan->steps.push_back(std::move(first));
  Step second;
  second.recvs.push_back(data_xfer(nullptr, 0));
  Xfer v;
  v.peer = peer;
  v.tag_step = 2;
  second.sends.push_back(v);
  second.after = [state]() { return state->verdict; };
  plan->steps.push_back(std::move(second));
}

}  // namespace mxmaca::transport::ucx
