//! Real consumer-group members: on a share of seeds, some routers run one or two members
//! of the simulation's group, each a core [`ConsumerState`] driven as the adapters drive
//! it (`memberrun.rs`): `next_step` gives a request to submit or an instant to wait for,
//! the router's completion of that request goes back to `answer`; one request out at a
//! time. The caller takes the messages polled one by one (`next_message`: the hand-out),
//! working on each for a while, and asks for the next step only when none is left, as the
//! adapters' `next` does.
//!
//! The plan draws from a stream of its own, so every other choice of a seed stays what it
//! was (and a seed without members runs exactly as before). A member:
//! - joins early or late, and stops by a deadline shortly after the workload: by
//!   shutting down (its commit, then its leave) or by being dropped without one (its
//!   router then ends the membership, as the adapters do: `take_leaving`, `abandon_group`);
//!   a shutdown that fails or outlasts [`GRACE`] ends in a drop too;
//! - sometimes stops stepping for a while (a slow member: what it polled waits, not taken)
//!   and then goes on;
//! - commits on its own (`AfterPoll` or `Interval`), and sometimes at the caller's word;
//! - may be followed on its router by a second consumer of the group: one that starts
//!   while the first lives must be refused (`GroupConsumerExists`), one that starts after
//!   it ended takes its place.

use std::collections::BTreeMap;
use std::time::Duration;

use iggy_route_core::RequestId;
use iggy_route_core::client::ClientError;
use iggy_route_core::client::ExpectedReply;
use iggy_route_core::client::consumer::{
    AutoCommit, ConsumerConfig, ConsumerIdentity, ConsumerState, ConsumerStats, GroupClaims,
};
use iggy_route_core::wire::Identifier;
use iggy_route_core::{Reply, Request};

use super::nodes::SimTopic;
use super::ops::GROUP;
use super::rng::SimRng;
use super::scenario::Scenario;

/// Run members in this share of seeds (percent).
pub const MEMBER_SEEDS_PERCENT: u64 = 50;
/// How long a shutdown may take before its member is dropped instead.
pub const GRACE: Duration = Duration::from_secs(3);

/// How a member ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Commit what it handed out, then leave the group.
    Shutdown,
    /// Dropped without a shutdown.
    Drop,
}

/// One planned member.
#[derive(Debug, Clone)]
pub struct MemberPlan {
    /// Its router.
    pub router: usize,
    /// When it is built (and claims the group on its router).
    pub start: Duration,
    /// When it stops reading and ends.
    pub stop: Duration,
    /// How it ends.
    pub ending: Ending,
    /// Windows `[from, until)` in which it does not step (a slow member).
    pub pauses: Vec<(Duration, Duration)>,
    /// When the caller asks it to commit.
    pub commits: Vec<Duration>,
    /// How long the caller works on each message it takes.
    pub process: Duration,
    /// Its configuration.
    pub config: ConsumerConfig,
}

impl MemberPlan {
    /// The end of the pause `now` falls in, if any.
    pub fn paused_until(&self, now: Duration) -> Option<Duration> {
        self.pauses
            .iter()
            .find(|(from, until)| *from <= now && now < *until)
            .map(|(_, until)| *until)
    }
}

/// Every member of a seed, planned.
pub fn plan(scenario: &Scenario, topic: SimTopic, end: Duration) -> Vec<MemberPlan> {
    let mut rng = SimRng::new(scenario.seed, 0x3E3B_E125_0000);
    if !rng.chance(MEMBER_SEEDS_PERCENT) {
        return Vec::new();
    }
    let routers = scenario.routers;
    let count = rng.range(2.min(routers as u64), routers as u64) as usize;
    let first = rng.index(routers);
    let mut plans = Vec::new();
    for i in 0..count {
        let router = (first + i) % routers;
        let one = member(&mut rng, scenario, topic, router, end, None);
        let (start, stop) = (one.start, one.stop);
        plans.push(one);
        if rng.chance(45) {
            // A second consumer of the group on this router: refused while the first
            // lives, a replacement after it.
            let start = if rng.chance(65) {
                rng.duration(start, stop)
            } else {
                stop + GRACE + rng.duration(Duration::from_millis(50), Duration::from_millis(400))
            };
            plans.push(member(&mut rng, scenario, topic, router, end, Some(start)));
        }
    }
    plans
}

fn member(
    rng: &mut SimRng,
    scenario: &Scenario,
    topic: SimTopic,
    router: usize,
    end: Duration,
    start: Option<Duration>,
) -> MemberPlan {
    let ms = Duration::from_millis;
    let span = scenario.workload_span;
    let start = start.unwrap_or_else(|| {
        if rng.chance(60) {
            rng.duration(ms(10), span / 5)
        } else {
            rng.duration(span / 5, span * 2 / 3)
        }
    });
    // The latest stop: the members read what the workload wrote last.
    let deadline = end + rng.duration(ms(300), ms(1_000));
    let stop = if rng.chance(40) || start + span / 5 >= deadline {
        deadline.max(start + ms(100))
    } else {
        rng.duration(start + span / 5, deadline)
    };
    let ending = if rng.chance(30) {
        Ending::Drop
    } else {
        Ending::Shutdown
    };
    let mut pauses = Vec::new();
    if rng.chance(40) {
        let mut from = start;
        for _ in 0..rng.range(1, 2) {
            from = rng.duration(from, stop);
            let until = (from + rng.duration(ms(150), ms(2_000))).min(stop);
            pauses.push((from, until));
            from = until;
        }
    }
    let mut commits = Vec::new();
    if rng.chance(30) {
        for _ in 0..rng.range(1, 3) {
            commits.push(rng.duration(start, stop));
        }
        commits.sort_unstable();
    }
    let mut config = ConsumerConfig::new(
        Identifier::Numeric(topic.stream),
        Identifier::Numeric(topic.topic),
        ConsumerIdentity::Group(Identifier::Numeric(GROUP)),
    );
    config.batch_length = rng.range(1, 5) as u32;
    config.poll_interval = rng.duration(ms(10), ms(60));
    config.sync_interval = rng.duration(ms(100), ms(600));
    config.auto_commit = if rng.chance(60) {
        AutoCommit::AfterPoll
    } else {
        AutoCommit::Interval(rng.duration(ms(30), ms(300)))
    };
    // The group exists (`SimNodes::create_topic`); created by name it would be another.
    config.create_group = false;
    let process = if rng.chance(50) {
        Duration::ZERO
    } else {
        rng.duration(Duration::from_micros(200), ms(3))
    };
    MemberPlan {
        router,
        start,
        stop,
        ending,
        pauses,
        commits,
        process,
        config,
    }
}

/// Where a member is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not built yet.
    Unborn,
    /// Reading.
    Reading,
    /// Shutting down: its commit.
    Committing,
    /// Shutting down: its leave is out.
    Leaving,
    /// Over (left, dropped, or refused).
    Over,
}

/// What a member's request out is for.
#[derive(Debug)]
pub enum Purpose {
    /// A step of its state machine.
    Step,
    /// Its leave, with how to read the answer.
    Leave(ExpectedReply<()>),
}

/// One member as it runs.
#[derive(Debug)]
pub struct Member {
    /// Its plan.
    pub plan: MemberPlan,
    /// Its state machine, while it lives.
    pub state: Option<ConsumerState>,
    /// Where it is.
    pub phase: Phase,
    /// Its request out.
    pub out: Option<RequestId>,
    /// What that request is for.
    pub purpose: Option<Purpose>,
    /// The answer that came, for its next step.
    pub arrived: Option<(Purpose, Result<Reply, ClientError>)>,
    /// When it steps next (`None`: when its answer comes, or never).
    pub wake: Option<Duration>,
    /// Its counters, kept after it is gone.
    pub stats: ConsumerStats,
    /// Caller commits asked so far.
    pub commits_asked: usize,
    /// The instant of its last step, and how many steps it took then.
    pub last_step: Option<Duration>,
    /// See `last_step`.
    pub steps_at_once: u32,
    /// Its last step asked to wait until then (once is the end of a caller's commit).
    pub waited_now: bool,
    /// The group's stored offset of each partition when it last sent a sync: the sync
    /// whose answer let it hand out what it hands out now (see `GroupCheck::handed_out`).
    pub stored_at_sync: std::collections::BTreeMap<u32, Option<u64>>,
}

/// A member's request, as the simulation holds it.
#[derive(Debug, Clone, Copy)]
pub struct Owned {
    /// The member.
    pub member: usize,
    /// Its member is gone (dropped with the request out).
    pub orphan: bool,
    /// Completed.
    pub done: bool,
}

/// Counts for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemberTally {
    /// Members built.
    pub built: u64,
    /// Second consumers of a router's group refused with `GroupConsumerExists`.
    pub refused: u64,
    /// Members dropped without a shutdown (planned, or a shutdown that failed).
    pub dropped: u64,
    /// Members that shut down (commit and leave).
    pub shut_down: u64,
    /// Caller commits asked.
    pub caller_commits: u64,
    /// Steps that asked, a second time in a row, to wait until now (a spin).
    pub spin_waits: u64,
}

/// Every member of the run, with its router's claims.
#[derive(Debug)]
pub struct Members {
    /// The members, in plan order.
    pub list: Vec<Member>,
    /// Each router's consumers' claims.
    pub claims: Vec<GroupClaims>,
    /// Member requests by (router, id).
    pub owned: BTreeMap<(usize, RequestId), Owned>,
    /// Counts.
    pub tally: MemberTally,
    end: Duration,
}

impl Members {
    /// The members of `plans`, for `routers` routers.
    pub fn new(plans: Vec<MemberPlan>, routers: usize) -> Self {
        let end = plans
            .iter()
            .map(|p| p.stop + GRACE)
            .max()
            .unwrap_or(Duration::ZERO);
        let list = plans
            .into_iter()
            .map(|plan| Member {
                wake: Some(plan.start),
                plan,
                state: None,
                phase: Phase::Unborn,
                out: None,
                purpose: None,
                arrived: None,
                stats: ConsumerStats::default(),
                commits_asked: 0,
                last_step: None,
                steps_at_once: 0,
                waited_now: false,
                stored_at_sync: std::collections::BTreeMap::new(),
            })
            .collect();
        Self {
            list,
            claims: (0..routers).map(|_| GroupClaims::new(|| {})).collect(),
            owned: BTreeMap::new(),
            tally: MemberTally::default(),
            end,
        }
    }

    /// Whether any member is planned.
    pub fn any(&self) -> bool {
        !self.list.is_empty()
    }

    /// When the last member is over at the latest.
    pub fn end(&self) -> Duration {
        self.end
    }

    /// Whether `(router, id)` is a member's request.
    pub fn owns(&self, router: usize, id: RequestId) -> bool {
        self.owned.contains_key(&(router, id))
    }

    /// Whether every member is over and every request of theirs completed.
    pub fn all_done(&self) -> bool {
        self.list.iter().all(|m| m.phase == Phase::Over) && self.owned.values().all(|o| o.done)
    }

    /// Whether a member of `router` other than `except` lives.
    pub fn lives_on(&self, router: usize, except: usize) -> bool {
        self.list
            .iter()
            .enumerate()
            .any(|(k, m)| k != except && m.plan.router == router && m.state.is_some())
    }

    /// The counters of every member, summed.
    pub fn stats(&self) -> ConsumerStats {
        let mut sum = ConsumerStats::default();
        for m in &self.list {
            let s = m.state.as_ref().map_or(m.stats, ConsumerState::stats);
            sum.polls += s.polls;
            sum.messages += s.messages;
            sum.commits += s.commits;
            sum.commit_failures += s.commit_failures;
            sum.joins += s.joins;
            sum.syncs += s.syncs;
            sum.resyncs += s.resyncs;
            sum.commits_fenced += s.commits_fenced;
        }
        sum
    }
}

/// A short description of a member's request, for the trace.
#[allow(
    clippy::wildcard_enum_match_arm,
    reason = "`Request` is non_exhaustive; a member sends none of the others"
)]
pub fn describe(request: &Request) -> String {
    match request {
        Request::Poll(poll) => format!(
            "poll p{:?} {:?} x{}",
            poll.partition_id, poll.strategy, poll.count
        ),
        Request::StoreOffset(store) => {
            format!("commit p{} {}", store.partition_id, store.offset)
        }
        Request::Command(command) => format!("command {}", command.code),
        other => format!("{other:?}"),
    }
}
