//! The requests the router holds: each caller's request with its payload, from `submit`
//! until its `Completed`, and the reply of its last served attempt. The routing layer sees
//! only their facts.

use std::time::Instant;

use tracing::{debug, warn};

use super::group_commit::GroupCommit;
use super::groups::GroupRole;
use super::{Output, Router};
use crate::ids::{LinkId, RequestId};
use crate::request::{Reply, Request, RequestError, StoreOffsetRequest, SubmitError};
use crate::wire::ErrorCode;

/// One accepted request.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) request: Request,
    /// When it is over whatever happens (what the routing layer completes it at).
    pub(super) deadline: Instant,
    /// The partition routing chose for it, as of its latest write.
    pub(super) partition: Option<u32>,
    /// The decoded answer of its latest served attempt, handed to the caller when routing
    /// completes the request with `Ok`.
    pub(super) reply: Option<Reply>,
    /// The link of its latest write: a 57 replay waiting there ends with the request.
    pub(super) link: Option<LinkId>,
    /// The sends routing merged into this one's next frame (see `Decision::Write`).
    pub(super) riders: Vec<RequestId>,
    /// An auto-commit poll written in the plain form without its commit (see
    /// `Router::write_request`): the offset it read up to is stored on the primary before
    /// the caller hears of it.
    pub(super) commit_after: bool,
    /// Such a poll, served, whose offset write is under way.
    pub(super) committing: bool,
    /// For the offset write of such a poll: the caller's poll and the reply it waits for.
    pub(super) commit_for: Option<(RequestId, Reply)>,
    /// What it is to a consumer group, worked out once when it is accepted: `None` for
    /// most requests, which so pass no group checks (see `groups`).
    pub(super) group: Option<GroupRole>,
    /// A consumer group's offset write, made in steps (see `router::group_commit`).
    pub(super) group_commit: Option<GroupCommit>,
    /// A member's auto-commit poll, accepted without its commit: its offset is written as
    /// the group's offset write once it is served (see `Router::group_auto_commit`).
    pub(super) group_auto_commit: bool,
    /// Links lost (closed, evicted, silent) with it in flight since it was last answered:
    /// at two it is not written again (see `Router::session_lost_under`).
    pub(super) sessions_lost: u8,
}

impl Router {
    /// Stamps a request's message ids and checks its shape: what refuses it whether or
    /// not there is room.
    pub(super) fn check_request(&mut self, request: Request) -> Result<Request, SubmitError> {
        // Ids are stamped first, also for a request refused below, so that the seeded id
        // sequence does not depend on which requests were accepted.
        let request = self.stamp_message_ids(request);
        if self.closed {
            return Err(SubmitError::Closed);
        }
        request.validate(self.config.max_frame_size)?;
        Ok(request)
    }

    /// Hands a checked request's facts to routing. A refusal (no room) hands the request
    /// back, unchanged, so that it may wait.
    pub(super) fn admit_checked(
        &mut self,
        now: Instant,
        mut request: Request,
    ) -> Result<RequestId, (SubmitError, Box<Request>)> {
        let group = GroupRole::of(&request);
        let group_auto_commit = group.is_some() && self.group_auto_commit(&request, group.as_ref());
        if let (true, Request::Poll(poll)) = (group_auto_commit, &mut request) {
            // Routing places it as the read it now is: it proves no primary.
            poll.auto_commit = false;
        }
        let id = match self.routing.admit(now, request.facts()) {
            Ok(id) => id,
            Err(error) => {
                if let (true, Request::Poll(poll)) = (group_auto_commit, &mut request) {
                    poll.auto_commit = true;
                }
                return Err((error, Box::new(request)));
            }
        };
        let entry = Entry {
            request,
            deadline: now + self.config.request_timeout,
            partition: None,
            reply: None,
            link: None,
            riders: Vec::new(),
            commit_after: false,
            committing: false,
            commit_for: None,
            group,
            group_commit: None,
            group_auto_commit,
            sessions_lost: 0,
        };
        self.requests.insert(id, entry);
        Ok(id)
    }

    /// An auto-commit poll written without its commit was answered with `reply`: the
    /// offset it read up to is to be stored on the partition's primary, first thing in the
    /// poll's lane (so the next poll of the partition reads what it leaves) and by the
    /// poll's deadline. The caller gets the reply once the write is over, however it ended
    /// (see `finish_request`). `Err` when the write cannot be queued (the router is
    /// closing); `Ok` with the reply back when there is nothing to store (no message was
    /// read, or the poll is over).
    pub(super) fn commit_polled(
        &mut self,
        now: Instant,
        poll_id: RequestId,
        reply: Reply,
    ) -> Result<Option<Reply>, RequestError> {
        let Some(entry) = self.requests.get(&poll_id) else {
            return Ok(Some(reply));
        };
        let (Request::Poll(poll), Reply::Polled(polled)) = (&entry.request, &reply) else {
            return Ok(Some(reply));
        };
        let Some(last) = polled.messages.last().map(|message| message.offset) else {
            return Ok(Some(reply));
        };
        let deadline = entry.deadline;
        if deadline <= now {
            // Over already: nothing more is written for it. The caller gets the messages
            // (they were read), uncommitted: read again later rather than lost.
            return Ok(Some(reply));
        }
        let store = Request::StoreOffset(StoreOffsetRequest {
            consumer: poll.consumer.clone(),
            stream: poll.stream.clone(),
            topic: poll.topic.clone(),
            // The partition asked for (the lane the write joins); only a poll that let the
            // server pick goes by the reply's.
            partition_id: poll.partition_id.unwrap_or(polled.partition_id),
            offset: last,
        });
        let store_id = self
            .routing
            .admit_next(now, store.facts(), deadline, poll_id)
            .map_err(|error| match error {
                SubmitError::QueueFull { limit } => RequestError::QueueFull { limit },
                SubmitError::Closed
                | SubmitError::EmptyBatch
                | SubmitError::EmptyPoll
                | SubmitError::FrameTooLarge { .. }
                | SubmitError::Invalid(_)
                | SubmitError::SessionCommand { .. } => RequestError::Shutdown,
            })?;
        debug!(poll = %poll_id, store = %store_id, offset = last, "storing a polled offset on the primary");
        let group = GroupRole::of(&store);
        self.requests.insert(
            store_id,
            Entry {
                request: store,
                deadline,
                partition: None,
                reply: None,
                link: None,
                riders: Vec::new(),
                commit_after: false,
                committing: false,
                commit_for: Some((poll_id, reply)),
                group,
                group_commit: None,
                group_auto_commit: false,
                sessions_lost: 0,
            },
        );
        if let Some(poll) = self.requests.get_mut(&poll_id) {
            poll.committing = true;
        }
        Ok(None)
    }

    /// A request is over: the caller gets the reply kept for it, or the error.
    pub(super) fn finish_request(&mut self, id: RequestId, outcome: Result<(), RequestError>) {
        if let Err(RequestError::QueueFull { limit }) = outcome
            && self.wait_again(id, limit)
        {
            return;
        }
        let mut entry = self.requests.remove(&id);
        if let Some(link) = entry.as_ref().and_then(|entry| entry.link)
            && self
                .links
                .get(&link)
                .and_then(|link| link.in_flight.as_ref())
                .is_some_and(|in_flight| in_flight.replay_at.is_some())
        {
            // A replay waiting on that link was bounded by this request's deadline.
            self.links.touch(link);
        }
        if let Some((poll_id, polled)) = entry.as_mut().and_then(|entry| entry.commit_for.take()) {
            // The offset write of an auto-commit poll: its caller is the poll's, and gets the
            // messages whatever became of the write, as the server's own auto-commit, which
            // no poll reply reports on, would have it. A write that failed (or timed out,
            // stored or not) leaves them to be read again: never lost.
            let for_group = entry
                .as_ref()
                .is_some_and(|entry| matches!(entry.group, Some(GroupRole::Commit(_))));
            let outcome = match outcome {
                Err(error) => {
                    debug!(poll = %poll_id, %error, "the polled offset was not stored");
                    // Except that a group's write fenced (the partition is another
                    // member's now, or we are no member) fails the poll as the server's own
                    // auto-commit poll would have failed: the messages are the new owner's
                    // to read from the group's offset, which did not move. Handed to us as
                    // well, they would be read twice in the group.
                    match group_fence(&error) {
                        Some(code) if for_group => Err(RequestError::Server { code }),
                        Some(_) | None => Ok(polled),
                    }
                }
                Ok(()) => Ok(polled),
            };
            self.outputs.push_back(Output::Completed {
                id: self.waiting.completed(poll_id),
                outcome,
            });
            return;
        }
        if entry.as_ref().is_some_and(|entry| entry.committing) {
            // Served, and its offset is being stored: the caller hears of it when the write
            // is over (with this reply, or the write's error), whatever routing says here.
            return;
        }
        let reply = entry.as_mut().and_then(|entry| entry.reply.take());
        let outcome = match (outcome, reply) {
            (Ok(()), Some(reply)) => Ok(reply),
            (Ok(()), None) => {
                // Routing completes with `Ok` only after a served attempt, whose reply is
                // kept; were that ever not so, the caller must not be told of a success.
                warn!(request = %id, "completed without a reply; reported as unknown");
                Err(RequestError::OutcomeUnknown { node: None })
            }
            (Err(error), _) => Err(error),
        };
        let id = self.waiting.completed(id);
        self.outputs.push_back(Output::Completed { id, outcome });
    }
}

/// The code a poll whose group offset write met the server's fence fails with: `None`
/// when `error` is not that fence. The fence answers `ConsumerGroupPartitionNotOwned`, or
/// `ResourceNotFound` to a connection that is no member (see `group_commit`), or
/// `ConsumerGroupMemberNotFound`; each is a definite "not stored".
fn group_fence(error: &RequestError) -> Option<ErrorCode> {
    let RequestError::Server { code } = error else {
        return None;
    };
    if *code == ErrorCode::ConsumerGroupMemberNotFound {
        return Some(*code);
    }
    matches!(
        code,
        ErrorCode::ConsumerGroupPartitionNotOwned | ErrorCode::ResourceNotFound
    )
    .then_some(ErrorCode::ConsumerGroupPartitionNotOwned)
}
