//! Consumer-group memberships: which link's identity each group we joined belongs to.
//!
//! The server binds a membership to the client id of the connection whose `JOIN` the
//! metadata leader admitted, and ends it when that connection closes (seen on the real
//! cluster). So the data link that carried a successful join becomes that group's member
//! link: it leaves the pool (no other request uses it, so no caller's traffic can lose the
//! membership with it), it is never closed for idleness and its heartbeats keep it alive.
//! The group's `SYNC` and polls are answered as whoever the request header names, on any
//! node: they go wherever routing sends them, with the member's id in the header. A
//! `LEAVE`, a `JOIN` of a group already joined and a group offset write (see
//! `router::group_commit`) go on the member link itself; if that node can no longer admit
//! a leave (the metadata leader moved), closing the link ends the membership just as well.
//! A join or leave answered after its caller gave up is made to match what the caller was
//! told; a sync answered "not a member" past our own join's settle window ends the
//! membership here too.

use std::time::Instant;

use bytes::Bytes;
use tracing::{debug, info};

use super::Router;
use super::group_commit::{CommitStep, GroupCommit};
use super::groups::{Detour, GroupKey, GroupRole, Membership};
use super::link::Link;
use crate::event::LinkRole;
use crate::ids::{LinkId, RequestId};
use crate::request::{Reply, ReplyPayload, Request, RequestError};
use crate::routing::{Attempt, Served, Target};
use crate::wire::ConsumerGroupRef;

/// The answer that completes a join or a leave: the server's own is an empty payload.
fn done() -> Reply {
    Reply::Payload(ReplyPayload(Bytes::new()))
}

impl Router {
    /// Whether a poll of a group we are a member of asks for auto-commit: such a poll is
    /// written without it, and the offset it read up to is written as the group's offset
    /// write (see `router::group_commit`), since wherever the poll is served the server
    /// would keep the commit to that node (a backup keeps it to itself).
    pub(super) fn group_auto_commit(&self, request: &Request, role: Option<&GroupRole>) -> bool {
        matches!(request, Request::Poll(poll) if poll.auto_commit)
            && matches!(role, Some(GroupRole::AsMember(key)) if self.groups.is_member(key))
    }

    /// Whether `request` is a join of a group we are not a member of, about to be written
    /// on a link attached to the session (see `Router::write_request`).
    pub(super) fn join_on_attached_link(&self, request: RequestId, link_id: LinkId) -> bool {
        let joins = self.requests.get(&request).is_some_and(|entry| {
            matches!(&entry.group, Some(GroupRole::Join(key)) if !self.groups.is_member(key))
        });
        joins
            && self
                .links
                .get(&link_id)
                .is_some_and(|l| l.attached.is_some())
    }

    /// Whether a sync we sent as a member was answered as to a stranger: no assignment.
    pub(super) fn answered_as_stranger(&self, role: &GroupRole, reply: &Reply) -> bool {
        let (GroupRole::Sync(key) | GroupRole::AsMember(key)) = role else {
            return false;
        };
        if !self.groups.is_member(key) {
            return false;
        }
        match reply {
            Reply::Payload(payload) => payload.0.is_empty(),
            // A poll fenced so says "not your partition" as often as "not a member": the
            // consumer syncs again, and the sync's answer is the one that may be doubted.
            Reply::Polled(_)
            | Reply::Sent(_)
            | Reply::OffsetStored
            | Reply::Stream(_)
            | Reply::Topic(_)
            | Reply::PartitionsCreated => false,
        }
    }

    /// Where a group request goes instead of the link routing offered: `None` to write it
    /// there as usual. A join of a group we are a member of, a leave and a group offset
    /// write go on the member link (a second identity joining would become a second
    /// member), waiting while that link is busy (a heartbeat).
    pub(super) fn group_detour(&mut self, request: RequestId, target: Target) -> Option<Detour> {
        let role = self.requests.get(&request)?.group.clone()?;
        match role {
            GroupRole::Leave(key) => {
                let member_link = self.groups.get(&key)?.link;
                match self.on_member_link(member_link, request, target) {
                    // Busy (a request whose answer is late, perhaps long past its
                    // caller's deadline): closing the link ends the membership now, and
                    // answers the leave that waits for it.
                    Detour::Waiting => Some(Detour::Close(member_link)),
                    detour @ (Detour::Link(_) | Detour::Close(_)) => Some(detour),
                }
            }
            GroupRole::Join(key) => {
                let member_link = self.groups.get(&key)?.link;
                Some(self.on_member_link(member_link, request, target))
            }
            GroupRole::Commit(key) => {
                let member_link = self.groups.get(&key).map(|m| m.link);
                let entry = self.requests.get_mut(&request)?;
                let Some(member_link) = member_link else {
                    // Not (or no longer) a member: written as it is, for the server to fence.
                    entry.group_commit = None;
                    return None;
                };
                let commit = entry.group_commit.get_or_insert(GroupCommit::new(target));
                if let CommitStep::PollOn(node) = commit.step {
                    if target == Target::Node(node) {
                        // Where `group_commit` queued it: on a data link to that node.
                        return None;
                    }
                    // Handed back to routing meanwhile (no link to that node), which sent
                    // it on: the steps start again.
                    *commit = GroupCommit::new(target);
                }
                Some(self.on_member_link(member_link, request, target))
            }
            GroupRole::Sync(_) | GroupRole::AsMember(_) => None,
        }
    }

    /// To `member_link` if it is idle, else waiting for it.
    fn on_member_link(
        &mut self,
        member_link: LinkId,
        request: RequestId,
        target: Target,
    ) -> Detour {
        if self.links.get(&member_link).is_some_and(Link::is_idle) {
            Detour::Link(member_link)
        } else {
            self.groups.wait(request, target);
            Detour::Waiting
        }
    }

    /// Writes the requests that waited for their member link, where it is idle now. One
    /// whose membership ended meanwhile goes on as routing placed it (a leave is answered as
    /// done: the membership ended with its link).
    pub(super) fn serve_member_waiting(&mut self, now: Instant) {
        let waiting = self.groups.take_waiting();
        for (request, target) in waiting {
            let role = self.requests.get(&request).and_then(|e| e.group.clone());
            let key = match &role {
                Some(GroupRole::Join(key) | GroupRole::Leave(key) | GroupRole::Commit(key)) => key,
                Some(GroupRole::Sync(_) | GroupRole::AsMember(_)) | None => {
                    // Over (its deadline), or never a member link's: released as not sent.
                    self.unsent.push((request, target));
                    continue;
                }
            };
            match self.groups.get(key).map(|m| m.link) {
                None if matches!(role, Some(GroupRole::Leave(_))) => {
                    self.answer_leave(now, request, target);
                }
                None => {
                    // Routing places it again; written then as any request.
                    if let Some(entry) = self.requests.get_mut(&request) {
                        entry.group_commit = None;
                    }
                    self.unsent.push((request, target));
                }
                Some(link) if self.links.get(&link).is_some_and(Link::is_idle) => {
                    self.write_request(now, link, request, target);
                }
                Some(_) => self.groups.wait(request, target),
            }
        }
    }

    pub(super) fn answer_leave(&mut self, now: Instant, request: RequestId, target: Target) {
        if let Some(entry) = self.requests.get_mut(&request) {
            entry.reply = Some(done());
        }
        self.routing
            .handle_result(now, request, target, Attempt::Done(Served::Plain));
    }

    /// A request of a group was answered on `link` with `attempt`: a sync answered as to a
    /// stranger past our own join's settle window ends the membership, and a join or a
    /// leave may report another attempt (see [`Router::group_answered`]).
    pub(super) fn group_replied(
        &mut self,
        now: Instant,
        link: LinkId,
        (request, role): (RequestId, GroupRole),
        attempt: Attempt,
    ) -> Attempt {
        if let (Attempt::Done(Served::Stranger), GroupRole::Sync(key)) = (&attempt, &role)
            && !self.routing.own_write_unsettled(now)
        {
            self.membership_ended(now, key);
        }
        self.group_answered(now, link, (request, role), &attempt)
            .unwrap_or(attempt)
    }

    /// A join or a leave was answered on `link` with `attempt`. Returns the attempt to
    /// report instead, if any:
    /// - a join admitted on a data link makes it the group's member link; a join of a
    ///   group we are in, refused by the member link's node (the leadership moved away),
    ///   leaves the membership as it is, done; refused otherwise (the group is gone), the
    ///   membership is over;
    /// - a leave on the member link ends the membership, whatever the answer: not admitted
    ///   there, it is made by closing the link. It is done, unless the server said there
    ///   was no membership to end (the group was deleted or renamed, by another client
    ///   too): that answer is the caller's, as the SDK reports it, and the link is closed
    ///   as well, which ends whatever membership it still holds.
    fn group_answered(
        &mut self,
        now: Instant,
        link: LinkId,
        (request, role): (RequestId, GroupRole),
        attempt: &Attempt,
    ) -> Option<Attempt> {
        let on_member_link = |router: &Self, key: &GroupKey| router.groups.held_on(key, link);
        match role {
            GroupRole::Join(key) if on_member_link(self, &key) => match attempt {
                Attempt::Done(_) | Attempt::Refused | Attempt::RefusedNaming(_) => {
                    self.set_reply(request, done());
                    Some(Attempt::Done(Served::Plain))
                }
                Attempt::Failed(_) => {
                    self.drop_membership(&key);
                    None
                }
                Attempt::NotSent | Attempt::Unknown | Attempt::NotYet(_) => None,
            },
            GroupRole::Join(key) if matches!(attempt, Attempt::Done(_)) => {
                let member = self.links.get_mut(&link)?;
                if member.role != LinkRole::Data {
                    // A caller's raw join on the session: its own business.
                    return None;
                }
                member.member_of = Some(key.clone());
                let membership = Membership {
                    link,
                    member: member.client_id,
                };
                info!(%link, node = %member.node, "joined a consumer group; the link is its member link");
                self.groups.joined(key, membership);
                None
            }
            GroupRole::Leave(key) if on_member_link(self, &key) => {
                self.drop_membership(&key);
                if let Attempt::Failed(RequestError::Server { code }) = attempt
                    && code.names_no_membership()
                {
                    // Closed all the same: the group may live on under names this client
                    // does not know (renamed by another client), the link still its member.
                    self.close_by_choice(now, link);
                    return None;
                }
                if !matches!(attempt, Attempt::Done(_)) {
                    debug!(%link, "leave not admitted on the member link; closing it");
                    self.close_by_choice(now, link);
                }
                self.set_reply(request, done());
                Some(Attempt::Done(Served::Plain))
            }
            GroupRole::Join(_) | GroupRole::Leave(_) => None,
            GroupRole::Sync(_) | GroupRole::AsMember(_) | GroupRole::Commit(_) => None,
        }
    }

    fn set_reply(&mut self, request: RequestId, reply: Reply) {
        if let Some(entry) = self.requests.get_mut(&request) {
            entry.reply = Some(reply);
        }
    }

    /// Forgets a membership; its link goes back to the pool.
    fn drop_membership(&mut self, key: &GroupKey) {
        if let Some(membership) = self.groups.forget(key)
            && let Some(link) = self.links.get_mut(&membership.link)
        {
            link.member_of = None;
        }
    }

    /// The answer to a join or leave whose caller's request was over (its deadline) when
    /// it came: the server's state is made to match what the caller was told. A join it
    /// admitted on a pool link is undone by closing that link (the membership ends with
    /// it); a leave ends the membership, by closing the member link if it was refused.
    pub(super) fn late_group_answer(&mut self, now: Instant, link: LinkId, admitted: bool) {
        let Some((_, _, role)) = self
            .links
            .get_mut(&link)
            .and_then(|l| l.membership_write.take())
        else {
            return;
        };
        let member_of = self.links.get(&link).and_then(|l| l.member_of.clone());
        match role {
            GroupRole::Join(key) if admitted && member_of.as_ref() != Some(&key) => {
                debug!(%link, "a join admitted after its caller gave up; closing its link");
                self.close_by_choice(now, link);
            }
            GroupRole::Leave(key) if member_of.as_ref() == Some(&key) => {
                self.drop_membership(&key);
                if !admitted {
                    self.close_by_choice(now, link);
                }
            }
            GroupRole::Join(_) | GroupRole::Leave(_) => {}
            GroupRole::Sync(_) | GroupRole::AsMember(_) | GroupRole::Commit(_) => {}
        }
    }

    /// A sync we sent as a member was answered "not a member" when no join of ours can
    /// explain it (past the settle window): the membership is over on the server (the
    /// group, its topic or its stream was deleted, or the server ended it). Closing the
    /// member link makes sure of it, and counts it lost.
    fn membership_ended(&mut self, now: Instant, key: &GroupKey) {
        let Some(membership) = self.groups.get(key) else {
            return;
        };
        info!(link = %membership.link, "the server no longer knows our membership; ending it");
        self.close_by_choice(now, membership.link);
    }

    /// The consumer of `group` was dropped without leaving it: the membership ends now, by
    /// closing its member link (the server ends a membership with its connection), so that
    /// the other members get its partitions at their next sync. Nothing is reported lost.
    pub fn abandon_group(&mut self, now: Instant, group: &ConsumerGroupRef) {
        let key = GroupKey::of(group);
        let Some(membership) = self.groups.get(&key) else {
            return;
        };
        info!(link = %membership.link, "a consumer left its group without leaving; ending the membership");
        self.drop_membership(&key);
        self.close_by_choice(now, membership.link);
        self.settle(now);
    }

    /// `link` is gone: the membership it held ended with it. A leave written on it, or
    /// waiting for it, is done by that (answered here), not a lost membership.
    pub(super) fn memberships_gone(&mut self, now: Instant, link: &Link) -> bool {
        let Some(key) = &link.member_of else {
            return false;
        };
        if self.groups.held_on(key, link.id) {
            self.groups.forget(key);
        }
        let in_flight_leave = match &link.membership_write {
            Some((request, target, GroupRole::Leave(left))) if left == key => {
                Some((*request, *target))
            }
            Some(_) | None => None,
        };
        let waiting_leave = self.groups.waiting().any(|request| {
            self.requests
                .get(&request)
                .is_some_and(|e| matches!(&e.group, Some(GroupRole::Leave(left)) if left == key))
        });
        if let Some((request, target)) = in_flight_leave {
            self.answer_leave(now, request, target);
        } else if !waiting_leave {
            self.stats.memberships_lost += 1;
            info!(link = %link.id, node = %link.node, "member link lost: its consumer-group membership ended");
        }
        in_flight_leave.is_some()
    }
}
