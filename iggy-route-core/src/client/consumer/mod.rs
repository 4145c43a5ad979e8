//! The sans-IO half of a consumer (the SDK's `IggyConsumer`): what to ask next, and what
//! each answer means. A consumer reads one topic, as a single consumer (of one partition or
//! all of them, round-robin) or as a member of a consumer group (of the partitions the
//! group assigns it, round-robin, synced again every `sync_interval` and whenever the
//! server says the member's view is stale). It keeps its own position in each partition,
//! so a message is handed out once however the polls are served; it commits the offsets
//! it handed out as its [`AutoCommit`] policy says, and the router makes each commit on
//! the partition's primary. A partition that answered with nothing is not asked again
//! before `poll_interval` has passed: an idle topic costs a few polls a second, no spin.
//!
//! A group member keeps a position only while the partition stayed its own. The server
//! bumps the group's generation on every membership change, so a partition listed in two
//! syncs whose generations differ by at most one was the member's throughout; listed after
//! a larger jump (the member did not sync while others joined and left), it may have been
//! read and committed by another member in between, so the member's next poll of it starts
//! after the group's stored offset: at or before the member's own position when nobody
//! stored past it (the position stands, and nothing is handed out twice), after it when
//! someone did (the member goes on from there). For the same reason a member stores a batch's offset only
//! once a sync sent after the batch was handed out showed the partition still its own: a
//! member that stopped reading for a while, and got a partition back that someone else
//! committed further meanwhile, never moves the stored offset back. A commit the server
//! fences (the partition went to another member) makes the member sync again; it is not
//! an error for the caller. A partition given up while the member still holds some of it
//! is drained when the server holds it for the member (a pending hand-over: see
//! `state/drain.rs`), and dropped when it moved at once. What a member may see twice is
//! what another member polled and had not stored when the server moved its partition at
//! once: its new owner reads on from the stored offset.
//!
//! The adapters run the loop (an async task, a blocking iterator): ask the state's
//! `next_step`, submit the request or wait, hand the answer to its `answer`, which returns
//! the messages to hand out. One request is out at a time.

use std::time::{Duration, Instant};

use crate::request::Request;
use crate::wire::{HeaderError, Identifier, PolledMessage, PollingStrategy, UserHeaders};

mod builder;
mod claims;
mod state;

pub use builder::ConsumerBuilder;
// The adapters' kit: public for them, not for users.
#[doc(hidden)]
pub use builder::StartConsumer;
#[doc(hidden)]
pub use claims::{GroupClaim, GroupClaims, ResolvedGroup};
#[doc(hidden)]
pub use state::ConsumerState;

/// Who consumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerIdentity {
    /// A single consumer with this id: its offsets are its own.
    Consumer(Identifier),
    /// A member of this consumer group: the group shares out the partitions and the
    /// offsets.
    Group(Identifier),
}

/// When the consumer stores the offsets it has handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoCommit {
    /// Only when the caller commits.
    Never,
    /// Before a partition is polled again, the offset of what its last poll handed out
    /// (the caller has come back for more: Kafka's commit-on-poll), and before a
    /// partition is given up in a rebalance.
    AfterPoll,
    /// Every so often, every partition's offset handed out since the last commit.
    Interval(Duration),
}

/// How a consumer reads.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// The stream.
    pub stream: Identifier,
    /// The topic.
    pub topic: Identifier,
    /// Who consumes.
    pub identity: ConsumerIdentity,
    /// A single consumer's one partition; `None` reads all of them (ignored for a group).
    pub partition: Option<u32>,
    /// Where each partition's first poll starts; later polls go on from what it read.
    /// `Next` starts after the stored offset. A group member always starts after the
    /// group's stored offset, where the group left off; this says only where a partition
    /// the group has stored nothing for starts (`First` and `Next` from its start; for
    /// `Last`, `Offset` and `Timestamp` the member reads the stored offset before the
    /// partition's first poll).
    pub strategy: PollingStrategy,
    /// Most messages per poll.
    pub batch_length: u32,
    /// How long a partition that answered with nothing waits before it is polled again.
    pub poll_interval: Duration,
    /// How a group member re-reads its assignment when nothing else made it.
    pub sync_interval: Duration,
    /// When offsets are stored.
    pub auto_commit: AutoCommit,
    /// Create the group when it does not exist (a group member only).
    pub create_group: bool,
}

impl ConsumerConfig {
    /// A consumer of `topic` with the SDK's defaults: from the stored offset, 100
    /// messages a poll, commit after each poll.
    pub fn new(stream: Identifier, topic: Identifier, identity: ConsumerIdentity) -> Self {
        Self {
            stream,
            topic,
            identity,
            partition: None,
            strategy: PollingStrategy::Next,
            batch_length: 100,
            poll_interval: Duration::from_millis(100),
            sync_interval: Duration::from_secs(1),
            auto_commit: AutoCommit::AfterPoll,
            create_group: true,
        }
    }
}

/// A message handed out, with the partition it came from and how far that partition had
/// gone (the SDK 0.11.0's `ReceivedMessage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// The partition.
    pub partition_id: u32,
    /// The offset of the partition's newest message when the poll that brought this one
    /// was answered, as the node that answered saw it: `current_offset - offset()` is how
    /// far the consumer was behind. The same for every message of one poll.
    pub current_offset: u64,
    /// The message; its own offset is `message.offset`.
    pub message: PolledMessage,
}

impl ReceivedMessage {
    /// The message's offset in its partition: what a commit of it stores.
    pub fn offset(&self) -> u64 {
        self.message.offset
    }

    /// The message's user headers, typed (see [`PolledMessage::headers`]).
    pub fn headers(&self) -> Result<UserHeaders, HeaderError> {
        self.message.headers()
    }
}

/// Counters of one consumer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumerStats {
    /// Polls answered (with messages or without).
    pub polls: u64,
    /// Messages handed out.
    pub messages: u64,
    /// Offsets stored.
    pub commits: u64,
    /// Offset writes that failed.
    pub commit_failures: u64,
    /// Times the group was joined (1 for a member that never lost its membership).
    pub joins: u64,
    /// Syncs of the group's assignment.
    pub syncs: u64,
    /// Polls answered "re-sync": the partition was no longer the member's.
    pub resyncs: u64,
    /// Commits the server fenced: the partition had gone to another member, which reads
    /// on from the group's stored offset.
    pub commits_fenced: u64,
}

/// What the adapter does next.
#[doc(hidden)]
#[derive(Debug)]
pub enum Step {
    /// Submit this request and hand its answer to [`ConsumerState::answer`].
    Submit(Request),
    /// Nothing to ask before this instant (every partition is idle or backing off).
    Wait(Instant),
}
