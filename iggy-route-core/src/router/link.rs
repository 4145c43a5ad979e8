//! One connection to one node: its sign-in, its session identity and its single request in
//! flight (the protocol is lockstep: the next frame read is the reply to the last written).

use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};

use crate::event::LinkRole;
use crate::ids::{LinkId, NodeId, PartitionKey, RequestId, TopicKey};
use crate::routing::Target;

use super::groups::{GroupKey, GroupRole};
use super::timer::TimerKind;
use crate::wire::{FrameDecoder, HEADER_SIZE, Operation, RequestHeader, request_checksum};

/// Where a link is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LinkState {
    /// `Output::Connect` issued, no answer from the transport yet.
    Connecting,
    /// Connected; the login is in flight.
    SigningIn,
    /// Signed in: takes requests.
    Ready,
}

/// What the request in flight on a link is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Job {
    Login,
    Ping,
    Roster,
    Route(PartitionKey),
    Topic(TopicKey),
    /// `ATTACH_CONSUMER_SESSION` ahead of this routed request.
    Attach(RequestId),
    Request(RequestId, Target),
}

/// The exchange a link waits on. `Debug` shows the frame's length only: a login frame
/// carries the password.
pub(super) struct InFlight {
    pub(super) job: Job,
    /// Past this instant the node counts as silent and the link is closed.
    pub(super) deadline: Instant,
    /// The frame as written, replayed byte for byte after a `TransientNotCommitted` (57).
    pub(super) frame: Bytes,
    /// What the reply must echo: the request number and operation the frame carries.
    pub(super) sent: Sealed,
    /// When set, the frame is written again at this instant.
    pub(super) replay_at: Option<Instant>,
    /// Replays of this frame so far (bounded by `Config::max_replays`).
    pub(super) replays: u32,
    /// A merged send's requests in frame order, the first being the job's, with each
    /// one's message count; empty for any other exchange.
    pub(super) batch: Vec<(RequestId, u32)>,
}

/// The identity of one written frame, as its reply must echo it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sealed {
    pub(super) request: u64,
    pub(super) operation: Operation,
}

impl InFlight {
    /// Every caller's request this exchange carries: the job's, and the sends merged into
    /// its frame.
    pub(super) fn carried(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.request()
            .into_iter()
            .chain(self.batch.iter().skip(1).map(|(id, _)| *id))
    }

    /// The caller's request this exchange carries, if any: only those are answered 57 and
    /// replayed.
    pub(super) fn request(&self) -> Option<RequestId> {
        match &self.job {
            Job::Request(request, _) => Some(*request),
            Job::Login
            | Job::Ping
            | Job::Roster
            | Job::Route(_)
            | Job::Topic(_)
            | Job::Attach(_) => None,
        }
    }
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("job", &self.job)
            .field("deadline", &self.deadline)
            .field("frame_len", &self.frame.len())
            .field("sent", &self.sent)
            .field("replay_at", &self.replay_at)
            .field("replays", &self.replays)
            .field("batch", &self.batch)
            .finish()
    }
}

/// The consumer session a data link was attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Attachment {
    pub(super) client_id: u128,
    pub(super) session: u64,
    pub(super) watermark: u64,
}

#[derive(Debug)]
pub(super) struct Link {
    pub(super) id: LinkId,
    pub(super) node: NodeId,
    pub(super) role: LinkRole,
    pub(super) state: LinkState,
    pub(super) opened_at: Instant,
    /// This link's own VSR identity: its client id, the session its login returned and its
    /// request counter. A send's dedup identity is the link it goes out on.
    pub(super) client_id: u128,
    pub(super) session: u64,
    pub(super) request_counter: u64,
    pub(super) decoder: FrameDecoder,
    pub(super) in_flight: Option<InFlight>,
    pub(super) last_sent: Instant,
    /// Last real request (not a heartbeat): data links idle past their timeout are closed.
    pub(super) last_used: Instant,
    pub(super) attached: Option<Attachment>,
    /// The node answered an exchange of ours on this link after its sign-in. A link lost
    /// before that (a node that signs in and then breaks the protocol, closes or falls
    /// silent) counts as a failure of its node and backs off, like a failed connect.
    pub(super) proven: bool,
    /// Its next deadline and what for, as filed in the router's timer index.
    pub(super) filed: Option<(Instant, TimerKind)>,
    /// The consumer group whose membership this link's identity holds (see
    /// `router::membership`): such a link takes no pool traffic and is never closed for
    /// idleness.
    pub(super) member_of: Option<GroupKey>,
    /// The join or leave in flight on this link (its request and where routing sent it),
    /// settled by its answer even when its caller's request is over.
    pub(super) membership_write: Option<(RequestId, Target, GroupRole)>,
    /// Signed in (or signing in) with credentials the router no longer uses (see
    /// `Router::sign_in_as`): it takes nothing new and is closed once its exchange in
    /// flight is answered.
    pub(super) retiring: bool,
}

impl Link {
    pub(super) fn new(
        id: LinkId,
        node: NodeId,
        role: LinkRole,
        client_id: u128,
        max_frame_size: u32,
        now: Instant,
    ) -> Self {
        Self {
            id,
            node,
            role,
            state: LinkState::Connecting,
            opened_at: now,
            client_id,
            session: 0,
            request_counter: 1,
            decoder: FrameDecoder::new(max_frame_size),
            in_flight: None,
            last_sent: now,
            last_used: now,
            attached: None,
            proven: false,
            filed: None,
            member_of: None,
            membership_write: None,
            retiring: false,
        }
    }

    pub(super) fn is_idle(&self) -> bool {
        self.state == LinkState::Ready && self.in_flight.is_none() && !self.retiring
    }

    /// A data link of the node's pool: one that holds no group membership.
    pub(super) fn in_pool(&self) -> bool {
        self.role == LinkRole::Data && self.member_of.is_none()
    }

    /// A whole request frame with this link's identity, around `body`, and what its reply
    /// must echo.
    pub(super) fn frame(
        &mut self,
        operation: Operation,
        code: u32,
        body: &[u8],
    ) -> (Bytes, Sealed) {
        let mut frame = BytesMut::with_capacity(HEADER_SIZE + body.len());
        frame.put_bytes(0, HEADER_SIZE);
        frame.extend_from_slice(body);
        self.seal(operation, code, frame)
    }

    /// Writes this link's header over the first 256 bytes of `frame` (a placeholder the
    /// body was encoded after, so the body is never copied). A login carries 0 (protocol
    /// §3.3); every other exchange, reads included, takes the next request number.
    ///
    /// The SDK lets reads carry the current number without taking it, so two reads in a
    /// row share one and a late or duplicated reply to the first would pass for the
    /// second's. The server uses a read's number for nothing but the echo (the
    /// non-replicated path), and the metadata plane's client table allows gaps between
    /// replicated numbers, so a number per exchange costs nothing and lets every reply be
    /// matched to its request.
    pub(super) fn seal(
        &mut self,
        operation: Operation,
        code: u32,
        frame: BytesMut,
    ) -> (Bytes, Sealed) {
        self.seal_as(operation, code, frame, None)
    }

    /// [`Link::seal`], with `speak_for` in the header's `client` field instead of this
    /// link's id where given: a consumer group's sync and polls are answered as whoever
    /// the header names (see `router::membership`).
    pub(super) fn seal_as(
        &mut self,
        operation: Operation,
        code: u32,
        mut frame: BytesMut,
        speak_for: Option<u128>,
    ) -> (Bytes, Sealed) {
        let (session, request) = if operation == Operation::Register {
            (0, 0)
        } else {
            let request = self.request_counter;
            self.request_counter += 1;
            (self.session, request)
        };
        let split = HEADER_SIZE.min(frame.len());
        let (header_bytes, body) = frame.split_at_mut(split);
        let mut header = RequestHeader::new(
            operation,
            code,
            speak_for.unwrap_or(self.client_id),
            session,
            request,
            body.len(),
        );
        if operation.is_checksummed() {
            header.request_checksum = request_checksum(body);
        }
        header.encode(&mut &mut header_bytes[..]);
        (frame.freeze(), Sealed { request, operation })
    }
}
