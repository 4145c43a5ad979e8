//! The [`Watch`]: a ledger of every (partition, offset) each member is handed, checked as
//! it is handed against the group's stored offsets, plus a [`Sampler`] of the stored offsets
//! that keeps every decrease.
//!
//! What the watch flags, each a breach of the consumer-group promise:
//! - `committed_again`: a message handed out whose offset was at or below the group's
//!   stored offset of its partition *before* the `next()` that handed it began (a batch
//!   that was committed is handed out again, or a message is skipped and stored unread);
//! - `beyond_window`: a message handed out a second time that is not in its earlier
//!   recipient's last batch of the partition (more than `batch_length` behind the highest
//!   offset of that partition the earlier recipient had been handed);
//! - `decreases`: a stored group offset seen lower than a value seen earlier;
//! - `ahead`: a stored group offset past every offset of its partition handed out so far
//!   (a commit of what was polled ahead, not handed out);
//! - `disorder`: a member handed a partition's offset below one it had already been
//!   handed, and the lower one was never handed to anyone (a skip filled in later);
//! - `wrong_payloads`: a message whose payload is not the one stored at its place.
//!
//! The documented window of a member that has not synced since the server moved one of
//! its partitions at once (a member left or ended, or a join the server did not see the
//! partition in flight for): it may hand out what it had polled of that partition before
//! the move, though the next owner read and stored it meanwhile. A test that makes such a
//! move names the member ([`Watch::idle_window`]); its `committed_again` and
//! `beyond_window` hand-outs are then counted apart, and must stay within two batches per
//! partition (one handed out and not stored, one polled and not handed out).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iggy_route_tokio::{AutoCommit, ClientError, ReceivedMessage};

use super::{Adapter, Env};

/// One hand-out.
#[derive(Debug, Clone)]
pub(crate) struct Handed {
    pub(crate) member: String,
    pub(crate) partition: u32,
    pub(crate) offset: u64,
    #[expect(
        dead_code,
        reason = "recorded for debugging (the ledger's `Debug`); no check reads it"
    )]
    pub(crate) at: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    partitions: u32,
    /// The highest stored offset seen per partition.
    hwm: BTreeMap<u32, u64>,
    last: BTreeMap<u32, u64>,
    history: BTreeMap<u32, Vec<u64>>,
    handed: Vec<Handed>,
    counts: BTreeMap<(u32, u64), u32>,
    /// (partition, offset) -> who had it last.
    holder: BTreeMap<(u32, u64), String>,
    /// (member, partition) -> highest offset handed to it.
    member_max: BTreeMap<(String, u32), u64>,
    /// partition -> highest offset handed to anyone.
    max_handed: BTreeMap<u32, u64>,
    committed_again: Vec<String>,
    beyond_window: Vec<String>,
    /// Hand-outs in the idle window, per (member, partition): (offset, why).
    in_idle_window: BTreeMap<(String, u32), Vec<(u64, String)>>,
    decreases: Vec<String>,
    ahead: Vec<String>,
    disorder: Vec<String>,
    wrong_payloads: Vec<String>,
    errors: Vec<String>,
}

impl Inner {
    fn note_idle(&mut self, member: &str, partition: u32, offset: u64, why: String) {
        self.in_idle_window
            .entry((member.to_owned(), partition))
            .or_default()
            .push((offset, why));
    }
}

/// The ledger and the stored-offset checks of one group (see the module documentation).
#[derive(Debug)]
pub(crate) struct Watch {
    pub(crate) group: &'static str,
    /// `batch_length` of the members: the size of the re-delivery window.
    pub(crate) batch: u64,
    inner: Mutex<Inner>,
    started: Instant,
    /// Members whose policy (`Never`, `Interval`) may leave more than their last batch
    /// uncommitted: what they were handed may come again to the next owner beyond the
    /// one-batch window (never what was committed).
    exempt: Mutex<std::collections::BTreeSet<String>>,
    /// Members in the idle window of a move made at once (see the module documentation).
    idle: Mutex<std::collections::BTreeSet<String>>,
}

impl Watch {
    pub(crate) fn new(group: &'static str, partitions: u32, batch: u32) -> Self {
        Watch {
            group,
            batch: u64::from(batch),
            inner: Mutex::new(Inner {
                partitions,
                ..Inner::default()
            }),
            started: Instant::now(),
            exempt: Mutex::new(std::collections::BTreeSet::new()),
            idle: Mutex::new(std::collections::BTreeSet::new()),
        }
    }

    /// `member` may hand out, in the documented idle window, what it polled before the
    /// server moved a partition of it at once (see the module documentation).
    pub(crate) fn idle_window(&self, member: &str) {
        self.idle.lock().unwrap().insert(member.to_owned());
    }

    /// `member` commits by `Never` or `Interval`: see [`Watch::exempt`].
    pub(crate) fn exempt(&self, member: &str) {
        self.exempt.lock().unwrap().insert(member.to_owned());
    }

    /// `member` is exempt if its policy is not `AfterPoll`.
    pub(crate) fn policy(&self, member: &str, policy: AutoCommit) {
        if !matches!(policy, AutoCommit::AfterPoll) {
            self.exempt(member);
        }
    }

    /// The topic grew to `partitions`.
    pub(crate) fn set_partitions(&self, partitions: u32) {
        self.inner.lock().unwrap().partitions = partitions;
    }

    /// Reads the stored offsets, keeps decreases and stored offsets past what was handed.
    pub(crate) fn sample(&self, env: &Env, when: &str) {
        let mut inner = self.inner.lock().unwrap();
        Self::sample_locked(&mut inner, env, self.group, when, self.started);
    }

    fn sample_locked(inner: &mut Inner, env: &Env, group: &str, when: &str, started: Instant) {
        for partition in 0..inner.partitions {
            let Some(now) = env.stored(group, partition) else {
                continue;
            };
            let before = inner.last.insert(partition, now);
            if before != Some(now) {
                inner.history.entry(partition).or_default().push(now);
            }
            if let Some(high) = inner.hwm.get(&partition).copied()
                && now < high
                && before != Some(now)
            {
                inner.decreases.push(format!(
                    "p{partition}: {high} -> {now} ({when}, at {:?})",
                    started.elapsed()
                ));
            }
            let high = inner.hwm.entry(partition).or_insert(now);
            *high = (*high).max(now);
            if inner
                .max_handed
                .get(&partition)
                .is_none_or(|max| now > *max)
            {
                let entry = format!(
                    "p{partition}: stored {now}, handed out up to {:?} ({when})",
                    inner.max_handed.get(&partition)
                );
                if inner.ahead.last() != Some(&entry) {
                    inner.ahead.push(entry);
                }
            }
        }
    }

    /// `next()` of `member`, checked and recorded.
    pub(crate) fn next<A: Adapter>(
        &self,
        env: &Env,
        member: &str,
        consumer: &mut A::Consumer,
        wait: Duration,
    ) -> Option<Result<ReceivedMessage, ClientError>> {
        let before = {
            let mut inner = self.inner.lock().unwrap();
            Self::sample_locked(&mut inner, env, self.group, member, self.started);
            inner.hwm.clone()
        };
        let next = A::next_within(env, consumer, wait);
        match &next {
            Some(Ok(received)) => self.record(env, member, received, &before),
            Some(Err(error)) => self
                .inner
                .lock()
                .unwrap()
                .errors
                .push(format!("{member}: {error:?}")),
            None => {}
        }
        next
    }

    fn record(
        &self,
        env: &Env,
        member: &str,
        received: &ReceivedMessage,
        before: &BTreeMap<u32, u64>,
    ) {
        let partition = received.partition_id;
        let offset = received.message.offset;
        let mut inner = self.inner.lock().unwrap();
        let payload = String::from_utf8_lossy(&received.message.payload).into_owned();
        if payload != format!("p{partition}-{offset}") {
            inner
                .wrong_payloads
                .push(format!("{member}: p{partition}@{offset} = {payload}"));
        }
        let idle = self.idle.lock().unwrap().contains(member);
        if let Some(stored) = before.get(&partition)
            && offset <= *stored
        {
            let earlier = inner.holder.get(&(partition, offset)).cloned();
            let breach = format!(
                "{member}: p{partition}@{offset}, stored {stored} before the next() began \
                 (handed before to {earlier:?}, at {:?})",
                self.started.elapsed()
            );
            if idle {
                inner.note_idle(member, partition, offset, breach);
            } else {
                inner.committed_again.push(breach);
            }
        }
        let key = (partition, offset);
        let seen = inner.counts.get(&key).copied().unwrap_or(0);
        if seen > 0 {
            let earlier = inner.holder.get(&key).cloned().unwrap_or_default();
            let their_max = inner
                .member_max
                .get(&(earlier.clone(), partition))
                .copied()
                .unwrap_or(offset);
            let exempt = self.exempt.lock().unwrap().contains(&earlier);
            if offset + self.batch <= their_max && !exempt {
                let breach = format!(
                    "{member}: p{partition}@{offset} again; {earlier} had been handed up to \
                     {their_max} (batch {}), at {:?}",
                    self.batch,
                    self.started.elapsed()
                );
                if idle {
                    inner.note_idle(member, partition, offset, breach);
                } else {
                    inner.beyond_window.push(breach);
                }
            }
        } else if let Some(mine) = inner.member_max.get(&(member.to_owned(), partition))
            && offset < *mine
        {
            let entry = format!("{member}: p{partition}@{offset} first handed after {mine}");
            inner.disorder.push(entry);
        }
        *inner.counts.entry(key).or_insert(0) += 1;
        inner.holder.insert(key, member.to_owned());
        let mine = inner
            .member_max
            .entry((member.to_owned(), partition))
            .or_insert(offset);
        *mine = (*mine).max(offset);
        let max = inner.max_handed.entry(partition).or_insert(offset);
        *max = (*max).max(offset);
        inner.handed.push(Handed {
            member: member.to_owned(),
            partition,
            offset,
            at: Instant::now(),
        });
        Self::sample_locked(&mut inner, env, self.group, member, self.started);
    }

    /// Reads with `next()` until nothing came for `idle` (or `cap` passed).
    pub(crate) fn drain<A: Adapter>(
        &self,
        env: &Env,
        member: &str,
        consumer: &mut A::Consumer,
        idle: Duration,
        cap: Duration,
    ) -> usize {
        let give_up = Instant::now() + cap;
        let mut got = 0;
        while Instant::now() < give_up {
            match self.next::<A>(env, member, consumer, idle) {
                Some(Ok(_)) => got += 1,
                Some(Err(_)) => {}
                None => break,
            }
        }
        got
    }

    /// Reads until `done` holds or `cap` passed.
    pub(crate) fn read_until<A: Adapter>(
        &self,
        env: &Env,
        member: &str,
        consumer: &mut A::Consumer,
        cap: Duration,
        mut done: impl FnMut(&Watch) -> bool,
    ) -> bool {
        let give_up = Instant::now() + cap;
        while Instant::now() < give_up {
            if done(self) {
                return true;
            }
            let _ = self.next::<A>(env, member, consumer, Duration::from_millis(100));
        }
        done(self)
    }

    pub(crate) fn distinct(&self) -> usize {
        self.inner.lock().unwrap().counts.len()
    }

    pub(crate) fn total(&self) -> usize {
        self.inner.lock().unwrap().handed.len()
    }

    /// What `member` was handed, in order.
    pub(crate) fn handed_to(&self, member: &str) -> Vec<(u32, u64)> {
        self.inner
            .lock()
            .unwrap()
            .handed
            .iter()
            .filter(|h| h.member == member)
            .map(|h| (h.partition, h.offset))
            .collect()
    }

    /// The highest offset of `partition` handed to `member`.
    pub(crate) fn max_of(&self, member: &str, partition: u32) -> Option<u64> {
        self.inner
            .lock()
            .unwrap()
            .member_max
            .get(&(member.to_owned(), partition))
            .copied()
    }

    /// Offsets below `len[p]` of each partition that nobody was handed.
    pub(crate) fn missing(&self, lens: &[u64]) -> BTreeMap<u32, Vec<u64>> {
        let inner = self.inner.lock().unwrap();
        lens.iter()
            .enumerate()
            .filter_map(|(partition, len)| {
                let partition = partition as u32;
                let missing: Vec<u64> = (0..*len)
                    .filter(|offset| !inner.counts.contains_key(&(partition, *offset)))
                    .collect();
                (!missing.is_empty()).then_some((partition, missing))
            })
            .collect()
    }

    /// Every (partition, offset) handed out more than once, with its recipients.
    pub(crate) fn duplicates(&self) -> Vec<((u32, u64), Vec<String>)> {
        let inner = self.inner.lock().unwrap();
        inner
            .counts
            .iter()
            .filter(|(_, count)| **count > 1)
            .map(|(key, _)| {
                let to = inner
                    .handed
                    .iter()
                    .filter(|h| (h.partition, h.offset) == *key)
                    .map(|h| h.member.clone())
                    .collect();
                (*key, to)
            })
            .collect()
    }

    pub(crate) fn errors(&self) -> Vec<String> {
        self.inner.lock().unwrap().errors.clone()
    }

    /// Every breach flagged so far, by kind (empty kinds left out).
    pub(crate) fn breaches(&self) -> BTreeMap<&'static str, Vec<String>> {
        let inner = self.inner.lock().unwrap();
        let mut all = BTreeMap::new();
        for (kind, list) in [
            ("committed_again", &inner.committed_again),
            ("beyond_window", &inner.beyond_window),
            ("decreases", &inner.decreases),
            ("ahead", &inner.ahead),
            ("disorder", &inner.disorder),
            ("wrong_payloads", &inner.wrong_payloads),
        ] {
            if !list.is_empty() {
                all.insert(kind, list.iter().take(12).cloned().collect());
            }
        }
        all
    }

    /// Per member, per partition: how many and the offset range.
    pub(crate) fn summary(&self) -> String {
        let inner = self.inner.lock().unwrap();
        let mut ranges: BTreeMap<(String, u32), (u64, u64, usize)> = BTreeMap::new();
        for h in &inner.handed {
            let range = ranges
                .entry((h.member.clone(), h.partition))
                .or_insert((h.offset, h.offset, 0));
            range.0 = range.0.min(h.offset);
            range.1 = range.1.max(h.offset);
            range.2 += 1;
        }
        let parts: Vec<String> = ranges
            .iter()
            .map(|((m, p), (lo, hi, n))| format!("{m}:p{p}:{n}@{lo}..={hi}"))
            .collect();
        format!("{} | stored history {:?}", parts.join(" "), inner.history)
    }

    /// The stored offsets now.
    pub(crate) fn stored_now(&self, env: &Env) -> Vec<Option<u64>> {
        let partitions = self.inner.lock().unwrap().partitions;
        (0..partitions).map(|p| env.stored(self.group, p)).collect()
    }

    /// Asserts no breach was flagged, nothing is missing below `lens` and no `next()`
    /// failed (unless `errors_allowed`).
    pub(crate) fn assert_clean(&self, adapter: &str, lens: &[u64], errors_allowed: bool) {
        let mut breaches = self.breaches();
        let missing = self.missing(lens);
        let errors = self.errors();
        let window: Vec<String> = {
            let inner = self.inner.lock().unwrap();
            let over: Vec<String> = inner
                .in_idle_window
                .iter()
                .filter_map(|((member, partition), handed)| {
                    let distinct: std::collections::BTreeSet<u64> =
                        handed.iter().map(|(offset, _)| *offset).collect();
                    (distinct.len() as u64 > 2 * self.batch).then(|| {
                        format!(
                            "{member}: p{partition}: {} in the idle window",
                            distinct.len()
                        )
                    })
                })
                .collect();
            let counted: Vec<String> = inner
                .in_idle_window
                .iter()
                .map(|((member, partition), handed)| {
                    format!("{member}:p{partition}:{}", handed.len())
                })
                .collect();
            println!("[{adapter}] in the idle window: {counted:?}");
            over
        };
        if !window.is_empty() {
            breaches.insert("beyond_idle_window", window);
        }
        println!(
            "[{adapter}] {} handed out ({} distinct); duplicates {:?}; breaches {breaches:?}; \
             missing {missing:?}; errors {errors:?}; {}",
            self.total(),
            self.distinct(),
            self.duplicates().iter().take(12).collect::<Vec<_>>(),
            self.summary()
        );
        assert!(
            breaches.is_empty(),
            "{adapter}: {breaches:#?}\n{}",
            self.summary()
        );
        assert!(
            missing.is_empty(),
            "{adapter}: never handed out {missing:?}"
        );
        assert!(
            errors_allowed || errors.is_empty(),
            "{adapter}: next() failed: {errors:?}"
        );
    }
}

/// Samples the group's stored offsets every millisecond on a thread of its own until
/// dropped.
pub(crate) struct Sampler<'s> {
    stop: &'s AtomicBool,
}

impl<'s> Sampler<'s> {
    pub(crate) fn spawn<'scope, 'env: 'scope>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        env: &'env Env,
        watch: &'env Watch,
        stop: &'env AtomicBool,
    ) -> Sampler<'env> {
        scope.spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                watch.sample(env, "sampler");
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Sampler { stop }
    }
}

impl Drop for Sampler<'_> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}
