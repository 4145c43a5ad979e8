//! [`ConsumerState`]: what a consumer asks next and what each answer means (see the
//! module documentation of `client::consumer` for the rules of a group member).

mod answers;
mod calls;
mod drain;
mod position;

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use position::{Position, View};

use super::{
    AutoCommit, ConsumerConfig, ConsumerIdentity, ConsumerStats, GroupClaim, GroupClaims,
    ReceivedMessage, Step,
};
use crate::client::{Call, ClientError};
use crate::request::Request;
use crate::wire::{Consumer, ConsumerGroupRef, ConsumerKind, Identifier, Name, PollingStrategy};

/// The request out, and what its answer is for.
#[derive(Debug)]
enum Asked {
    CreateGroup,
    /// The stream (and its topics), to resolve the group's names before the join.
    ResolveStream,
    /// The group, to resolve its name and id before the join.
    ResolveGroup,
    Join,
    /// A sync, sent when [`ConsumerState::handouts`] and [`ConsumerState::takes`] were
    /// these.
    Sync(u64, u64),
    Partitions,
    /// The group's stored offset of a partition, read before its first poll.
    Stored(u32),
    /// The group's stored offset of a partition, read right before a commit of it.
    StoredBeforeCommit(u32),
    Poll(u32),
    Commit(u32, u64),
    /// The group's listing, for the partitions being handed over (see `drain`).
    DrainListing,
    /// An offset write of a partition being handed over.
    Drain(u32),
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
    /// The claimed group's names were resolved (or cannot be, and the join will say why).
    resolved: bool,
    /// The stream's and the topic's id and name, while the group's are read.
    resolving: Option<((u32, Name), (u32, Name))>,
    /// The assignment of the last sync of this membership.
    view: Option<View>,
    /// Whether an assignment was ever synced: partitions listed later were another
    /// member's and start from the stored offset.
    assigned_before: bool,
    cursor: usize,
    positions: BTreeMap<u32, Position>,
    /// Partitions given up while their polled messages are not all taken and stored.
    draining: BTreeMap<u32, drain::Drain>,
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
            resolved: false,
            resolving: None,
            view: None,
            assigned_before: false,
            cursor: 0,
            positions: BTreeMap::new(),
            draining: BTreeMap::new(),
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
        let partition = message.partition_id;
        let position = match self.positions.get_mut(&partition) {
            Some(position) => Some(position),
            None => self.draining.get_mut(&partition).map(|d| &mut d.position),
        };
        if let Some(position) = position {
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

    fn next_request(&mut self, now: Instant) -> (Option<Asked>, Option<Request>) {
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
            if !self.joined && !self.resolved && self.claim.is_some() {
                // One group named several ways on one client would be one membership.
                return match self.resolving {
                    None => (
                        Some(Asked::ResolveStream),
                        Call::get_stream(stream).ok().map(|c| c.request),
                    ),
                    Some(_) => (
                        Some(Asked::ResolveGroup),
                        Call::get_consumer_group(stream, topic, group)
                            .ok()
                            .map(|c| c.request),
                    ),
                };
            }
            if !self.joined {
                let call = Call::join_consumer_group(stream, topic, group);
                return (Some(Asked::Join), call.ok().map(|c| c.request));
            }
            if self.sync_due(now) {
                return self.sync_request(group);
            }
            // After a due sync: one that lists a draining partition again ends its drain.
            match self.drain_due(now) {
                Some(drain::DrainAsk::Listing) => {
                    let call = Call::get_consumer_group(stream, topic, group);
                    return (Some(Asked::DrainListing), call.ok().map(|c| c.request));
                }
                Some(drain::DrainAsk::Sync) => return self.sync_request(group),
                Some(drain::DrainAsk::Read(partition)) => return self.stored_request(partition),
                Some(drain::DrainAsk::Store(partition, offset)) => {
                    return (
                        Some(Asked::Drain(partition)),
                        self.commit_call(partition, offset).ok().map(|c| c.request),
                    );
                }
                None => {}
            }
            if self.unconfirmed_ready() {
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
            let read_at = self
                .positions
                .get(&partition)
                .and_then(|p| p.stored_read_at);
            if self.group().is_some()
                && read_at.is_none_or(|at| now > at + self.config.poll_interval)
            {
                // And right after a read shows nobody stored past this member: the
                // partition may have gone to another member and come back since the sync.
                let (_, request) = self.stored_request(partition);
                return (Some(Asked::StoredBeforeCommit(partition)), request);
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
            // A group member starts where the group left off; the configured strategy
            // only says where a partition the group never stored an offset of starts.
            None if self.group().is_some() => match self.config.strategy {
                // From the start when nothing is stored: what `Next` does then.
                PollingStrategy::First | PollingStrategy::Next => PollingStrategy::Next,
                configured if position.nothing_stored => configured,
                PollingStrategy::Last
                | PollingStrategy::Offset(_)
                | PollingStrategy::Timestamp(_) => return self.stored_request(partition),
            },
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

    /// Reads the stored offset of `partition` (for a group member: the group's).
    fn stored_request(&self, partition: u32) -> (Option<Asked>, Option<Request>) {
        let (stream, topic) = (self.config.stream.clone(), self.config.topic.clone());
        let call = Call::get_consumer_offset(self.consumer(), stream, topic, Some(partition));
        (Some(Asked::Stored(partition)), call.ok().map(|c| c.request))
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
}
