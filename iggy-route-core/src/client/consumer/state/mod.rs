//! [`ConsumerState`]: what a consumer asks next and what each answer means (see the
//! module documentation of `client::consumer` for the rules of a group member).

mod answers;

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use super::{
    AutoCommit, ConsumerConfig, ConsumerIdentity, ConsumerStats, GroupClaim, GroupClaims,
    ReceivedMessage, Step,
};
use crate::client::{Call, ClientError};
use crate::request::Request;
use crate::wire::{
    Consumer, ConsumerGroupAssignment, ConsumerGroupRef, ConsumerKind, Identifier, PollingStrategy,
};

/// What one partition's reading has come to.
#[derive(Debug, Clone, Copy, Default)]
struct Position {
    /// The next offset to read; `None` before the first poll.
    next: Option<u64>,
    /// The last offset handed out: taken by the caller, not only polled.
    handed_out: Option<u64>,
    /// The last offset stored.
    committed: Option<u64>,
    /// Not polled before this instant.
    idle_until: Option<Instant>,
    /// The first poll starts after the group's stored offset, not where the configured
    /// strategy says: the partition was taken over from another member.
    from_stored: bool,
    /// [`ConsumerState::takes`] when the caller last took a message of it.
    taken_at: u64,
    /// The partition may have been another member's since the member last read it: the
    /// next poll starts after the group's stored offset, to learn whether someone else
    /// stored past this position, and nothing is committed before its answer.
    verify: bool,
}

impl Position {
    /// The offset handed out and not stored yet, if any (none while it is verified: it may
    /// lie behind what another member stored).
    fn uncommitted(&self) -> Option<u64> {
        let handed_out = self.handed_out?;
        (!self.verify && self.committed < Some(handed_out)).then_some(handed_out)
    }
}

/// A member's assignment as a sync showed it.
#[derive(Debug, Clone)]
struct View {
    generation: u64,
    partitions: Vec<u32>,
}

impl View {
    /// Whether `partition`, listed in `next`, stayed this member's from this view to it:
    /// listed in both, with no other membership change in between (the server bumps the
    /// generation once per change).
    fn kept(&self, next: &ConsumerGroupAssignment, partition: u32) -> bool {
        (next.generation == self.generation || next.generation == self.generation + 1)
            && self.partitions.contains(&partition)
    }
}

/// The request out, and what its answer is for.
#[derive(Debug)]
enum Asked {
    CreateGroup,
    Join,
    /// A sync, sent when [`ConsumerState::handouts`] and [`ConsumerState::takes`] were
    /// these.
    Sync(u64, u64),
    Partitions,
    Poll(u32),
    Commit(u32, u64),
}

/// See the module documentation of `client::consumer`.
#[derive(Debug)]
pub struct ConsumerState {
    config: ConsumerConfig,
    /// The partitions read, in order (a group's assignment, or the topic's).
    partitions: Vec<u32>,
    /// Whether `partitions` is known (synced, or read from the topic).
    known: bool,
    joined: bool,
    group_created: bool,
    /// The assignment of the last sync of this membership.
    view: Option<View>,
    /// Whether an assignment was ever synced: partitions listed later were another
    /// member's and start from the stored offset.
    assigned_before: bool,
    cursor: usize,
    positions: BTreeMap<u32, Position>,
    /// Batches handed out so far: a count that orders hand-outs and syncs without a clock.
    handouts: u64,
    /// Every batch handed out at or before this count was confirmed the member's by a sync
    /// sent after it: only such a batch's offset is stored.
    confirmed: u64,
    /// Messages the caller took so far: a count that orders takes and syncs.
    takes: u64,
    /// Every message taken at or before this count is confirmed the member's by a sync
    /// sent after it: only such a message's offset is stored (the caller may be slow to
    /// come back for more, and its partition may have changed hands meanwhile).
    confirmed_takes: u64,
    /// The caller asked to store everything handed out.
    commit_requested: bool,
    /// Messages polled and not taken by the caller yet, in order, each with the count of
    /// [`ConsumerState::handouts`] its poll was answered at.
    ready: VecDeque<(u64, ReceivedMessage)>,
    synced_at: Option<Instant>,
    committed_at: Option<Instant>,
    /// After a failed request: nothing is asked before this instant.
    retry_at: Option<Instant>,
    asked: Option<Asked>,
    stats: ConsumerStats,
    /// This consumer's claim of its group on its client.
    claim: Option<GroupClaim>,
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
            view: None,
            assigned_before: false,
            cursor: 0,
            positions: BTreeMap::new(),
            handouts: 0,
            confirmed: 0,
            takes: 0,
            confirmed_takes: 0,
            commit_requested: false,
            ready: VecDeque::new(),
            synced_at: None,
            committed_at: None,
            retry_at: None,
            asked: None,
            stats: ConsumerStats::default(),
            claim: None,
            config,
        }
    }

    /// [`Self::new`] for a consumer of a client whose consumers hold `claims`: a group
    /// member claims its group first, refused with [`ClientError::GroupConsumerExists`]
    /// while another consumer of the client holds it. Dropped while it may be a member,
    /// the consumer asks the client to end the membership.
    pub fn claiming(config: ConsumerConfig, claims: &GroupClaims) -> Result<Self, ClientError> {
        let claim = match &config.identity {
            ConsumerIdentity::Group(group) => Some(claims.claim(ConsumerGroupRef {
                stream: config.stream.clone(),
                topic: config.topic.clone(),
                group: group.clone(),
            })?),
            ConsumerIdentity::Consumer(_) => None,
        };
        let mut state = Self::new(config);
        state.claim = claim;
        Ok(state)
    }

    /// The configuration.
    pub fn config(&self) -> &ConsumerConfig {
        &self.config
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
            None if self.commit_requested => {
                // Everything handed out is stored.
                self.commit_requested = false;
                Step::Wait(now)
            }
            None => Step::Wait(self.next_wake(now)),
        }
    }

    /// The next message polled and not taken yet, now handed out: a commit stores it and
    /// what came before it, never what was polled after it. Take every message before
    /// asking for the next step, so that `AfterPoll` commits a partition's whole batch.
    ///
    /// A group member hands a poll's messages out only once a sync sent after the poll was
    /// answered shows their partition still its own, and while no sync is due (the caller
    /// was away): until then this is `None`, and the next step syncs. Messages of a
    /// partition that may have changed hands since they were polled (the poll was slow, or
    /// answered by a node that had not applied a rebalance) are dropped and read again
    /// after the stored offset, so that what another member read and committed meanwhile
    /// is not handed out again.
    pub fn next_message(&mut self, now: Instant) -> Option<ReceivedMessage> {
        if self.group().is_some() && (self.sync_due(now) || self.unconfirmed_ready()) {
            return None;
        }
        let (_, message) = self.ready.pop_front()?;
        self.takes += 1;
        if let Some(position) = self.positions.get_mut(&message.partition_id) {
            position.handed_out = position.handed_out.max(Some(message.message.offset));
            position.taken_at = self.takes;
        }
        Some(message)
    }

    /// Asks [`Self::next_step`] to store every offset handed out and not stored, before
    /// anything else; [`Self::commit_requested`] says when that is done.
    pub fn request_commit(&mut self) {
        self.commit_requested = true;
    }

    /// Whether a commit the caller asked for is still being made.
    pub fn commit_requested(&self) -> bool {
        self.commit_requested
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
            if self.sync_due(now) || self.unconfirmed_ready() {
                return self.sync_request(group);
            }
        } else if !self.known {
            let call = Call::get_topic(stream, topic);
            return (Some(Asked::Partitions), call.ok().map(|c| c.request));
        }
        if let Some((partition, offset)) = self.commit_due(now) {
            if let Some(group) = self.group().cloned()
                && self
                    .positions
                    .get(&partition)
                    .is_some_and(|p| p.taken_at > self.confirmed_takes)
            {
                // Stored only once a sync sent after the caller took it shows it still ours.
                return self.sync_request(group);
            }
            return (
                Some(Asked::Commit(partition, offset)),
                self.commit_call(partition, offset).ok().map(|c| c.request),
            );
        }
        if self.commit_requested {
            return (None, None);
        }
        let Some(partition) = self.next_partition(now) else {
            return (None, None);
        };
        let position = self.positions.get(&partition).copied().unwrap_or_default();
        let strategy = match position.next {
            _ if position.verify => PollingStrategy::Next,
            Some(offset) => PollingStrategy::Offset(offset),
            None if position.from_stored => PollingStrategy::Next,
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

    /// Whether the next message waits for a sync to confirm its partition.
    fn unconfirmed_ready(&self) -> bool {
        self.ready
            .front()
            .is_some_and(|(answered_at, _)| *answered_at > self.confirmed)
    }

    /// Whether a group member's assignment is to be read again.
    fn sync_due(&self, now: Instant) -> bool {
        !self.known
            || self
                .synced_at
                .is_none_or(|at| now >= at + self.config.sync_interval)
    }

    fn sync_request(&self, group: Identifier) -> (Option<Asked>, Option<Request>) {
        let (stream, topic) = (self.config.stream.clone(), self.config.topic.clone());
        let call = Call::sync_consumer_group(stream, topic, group);
        (
            Some(Asked::Sync(self.handouts, self.takes)),
            call.ok().map(|c| c.request),
        )
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
            let offset = self.positions.get(partition)?.uncommitted()?;
            Some((*partition, offset))
        };
        if self.commit_requested {
            return self.partitions.iter().find_map(uncommitted);
        }
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
            // Only when there is something to store: else the wait would end at once,
            // again and again.
            AutoCommit::Interval(every) if !self.uncommitted().is_empty() => {
                self.committed_at.map(|at| at + every)
            }
            AutoCommit::Interval(_) | AutoCommit::Never | AutoCommit::AfterPoll => None,
        };
        [idle, sync, commit]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + self.config.poll_interval)
            .max(now)
    }

    /// Offsets handed out and not stored, per partition.
    pub fn uncommitted(&self) -> Vec<(u32, u64)> {
        self.positions
            .iter()
            .filter_map(|(partition, position)| Some((*partition, position.uncommitted()?)))
            .collect()
    }

    /// The request storing `offset` of `partition` for this consumer.
    pub fn commit_call(&self, partition: u32, offset: u64) -> Result<Call<()>, ClientError> {
        Call::store_offset(
            self.consumer(),
            self.config.stream.clone(),
            self.config.topic.clone(),
            partition,
            offset,
        )
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

    /// The leave of [`Self::leave_call`] succeeded: the consumer is no member now.
    pub fn left(&mut self) {
        self.joined = false;
    }

    /// Whether the group may count this consumer's client as a member: it joined, or a
    /// join is out.
    fn may_be_member(&self) -> bool {
        self.joined || matches!(self.asked, Some(Asked::Join))
    }
}

impl Drop for ConsumerState {
    fn drop(&mut self) {
        if let Some(claim) = self.claim.take() {
            claim.release(self.may_be_member());
        }
    }
}
