//! The checker of the consumer group's promise, over every member the simulation runs
//! (`members.rs`):
//! - every message a member hands out is in its partition's log, at its offset;
//! - a message handed out twice (by any members, the same one included) is allowed only
//!   inside the documented window: the group had not stored an offset at or beyond it
//!   when it was handed out again (a batch handed out and not committed before its
//!   partition changed owner, which the new owner reads again from the stored offset);
//! - every offset the group stores only moves forward (sampled after every step; an
//!   offset that disappears, with its partition or group, starts a new baseline).
//!
//! A violation names the hand-outs of the message, the partition's recent stored offsets
//! and the group's recent generations, so that the run can be read from the message.
//!
//! At the end of a run: every member is over, every request of theirs completed, and a
//! router that joined the group only through its members is no member of it (a dropped
//! member's membership ended).

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::time::Duration;

use super::engine::Simulation;
use super::memberrun::group_stored;
use super::members::Phase;
use super::ops::GROUP;
use crate::cluster::Lookup;

/// Entries of each history kept for a violation's message.
const HISTORY: usize = 24;

/// One hand-out of one message.
#[derive(Debug, Clone, Copy)]
struct HandOut {
    member: usize,
    router: usize,
    step: u64,
    at: Duration,
    /// The group's stored offset of the partition then.
    stored: Option<u64>,
}

/// A change of the group's membership as the cluster model holds it.
#[derive(Debug, Clone)]
struct Generation {
    step: u64,
    at: Duration,
    generation: u64,
    /// Each member as its router (`None`: no open connection of a router), with its
    /// partitions.
    assignment: Vec<(Option<usize>, Vec<u32>)>,
}

/// A change of a stored offset.
#[derive(Debug, Clone, Copy)]
struct Stored {
    step: u64,
    at: Duration,
    partition: u32,
    from: Option<u64>,
    to: Option<u64>,
}

/// See the module doc.
#[derive(Debug, Default)]
pub struct GroupCheck {
    handouts: BTreeMap<(u32, u64), Vec<HandOut>>,
    /// The baseline of each partition's stored group offset.
    stored: BTreeMap<u32, u64>,
    stored_log: VecDeque<Stored>,
    generations: VecDeque<Generation>,
    last_generation: Option<u64>,
    /// Messages handed out.
    pub handed_out: u64,
    /// Messages handed out again inside the window.
    pub redelivered: u64,
    /// Per (partition, offset) a member sent a commit of, the lowest group stored offset
    /// when one was sent (`None`: nothing stored then).
    commits_sent: BTreeMap<(u32, u64), Option<u64>>,
    /// Commits that moved the stored offset back, though they did not when sent.
    pub landed_late: u64,
}

impl GroupCheck {
    /// Member `member` of router `router` handed out `offset` of `partition` at step
    /// `step`, when the group's stored offset of the partition was `stored`.
    pub fn handed_out(
        &mut self,
        (member, router): (usize, usize),
        (partition, offset): (u32, u64),
        stored: Option<u64>,
        (step, at): (u64, Duration),
    ) -> Result<(), String> {
        self.handed_out += 1;
        let this = HandOut {
            member,
            router,
            step,
            at,
            stored,
        };
        let earlier = self.handouts.entry((partition, offset)).or_default();
        if !earlier.is_empty() {
            if stored.is_some_and(|stored| stored >= offset) {
                earlier.push(this);
                let message = format!(
                    "member m{member} (router {router}) handed out offset {offset} of partition \
                     {partition} again, though the group had stored {stored:?} for it: outside \
                     the re-delivery window\n{}",
                    self.describe(partition, offset)
                );
                return Err(message);
            }
            self.redelivered += 1;
        }
        earlier.push(this);
        Ok(())
    }

    /// A member sent a commit of `offset` of `partition`, confirmed by a sync sent when the
    /// group's stored offset of it was `stored`. A member never sends one that moved the
    /// offset back then.
    pub fn commit_sent(
        &mut self,
        (partition, offset): (u32, u64),
        stored: Option<u64>,
    ) -> Result<(), String> {
        if stored.is_some_and(|stored| stored > offset) {
            return Err(format!(
                "a member sent a commit of offset {offset} of partition {partition} while the                  group had stored {stored:?}: a step back already when sent\n{}",
                self.describe(partition, offset)
            ));
        }
        let lowest = self
            .commits_sent
            .entry((partition, offset))
            .or_insert(stored);
        *lowest = (*lowest).min(stored);
        Ok(())
    }

    /// Whether a member sent a commit of `offset` of `partition` that was no step back
    /// when it was sent.
    fn sent_in_time(&self, partition: u32, offset: u64) -> bool {
        self.commits_sent
            .get(&(partition, offset))
            .is_some_and(|stored| stored.is_none_or(|stored| stored <= offset))
    }

    /// The group's stored offsets now, per partition (`None`: none stored, or the
    /// partition or group is gone: the baseline starts again).
    pub fn sample(
        &mut self,
        (step, at): (u64, Duration),
        offsets: &[(u32, Option<u64>)],
    ) -> Result<(), String> {
        for &(partition, now) in offsets {
            let seen = self.stored.get(&partition).copied();
            if seen == now {
                continue;
            }
            self.note_stored(Stored {
                step,
                at,
                partition,
                from: seen,
                to: now,
            });
            match (seen, now) {
                (Some(seen), Some(now)) if now < seen && self.sent_in_time(partition, now) => {
                    // A member's commit that was no step back when it was sent: a rebalance
                    // while it was on its way (or a node that had not applied one) let it
                    // land late, the window a server without leases leaves any client.
                    self.landed_late += 1;
                    self.stored.insert(partition, now);
                }
                (Some(seen), Some(now)) if now < seen => {
                    return Err(format!(
                        "the group's stored offset of partition {partition} went back from \
                         {seen} to {now}\n{}",
                        self.describe(partition, now)
                    ));
                }
                (_, Some(now)) => {
                    self.stored.insert(partition, now);
                }
                (_, None) => {
                    self.stored.remove(&partition);
                }
            }
        }
        Ok(())
    }

    fn note_stored(&mut self, change: Stored) {
        if self.stored_log.len() == HISTORY {
            self.stored_log.pop_front();
        }
        self.stored_log.push_back(change);
    }

    /// The group's generation and assignment now; true when the generation changed.
    pub fn note_generation(
        &mut self,
        (step, at): (u64, Duration),
        generation: u64,
        assignment: Vec<(Option<usize>, Vec<u32>)>,
    ) -> bool {
        if self.last_generation == Some(generation) {
            return false;
        }
        self.last_generation = Some(generation);
        if self.generations.len() == HISTORY {
            self.generations.pop_front();
        }
        self.generations.push_back(Generation {
            step,
            at,
            generation,
            assignment,
        });
        true
    }

    /// What the checker knows of `offset` of `partition`: its hand-outs, the partition's
    /// stored offsets, the group's generations.
    fn describe(&self, partition: u32, offset: u64) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "hand-outs of partition {partition} offset {offset}:");
        for h in self
            .handouts
            .get(&(partition, offset))
            .into_iter()
            .flatten()
        {
            let _ = writeln!(
                out,
                "  step {} at {:?}: member m{} (router {}), group's stored offset {:?}",
                h.step, h.at, h.member, h.router, h.stored
            );
        }
        let _ = writeln!(
            out,
            "stored offsets of partition {partition} (latest changes):"
        );
        for s in self.stored_log.iter().filter(|s| s.partition == partition) {
            let _ = writeln!(
                out,
                "  step {} at {:?}: {:?} -> {:?}",
                s.step, s.at, s.from, s.to
            );
        }
        let _ = writeln!(out, "group generations (latest; members as routers):");
        for g in &self.generations {
            let _ = writeln!(
                out,
                "  step {} at {:?}: generation {} {:?}",
                g.step, g.at, g.generation, g.assignment
            );
        }
        out
    }
}

/// The simulation's side of the checks: sampling the model after every step, and the
/// members' end-of-run checks.
impl Simulation {
    /// The per-step group checks: the stored offsets only move forward; the generations
    /// are noted (traced on seeds with members).
    pub(super) fn check_group(&mut self) {
        let topic = self.topic;
        let offsets: Vec<(u32, Option<u64>)> = (0..topic.partitions)
            .map(|p| (p, group_stored(&self.nodes, topic, p)))
            .collect();
        if let Err(message) = self.group_check.sample((self.step, self.now), &offsets) {
            self.fail(format_args!("{message}"));
        }
        if !self.members.any() {
            return;
        }
        let Some((generation, partitions)) = self
            .nodes
            .state
            .catalog
            .topic(Lookup::Id(topic.stream), Lookup::Id(topic.topic))
            .ok()
            .and_then(|found| found.groups.find(Lookup::Id(GROUP)))
            .map(|group| {
                let partitions: Vec<Vec<u32>> =
                    group.members.iter().map(|m| m.partitions.clone()).collect();
                (group.generation, partitions)
            })
        else {
            return;
        };
        let routers = self
            .nodes
            .group_members(topic, GROUP, &|id| self.pauses.is_closing(id));
        let assignment: Vec<(Option<usize>, Vec<u32>)> =
            routers.into_iter().zip(partitions).collect();
        let at = (self.step, self.now);
        if self
            .group_check
            .note_generation(at, generation, assignment.clone())
        {
            self.trace.line(
                self.now,
                format_args!("group generation {generation}: {assignment:?}"),
            );
        }
    }

    /// The end-of-run checks of the members: every one is over, every request of theirs
    /// completed, and a router that never joined the group but through its members is no
    /// member of it now (a dropped member's membership ended).
    pub(super) fn finish_members(&self) -> Result<(), String> {
        if let Some((k, m)) = self
            .members
            .list
            .iter()
            .enumerate()
            .find(|(_, m)| m.phase != Phase::Over)
        {
            return Err(format!("member m{k} never ended ({:?})", m.phase));
        }
        if let Some(((router, id), owned)) = self.members.owned.iter().find(|(_, o)| !o.done) {
            return Err(format!(
                "router {router} never completed member m{}'s request {id}",
                owned.member
            ));
        }
        let members = self
            .nodes
            .group_members(self.topic, GROUP, &|id| self.pauses.is_closing(id));
        for router in 0..self.routers.len() {
            let raw = self.raw_joiners.get(router).copied().unwrap_or(true);
            if !raw && members.contains(&Some(router)) {
                let ends: Vec<String> = self
                    .members
                    .list
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.plan.router == router)
                    .map(|(k, m)| format!("m{k} ({:?} at {:?})", m.plan.ending, m.plan.stop))
                    .collect();
                return Err(format!(
                    "router {router} is still a member of the group at the end, though every \
                     consumer of it there is over ({ends:?}) and it joined no other way"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const T: (u64, Duration) = (1, Duration::ZERO);

    #[test]
    fn a_second_hand_out_is_allowed_only_below_the_stored_offset() {
        let mut check = GroupCheck::default();
        check.handed_out((0, 0), (1, 5), None, T).unwrap();
        check.handed_out((1, 1), (1, 5), Some(4), T).unwrap();
        assert_eq!(check.redelivered, 1);
        assert!(check.handed_out((0, 0), (1, 5), Some(5), T).is_err());
        check.handed_out((0, 0), (1, 6), Some(9), T).unwrap();
        assert_eq!(check.handed_out, 4);
    }

    #[test]
    fn a_stored_offset_never_goes_back_until_it_is_gone() {
        let mut check = GroupCheck::default();
        check.sample(T, &[(0, Some(3)), (1, None)]).unwrap();
        check.sample(T, &[(0, Some(7))]).unwrap();
        assert!(check.sample(T, &[(0, Some(6))]).is_err());
        let mut check = GroupCheck::default();
        check.sample(T, &[(0, Some(7))]).unwrap();
        check.sample(T, &[(0, None)]).unwrap();
        check.sample(T, &[(0, Some(2))]).unwrap();
    }
}
