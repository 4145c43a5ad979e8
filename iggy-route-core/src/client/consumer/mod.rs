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
//! The adapters run the loop (an async task, a blocking iterator): ask [`ConsumerState::
//! next_step`], submit the request or wait, hand the answer to [`ConsumerState::answer`],
//! which returns the messages to hand out. One request is out at a time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{Call, ClientError};
use crate::request::{Reply, Request, RequestError};
use crate::wire::{
    Consumer, ConsumerGroupAssignment, ConsumerKind, ErrorCode, Identifier, PolledMessage,
    PollingStrategy,
};

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
    /// `Next` starts after the stored offset.
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

/// A message handed out, with the partition it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// The partition.
    pub partition_id: u32,
    /// The message.
    pub message: PolledMessage,
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
}

/// What the adapter does next.
#[derive(Debug)]
pub enum Step {
    /// Submit this request and hand its answer to [`ConsumerState::answer`].
    Submit(Request),
    /// Nothing to ask before this instant (every partition is idle or backing off).
    Wait(Instant),
}

/// What one partition's reading has come to.
#[derive(Debug, Clone, Copy, Default)]
struct Position {
    /// The next offset to read; `None` before the first poll.
    next: Option<u64>,
    /// The last offset handed out.
    handed_out: Option<u64>,
    /// The last offset stored.
    committed: Option<u64>,
    /// Not polled before this instant.
    idle_until: Option<Instant>,
}

/// The request out, and what its answer is for.
#[derive(Debug)]
enum Asked {
    CreateGroup,
    Join,
    Sync,
    Partitions,
    Poll(u32),
    Commit(u32, u64),
}

/// See the module documentation.
#[derive(Debug)]
pub struct ConsumerState {
    config: ConsumerConfig,
    /// The partitions read, in order (a group's assignment, or the topic's).
    partitions: Vec<u32>,
    /// Whether `partitions` is known (synced, or read from the topic).
    known: bool,
    joined: bool,
    group_created: bool,
    generation: Option<u64>,
    cursor: usize,
    positions: BTreeMap<u32, Position>,
    synced_at: Option<Instant>,
    committed_at: Option<Instant>,
    /// After a failed request: nothing is asked before this instant.
    retry_at: Option<Instant>,
    asked: Option<Asked>,
    stats: ConsumerStats,
}

impl ConsumerState {
    /// A consumer that has asked nothing yet.
    pub fn new(config: ConsumerConfig) -> Self {
        let fixed = match (&config.identity, config.partition) {
            (ConsumerIdentity::Consumer(_), Some(partition)) => Some(partition),
            (ConsumerIdentity::Consumer(_) | ConsumerIdentity::Group(_), _) => None,
        };
        let group_created = !config.create_group;
        Self {
            partitions: fixed.into_iter().collect(),
            known: fixed.is_some(),
            joined: false,
            group_created,
            generation: None,
            cursor: 0,
            positions: BTreeMap::new(),
            synced_at: None,
            committed_at: None,
            retry_at: None,
            asked: None,
            stats: ConsumerStats::default(),
            config,
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> ConsumerStats {
        self.stats
    }

    /// Whether the consumer knows what to read: a member has joined and synced its
    /// assignment, a single consumer knows its partitions.
    pub fn is_ready(&self) -> bool {
        self.known && (self.joined || self.group().is_none())
    }

    /// The partitions read now, in order.
    pub fn partitions(&self) -> &[u32] {
        &self.partitions
    }

    /// The consumer as the server knows it.
    pub fn consumer(&self) -> Consumer {
        match &self.config.identity {
            ConsumerIdentity::Consumer(id) => Consumer {
                kind: ConsumerKind::Consumer,
                id: id.clone(),
            },
            ConsumerIdentity::Group(id) => Consumer {
                kind: ConsumerKind::ConsumerGroup,
                id: id.clone(),
            },
        }
    }

    fn group(&self) -> Option<&Identifier> {
        match &self.config.identity {
            ConsumerIdentity::Group(group) => Some(group),
            ConsumerIdentity::Consumer(_) => None,
        }
    }

    /// The next thing to do at `now`. Called only when no request is out.
    pub fn next_step(&mut self, now: Instant) -> Step {
        if let Some(at) = self.retry_at.filter(|at| *at > now) {
            return Step::Wait(at);
        }
        self.retry_at = None;
        let (asked, request) = self.next_request(now);
        match request {
            Some(request) => {
                self.asked = asked;
                Step::Submit(request)
            }
            None => Step::Wait(self.next_wake(now)),
        }
    }

    fn next_request(&self, now: Instant) -> (Option<Asked>, Option<Request>) {
        let (stream, topic) = (self.config.stream.clone(), self.config.topic.clone());
        if let Some(group) = self.group().cloned() {
            if !self.group_created {
                let name = match &group {
                    Identifier::Named(name) => name.as_str().to_owned(),
                    Identifier::Numeric(id) => id.to_string(),
                };
                let call = Call::create_consumer_group(stream, topic, &name);
                return (Some(Asked::CreateGroup), call.ok().map(|c| c.request));
            }
            if !self.joined {
                let call = Call::join_consumer_group(stream, topic, group);
                return (Some(Asked::Join), call.ok().map(|c| c.request));
            }
            let sync_due = !self.known
                || self
                    .synced_at
                    .is_none_or(|at| now >= at + self.config.sync_interval);
            if sync_due {
                let call = Call::sync_consumer_group(stream, topic, group);
                return (Some(Asked::Sync), call.ok().map(|c| c.request));
            }
        } else if !self.known {
            let call = Call::get_topic(stream, topic);
            return (Some(Asked::Partitions), call.ok().map(|c| c.request));
        }
        if let Some((partition, offset)) = self.commit_due(now) {
            let call = Call::store_offset(self.consumer(), stream, topic, partition, offset);
            return (
                Some(Asked::Commit(partition, offset)),
                call.ok().map(|c| c.request),
            );
        }
        let Some(partition) = self.next_partition(now) else {
            return (None, None);
        };
        let position = self.positions.get(&partition).copied().unwrap_or_default();
        let strategy = match position.next {
            Some(offset) => PollingStrategy::Offset(offset),
            None => self.config.strategy,
        };
        let call = Call::poll(
            stream,
            topic,
            Some(partition),
            self.consumer(),
            strategy,
            self.config.batch_length.max(1),
        );
        (Some(Asked::Poll(partition)), call.ok().map(|c| c.request))
    }

    /// The next partition due, round-robin from the cursor.
    fn next_partition(&self, now: Instant) -> Option<u32> {
        let count = self.partitions.len();
        (0..count)
            .map(|step| self.partitions[(self.cursor + step) % count])
            .find(|partition| {
                self.positions
                    .get(partition)
                    .and_then(|p| p.idle_until)
                    .is_none_or(|at| at <= now)
            })
    }

    /// A partition whose offset is to be stored now, with the offset.
    fn commit_due(&self, now: Instant) -> Option<(u32, u64)> {
        let uncommitted = |partition: &u32| {
            let position = self.positions.get(partition)?;
            let handed_out = position.handed_out?;
            (position.committed < Some(handed_out)).then_some((*partition, handed_out))
        };
        match self.config.auto_commit {
            AutoCommit::Never => None,
            // The partition about to be polled again: its last batch has been taken.
            AutoCommit::AfterPoll => self.next_partition(now).and_then(|p| uncommitted(&p)),
            AutoCommit::Interval(every) => {
                let due = self.committed_at.is_none_or(|at| now >= at + every);
                if due {
                    self.partitions.iter().find_map(uncommitted)
                } else {
                    None
                }
            }
        }
    }

    /// When something is next due: a partition's idle wait ending, the next sync, the
    /// next interval commit.
    fn next_wake(&self, now: Instant) -> Instant {
        let idle = self
            .partitions
            .iter()
            .filter_map(|p| self.positions.get(p).and_then(|p| p.idle_until))
            .min();
        let sync = self
            .group()
            .and(self.synced_at)
            .map(|at| at + self.config.sync_interval);
        let commit = match self.config.auto_commit {
            AutoCommit::Interval(every) => self.committed_at.map(|at| at + every),
            AutoCommit::Never | AutoCommit::AfterPoll => None,
        };
        [idle, sync, commit]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + self.config.poll_interval)
            .max(now)
    }

    /// The answer to the request out. Returns the messages to hand out, in order, or the
    /// error to report (the step is asked again after `poll_interval`).
    pub fn answer(
        &mut self,
        now: Instant,
        answer: Result<Reply, ClientError>,
    ) -> Result<Vec<ReceivedMessage>, ClientError> {
        let Some(asked) = self.asked.take() else {
            return Ok(Vec::new());
        };
        let result = self.apply(now, asked, answer);
        if result.is_err() {
            self.retry_at = Some(now + self.config.poll_interval);
        }
        result
    }

    fn apply(
        &mut self,
        now: Instant,
        asked: Asked,
        answer: Result<Reply, ClientError>,
    ) -> Result<Vec<ReceivedMessage>, ClientError> {
        match asked {
            Asked::CreateGroup => {
                match answer {
                    Ok(_) => {}
                    // Created by another member first.
                    Err(error)
                        if server_code(&error).map(ErrorCode::as_u32) == Some(GROUP_NAME_TAKEN) => {
                    }
                    Err(error) => return Err(error),
                }
                self.group_created = true;
            }
            Asked::Join => {
                answer?;
                self.joined = true;
                self.known = false;
                self.stats.joins += 1;
            }
            Asked::Sync => {
                let payload = answer?;
                let assignment = Call::<Option<ConsumerGroupAssignment>>::sync_consumer_group(
                    self.config.stream.clone(),
                    self.config.topic.clone(),
                    self.group().cloned().unwrap_or(Identifier::Numeric(0)),
                )?
                .reply
                .extract(payload)?;
                self.stats.syncs += 1;
                self.synced_at = Some(now);
                match assignment {
                    Some(assignment) => self.assign(assignment),
                    // The membership ended (its link was lost): join again.
                    None => {
                        self.joined = false;
                        self.known = false;
                    }
                }
            }
            Asked::Partitions => {
                let topic = Call::get_topic(self.config.stream.clone(), self.config.topic.clone())?
                    .reply
                    .extract(answer?)?;
                let Some(topic) = topic else {
                    return Err(ClientError::Request(RequestError::Server {
                        code: ErrorCode::TopicIdNotFound,
                    }));
                };
                self.partitions = (0..topic.summary.partitions_count).collect();
                self.known = true;
            }
            Asked::Commit(partition, offset) => {
                self.committed_at = Some(now);
                match answer {
                    Ok(_) => {
                        self.stats.commits += 1;
                        if let Some(position) = self.positions.get_mut(&partition) {
                            position.committed = Some(offset);
                        }
                    }
                    Err(error) => {
                        self.stats.commit_failures += 1;
                        return Err(error);
                    }
                }
            }
            Asked::Poll(partition) => return self.polled(now, partition, answer),
        }
        Ok(Vec::new())
    }

    fn polled(
        &mut self,
        now: Instant,
        partition: u32,
        answer: Result<Reply, ClientError>,
    ) -> Result<Vec<ReceivedMessage>, ClientError> {
        let polled = match answer {
            Ok(Reply::Polled(polled)) => polled,
            Ok(_) => {
                return Err(ClientError::UnexpectedReply {
                    operation: "poll messages",
                });
            }
            Err(error)
                if server_code(&error) == Some(ErrorCode::ConsumerGroupPartitionNotOwned) =>
            {
                self.resync();
                return Ok(Vec::new());
            }
            Err(error) => return Err(error),
        };
        self.stats.polls += 1;
        if polled.partition_id == u32::MAX && polled.messages.is_empty() {
            // Not this member's partition (any more): read the assignment again.
            self.resync();
            return Ok(Vec::new());
        }
        let count = self.partitions.len().max(1);
        self.cursor = (self.cursor + 1) % count;
        let position = self.positions.entry(partition).or_default();
        let Some(last) = polled.messages.last().map(|m| m.offset) else {
            position.idle_until = Some(now + self.config.poll_interval);
            return Ok(Vec::new());
        };
        // Only what lies at or after the position: a message handed out is never handed
        // out again by this consumer.
        let from = position.next.unwrap_or(0);
        position.next = Some(last + 1);
        position.handed_out = Some(last);
        position.idle_until = None;
        let messages: Vec<ReceivedMessage> = polled
            .messages
            .into_iter()
            .filter(|m| m.offset >= from)
            .map(|message| ReceivedMessage {
                partition_id: partition,
                message,
            })
            .collect();
        self.stats.messages += messages.len() as u64;
        Ok(messages)
    }

    fn resync(&mut self) {
        self.stats.resyncs += 1;
        self.known = false;
    }

    /// A new assignment: partitions given up keep nothing; new ones start as configured.
    fn assign(&mut self, assignment: ConsumerGroupAssignment) {
        if self.generation != Some(assignment.generation) {
            self.cursor = 0;
        }
        self.generation = Some(assignment.generation);
        self.positions
            .retain(|partition, _| assignment.partitions.contains(partition));
        self.partitions = assignment.partitions;
        self.known = true;
    }

    /// Offsets handed out and not stored, per partition: what [`Self::commit_call`] stores.
    pub fn uncommitted(&self) -> Vec<(u32, u64)> {
        self.positions
            .iter()
            .filter_map(|(partition, position)| {
                let handed_out = position.handed_out?;
                (position.committed < Some(handed_out)).then_some((*partition, handed_out))
            })
            .collect()
    }

    /// The request storing `offset` of `partition` for this consumer (a caller's commit).
    pub fn commit_call(&self, partition: u32, offset: u64) -> Result<Call<()>, ClientError> {
        Call::store_offset(
            self.consumer(),
            self.config.stream.clone(),
            self.config.topic.clone(),
            partition,
            offset,
        )
    }

    /// A caller's commit of `offset` of `partition` succeeded.
    pub fn committed(&mut self, partition: u32, offset: u64) {
        self.stats.commits += 1;
        if let Some(position) = self.positions.get_mut(&partition) {
            position.committed = position.committed.max(Some(offset));
        }
    }

    /// The request that leaves the group, for a member that joined.
    pub fn leave_call(&self) -> Option<Call<()>> {
        let group = self.group()?.clone();
        if !self.joined {
            return None;
        }
        Call::leave_consumer_group(self.config.stream.clone(), self.config.topic.clone(), group)
            .ok()
    }
}

/// The server's "a group of this name exists" (`ConsumerGroupNameAlreadyExists`).
const GROUP_NAME_TAKEN: u32 = 5004;

fn server_code(error: &ClientError) -> Option<ErrorCode> {
    if let ClientError::Request(RequestError::Server { code }) = error {
        Some(*code)
    } else {
        None
    }
}
