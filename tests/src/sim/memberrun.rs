//! The simulation's side of the consumer-group members (`members.rs`): building each one
//! on its router's claims, stepping it as the adapters do (take the messages polled with
//! `next_message`, then submit what `next_step` asks and hand the router's completion to
//! `answer` as `Result<Reply, ClientError>`), ending it by a shutdown or a drop (then, as
//! the adapters' I/O side does, withdrawing its request out and having the router abandon
//! the memberships its claims hand back). What it hands out is checked by `group_check.rs`.

use iggy_route_core::client::ClientError;
use iggy_route_core::client::consumer::{ConsumerState, ReceivedMessage, Step};
use iggy_route_core::wire::code::SYNC_CONSUMER_GROUP;
use iggy_route_core::{Outcome, Request, RequestId};

use super::engine::Simulation;
use super::members::{Ending, GRACE, Owned, Phase, Purpose, describe};
use super::nodes::{SimNodes, SimTopic};
use super::ops::GROUP;
use super::opsrun::log_in;
use crate::cluster::{Lookup, OffsetOwner};

/// Whether a member that asks twice in a row to wait until now fails the run: the
/// adapters' loops would spin. (It did with an `Interval` commit overdue and nothing to
/// commit, before `next_wake` looked for something to commit.) Off, the spins are counted
/// in the report instead, and the member steps again after [`SPIN_STEP`].
const SPIN_IS_FATAL: bool = true;
/// How soon a spinning member steps again.
const SPIN_STEP: std::time::Duration = std::time::Duration::from_millis(1);

/// Steps of one member at one simulated instant before it counts as spinning: an answer,
/// the step after it and a submit take three.
const SPIN_STEPS: u32 = 50;

/// How a member ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Its shutdown: committed and left.
    Left,
    /// Dropped without a shutdown, as planned.
    Dropped,
    /// Its shutdown failed: dropped, as the adapters' `shutdown` leaves it.
    ShutdownFailed,
    /// Its shutdown outlasted the grace: dropped.
    CutShort,
}

/// The group's stored offset of `partition`.
/// More partitions than a simulated topic ever has.
const MAX_PARTITIONS: u32 = 16;

pub(super) fn group_stored(nodes: &SimNodes, topic: SimTopic, partition: u32) -> Option<u64> {
    nodes
        .state
        .catalog
        .partition(Lookup::Id(topic.stream), Lookup::Id(topic.topic), partition)
        .ok()?
        .offsets
        .get(&OffsetOwner::GroupId(GROUP))
        .copied()
}

impl Simulation {
    /// Member `k`'s step: start it, hand it its answer, or ask it what to do next.
    pub(super) fn step_member(&mut self, k: usize) {
        let now = self.now;
        let member = &mut self.members.list[k];
        member.wake = None;
        if member.last_step == Some(now) {
            member.steps_at_once += 1;
            if member.steps_at_once >= SPIN_STEPS {
                let router = member.plan.router;
                self.fail(format_args!(
                    "member m{k} (router {router}) stepped {SPIN_STEPS} times at one instant: \
                     it spins"
                ));
            }
        } else {
            member.last_step = Some(now);
            member.steps_at_once = 0;
        }
        match member.phase {
            Phase::Unborn => return self.start_member(k),
            Phase::Over => return,
            Phase::Reading | Phase::Committing | Phase::Leaving => {}
        }
        if let Some((purpose, answer)) = member.arrived.take() {
            return self.member_answer(k, purpose, answer);
        }
        if member.out.is_some() {
            return;
        }
        if let Some(until) = member.plan.paused_until(now) {
            member.wake = Some(until);
            return;
        }
        let (router, stop) = (member.plan.router, member.plan.stop);
        if member.phase == Phase::Reading && now >= stop {
            if member.plan.ending == Ending::Drop {
                return self.end_member(k, End::Dropped);
            }
            if let Some(state) = member.state.as_mut() {
                state.request_commit();
            }
            member.phase = Phase::Committing;
            self.trace
                .line(now, format_args!("m{k} r{router} shuts down: commit"));
        }
        let member = &mut self.members.list[k];
        if member.phase != Phase::Reading && now >= stop + GRACE {
            return self.end_member(k, End::CutShort);
        }
        if member.phase == Phase::Reading
            && member
                .plan
                .commits
                .get(member.commits_asked)
                .is_some_and(|at| *at <= now)
        {
            member.commits_asked += 1;
            self.members.tally.caller_commits += 1;
            let member = &mut self.members.list[k];
            // A caller's commit ends with one wait until now of its own.
            member.waited_now = false;
            if let Some(state) = member.state.as_mut() {
                state.request_commit();
            }
            self.trace
                .line(now, format_args!("m{k} r{router} caller commits"));
        }
        let instant = self.instant();
        let member = &mut self.members.list[k];
        let Some(state) = member.state.as_mut() else {
            self.fail(format_args!("member m{k} lives without its state"));
        };
        if member.phase == Phase::Committing && !state.commit_requested() {
            return self.leave_member(k);
        }
        // The caller takes what was polled, one message at a time, before it asks for more
        // (not while its commit is being made).
        if member.phase == Phase::Reading
            && !state.commit_requested()
            && let Some(message) = state.next_message(instant)
        {
            member.wake = Some(now + member.plan.process);
            return self.record_handout(k, &message);
        }
        match state.next_step(instant) {
            Step::Submit(request) => self.member_submit(k, request, Purpose::Step),
            Step::Wait(at) => {
                let mut at = at.saturating_duration_since(self.base).max(now);
                if at > now {
                    member.waited_now = false;
                } else if member.waited_now {
                    // Asked twice in a row to wait until now: the adapters' loops would ask
                    // again at once, and again, until something is due (see SPIN_IS_FATAL).
                    self.members.tally.spin_waits += 1;
                    if SPIN_IS_FATAL {
                        self.fail(format_args!(
                            "member m{k} (router {router}) asks twice in a row to wait until \
                             now: its adapter would spin"
                        ));
                    }
                    self.trace
                        .line(now, format_args!("m{k} r{router} spins: waits until now"));
                    at = now + SPIN_STEP;
                } else {
                    // Once, after the caller's commit is made.
                    member.waited_now = true;
                }
                // The caller's own moves (a commit, the stop) come at their time.
                let reading = member.phase == Phase::Reading;
                let next_commit = member
                    .plan
                    .commits
                    .get(member.commits_asked)
                    .copied()
                    .filter(|_| reading);
                let stop = reading.then_some(stop);
                let wake = [Some(at), next_commit, stop]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or(at)
                    .max(now);
                member.wake = Some(wake);
            }
        }
    }

    /// Build member `k` on its router's claims: refused exactly while another consumer of
    /// the group lives on that router.
    fn start_member(&mut self, k: usize) {
        let member = &self.members.list[k];
        let router = member.plan.router;
        let taken = self.members.lives_on(router, k);
        let claimed =
            ConsumerState::claiming(member.plan.config.clone(), &self.members.claims[router]);
        match (claimed, taken) {
            (Ok(state), false) => {
                let member = &mut self.members.list[k];
                member.state = Some(state);
                member.phase = Phase::Reading;
                member.wake = Some(self.now);
                self.members.tally.built += 1;
                let plan = &self.members.list[k].plan;
                self.trace.line(
                    self.now,
                    format_args!(
                        "m{k} r{router} built: stop {:?} {:?}, pauses {:?}, commits {:?}, batch {}, \
                         poll {:?}, sync {:?}, {:?}",
                        plan.stop,
                        plan.ending,
                        plan.pauses,
                        plan.commits,
                        plan.config.batch_length,
                        plan.config.poll_interval,
                        plan.config.sync_interval,
                        plan.config.auto_commit
                    ),
                );
            }
            (Err(ClientError::GroupConsumerExists { .. }), true) => {
                self.members.list[k].phase = Phase::Over;
                self.members.tally.refused += 1;
                self.trace.line(
                    self.now,
                    format_args!("m{k} r{router} refused: a consumer of the group lives there"),
                );
            }
            (Ok(_), true) => self.fail(format_args!(
                "a second consumer of the group on router {router} (m{k}) was built while \
                 another lives there"
            )),
            (Err(error), _) => self.fail(format_args!(
                "member m{k} on router {router} was refused: {error}"
            )),
        }
    }

    fn member_submit(&mut self, k: usize, request: Request, purpose: Purpose) {
        let router = self.members.list[k].plan.router;
        if let Request::StoreOffset(store) = &request {
            let partition = store.partition_id;
            // Checked as of the sync that confirmed it, as hand-outs are.
            let stored = self.members.list[k]
                .stored_at_sync
                .get(&partition)
                .copied()
                .flatten();
            let sent = self
                .group_check
                .commit_sent((partition, store.offset), stored);
            if let Err(message) = sent {
                self.fail(format_args!("{message}"));
            }
        }
        if matches!(&request, Request::Command(c) if c.code == SYNC_CONSUMER_GROUP) {
            let stored = (0..MAX_PARTITIONS)
                .map(|p| (p, group_stored(&self.nodes, self.topic, p)))
                .collect();
            self.members.list[k].stored_at_sync = stored;
        }
        let what = describe(&request);
        let instant = self.instant();
        let result = self.routers[router].submit(instant, request);
        self.trace.line(
            self.now,
            format_args!("m{k} r{router} submit {what} -> {result:?}"),
        );
        let member = &mut self.members.list[k];
        member.waited_now = false;
        match result {
            Ok(id) => {
                member.out = Some(id);
                member.purpose = Some(purpose);
                let owned = Owned {
                    member: k,
                    orphan: false,
                    done: false,
                };
                if self.members.owned.insert((router, id), owned).is_some() {
                    self.fail(format_args!("router {router} reused request id {id}"));
                }
            }
            Err(error @ iggy_route_core::SubmitError::QueueFull { .. }) => {
                member.arrived = Some((purpose, Err(ClientError::from(error))));
                member.wake = Some(self.now);
            }
            Err(other) => self.fail(format_args!(
                "router {router} refused member m{k}'s valid {what}: {other}"
            )),
        }
        self.drain(router, false);
    }

    /// Router `router` completed `id`, a member's request: its answer waits for the
    /// member's next step (now).
    pub(super) fn member_completed(
        &mut self,
        router: usize,
        id: RequestId,
        outcome: Outcome,
    ) -> Result<(), String> {
        let Some(owned) = self.members.owned.get_mut(&(router, id)) else {
            return Err(format!("router {router} completed {id}, never a member's"));
        };
        if owned.done {
            return Err(format!(
                "router {router} completed member m{}'s {id} twice, now with {outcome:?}",
                owned.member
            ));
        }
        owned.done = true;
        if owned.orphan {
            return Ok(());
        }
        let k = owned.member;
        let member = &mut self.members.list[k];
        if member.out != Some(id) {
            return Err(format!(
                "router {router} completed {id} of member m{k}, whose request out is {:?}",
                member.out
            ));
        }
        member.out = None;
        let purpose = member.purpose.take().unwrap_or(Purpose::Step);
        member.arrived = Some((purpose, outcome.map_err(ClientError::from)));
        member.wake = Some(self.now);
        Ok(())
    }

    fn member_answer(
        &mut self,
        k: usize,
        purpose: Purpose,
        answer: Result<iggy_route_core::Reply, ClientError>,
    ) {
        let (now, instant) = (self.now, self.instant());
        let member = &mut self.members.list[k];
        let router = member.plan.router;
        let Some(state) = member.state.as_mut() else {
            self.fail(format_args!("member m{k} lives without its state"));
        };
        match purpose {
            Purpose::Step => {
                // The messages a poll brought wait for the caller to take them.
                let result = state.answer(instant, answer);
                member.stats = state.stats();
                member.wake = Some(now);
                match result {
                    Ok(()) => {}
                    Err(error) => {
                        self.trace
                            .line(now, format_args!("m{k} r{router} error: {error}"));
                        if member.phase == Phase::Committing {
                            self.end_member(k, End::ShutdownFailed);
                        }
                    }
                }
            }
            Purpose::Leave(expected) => match answer.and_then(|reply| expected.extract(reply)) {
                Ok(()) => {
                    state.left();
                    self.end_member(k, End::Left);
                }
                Err(error) => {
                    self.trace
                        .line(now, format_args!("m{k} r{router} leave failed: {error}"));
                    self.end_member(k, End::ShutdownFailed);
                }
            },
        }
    }

    /// Check a message member `k` handed out against its log and the group's stored
    /// offsets.
    fn record_handout(&mut self, k: usize, received: &ReceivedMessage) {
        let router = self.members.list[k].plan.router;
        let (partition, offset) = (received.partition_id, received.message.offset);
        let stored = group_stored(&self.nodes, self.topic, partition);
        // A member hands out what a sync it sent after the poll confirmed; what another
        // member stored while that sync (or its answer) was on its way is the window the
        // docs name: the check is against the stored offset when the sync was sent.
        let confirmed_against = self.members.list[k]
            .stored_at_sync
            .get(&partition)
            .copied()
            .flatten();
        self.trace.line(
            self.now,
            format_args!(
                "m{k} r{router} hands out p{partition} {offset} (group stored {stored:?})"
            ),
        );
        let log = log_in(&self.nodes, self.topic, partition);
        let logged = usize::try_from(offset).ok().and_then(|at| log.get(at));
        if logged.is_none_or(|m| m.offset != offset || m.payload != received.message.payload) {
            self.fail(format_args!(
                "member m{k} (router {router}) handed out offset {offset} of partition \
                 {partition}, which its log does not hold as handed out"
            ));
        }
        let at = (self.step, self.now);
        if let Err(message) =
            self.group_check
                .handed_out((k, router), (partition, offset), confirmed_against, at)
        {
            self.fail(format_args!("{message}"));
        }
    }

    /// Member `k`'s commit is made: it leaves the group, if it joined one.
    fn leave_member(&mut self, k: usize) {
        let member = &mut self.members.list[k];
        let Some(call) = member.state.as_ref().and_then(ConsumerState::leave_call) else {
            return self.end_member(k, End::Left);
        };
        member.phase = Phase::Leaving;
        self.member_submit(k, call.request, Purpose::Leave(call.reply));
    }

    /// Member `k` is over: its state is dropped. As the adapters' I/O side does then, its
    /// request out is withdrawn and the memberships its router's claims hand back as
    /// leaving are abandoned.
    fn end_member(&mut self, k: usize, how: End) {
        let instant = self.instant();
        let member = &mut self.members.list[k];
        let router = member.plan.router;
        member.phase = Phase::Over;
        member.arrived = None;
        member.purpose = None;
        member.wake = None;
        let out = member.out.take();
        if let Some(state) = member.state.take() {
            member.stats = state.stats();
        }
        if let Some(id) = out
            && let Some(owned) = self.members.owned.get_mut(&(router, id))
        {
            owned.orphan = true;
        }
        match how {
            End::Left => self.members.tally.shut_down += 1,
            End::Dropped | End::ShutdownFailed | End::CutShort => self.members.tally.dropped += 1,
        }
        self.trace.line(
            self.now,
            format_args!("m{k} r{router} over: {how:?}, request out {out:?}"),
        );
        if let Some(id) = out {
            self.routers[router].withdraw(instant, id);
        }
        for group in self.members.claims[router].take_leaving() {
            self.trace
                .line(self.now, format_args!("r{router} abandons {group:?}"));
            self.routers[router].abandon_group(instant, &group);
        }
        // Whatever membership the router had for the group may be over now: the raw
        // group requests of `ops.rs` no longer count it a member.
        self.opsbook.membership_ended(router);
        self.drain(router, false);
    }
}
