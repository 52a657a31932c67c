// Rejected-input accounting with per-reason rate-limited summaries (one line per reason per second).
#include "server/net/reject_log.h"

#include <spdlog/spdlog.h>

#include "shared/log_fields.h"

namespace impulse::server {
namespace {

constexpr std::chrono::seconds kSummaryInterval{1};

// Malformed or hostile traffic is a warning; ordinary client mistakes and races are debug noise.
spdlog::level::level_enum summary_level(RejectReason reason) {
  switch (reason) {
    case RejectReason::StaleId:
    case RejectReason::NotDynamic:
    case RejectReason::StrayDisconnect:
    case RejectReason::SealedWithoutSession:
    case RejectReason::ReceiveError:
      return spdlog::level::debug;
    case RejectReason::ServerFull:
    case RejectReason::ShuttingDown:
    case RejectReason::WorldFull:
      return spdlog::level::info;
    default:
      return spdlog::level::warn;
  }
}

}  // namespace

const char* to_string(RejectReason reason) {
  switch (reason) {
    case RejectReason::Empty: return "empty or truncated datagram";
    case RejectReason::Oversized: return "oversized datagram";
    case RejectReason::BadIdentifier: return "bad file identifier";
    case RejectReason::VerifyFailed: return "FlatBuffers verification failed";
    case RejectReason::VersionMismatch: return "protocol version mismatch";
    case RejectReason::NoMessage: return "empty or unknown message";
    case RejectReason::WrongDirection: return "server-to-client message sent to the server";
    case RejectReason::NotConnected: return "message from an address without a session";
    case RejectReason::StrayDisconnect: return "disconnect from an address without a session";
    case RejectReason::InvalidArgument: return "request with an invalid argument";
    case RejectReason::StaleId: return "request with a stale id";
    case RejectReason::NotDynamic: return "request on a non-dynamic body";
    case RejectReason::WorldFull: return "create refused: world full";
    case RejectReason::ServerFull: return "connect refused: server full";
    case RejectReason::ShuttingDown: return "connect refused: shutting down";
    case RejectReason::BadConnect: return "connect refused: bad name, protocol version or padding";
    case RejectReason::QueueFull: return "request dropped: queue full";
    case RejectReason::EventsDropped: return "collision events dropped";
    case RejectReason::ReceiveError: return "socket receive error";
    case RejectReason::SendError: return "socket send error";
    case RejectReason::BadCookie: return "connect with a bad cookie (challenged again)";
    case RejectReason::BadToken: return "connect refused: missing, invalid or expired token";
    case RejectReason::RateLimited: return "client over its request or byte rate";
    case RejectReason::NotOwner: return "request refused: object owned by another client";
    case RejectReason::QuotaExceeded: return "create refused: client's object quota used up";
    case RejectReason::RequestTooOld: return "request id below the exactly-once window";
    case RejectReason::RequestTooFarAhead: return "request id beyond the exactly-once window";
    case RejectReason::ReadOnly: return "world-changing request to a replay (read-only spectators)";
    case RejectReason::Unauthenticated: return "datagram failed authentication (forged, corrupted or unsealed; dropped)";
    case RejectReason::Replayed: return "sealed datagram replayed or too old (replay window; dropped)";
    case RejectReason::NonFiniteBody: return "body removed by the step's guard: its state was not finite";
    case RejectReason::SealedWithoutSession:
      return "sealed datagram from an address without a session (one that ended; dropped)";
    case RejectReason::Unconfirmed:
      return "session ended unconfirmed: no sealed datagram within 2 s of its ConnectAccepted (half-open)";
    case RejectReason::RestoredNonFinite:
      return "body put back where the step found it, with its contact group: their solve was not finite";
    case RejectReason::ReplayedConnect:
      return "Connect replayed: its key share already made a session (dropped unanswered)";
    case RejectReason::NotController: return "replay control from a spectator that is not a controller";
    case RejectReason::OverBudget:
      return "client over its share of the tick (--tick-budget-ms): its bodies put to sleep and pushes refused, "
             "or its snapshot rounds reduced";
    case RejectReason::TickOutOfRange:
      return "tick out of range: an action or input stamped beyond --max-input-lead-ms, or a raycast's seen_tick "
             "outside --lag-compensation-ms";
    case RejectReason::InputRefused: return "input refused: not the client's body, or more bodies than its input channels";
    case RejectReason::Count: break;
  }
  return "unknown";
}

const char* name_of(RejectReason reason) {
  switch (reason) {
    case RejectReason::Empty: return "Empty";
    case RejectReason::Oversized: return "Oversized";
    case RejectReason::BadIdentifier: return "BadIdentifier";
    case RejectReason::VerifyFailed: return "VerifyFailed";
    case RejectReason::VersionMismatch: return "VersionMismatch";
    case RejectReason::NoMessage: return "NoMessage";
    case RejectReason::WrongDirection: return "WrongDirection";
    case RejectReason::NotConnected: return "NotConnected";
    case RejectReason::StrayDisconnect: return "StrayDisconnect";
    case RejectReason::InvalidArgument: return "InvalidArgument";
    case RejectReason::StaleId: return "StaleId";
    case RejectReason::NotDynamic: return "NotDynamic";
    case RejectReason::WorldFull: return "WorldFull";
    case RejectReason::ServerFull: return "ServerFull";
    case RejectReason::ShuttingDown: return "ShuttingDown";
    case RejectReason::BadConnect: return "BadConnect";
    case RejectReason::QueueFull: return "QueueFull";
    case RejectReason::EventsDropped: return "EventsDropped";
    case RejectReason::ReceiveError: return "ReceiveError";
    case RejectReason::SendError: return "SendError";
    case RejectReason::BadCookie: return "BadCookie";
    case RejectReason::BadToken: return "BadToken";
    case RejectReason::RateLimited: return "RateLimited";
    case RejectReason::NotOwner: return "NotOwner";
    case RejectReason::QuotaExceeded: return "QuotaExceeded";
    case RejectReason::RequestTooOld: return "RequestTooOld";
    case RejectReason::RequestTooFarAhead: return "RequestTooFarAhead";
    case RejectReason::ReadOnly: return "ReadOnly";
    case RejectReason::Unauthenticated: return "Unauthenticated";
    case RejectReason::Replayed: return "Replayed";
    case RejectReason::NonFiniteBody: return "NonFiniteBody";
    case RejectReason::SealedWithoutSession: return "SealedWithoutSession";
    case RejectReason::Unconfirmed: return "Unconfirmed";
    case RejectReason::RestoredNonFinite: return "RestoredNonFinite";
    case RejectReason::ReplayedConnect: return "ReplayedConnect";
    case RejectReason::NotController: return "NotController";
    case RejectReason::OverBudget: return "OverBudget";
    case RejectReason::TickOutOfRange: return "TickOutOfRange";
    case RejectReason::InputRefused: return "InputRefused";
    case RejectReason::Count: break;
  }
  return "Unknown";
}

RejectReason to_reject_reason(wire::DropReason reason) {
  switch (reason) {
    case wire::DropReason::Empty: return RejectReason::Empty;
    case wire::DropReason::Oversized: return RejectReason::Oversized;
    case wire::DropReason::BadIdentifier: return RejectReason::BadIdentifier;
    case wire::DropReason::VerifyFailed: return RejectReason::VerifyFailed;
    case wire::DropReason::VersionMismatch: return RejectReason::VersionMismatch;
    case wire::DropReason::NoMessage: return RejectReason::NoMessage;
    case wire::DropReason::WrongDirection: return RejectReason::WrongDirection;
    case wire::DropReason::None:
    case wire::DropReason::Count: break;
  }
  return RejectReason::VerifyFailed;
}

void RejectLog::note(RejectReason reason, const Endpoint& from, std::string_view detail, TimePoint now) {
  if (spdlog::should_log(spdlog::level::debug)) {
    const std::string address = to_string(from);
    const LogField fields[] = {{"event", std::string_view("rejected")},
                               {"reason", std::string_view(to_string(reason))},
                               {"address", std::string_view(address)}};
    const ScopedLogFields scope(fields);
    spdlog::debug("rejected from {}: {}{}{}", address, to_string(reason), detail.empty() ? "" : ": ",
                  detail);
  }
  note(reason, std::string_view{}, now);
}

void RejectLog::note(RejectReason reason, std::string_view detail, TimePoint now) {
  const auto i = static_cast<size_t>(reason);
  if (i >= kReasons) return;
  if (!detail.empty() && spdlog::should_log(spdlog::level::debug)) {
    const LogField fields[] = {{"event", std::string_view("rejected")}, {"reason", std::string_view(to_string(reason))}};
    const ScopedLogFields scope(fields);
    spdlog::debug("rejected: {}: {}", to_string(reason), detail);
  }
  ++totals_[i];
  if (pending_[i]++ == 0) first_pending_[i] = now;
}

void RejectLog::flush(TimePoint now) {
  for (size_t i = 0; i < kReasons; ++i) {
    if (pending_[i] == 0) continue;
    // The first occurrence after a quiet spell is reported at once; later ones are batched.
    if (last_summary_[i] != TimePoint{} && now - last_summary_[i] < kSummaryInterval) continue;
    const auto reason = static_cast<RejectReason>(i);
    const double span_s = std::chrono::duration<double>(now - first_pending_[i]).count();
    const LogField fields[] = {{"event", std::string_view("rejects")},
                               {"reason", std::string_view(to_string(reason))},
                               {"count", pending_[i]},
                               {"span_s", span_s},
                               {"total", totals_[i]}};
    const ScopedLogFields scope(fields);
    spdlog::log(summary_level(reason), "rejected {} x {} in the last {:.1f} s ({} in total)", pending_[i],
                to_string(reason), span_s, totals_[i]);
    pending_[i] = 0;
    last_summary_[i] = now;
  }
}

}  // namespace impulse::server
