//! The consumer groups of one topic: names, members and each member's partitions, as the
//! real server keeps them (read from its source, `core/metadata/src/stm/consumer_group.rs`).
//!
//! - Group ids start at 0 and are never reused within the topic.
//! - A member is the client id of the session that joined; its id in listings is a slot,
//!   the lowest free one. Members are kept, and every pass below walks them, in slot order.
//! - A join is cooperative (`rebalance_cooperative`): the topic's unassigned partitions go
//!   round-robin to the members that hold none; then each member above its fair share gives
//!   up its excess (its newest partitions, last first) round-robin to the members that
//!   hold none and are not already due one. Of that excess, a partition that is in flight
//!   (the group polled it past its committed offset, [`super::revocations`]) is not moved:
//!   it is pending revocation, and the others move at once.
//! - A pending revocation keeps the partition in its source's list (what
//!   `GET_CONSUMER_GROUP` shows, and what the commit fence admits), but the source may no
//!   longer poll it: a sync leaves it out and a group poll of it is fenced. The newcomer
//!   gets it only when the revocation completes ([`Group::complete_revocation`]), which the
//!   server's reconciler does once the source drained it, or after the rebalancing timeout.
//!   (Seen on the real cluster: a member that had polled all three partitions and committed
//!   nothing, then a second member's join, listed `[[0, 1, 2], []]`.)
//! - A leave, a session's end or a partitions change re-stripes the whole group: partition
//!   `i` goes to the member in slot order `i % members`, and every pending revocation is
//!   dropped (the partition moves at once, as the server does where the source cannot drain
//!   anyway).
//! - Every change of membership or assignment bumps the group's generation.

use std::collections::{BTreeMap, BTreeSet};

use super::catalog::Lookup;

/// A partition its member still owns but is handing over to another member (the server's
/// `PendingRevocation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revocation {
    /// The partition.
    pub partition: u32,
    /// The slot of the member it goes to.
    pub target: u32,
    /// When the join that started it was applied (µs, the model's clock): the rebalancing
    /// timeout counts from here.
    pub since: u64,
}

/// A member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its id in listings: the lowest slot free when it joined.
    pub slot: u32,
    /// The client id of the session that joined.
    pub client: u128,
    /// Its partitions, in the order they were assigned, pending revocations included.
    pub partitions: Vec<u32>,
    /// Those of its partitions it is handing over, in the order the joins revoked them.
    pub revoking: Vec<Revocation>,
}

impl Member {
    /// Whether it owns `partition`: what the commit fence admits.
    pub fn owns(&self, partition: u32) -> bool {
        self.partitions.contains(&partition)
    }

    /// Whether it may poll `partition`: owned and not being handed over (the poll fence).
    pub fn may_poll(&self, partition: u32) -> bool {
        self.owns(partition) && !self.is_revoking(partition)
    }

    /// Whether `partition` is pending revocation from it.
    pub fn is_revoking(&self, partition: u32) -> bool {
        self.revoking.iter().any(|r| r.partition == partition)
    }

    /// The partitions it may poll, in assignment order: what a sync answers it.
    pub fn pollable(&self) -> Vec<u32> {
        self.partitions
            .iter()
            .copied()
            .filter(|p| !self.is_revoking(*p))
            .collect()
    }
}

/// One consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// 0-based, never reused within its topic.
    pub id: u32,
    /// Unique within its topic.
    pub name: String,
    /// Bumped on every join, leave, rebalance and completed revocation.
    pub generation: u64,
    /// In slot order.
    pub members: Vec<Member>,
}

impl Group {
    /// The member `client`, if it joined.
    pub fn member(&self, client: u128) -> Option<&Member> {
        self.members.iter().find(|m| m.client == client)
    }

    /// Every partition some member owns (pending revocations included).
    pub fn assigned(&self) -> BTreeSet<u32> {
        self.members
            .iter()
            .flat_map(|m| m.partitions.iter().copied())
            .collect()
    }

    /// Every pending revocation as `(source client, revocation)`, in slot order.
    pub fn revocations(&self) -> impl Iterator<Item = (u128, Revocation)> + '_ {
        self.members
            .iter()
            .flat_map(|m| m.revoking.iter().map(move |r| (m.client, *r)))
    }

    /// Joins `client` (a second join is a no-op, as on the server) at `now` (µs); `partitions`
    /// is the topic's partitions count and `in_flight` the partitions the group polled past
    /// its committed offset, which a join revokes rather than moves.
    pub fn join(&mut self, client: u128, partitions: u32, in_flight: &BTreeSet<u32>, now: u64) {
        if self.member(client).is_some() {
            return;
        }
        let slot = (0..)
            .find(|slot| self.members.iter().all(|m| m.slot != *slot))
            .unwrap_or(0);
        let at = self.members.partition_point(|m| m.slot < slot);
        self.members.insert(
            at,
            Member {
                slot,
                client,
                partitions: Vec::new(),
                revoking: Vec::new(),
            },
        );
        self.rebalance_cooperatively(partitions, in_flight, now);
    }

    /// Removes `client`; true when it was a member.
    pub fn leave(&mut self, client: u128, partitions: u32) -> bool {
        let before = self.members.len();
        self.members.retain(|m| m.client != client);
        let left = self.members.len() != before;
        if left {
            self.restripe(partitions);
        }
        left
    }

    /// Every partition `i` to the member `i % members`, in slot order; no revocation is
    /// left pending.
    pub fn restripe(&mut self, partitions: u32) {
        for member in &mut self.members {
            member.partitions.clear();
            member.revoking.clear();
        }
        let count = self.members.len();
        if count > 0 {
            for partition in 0..partitions {
                self.members[partition as usize % count]
                    .partitions
                    .push(partition);
            }
        }
        self.generation += 1;
    }

    /// The pending revocation of `partition` from `client` completes: the partition moves
    /// to its target. False when there is no such revocation (completed already, or
    /// dropped by a re-stripe).
    pub fn complete_revocation(&mut self, client: u128, partition: u32, partitions: u32) -> bool {
        let Some(source) = self.members.iter_mut().find(|m| m.client == client) else {
            return false;
        };
        let Some(at) = source
            .revoking
            .iter()
            .position(|r| r.partition == partition)
        else {
            return false;
        };
        let revocation = source.revoking.remove(at);
        source.partitions.retain(|p| *p != partition);
        match self
            .members
            .iter_mut()
            .find(|m| m.slot == revocation.target)
        {
            Some(target) => {
                target.partitions.push(partition);
                self.generation += 1;
            }
            // The server falls back to a full re-stripe. Unreachable here: every removal of
            // a member re-stripes, which drops the revocations it was the target of.
            None => self.restripe(partitions),
        }
        true
    }

    /// The server's cooperative pass, run on every join: see the module doc.
    fn rebalance_cooperatively(&mut self, partitions: u32, in_flight: &BTreeSet<u32>, now: u64) {
        self.generation += 1;
        if self.members.is_empty() || partitions == 0 {
            return;
        }
        // Unassigned partitions (there are some only in a group that had no members) go to
        // the members that hold none.
        let assigned = self.assigned();
        let unassigned: Vec<u32> = (0..partitions).filter(|p| !assigned.contains(p)).collect();
        let empty = self.indices(|m| m.partitions.is_empty());
        if !empty.is_empty() {
            for (i, partition) in unassigned.into_iter().enumerate() {
                self.members[empty[i % empty.len()]]
                    .partitions
                    .push(partition);
            }
        }
        // The excess goes only to members that hold nothing and are not already due a
        // partition: with none, nothing moves.
        let targets: BTreeSet<u32> = self.revocations().map(|(_, r)| r.target).collect();
        let idle = self.indices(|m| m.partitions.is_empty() && !targets.contains(&m.slot));
        if idle.is_empty() {
            return;
        }
        let count = self.members.len();
        let fair = partitions as usize / count;
        // The members allowed one more than the fair share, granted in slot order to those
        // holding more than it.
        let mut extra = partitions as usize % count;
        let mut excess: Vec<(u32, usize)> = Vec::new();
        for (index, member) in self.members.iter().enumerate() {
            let kept = member.pollable();
            let allowed = fair + usize::from(extra > 0);
            if kept.len() > fair {
                extra = extra.saturating_sub(1);
            }
            let over = kept.len().saturating_sub(allowed);
            excess.extend(kept.iter().rev().take(over).map(|p| (*p, index)));
        }
        for (i, (partition, source)) in excess.into_iter().enumerate() {
            let target = idle[i % idle.len()];
            if in_flight.contains(&partition) {
                let slot = self.members[target].slot;
                self.members[source].revoking.push(Revocation {
                    partition,
                    target: slot,
                    since: now,
                });
            } else {
                self.members[source].partitions.retain(|p| *p != partition);
                self.members[target].partitions.push(partition);
            }
        }
    }

    /// The indices of the members `keep` selects, in slot order.
    fn indices(&self, keep: impl Fn(&Member) -> bool) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| keep(&self.members[i]))
            .collect()
    }
}

/// Why a group change was refused (the server's codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupError {
    /// 5000 / 5003: no such group.
    NotFound,
    /// 5004: the name is taken in this topic.
    NameTaken,
    /// 5006: the client is not a member.
    NotMember,
}

impl GroupError {
    /// The `IggyError` code.
    pub fn code(self) -> u32 {
        match self {
            Self::NotFound => 5000,
            Self::NameTaken => 5004,
            Self::NotMember => 5006,
        }
    }
}

/// The groups of one topic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Groups {
    groups: BTreeMap<u32, Group>,
    next_id: u32,
}

impl Groups {
    /// Every group, by id.
    pub fn all(&self) -> impl Iterator<Item = &Group> {
        self.groups.values()
    }

    /// The group a request names.
    pub fn find(&self, lookup: Lookup<'_>) -> Option<&Group> {
        match lookup {
            Lookup::Id(id) => self.groups.get(&id),
            Lookup::Name(name) => self.groups.values().find(|g| g.name == name),
        }
    }

    fn find_mut(&mut self, lookup: Lookup<'_>) -> Option<&mut Group> {
        match lookup {
            Lookup::Id(id) => self.groups.get_mut(&id),
            Lookup::Name(name) => self.groups.values_mut().find(|g| g.name == name),
        }
    }

    /// Creates a group; its id is the next never used.
    pub fn create(&mut self, name: &str) -> Result<&Group, GroupError> {
        if self.groups.values().any(|g| g.name == name) {
            return Err(GroupError::NameTaken);
        }
        let id = self.next_id;
        self.next_id += 1;
        let group = Group {
            id,
            name: name.to_owned(),
            generation: 0,
            members: Vec::new(),
        };
        Ok(self.groups.entry(id).or_insert(group))
    }

    /// Deletes a group with its membership.
    pub fn delete(&mut self, lookup: Lookup<'_>) -> Result<u32, GroupError> {
        let id = self.find(lookup).ok_or(GroupError::NotFound)?.id;
        self.groups.remove(&id);
        Ok(id)
    }

    /// `client` joins a group of a topic of `partitions` partitions at `now` (µs);
    /// `in_flight` as [`Group::join`] takes it.
    pub fn join(
        &mut self,
        lookup: Lookup<'_>,
        client: u128,
        partitions: u32,
        in_flight: &BTreeSet<u32>,
        now: u64,
    ) -> Result<(), GroupError> {
        let group = self.find_mut(lookup).ok_or(GroupError::NotFound)?;
        group.join(client, partitions, in_flight, now);
        Ok(())
    }

    /// `client` leaves a group.
    pub fn leave(
        &mut self,
        lookup: Lookup<'_>,
        client: u128,
        partitions: u32,
    ) -> Result<(), GroupError> {
        let group = self.find_mut(lookup).ok_or(GroupError::NotFound)?;
        if group.leave(client, partitions) {
            Ok(())
        } else {
            Err(GroupError::NotMember)
        }
    }

    /// A session ended: its memberships end, and each group it was in re-stripes.
    pub fn session_ended(&mut self, client: u128, partitions: u32) {
        for group in self.groups.values_mut() {
            group.leave(client, partitions);
        }
    }

    /// The topic's partitions changed: every group with members re-stripes.
    pub fn repartitioned(&mut self, partitions: u32) {
        for group in self.groups.values_mut() {
            if !group.members.is_empty() {
                group.restripe(partitions);
            }
        }
    }

    /// Whether any group has a revocation pending.
    pub fn any_revoking(&self) -> bool {
        self.groups
            .values()
            .flat_map(|g| &g.members)
            .any(|m| !m.revoking.is_empty())
    }

    /// Completes the pending revocation of `partition` from `client` in group `id` (see
    /// [`Group::complete_revocation`]); false when there is none.
    pub fn complete_revocation(
        &mut self,
        id: u32,
        client: u128,
        partition: u32,
        partitions: u32,
    ) -> bool {
        self.groups
            .get_mut(&id)
            .is_some_and(|group| group.complete_revocation(client, partition, partitions))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn assignment(groups: &Groups) -> Vec<Vec<u32>> {
        let group = groups.find(Lookup::Id(0)).unwrap();
        group.members.iter().map(|m| m.partitions.clone()).collect()
    }

    /// A join with nothing in flight.
    fn join(groups: &mut Groups, client: u128, partitions: u32) {
        groups
            .join(Lookup::Id(0), client, partitions, &BTreeSet::new(), 0)
            .unwrap();
    }

    #[test]
    fn ids_start_at_zero_are_never_reused_and_names_are_unique() {
        let mut groups = Groups::default();
        assert_eq!(groups.create("a").unwrap().id, 0);
        assert_eq!(groups.create("b").unwrap().id, 1);
        assert_eq!(groups.create("a"), Err(GroupError::NameTaken));
        groups.delete(Lookup::Name("a")).unwrap();
        assert_eq!(groups.create("a").unwrap().id, 2);
        assert_eq!(groups.delete(Lookup::Id(0)), Err(GroupError::NotFound));
    }

    #[test]
    fn a_join_moves_only_the_excess_and_a_leave_restripes() {
        let mut groups = Groups::default();
        groups.create("g").unwrap();
        join(&mut groups, 11, 3);
        assert_eq!(assignment(&groups), vec![vec![0, 1, 2]]);
        join(&mut groups, 22, 3);
        assert_eq!(assignment(&groups), vec![vec![0, 1], vec![2]]);
        join(&mut groups, 22, 3);
        let group = groups.find(Lookup::Id(0)).unwrap();
        assert_eq!(group.generation, 2, "a second join changes nothing");
        join(&mut groups, 33, 3);
        assert_eq!(assignment(&groups), vec![vec![0], vec![2], vec![1]]);
        groups.leave(Lookup::Id(0), 11, 3).unwrap();
        assert_eq!(assignment(&groups), vec![vec![0, 2], vec![1]]);
        assert_eq!(
            groups.leave(Lookup::Id(0), 11, 3),
            Err(GroupError::NotMember)
        );
    }

    #[test]
    fn members_beyond_the_partitions_get_none_and_slots_are_reused() {
        let mut groups = Groups::default();
        groups.create("g").unwrap();
        for client in [1, 2, 3] {
            join(&mut groups, client, 2);
        }
        assert_eq!(assignment(&groups), vec![vec![0], vec![1], vec![]]);
        groups.session_ended(1, 2);
        join(&mut groups, 4, 2);
        let group = groups.find(Lookup::Id(0)).unwrap();
        let slots: Vec<(u32, u128)> = group.members.iter().map(|m| (m.slot, m.client)).collect();
        assert_eq!(slots, vec![(0, 4), (1, 2), (2, 3)]);
        let mut all: Vec<u32> = group
            .members
            .iter()
            .flat_map(|m| m.partitions.clone())
            .collect();
        all.sort_unstable();
        assert_eq!(all, vec![0, 1], "every partition has exactly one member");
    }

    #[test]
    fn a_partitions_change_restripes_every_group_with_members() {
        let mut groups = Groups::default();
        groups.create("g").unwrap();
        groups.create("empty").unwrap();
        join(&mut groups, 1, 2);
        join(&mut groups, 2, 2);
        groups.repartitioned(5);
        assert_eq!(assignment(&groups), vec![vec![0, 2, 4], vec![1, 3]]);
        assert_eq!(groups.find(Lookup::Id(1)).unwrap().generation, 0);
    }

    #[test]
    fn an_in_flight_excess_is_revoked_not_moved_and_moves_on_completion() {
        let mut groups = Groups::default();
        groups.create("g").unwrap();
        join(&mut groups, 1, 3);
        let in_flight = BTreeSet::from([1, 2]);
        groups.join(Lookup::Id(0), 2, 3, &in_flight, 7).unwrap();
        let group = groups.find(Lookup::Id(0)).unwrap();
        assert_eq!(assignment(&groups), vec![vec![0, 1, 2], vec![]]);
        let source = group.member(1).unwrap();
        assert_eq!(source.pollable(), vec![0, 1]);
        assert!(source.owns(2) && !source.may_poll(2));
        let pending: Vec<(u128, Revocation)> = group.revocations().collect();
        let revocation = Revocation {
            partition: 2,
            target: 1,
            since: 7,
        };
        assert_eq!(pending, vec![(1, revocation)]);
        assert_eq!(group.generation, 2);
        // A third member: the second is due a partition already, so only the third is a
        // target, and the source's revoked partition no longer counts as its own.
        groups.join(Lookup::Id(0), 3, 3, &in_flight, 9).unwrap();
        assert_eq!(assignment(&groups), vec![vec![0, 1, 2], vec![], vec![]]);
        let group = groups.find(Lookup::Id(0)).unwrap();
        let targets: Vec<(u32, u32)> = group
            .revocations()
            .map(|(_, r)| (r.partition, r.target))
            .collect();
        assert_eq!(targets, vec![(2, 1), (1, 2)]);
        assert!(groups.any_revoking());
        assert!(groups.complete_revocation(0, 1, 2, 3));
        assert!(!groups.complete_revocation(0, 1, 2, 3), "completed already");
        assert_eq!(assignment(&groups), vec![vec![0, 1], vec![2], vec![]]);
        assert_eq!(groups.find(Lookup::Id(0)).unwrap().generation, 4);
        assert!(groups.complete_revocation(0, 1, 1, 3));
        assert_eq!(assignment(&groups), vec![vec![0], vec![2], vec![1]]);
        assert!(!groups.any_revoking());
    }

    #[test]
    fn a_restripe_drops_every_pending_revocation() {
        let mut groups = Groups::default();
        groups.create("g").unwrap();
        join(&mut groups, 1, 2);
        groups
            .join(Lookup::Id(0), 2, 2, &BTreeSet::from([1]), 0)
            .unwrap();
        join(&mut groups, 3, 2);
        assert!(groups.any_revoking());
        groups.leave(Lookup::Id(0), 3, 2).unwrap();
        assert!(!groups.any_revoking());
        assert_eq!(assignment(&groups), vec![vec![0], vec![1]]);
        assert!(!groups.complete_revocation(0, 1, 1, 2));
    }
}
