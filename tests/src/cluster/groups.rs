//! The consumer groups of one topic: names, members and each member's partitions, as the
//! real server keeps them (read from its source, `core/metadata/src/stm/consumer_group.rs`).
//!
//! - Group ids start at 0 and are never reused within the topic.
//! - A member is the client id of the session that joined; its id in listings is a slot,
//!   the lowest free one.
//! - A join is cooperative: the newcomer takes the unassigned partitions, then the excess of
//!   members above their fair share (taken from the tail of their lists), so no partition
//!   moves that need not. A leave, a session's end or a partitions change re-stripes the
//!   whole group: partition `i` goes to the member in slot order `i % members`.
//! - Every change of membership or assignment bumps the group's generation.
//!
//! Not modelled: the server's pending revocations. A partition the group polled past its
//! committed offset is handed over only once the old member drains it, or after 30 s; until
//! then the old member keeps it in listings but may no longer poll it, and the newcomer has
//! nothing (seen on the real cluster: a member that had polled all three partitions and
//! committed nothing, then a second member's join, listed `[[0, 1, 2], []]`). Here a
//! handover is immediate.

use std::collections::BTreeMap;

use super::catalog::Lookup;

/// A member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its id in listings: the lowest slot free when it joined.
    pub slot: u32,
    /// The client id of the session that joined.
    pub client: u128,
    /// Its partitions, in the order they were assigned.
    pub partitions: Vec<u32>,
}

/// One consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// 0-based, never reused within its topic.
    pub id: u32,
    /// Unique within its topic.
    pub name: String,
    /// Bumped on every join, leave and rebalance.
    pub generation: u64,
    /// In slot order.
    pub members: Vec<Member>,
}

impl Group {
    /// The member `client`, if it joined.
    pub fn member(&self, client: u128) -> Option<&Member> {
        self.members.iter().find(|m| m.client == client)
    }

    /// Joins `client` (a second join is a no-op, as on the server); `partitions` is the
    /// topic's partitions count.
    pub fn join(&mut self, client: u128, partitions: u32) {
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
            },
        );
        self.rebalance_cooperatively(partitions);
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

    /// Every partition `i` to the member `i % members`, in slot order.
    pub fn restripe(&mut self, partitions: u32) {
        for member in &mut self.members {
            member.partitions.clear();
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

    /// Unassigned partitions, then the members' excess above their fair share, go to the
    /// members below theirs; nobody else's partitions move.
    fn rebalance_cooperatively(&mut self, partitions: u32) {
        let count = self.members.len();
        let fair = |index: usize| {
            let base = partitions as usize / count;
            base + usize::from(index < partitions as usize % count)
        };
        let mut spare: Vec<u32> = (0..partitions)
            .filter(|p| self.members.iter().all(|m| !m.partitions.contains(p)))
            .collect();
        for (index, member) in self.members.iter_mut().enumerate() {
            while member.partitions.len() > fair(index) {
                if let Some(partition) = member.partitions.pop() {
                    spare.push(partition);
                }
            }
        }
        spare.reverse();
        for (index, member) in self.members.iter_mut().enumerate() {
            while member.partitions.len() < fair(index) {
                let Some(partition) = spare.pop() else {
                    break;
                };
                member.partitions.push(partition);
            }
        }
        self.generation += 1;
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

    /// `client` joins a group of a topic of `partitions` partitions.
    pub fn join(
        &mut self,
        lookup: Lookup<'_>,
        client: u128,
        partitions: u32,
    ) -> Result<(), GroupError> {
        let group = self.find_mut(lookup).ok_or(GroupError::NotFound)?;
        group.join(client, partitions);
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
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn assignment(groups: &Groups) -> Vec<Vec<u32>> {
        let group = groups.find(Lookup::Id(0)).unwrap();
        group.members.iter().map(|m| m.partitions.clone()).collect()
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
        groups.join(Lookup::Id(0), 11, 3).unwrap();
        assert_eq!(assignment(&groups), vec![vec![0, 1, 2]]);
        groups.join(Lookup::Id(0), 22, 3).unwrap();
        assert_eq!(assignment(&groups), vec![vec![0, 1], vec![2]]);
        groups.join(Lookup::Id(0), 22, 3).unwrap();
        let group = groups.find(Lookup::Id(0)).unwrap();
        assert_eq!(group.generation, 2, "a second join changes nothing");
        groups.join(Lookup::Id(0), 33, 3).unwrap();
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
            groups.join(Lookup::Id(0), client, 2).unwrap();
        }
        assert_eq!(assignment(&groups), vec![vec![0], vec![1], vec![]]);
        groups.session_ended(1, 2);
        groups.join(Lookup::Id(0), 4, 2).unwrap();
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
        groups.join(Lookup::Id(0), 1, 2).unwrap();
        groups.join(Lookup::Id(0), 2, 2).unwrap();
        groups.repartitioned(5);
        assert_eq!(assignment(&groups), vec![vec![0, 2, 4], vec![1, 3]]);
        assert_eq!(groups.find(Lookup::Id(1)).unwrap().generation, 0);
    }
}
