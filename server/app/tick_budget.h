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

// The send share: what one session's snapshots and events may cost of a wake-up. A session's
// cost is the object indices its last snapshot write visited (everything that changed in its
// area, plus its backlog of due records), and its events grow with the same area. 257 sessions
// whose areas cover a crowd of 4,864 flying bodies cost 25 ms of snapshots and 9 ms of events a
// tick, with the step at 5 ms: no account's bodies were over their share of the step, and the
// server dropped steps for everyone. When a wake-up passes kSendShareLoad of its ticks, the
// sessions above the fair share of the sends (max-min, as the tick budget) get one in
// send_every_for(cost, level) of their snapshot and event rounds; events stay queued and reliable.

/// The part of the tick a wake-up aims for once sends are shared: the rest absorbs the noise of a
/// 2-core machine (the tick p99 target is the whole tick).
inline constexpr double kSendShareLoad = 0.75;
/// No session's sends are reduced below this cost [visits per write], whatever its share: a
/// player's area of 20 m holds a few hundred bodies (the capacity benchmark's bots: 20 m areas
/// about 20-body piles).
inline constexpr uint64_t kMinSendShareVisits = 1024;
/// The most rounds a session's sends are spread over: 1 in 8 is 3.75 snapshots/s at the default
/// 30 Hz, still enough to show the session its own bodies and keep its acks flowing.
inline constexpr uint32_t kMaxSendEvery = 8;

/// One in how many rounds a session of `cost` visits gets, with the share at `level`: 1 when
/// cost <= level, else ceil(cost / level), at most kMaxSendEvery.
uint32_t send_every_for(uint64_t cost, uint64_t level);

/// The fair share of the sends [visits per write] when sessions of `costs`, each now served one
/// round in `every[i]`, must cost `fits` times what they cost now (fits = the tick time left for
/// sends over the sends' time): the level L with sum(min(cost_i, L)) = fits * sum(cost_i /
/// every[i]), at least kMinSendShareVisits. `costs` and `every` have the same size.
uint64_t send_share_level(std::span<const uint64_t> costs, std::span<const uint32_t> every, double fits);

}  // namespace impulse::server
