// The tick budget: what one client's bodies may cost of a step. When a step runs over its
// budget, each account (a token's client id, or an anonymous client's address prefix) is charged
// what its bodies cost that step (the share then fits the whole wake-up, step plus events plus
// snapshots, into the tick), and the accounts above their fair share (max-min fairness, by
// water-filling: Bertsekas and Gallager, "Data Networks", 2nd ed., section 6.5.2) are throttled:
// their awake bodies are put to sleep and their pushes refused for a while. Accounts under the
// share (a player with a few bodies) are never touched.
#pragma once

#include <cstdint>
#include <span>

namespace impulse::server {

/// Work units of one step, a deterministic stand-in for its time: each awake body 1, each contact
/// kContactWork (a contact's solve and narrowphase cost about three awake bodies' integration and
/// broadphase on this machine: 4,864 converging spheres, 17.8 ms with 5,156 contacts and 73 ms
/// with 14,489; docs/BENCHMARKS.md, "Tick budget"). A contact is charged to both bodies' owners.
inline constexpr uint32_t kContactWork = 3;

/// No account is throttled below this cost [work units], whatever its fair share: about 64 bodies
/// each in a few contacts. When many players each with a handful of bodies load the server
/// together (the capacity benchmark: 256 clients, about 20 bodies and 80 units each), their
/// shares are equal and all would be over the level; none of them is anyone's attack.
inline constexpr uint64_t kMinShareWork = 256;

/// The floor under the fair share [work units] for a wake-up of `wakeup_ms` in ticks of
/// `tick_ms`, the `streak`-th wake-up in a row over its tick: kMinShareWork while it fits or the
/// streak is within kOverrunGrace, else shrunk in proportion to the overrun and halved for each
/// further overrun in the streak (at least kMinShareWorkOverrun). A wake-up longer than its tick
/// means the server drops steps for everyone: 256 accounts of 19 converging bullet spheres each,
/// every one under the floor, held the step at 60 ms with nobody throttled, and with a floor
/// only proportional to the overrun the wake-ups stayed at 27 ms (p50) for good. A short run of
/// late wake-ups (a stalled machine) does not move it.
uint64_t min_share_work(double wakeup_ms, double tick_ms, uint32_t streak = 1);
/// Wake-ups in a row over the tick before the floor yields: the capacity benchmark (256 players,
/// 5,000 bodies, every one under the floor) overran in short runs on a busy 2-core machine, and
/// a floor shrinking from the first overrun throttled its players 2,000-12,000 times in 20 s.
inline constexpr uint32_t kOverrunGrace = 8;
/// The least the floor shrinks to [work units]: a player's handful of bodies in a few contacts.
inline constexpr uint64_t kMinShareWorkOverrun = 16;

/// The fair-share level for `costs` [work units] so that the accounts' costs, each capped at the
/// level, sum to at most `target`: the largest L with sum(min(cost_i, L)) <= target. Accounts
/// whose cost is above L are over their share. Returns UINT64_MAX when the costs fit as they are.
/// O(n log n) in a scratch copy; the order of `costs` does not matter.
uint64_t fair_share_level(std::span<const uint64_t> costs, uint64_t target);

}  // namespace impulse::server
