//! A consumer group's offset write, made durable on a cluster that fences it.
//!
//! What the real server allows (measured, see `tests/tests/group_identity.rs`): a group's
//! offset is written only by a connection signed in as a member (any other gets 20, before
//! the primary check), and only the partition's primary admits it (58 elsewhere, its reply
//! header carrying the view that names the primary). Our only connection signed in as the
//! member is the member link, on the metadata leader. And an auto-commit poll of the group,
//! served by the primary to any connection whose request header names the member, stores
//! the offset of the last message it serves, durably.
//!
//! So an offset write `x` of partition `p` goes:
//! 1. on the member link, as the write itself: admitted (the leader leads `p`), it is done;
//! 2. refused, naming primary `P` under view `v`: a poll of exactly the message at `x`,
//!    with auto-commit, as the member, on a data link to `P`, which stores `x` there;
//! 3. the write again on the member link: refused naming `P` under the same `v`, `P` was the
//!    primary throughout (views only grow), so the poll's commit is the durable one; admitted,
//!    the leader leads `p` now and has just stored `x` itself; anything else goes round to
//!    step 2 again, at most [`COMMIT_POLLS_MAX`] times in all.
//!
//! The routing layer sees one request, active in its partition's lane from the first step
//! to the last (nothing else of the partition overtakes it), and hears its outcome against
//! the node that proved to be the primary.

use std::time::Instant;

use bytes::Bytes;
use tracing::debug;

use super::Router;
use crate::ids::{LinkId, NodeId, RequestId};
use crate::request::{PollRequest, Reply, Request, RequestError};
use crate::routing::{Attempt, Served, Target};
use crate::wire::{
    ErrorCode, PollMessagesReply, PollingStrategy, ReplyError, ReplyHeader, reply_payload,
};

/// Commit polls one offset write may make before it is handed back to routing as refused
/// (a primary that moves between every step).
pub(super) const COMMIT_POLLS_MAX: u32 = 3;

/// Times the leader may answer `InvalidOffset` before that answer is believed: the server
/// checks the offset against the node's own copy before it checks for the primary, and a
/// backup's copy lags the primary's by up to half a second (seen on the real cluster), so
/// an offset just read from the primary may be past the leader's end for a moment. The
/// write is asked again after [`LAGGING_WAIT`], so for about 1.5 s in all.
pub(super) const LAGGING_MAX: u32 = 15;

/// See [`LAGGING_MAX`].
pub(super) const LAGGING_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Where a group offset write is in its steps (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GroupCommit {
    /// Where routing sent the request: what a refusal is reported against.
    pub(super) routed: Target,
    pub(super) step: CommitStep,
    /// The primary and view the leader's last refusal named.
    pub(super) named: Option<(NodeId, u32)>,
    /// Commit polls written so far.
    pub(super) polls: u32,
    /// `InvalidOffset` answers from the leader so far.
    pub(super) lagging: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CommitStep {
    /// The write itself, on the member link.
    OnLeader,
    /// The auto-commit poll of the written offset, on a data link to this node.
    PollOn(NodeId),
}

impl GroupCommit {
    pub(super) fn new(routed: Target) -> Self {
        Self {
            routed,
            step: CommitStep::OnLeader,
            named: None,
            polls: 0,
            lagging: 0,
        }
    }
}

/// The poll that stores `store`'s offset where it is served: the one message at it.
pub(super) fn commit_poll(request: &Request) -> Option<Request> {
    let Request::StoreOffset(store) = request else {
        return None;
    };
    Some(Request::Poll(PollRequest {
        consumer: store.consumer.clone(),
        stream: store.stream.clone(),
        topic: store.topic.clone(),
        partition_id: Some(store.partition_id),
        strategy: PollingStrategy::Offset(store.offset),
        count: 1,
        auto_commit: true,
    }))
}

impl Router {
    /// The answer to one step of a group offset write on `link_id`.
    pub(super) fn group_commit_reply(
        &mut self,
        now: Instant,
        link_id: LinkId,
        request: RequestId,
        header: &ReplyHeader,
        body: Bytes,
    ) {
        let Some((commit, store)) = self.requests.get(&request).and_then(|entry| {
            let Request::StoreOffset(store) = &entry.request else {
                return None;
            };
            Some((entry.group_commit?, (store.partition_id, store.offset)))
        }) else {
            return;
        };
        let Some(node) = self.links.get(&link_id).map(|link| link.node) else {
            return;
        };
        let payload = reply_payload(header, body);
        match commit.step {
            CommitStep::OnLeader => match payload {
                // The leader leads the partition (now): it stored the offset itself.
                Ok(_) => self.commit_done(now, request, node),
                Err(ReplyError::Status(code) | ReplyError::Rejected(code)) if code.is_refusal() => {
                    let named = match self.named_by_refusal(Attempt::Refused, node, header) {
                        Attempt::RefusedNaming(primary) => Some((primary, header.view)),
                        Attempt::Done(_)
                        | Attempt::Refused
                        | Attempt::NotSent
                        | Attempt::Unknown
                        | Attempt::Failed(_)
                        | Attempt::NotYet(_) => None,
                    };
                    self.leader_refused(now, request, commit, named);
                }
                Err(ReplyError::Status(code) | ReplyError::Rejected(code))
                    if code == ErrorCode::InvalidOffset && commit.lagging < LAGGING_MAX =>
                {
                    // The leader's copy may not hold the offset yet: asked again in a
                    // moment, the steps so far kept.
                    if let Some(entry) = self.requests.get_mut(&request)
                        && let Some(commit) = &mut entry.group_commit
                    {
                        commit.lagging += 1;
                    }
                    let attempt = Attempt::NotYet(LAGGING_WAIT);
                    self.routing
                        .handle_result(now, request, commit.routed, attempt);
                }
                Err(ReplyError::Status(code) | ReplyError::Rejected(code))
                    if code == ErrorCode::ResourceNotFound =>
                {
                    // The server's offset fence: the partition is not the member's now.
                    // Said as the fence it is, so that it is not tried again as a partition
                    // a lagging node does not know yet (accepted later, once the partition
                    // came back, it would move the stored offset back).
                    let code = ErrorCode::ConsumerGroupPartitionNotOwned;
                    let attempt = Attempt::Failed(RequestError::Server { code });
                    self.commit_over(now, request, commit.routed, attempt);
                }
                Err(ReplyError::Status(code) | ReplyError::Rejected(code)) => {
                    let attempt = self.status_attempt(now, (link_id, request), code, false);
                    self.commit_over(now, request, commit.routed, attempt);
                }
                Err(ReplyError::Malformed(error)) => {
                    let attempt = Attempt::Failed(RequestError::Malformed(error));
                    self.commit_over(now, request, commit.routed, attempt);
                }
            },
            CommitStep::PollOn(primary) => {
                let polled = match payload {
                    Ok(payload) => PollMessagesReply::decode(&payload)
                        .map_err(|error| Attempt::Failed(RequestError::Malformed(error))),
                    Err(ReplyError::Status(code) | ReplyError::Rejected(code)) => {
                        Err(self.status_attempt(now, (link_id, request), code, false))
                    }
                    Err(ReplyError::Malformed(error)) => {
                        Err(Attempt::Failed(RequestError::Malformed(error)))
                    }
                };
                let (partition, offset) = store;
                match polled {
                    Ok(polled)
                        if polled.partition_id == partition
                            && polled.messages.first().map(|m| m.offset) == Some(offset) =>
                    {
                        // Served and committed by `primary`: confirm it still leads.
                        debug!(request = %request, %primary, offset, "commit poll served; confirming the primary");
                        // The offset is stored on `primary` now: however the steps end,
                        // not "not stored".
                        self.routing
                            .may_have_applied(request, Target::Node(primary));
                        self.commit_step(request, CommitStep::OnLeader, commit.named);
                        self.groups.wait(request, commit.routed);
                    }
                    Ok(polled) => {
                        let code = if polled.partition_id == u32::MAX {
                            ErrorCode::ConsumerGroupPartitionNotOwned
                        } else {
                            ErrorCode::InvalidOffset
                        };
                        let attempt = Attempt::Failed(RequestError::Server { code });
                        self.commit_over(now, request, commit.routed, attempt);
                    }
                    Err(attempt) => self.commit_over(now, request, commit.routed, attempt),
                }
            }
        }
    }

    /// The member link's node refused the write, naming `named` (primary and view) if its
    /// header did.
    fn leader_refused(
        &mut self,
        now: Instant,
        request: RequestId,
        commit: GroupCommit,
        named: Option<(NodeId, u32)>,
    ) {
        match named {
            Some((primary, _)) if commit.polls > 0 && named == commit.named => {
                // The same view as before the commit poll: that node led throughout.
                self.commit_done(now, request, primary);
            }
            Some((primary, _)) if commit.polls < COMMIT_POLLS_MAX => {
                self.commit_step(request, CommitStep::PollOn(primary), named);
                if let Some(entry) = self.requests.get_mut(&request)
                    && let Some(commit) = &mut entry.group_commit
                {
                    commit.polls += 1;
                }
                self.ready.entry(primary).or_default().push_back(request);
            }
            // No primary named (a roster we cannot map the refusal by), or one that kept
            // moving: routing has it as a refusal, and the next write starts again.
            Some(_) | None => self.commit_over(now, request, commit.routed, Attempt::Refused),
        }
    }

    fn commit_step(&mut self, request: RequestId, step: CommitStep, named: Option<(NodeId, u32)>) {
        if let Some(entry) = self.requests.get_mut(&request)
            && let Some(commit) = &mut entry.group_commit
        {
            commit.step = step;
            commit.named = named;
        }
    }

    /// Stored on `primary`, durably: routing learns that node as the partition's primary.
    fn commit_done(&mut self, now: Instant, request: RequestId, primary: NodeId) {
        if let Some(entry) = self.requests.get_mut(&request) {
            entry.reply = Some(Reply::OffsetStored);
            entry.group_commit = None;
        }
        self.routing.handle_result(
            now,
            request,
            Target::Node(primary),
            Attempt::Done(Served::Plain),
        );
    }

    /// The write ends its steps with `attempt`; a refusal starts them again at the next
    /// write.
    fn commit_over(&mut self, now: Instant, request: RequestId, routed: Target, attempt: Attempt) {
        if let Some(entry) = self.requests.get_mut(&request) {
            entry.group_commit = None;
        }
        self.routing.handle_result(now, request, routed, attempt);
    }
}
