//! The router's consumer-group state: the groups we are a member of, each held by its
//! member link's identity, and the requests waiting for a member link to be idle. What a
//! request is to a group ([`GroupRole`]) is worked out once, when the request is accepted,
//! and kept with it; a request with no role never reaches this state. How memberships are
//! made, kept and ended is in `membership`.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};

use crate::ids::{LinkId, RequestId};
use crate::request::{CommandRequest, Request};
use crate::routing::Target;
use crate::wire::{ConsumerGroupRef, ConsumerKind, code};

/// A group as its requests name it: the encoded `[stream][topic][group]` identifiers.
/// A group named once by id and once by name counts as two groups here (the router does
/// not resolve names), so a consumer names its group one way throughout.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct GroupKey(Bytes);

impl GroupKey {
    pub(super) fn of(group: &ConsumerGroupRef) -> Self {
        let mut out = BytesMut::with_capacity(group.encoded_len());
        group.encode(&mut out);
        Self(out.freeze())
    }
}

/// One group we are a member of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Membership {
    /// The link whose identity joined.
    pub(super) link: LinkId,
    /// That identity: what the group's syncs and polls carry in their header.
    pub(super) member: u128,
}

/// What a request is to the group layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum GroupRole {
    Join(GroupKey),
    Leave(GroupKey),
    /// A `SYNC`: answered as the member the header names.
    Sync(GroupKey),
    /// A group poll: answered as the member the header names.
    AsMember(GroupKey),
    /// A write of the group's offset (see `router::group_commit`).
    Commit(GroupKey),
}

impl GroupRole {
    /// The role of a request, if it has one. Called once per request, when it is
    /// accepted (see `requests::Entry::group`).
    pub(super) fn of(request: &Request) -> Option<Self> {
        match request {
            Request::Command(CommandRequest { code: op, body, .. }) => {
                let key = GroupKey(body.clone());
                match *op {
                    code::JOIN_CONSUMER_GROUP => Some(Self::Join(key)),
                    code::LEAVE_CONSUMER_GROUP => Some(Self::Leave(key)),
                    code::SYNC_CONSUMER_GROUP => Some(Self::Sync(key)),
                    _ => None,
                }
            }
            Request::Poll(poll) if poll.consumer.kind == ConsumerKind::ConsumerGroup => {
                Some(Self::AsMember(GroupKey::of(&ConsumerGroupRef {
                    stream: poll.stream.clone(),
                    topic: poll.topic.clone(),
                    group: poll.consumer.id.clone(),
                })))
            }
            Request::StoreOffset(store) if store.consumer.kind == ConsumerKind::ConsumerGroup => {
                Some(Self::Commit(GroupKey::of(&ConsumerGroupRef {
                    stream: store.stream.clone(),
                    topic: store.topic.clone(),
                    group: store.consumer.id.clone(),
                })))
            }
            Request::Poll(_) | Request::Send(_) | Request::StoreOffset(_) | Request::Admin(_) => {
                None
            }
        }
    }

    /// The group it names.
    pub(super) fn key(&self) -> &GroupKey {
        match self {
            Self::Join(key)
            | Self::Leave(key)
            | Self::Sync(key)
            | Self::AsMember(key)
            | Self::Commit(key) => key,
        }
    }

    /// A join or a leave: settled by its answer even when its caller's request is over.
    pub(super) fn is_membership_write(&self) -> bool {
        matches!(self, Self::Join(_) | Self::Leave(_))
    }

    /// A sync or a group poll: written with the member's id in its header.
    pub(super) fn speaks_as_member(&self) -> bool {
        matches!(self, Self::Sync(_) | Self::AsMember(_))
    }
}

/// The memberships and the requests waiting for their member link.
#[derive(Debug, Default)]
pub(super) struct Groups {
    memberships: BTreeMap<GroupKey, Membership>,
    /// Leaves, joins and group offset writes waiting for their member link to be idle,
    /// with where routing sent them, in the order they came.
    waiting: Vec<(RequestId, Target)>,
}

impl Groups {
    /// The membership of `key`, if we hold one.
    pub(super) fn get(&self, key: &GroupKey) -> Option<Membership> {
        self.memberships.get(key).copied()
    }

    /// The member id a request with this role carries in its header instead of its
    /// link's: a sync's or group poll's, of a group we are a member of.
    pub(super) fn speaks_for(&self, role: &GroupRole) -> Option<u128> {
        if !role.speaks_as_member() {
            return None;
        }
        self.get(role.key()).map(|m| m.member)
    }

    /// Whether we are a member of `key`'s group.
    pub(super) fn is_member(&self, key: &GroupKey) -> bool {
        self.memberships.contains_key(key)
    }

    /// Whether `link` holds `key`'s membership.
    pub(super) fn held_on(&self, key: &GroupKey, link: LinkId) -> bool {
        self.get(key).is_some_and(|m| m.link == link)
    }

    /// A join was admitted on `membership.link`.
    pub(super) fn joined(&mut self, key: GroupKey, membership: Membership) {
        self.memberships.insert(key, membership);
    }

    /// Forgets `key`'s membership, returning it.
    pub(super) fn forget(&mut self, key: &GroupKey) -> Option<Membership> {
        self.memberships.remove(key)
    }

    /// Queues a request until its member link is idle.
    pub(super) fn wait(&mut self, request: RequestId, target: Target) {
        self.waiting.push((request, target));
    }

    /// Whether requests wait for a member link.
    pub(super) fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// The waiting requests, in order, for the caller to serve or queue again.
    pub(super) fn take_waiting(&mut self) -> Vec<(RequestId, Target)> {
        std::mem::take(&mut self.waiting)
    }

    /// The requests waiting, in order.
    pub(super) fn waiting(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.waiting.iter().map(|(request, _)| *request)
    }
}

/// Where [`super::Router::group_detour`] sent a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Detour {
    /// To be written on this link instead.
    Link(LinkId),
    /// Queued until its link is idle.
    Waiting,
    /// Queued, and this member link is to be closed (a leave that would wait for it).
    Close(LinkId),
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::request::Plane;

    fn command(op: u32, body: &'static [u8]) -> Request {
        Request::Command(CommandRequest {
            code: op,
            body: Bytes::from_static(body),
            plane: Plane::MetadataWrite,
        })
    }

    #[test]
    fn a_role_is_read_from_the_command_and_names_its_group() {
        let join = GroupRole::of(&command(code::JOIN_CONSUMER_GROUP, b"g1")).unwrap();
        let leave = GroupRole::of(&command(code::LEAVE_CONSUMER_GROUP, b"g1")).unwrap();
        let sync = GroupRole::of(&command(code::SYNC_CONSUMER_GROUP, b"g1")).unwrap();
        assert!(matches!(join, GroupRole::Join(_)));
        assert!(matches!(leave, GroupRole::Leave(_)));
        assert!(matches!(sync, GroupRole::Sync(_)));
        assert_eq!(join.key(), leave.key());
        assert_eq!(join.key(), sync.key());
        assert!(join.is_membership_write() && leave.is_membership_write());
        assert!(!sync.is_membership_write() && sync.speaks_as_member());
        // Other commands, and requests of no group, have no role.
        assert_eq!(GroupRole::of(&command(code::PING, b"")), None);
        assert_eq!(GroupRole::of(&command(code::GET_TOPIC, b"g1")), None);
    }

    #[test]
    fn only_a_member_of_the_group_speaks_for_it() {
        let mut groups = Groups::default();
        let sync = GroupRole::Sync(GroupKey(Bytes::from_static(b"g1")));
        let other = GroupRole::AsMember(GroupKey(Bytes::from_static(b"g2")));
        let join = GroupRole::Join(GroupKey(Bytes::from_static(b"g1")));
        assert_eq!(groups.speaks_for(&sync), None);
        let membership = Membership {
            link: LinkId(3),
            member: 77,
        };
        groups.joined(sync.key().clone(), membership);
        assert_eq!(groups.speaks_for(&sync), Some(77));
        assert_eq!(groups.speaks_for(&other), None);
        // A join is written as its own link, even of a group we are in.
        assert_eq!(groups.speaks_for(&join), None);
        assert!(groups.held_on(sync.key(), LinkId(3)));
        assert!(!groups.held_on(sync.key(), LinkId(4)));
        assert_eq!(groups.forget(sync.key()), Some(membership));
        assert_eq!(groups.forget(sync.key()), None);
        assert!(!groups.is_member(sync.key()));
    }

    #[test]
    fn waiting_requests_come_back_in_order_once() {
        let mut groups = Groups::default();
        assert!(!groups.has_waiting());
        groups.wait(RequestId(2), Target::Coordinator);
        groups.wait(RequestId(1), Target::Coordinator);
        assert_eq!(
            groups.waiting().collect::<Vec<_>>(),
            [RequestId(2), RequestId(1)]
        );
        let taken = groups.take_waiting();
        assert_eq!(taken.len(), 2);
        assert_eq!(taken[0].0, RequestId(2));
        assert!(!groups.has_waiting());
        assert!(groups.take_waiting().is_empty());
    }
}
