//! Topic knowledge: the partition count that `Balanced` and `MessagesKey` partitioning
//! resolve against, read with `GET_TOPIC` and refreshed when the metadata watermark moves or
//! the server says a partition does not exist (the 0.11.0 SDK caches it forever).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tracing::debug;

use super::{
    Decision, LaneKey, OwnWrite, PartitionChoice, Place, Routing, Served, TimerKey, TopicAnswer,
};
use crate::ids::{PartitionKey, RequestId, TopicKey};
use crate::request::RequestError;
use crate::wire::Identifier;

/// How old a cached partition count may grow before a request resolved against it (a keyed
/// or balanced send chooses by it; an explicit partition is checked against it) also reads
/// the topic again (without waiting for the answer). Another client's
/// `CREATE_PARTITIONS` is so seen within this plus one round trip, where the SDK 0.11.0
/// keeps a count for as long as the client lives.
pub(super) const PARTITION_COUNT_MAX_AGE: Duration = Duration::from_secs(1);

/// How current a partition count is, when a request is resolved against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// Read for this request (or with it): final.
    Fresh,
    /// From the cache: another client may have added partitions since.
    Cached,
}

#[derive(Debug, Default)]
pub(crate) struct TopicState {
    /// Partition count and the watermark it was read under.
    pub(crate) info: Option<(u32, u64)>,
    /// Requests waiting for the count, in submission order.
    pub(crate) waiting: VecDeque<RequestId>,
    pub(crate) fetch_in_flight: bool,
    /// The client's metadata watermark when the read in flight was sent: an answer is no
    /// newer than that, whenever it arrives.
    pub(crate) fetch_watermark: u64,
    pub(crate) retry_streak: u32,
    /// Round-robin position for `Balanced`, per topic as in the SDK.
    pub(crate) balanced_cursor: u32,
    /// Partitions our own writes are known to have brought the topic to at least: explicit
    /// partition ids below it are not out of range, whatever a lagging read says.
    pub(crate) added_floor: u32,
    /// When the count in `info` was read (or learned from our own write).
    pub(crate) read_at: Option<Instant>,
    /// The read in flight refreshes a count that is only old, not outdated by a watermark:
    /// its answer is taken even under an unchanged watermark.
    pub(crate) refreshing: bool,
    /// The count requests last resolved against, kept while `info` is cleared for a read
    /// again: a count read then that differs from it is announced as any change is.
    pub(crate) last_count: Option<u32>,
}

impl Routing {
    pub(super) fn enqueue_for_topic(&mut self, now: Instant, id: RequestId, topic: TopicKey) {
        let watermark = self.watermark;
        let state = self.topics.entry(topic.clone()).or_default();
        match state.info {
            Some((count, seen)) if seen >= watermark && state.waiting.is_empty() => {
                let old = state
                    .read_at
                    .is_none_or(|at| now.saturating_duration_since(at) >= PARTITION_COUNT_MAX_AGE);
                self.resolve(now, id, &topic, count, Known::Cached);
                if old {
                    self.refresh_topic(&topic);
                }
            }
            Some(_) | None => {
                state.waiting.push_back(id);
                self.fetch_topic(&topic);
            }
        }
    }

    /// Reads the topic unless a read is already in flight (single flight per topic).
    fn fetch_topic(&mut self, topic: &TopicKey) {
        let watermark = self.watermark;
        if let Some(state) = self.topics.get_mut(topic)
            && !state.fetch_in_flight
        {
            state.fetch_in_flight = true;
            state.fetch_watermark = watermark;
            self.decisions.push_back(Decision::FetchTopic {
                topic: topic.clone(),
            });
        }
    }

    /// Reads an old count again in the background: requests keep resolving against the
    /// cached one until the answer comes.
    fn refresh_topic(&mut self, topic: &TopicKey) {
        let in_flight = self.topics.get(topic).is_none_or(|t| t.fetch_in_flight);
        if in_flight {
            return;
        }
        self.fetch_topic(topic);
        if let Some(state) = self.topics.get_mut(topic) {
            state.refreshing = true;
        }
    }

    /// The count of a topic read (or learned) now: the event when it differs from the
    /// one sends resolved against until now.
    fn count_read(&mut self, now: Instant, topic: &TopicKey, count: u32) {
        let watermark = self.watermark;
        let Some(state) = self.topics.get_mut(topic) else {
            return;
        };
        let before = state.info.map(|(known, _)| known).or(state.last_count);
        state.info = Some((count, watermark));
        state.last_count = Some(count);
        state.read_at = Some(now);
        if let Some(from) = before
            && from != count
        {
            self.decisions
                .push_back(Decision::Event(crate::event::Event::PartitionsChanged {
                    topic: topic.clone(),
                    from,
                    to: count,
                }));
        }
    }

    /// What one of our own metadata writes says about a topic, known under the watermark
    /// the write moved to (a topic we created), or a floor under its count (partitions we
    /// added). A read may still be answered by a node that has not applied the
    /// write (the real cluster's followers lag their leader by up to half a second and
    /// answer "absent" meanwhile), so the write's own answer is worth more than a read.
    pub(super) fn learn_own_write(&mut self, now: Instant, write: &OwnWrite, served: &Served) {
        match (write, served) {
            (
                OwnWrite::CreateTopic { stream },
                Served::Topic {
                    id,
                    name,
                    partitions_count,
                },
            ) => {
                let names = [Identifier::Numeric(*id), Identifier::Named(name.clone())];
                for name in names {
                    let key = super::topic_key(stream, &name);
                    self.know_count(now, &key, *partitions_count);
                }
            }
            (
                OwnWrite::CreatePartitions {
                    topic: key,
                    count: partitions_count,
                },
                Served::Plain,
            ) => {
                // The count we knew may or may not include this write already (a read
                // answered after it committed), so the sum is only a floor for explicit
                // partition ids: a send to a partition we just added is not refused as out
                // of range because a lagging node still reports the old count. Keyed and
                // balanced sends keep resolving against counts read from the cluster.
                if let Some(state) = self.topics.get_mut(key)
                    && let Some((count, _)) = state.info
                {
                    let floor = count.saturating_add(*partitions_count);
                    state.added_floor = state.added_floor.max(floor);
                }
            }
            _ => {}
        }
    }

    /// A partition count known fresh under the current watermark: requests waiting for the
    /// topic go on with it, and a read still in flight cannot overwrite it.
    fn know_count(&mut self, now: Instant, topic: &TopicKey, count: u32) {
        self.topics.entry(topic.clone()).or_default();
        self.count_read(now, topic, count);
        let Some(state) = self.topics.get_mut(topic) else {
            return;
        };
        state.retry_streak = 0;
        let waiting: Vec<RequestId> = state.waiting.drain(..).collect();
        for id in waiting {
            self.resolve(now, id, topic, count, Known::Fresh);
        }
    }

    /// The answer to a `FetchTopic`.
    pub fn handle_topic(&mut self, now: Instant, topic: &TopicKey, answer: TopicAnswer) {
        let now = self.clock(now);
        let watermark = self.watermark;
        let Some(state) = self.topics.get_mut(topic) else {
            return;
        };
        state.fetch_in_flight = false;
        let refreshing = std::mem::take(&mut state.refreshing);
        if let Some((count, seen)) = state.info
            && seen >= watermark
            && !refreshing
        {
            // Already known under the current watermark (from our own write, while this
            // read was in flight): a read can only be as new, or older.
            let waiting: Vec<RequestId> = state.waiting.drain(..).collect();
            for id in waiting {
                self.resolve(now, id, topic, count, Known::Fresh);
            }
            return;
        }
        match answer {
            TopicAnswer::Found { partitions_count } if state.fetch_watermark < watermark => {
                // A metadata write of ours committed while the read was in flight: the
                // answer may predate it (a partition just created would be missing).
                debug!(%topic, partitions_count, "topic read predates the watermark; reading again");
                self.fetch_topic(topic);
            }
            TopicAnswer::Found { partitions_count } => {
                self.count_found(now, topic, partitions_count);
            }
            TopicAnswer::Behind { partitions_count } => {
                self.count_behind(now, topic, partitions_count);
            }
            TopicAnswer::NotFound | TopicAnswer::AbsentOnFollower => {
                state.info = None;
                let on_follower = answer == TopicAnswer::AbsentOnFollower;
                // Shortly after our own metadata write, "absent" may come from a node that
                // has not applied it; and from a follower, also shortly after another
                // client's create. Read again later, unless a request would outlive its
                // deadline meanwhile (it ends with the answer).
                let doubt = self.doubt_wait(now, None);
                let Some(state) = self.topics.get_mut(topic) else {
                    return;
                };
                let waiting: Vec<RequestId> = state.waiting.drain(..).collect();
                let mut still_waiting = VecDeque::new();
                let mut next_read: Option<Duration> = None;
                for id in waiting {
                    let outlives =
                        |wait: Duration| self.deadline_of(id).is_some_and(|d| now + wait < d);
                    let wait = match doubt.filter(|&wait| outlives(wait)) {
                        Some(wait) => Some(wait),
                        None if on_follower => self.lag_wait(now, id),
                        None => None,
                    };
                    let error = RequestError::TopicNotFound {
                        stream: topic.stream.clone(),
                        topic: topic.topic.clone(),
                    };
                    if let Some(wait) = wait {
                        self.doubted(id, error);
                        still_waiting.push_back(id);
                        next_read = Some(next_read.map_or(wait, |soonest| soonest.min(wait)));
                        continue;
                    }
                    self.complete(now, id, Err(error));
                }
                if let Some(wait) = next_read {
                    debug!(%topic, ?wait, on_follower, "topic absent where it may not be yet; reading again");
                    if let Some(state) = self.topics.get_mut(topic) {
                        state.waiting = still_waiting;
                    }
                    self.timers
                        .insert((now + wait, TimerKey::Topic(topic.clone())));
                }
            }
            TopicAnswer::Unavailable => self.retry_topic_later(now, topic),
            TopicAnswer::Denied { code } => {
                // The user may not read the topic (a 0.11.0 server asks for read rights on
                // it) but may well send to it: the SDK never reads a topic before a send.
                // A request naming its partition goes on and the server checks the id; one
                // that needs the count to choose cannot, and fails with the server's word.
                // Nothing is cached: permissions change, and the next request asks again.
                state.retry_streak = 0;
                let waiting: Vec<RequestId> = state.waiting.drain(..).collect();
                for id in waiting {
                    let choice = self.pending.get(&id).map(|p| p.facts.choice);
                    if let Some(PartitionChoice::Explicit(partition)) = choice {
                        self.place_in_lane(now, id, topic, partition);
                    } else {
                        self.complete(now, id, Err(RequestError::Server { code }));
                    }
                }
            }
        }
    }

    /// A count read now: the requests waiting for it go on.
    fn count_found(&mut self, now: Instant, topic: &TopicKey, partitions_count: u32) {
        if let Some(state) = self.topics.get_mut(topic) {
            state.retry_streak = 0;
        }
        self.count_read(now, topic, partitions_count);
        let Some(state) = self.topics.get_mut(topic) else {
            return;
        };
        let waiting: Vec<RequestId> = state.waiting.drain(..).collect();
        for id in waiting {
            self.resolve(now, id, topic, partitions_count, Known::Fresh);
        }
    }

    /// A count from a node that has not applied our own latest metadata write. While the
    /// write is younger than `own_write_settle` the node is given time to catch up: the
    /// requests waiting for the count wait and the topic is read again, and a background
    /// refresh keeps the count it had. Once the write is settled the count is taken as it
    /// is (a node may stay behind; it is the best count there is). When a waiting request
    /// would outlive its deadline meanwhile, the waiting requests go on with it, all
    /// together and in order, but it is not kept: the next request reads the topic again.
    fn count_behind(&mut self, now: Instant, topic: &TopicKey, partitions_count: u32) {
        let Some(wait) = self.doubt_wait(now, None) else {
            self.count_found(now, topic, partitions_count);
            return;
        };
        let Some(state) = self.topics.get_mut(topic) else {
            return;
        };
        if state.waiting.is_empty() {
            return;
        }
        let waiting: Vec<RequestId> = state.waiting.iter().copied().collect();
        let can_wait = waiting
            .iter()
            .all(|&id| self.deadline_of(id).is_some_and(|d| now + wait < d));
        if !can_wait {
            self.count_found(now, topic, partitions_count);
            if let Some(state) = self.topics.get_mut(topic) {
                state.info = None;
            }
            return;
        }
        debug!(%topic, partitions_count, ?wait, "topic read on a node behind our own write; reading again");
        self.timers
            .insert((now + wait, TimerKey::Topic(topic.clone())));
    }

    /// Reads the topic again after a jittered, doubling wait.
    fn retry_topic_later(&mut self, now: Instant, topic: &TopicKey) {
        let Some(state) = self.topics.get_mut(topic) else {
            return;
        };
        let streak = state.retry_streak;
        state.retry_streak = streak.saturating_add(1);
        let wait = self.backoff_for(streak);
        self.timers
            .insert((now + wait, TimerKey::Topic(topic.clone())));
    }

    pub(super) fn retry_topic(&mut self, _now: Instant, topic: TopicKey) {
        if self
            .topics
            .get(&topic)
            .is_some_and(|t| !t.waiting.is_empty())
        {
            self.fetch_topic(&topic);
        }
    }

    /// Forgets a topic's partition count: the next request reads it again.
    pub(super) fn invalidate_topic(&mut self, topic: &TopicKey) {
        if let Some(state) = self.topics.get_mut(topic) {
            debug!(%topic, "partition count invalidated");
            state.info = None;
        }
    }

    /// Chooses the partition of a request whose topic has `count` partitions and puts it in
    /// that partition's lane. An explicit partition beyond a cached count is checked against
    /// a fresh read first: another client may have added partitions since.
    fn resolve(&mut self, now: Instant, id: RequestId, topic: &TopicKey, count: u32, known: Known) {
        let Some(pending) = self.pending.get(&id) else {
            return;
        };
        let (cursor, floor) = self
            .topics
            .get(topic)
            .map_or((0, 0), |t| (t.balanced_cursor, t.added_floor));
        let choice = pending.facts.choice;
        let chosen = self.choose(now, topic, choice, count, cursor);
        if choice == PartitionChoice::Balanced {
            let state = self.topics.entry(topic.clone()).or_default();
            state.balanced_cursor = state.balanced_cursor.wrapping_add(chosen.steps);
            if chosen.steps > 1 {
                self.stats.balanced_passed_over += 1;
            }
            if chosen.passed_stalled {
                self.stats.balanced_passed_stalled += 1;
            }
        }
        let partition = match chosen.partition {
            // Keyed and balanced choices are always below `count`; only an explicit id can
            // fall between the count read and the floor of our own additions.
            Some(p) if p < count.max(floor) => p,
            Some(_) if known == Known::Cached => {
                if let Some(state) = self.topics.get_mut(topic) {
                    state.info = None;
                    state.waiting.push_back(id);
                }
                self.fetch_topic(topic);
                return;
            }
            Some(partition) if let Some(wait) = self.doubt_wait(now, self.deadline_of(id)) => {
                // Shortly after our own metadata write the count read may predate it (a
                // partition we added, under a name or at a moment `added_floor` did not
                // catch): read again rather than fail.
                debug!(%topic, count, ?wait, "partition beyond a count read soon after our write; reading again");
                self.doubted(id, RequestError::PartitionOutOfRange { partition, count });
                if let Some(state) = self.topics.get_mut(topic) {
                    state.info = None;
                    state.waiting.push_back(id);
                }
                self.timers
                    .insert((now + wait, TimerKey::Topic(topic.clone())));
                return;
            }
            Some(partition) if let Some(wait) = self.lag_wait(now, id) => {
                // Read for this request and still short of the partition: the node that
                // answered may not have applied another client's `CREATE_PARTITIONS` yet.
                // Read again, paced, for a while from the submit, before failing.
                debug!(%topic, count, ?wait, "partition beyond a fresh count; reading again");
                self.doubted(id, RequestError::PartitionOutOfRange { partition, count });
                if let Some(state) = self.topics.get_mut(topic) {
                    state.info = None;
                    state.waiting.push_back(id);
                }
                self.timers
                    .insert((now + wait, TimerKey::Topic(topic.clone())));
                return;
            }
            Some(p) => {
                let error = RequestError::PartitionOutOfRange {
                    partition: p,
                    count,
                };
                self.complete(now, id, Err(error));
                return;
            }
            None => {
                let error = RequestError::PartitionOutOfRange {
                    partition: 0,
                    count,
                };
                self.complete(now, id, Err(error));
                return;
            }
        };
        self.place_in_lane(now, id, topic, partition);
    }

    /// How long to wait before reading the topic again for a request whose explicit
    /// partition lies beyond a count read for it (or whose topic a follower says is
    /// absent): half the time since its submit, from
    /// `route_backoff_initial` up to `route_backoff_max`, jittered, while the request is
    /// younger than `own_write_settle`; `None` once it is older (the partition does not
    /// exist: the request fails) or would outlive its deadline.
    pub(super) fn lag_wait(&mut self, now: Instant, id: RequestId) -> Option<Duration> {
        let pending = self.pending.get(&id)?;
        let since = now.saturating_duration_since(pending.submitted_at);
        if since >= self.config.own_write_settle {
            return None;
        }
        let deadline = pending.deadline;
        let base = (since / 2)
            .max(self.config.route_backoff_initial)
            .min(self.config.route_backoff_max);
        let wait = self.rng.jitter(base);
        (now + wait < deadline).then_some(wait)
    }

    /// Puts a request whose partition is chosen in that partition's lane.
    fn place_in_lane(&mut self, now: Instant, id: RequestId, topic: &TopicKey, partition: u32) {
        let Some(pending) = self.pending.get_mut(&id) else {
            return;
        };
        pending.partition = Some(partition);
        let lane = LaneKey::Partition(PartitionKey {
            topic: topic.clone(),
            partition,
        });
        let limit = self.config.max_pending_per_lane;
        if self.lanes.get(&lane).is_some_and(|l| l.len() >= limit) {
            // Checked again here because a request that waited for the partition count
            // could not be checked against its partition's queue at submit.
            self.complete(now, id, Err(RequestError::QueueFull { limit }));
            return;
        }
        let Some(pending) = self.pending.get_mut(&id) else {
            return;
        };
        pending.place = Place::Lane(lane.clone());
        self.lanes
            .entry(lane.clone())
            .or_insert_with(super::Lane::new)
            .queue
            .push_back(id);
        self.pump_lane(now, &lane);
    }
}
