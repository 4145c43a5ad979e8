//! A deterministic simulation of iggy-route against the test cluster's node model.
//!
//! Several routers (the core [`iggy_route_core::Router`], no adapter, each with its own
//! seed) and one three-node cluster (the sans-IO model of `crate::cluster`) are joined by a
//! seeded simulated network ([`network`]) in simulated time: a fixed base `Instant` plus a
//! simulated offset; the loop never reads the clock. Each step applies exactly one input,
//! the earliest of the next delivery, the next fault, the next submit and the earliest
//! `poll_timeout` of any router, in the manner of quinn-proto's `Pair::step`. A seeded
//! fault schedule ([`faults`]) cuts connections, stops and restarts nodes, moves partition
//! primaries and the metadata leader, slows nodes down and switches the routing commands
//! off (some seeds run without them throughout). Each router submits a bounded workload of
//! sends ([`workload`]) whose payloads name their router and batch, and of polls, offset
//! writes and admin requests ([`ops`]), one of which adds a partition to the topic.
//!
//! On half the seeds some routers also run real members of the consumer group, the core's
//! consumer state machine driven as the adapters drive it ([`members`]); every hand-out
//! and every stored group offset is checked against the group's promise (`group_check.rs`).
//!
//! After every step the invariants of `drain.rs`, `ledger.rs`, `wiretap.rs` and
//! `group_check.rs` are checked; a violation panics with the seed and the step, and [`run`] with that seed
//! replays the run exactly. Everything is bounded: the steps of a run, the simulated time,
//! the workload and the fault schedule.

mod drain;
mod engine;
pub mod faults;
pub mod group_check;
pub mod keyed_check;
pub mod ledger;
mod memberrun;
pub mod members;
pub mod network;
pub mod nodes;
pub mod ops;
pub mod opsbook;
mod opsrun;
pub mod pauses;
pub mod rng;
pub mod scenario;
pub mod trace;
pub mod wiretap;
pub mod workload;

use std::time::Duration;

/// What one seed did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimReport {
    /// The seed.
    pub seed: u64,
    /// Steps taken.
    pub steps: u64,
    /// Simulated time at the end.
    pub simulated: Duration,
    /// Hash of the whole trace: the same seed gives the same hash.
    pub trace_hash: u64,
    /// Sends accepted by `submit`.
    pub submitted: u64,
    /// Sends refused by `submit` (`QueueFull`).
    pub rejected: u64,
    /// Sends acknowledged.
    pub acked: u64,
    /// Sends that ended `OutcomeUnknown` or `TimedOut`.
    pub unknown: u64,
    /// Sends that ended with another error.
    pub failed: u64,
    /// Refusals (status 58) the routers received.
    pub refusals: u64,
    /// Refused batches written again to the node that refused them, after news.
    pub returns_after_refusal: u64,
    /// Times a session moved.
    pub session_moves: u64,
    /// The longest lane any router had, in percent of its bound.
    pub lane_peak_percent: u64,
    /// The most requests any router held, in percent of its bound.
    pub pending_peak_percent: u64,
    /// Polls that succeeded.
    pub polls_ok: u64,
    /// Messages those polls returned.
    pub polled: u64,
    /// Offset writes that succeeded.
    pub stores_ok: u64,
    /// Admin requests that succeeded.
    pub admin_ok: u64,
    /// Polls, offset writes and admin requests that ended with an error.
    pub ops_failed: u64,
    /// Acked sends to the partition added during the run.
    pub new_partition_acks: u64,
    /// Syncs of the consumer group answered with an assignment.
    pub syncs_as_member: u64,
    /// Group polls that read messages.
    pub group_polls_read: u64,
    /// Group polls answered with the re-sync poll.
    pub group_resyncs: u64,
    /// Requests the cluster evicted the session for, each ended by its eviction.
    pub evicted_requests: u64,
    /// Memberships the routers lost with their member links.
    pub memberships_lost: u64,
    /// What the adversarial nodes did.
    pub adversary: crate::cluster::adversary::AdversaryCounts,
    /// Frames the routers wrote again after a 57.
    pub replays: u64,
    /// Links the routers closed because a node broke the protocol.
    pub protocol_violations: u64,
    /// Sends the routers wrote merged behind another send of their partition.
    pub coalesced: u64,
    /// Refusals whose view the routers followed to the node it named.
    pub refusal_views_followed: u64,
    /// Balanced sends the routers moved past a partition that waited or queued long.
    pub balanced_passed_over: u64,
    /// Of those, the sends that passed over a partition waiting for its primary.
    pub balanced_passed_stalled: u64,
    /// Consumer-group members built (`members.rs`).
    pub members_built: u64,
    /// Messages the members handed out.
    pub member_handouts: u64,
    /// Of those, messages handed out again inside the re-delivery window.
    pub member_redeliveries: u64,
    /// Offsets the members stored.
    pub member_commits: u64,
    /// Member commits the cluster fenced (`ConsumerStats::commits_fenced`).
    pub member_commits_fenced: u64,
    /// Members dropped without a shutdown (planned, or a failed or overlong shutdown).
    pub members_dropped: u64,
    /// Members that shut down: committed, then left.
    pub members_shut_down: u64,
    /// Second consumers of a router's group refused with `GroupConsumerExists`.
    pub second_consumers_refused: u64,
    /// Keyed batches of routers other than the one that added the partition, submitted
    /// after the change committed, whose partition tells the count they resolved against
    /// (`keyed_check.rs`).
    pub keyed_after_change: u64,
    /// Of those, the ones resolved against the old count.
    pub keyed_stale: u64,
    /// Of those, the ones submitted more than `keyed_check::STALE_LATE` after the change.
    pub keyed_stale_late: u64,
    /// The longest from the change to the submit of a stale keyed batch.
    pub keyed_stale_max: Duration,
    /// `PartitionsChanged` events the routers emitted.
    pub partitions_changed_events: u64,
    /// Moves of a router's keyed batches from one count to another, each announced by its
    /// event.
    pub keyed_changes_announced: u64,
    /// Moves of a router's keyed batches from one count to another without the event
    /// (`keyed_check::SILENT_CHANGE_FAILS`).
    pub keyed_changes_silent: u64,
    /// Member steps that asked, a second time in a row, to wait until now: an adapter's
    /// loop would spin (see `memberrun.rs`).
    pub member_spin_waits: u64,
    /// Pauses of a node that ended with its resume (`pauses.rs`).
    pub pauses: u64,
    /// Writes a paused node read after its resume.
    pub paused_reads: u64,
    /// Of those, writes on links their router had closed while the node was silent.
    pub paused_reads_closed: u64,
}

/// How to run a seed.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Print every trace line to stderr.
    pub verbose: bool,
}

/// Run the simulation of `seed`, checking every invariant after every step.
///
/// # Panics
/// On any violated invariant, with the seed, the step and the end of the trace.
pub fn run(seed: u64) -> SimReport {
    run_with(seed, RunOptions::default())
}

/// [`run`] with options.
///
/// # Panics
/// As [`run`].
pub fn run_with(seed: u64, options: RunOptions) -> SimReport {
    engine::Simulation::new(seed, options.verbose).run()
}
