//! What the caller asks for, what it gets back, and the typed ways either can fail.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use crate::ids::{NodeId, PartitionKey};
use crate::partitioning::Partitioning;
use crate::wire::{
    self, Consumer, ErrorCode, EvictionReason, HEADER_SIZE, Identifier, Message, Name,
    PollMessagesReply, PollingStrategy, StreamDetails, TopicDetails, WireError,
};

/// One request for the router.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Request {
    /// Append messages to one partition, on that partition's primary.
    Send(SendRequest),
    /// Read messages.
    Poll(PollRequest),
    /// Store a consumer offset, on the partition's primary.
    StoreOffset(StoreOffsetRequest),
    /// A metadata command or read.
    Admin(AdminRequest),
    /// Any other command of the protocol, encoded by its caller (see [`CommandRequest`]).
    Command(CommandRequest),
}

/// The codes that sign a session in: never carried as a raw command (a logout is, as
/// `Call::logout_user`, and the next request signs in again).
const SESSION_COMMANDS: [u32; 4] = [
    wire::code::LOGIN_USER,
    wire::code::LOGIN_REGISTER,
    wire::code::LOGIN_WITH_PERSONAL_ACCESS_TOKEN,
    wire::code::LOGIN_REGISTER_WITH_PAT,
];

/// Largest payload of one message (`iggy_message.rs`, protocol §1.10).
const MAX_PAYLOAD: usize = 64_000_000;
/// The field a batch whose origin timestamps span more than a frame's 32-bit delta can
/// carry is refused for (`WireError::InvalidValue`, the span in µs as its value).
pub const ORIGIN_TIMESTAMP_SPAN: &str = "origin timestamp span";

impl Request {
    /// Checks a request before it is accepted: what the wire cannot carry, or the server
    /// would refuse for its shape, fails here with nothing sent.
    pub(crate) fn validate(&self, max_frame_size: u32) -> Result<(), SubmitError> {
        let body_len = match self {
            Request::Send(send) => {
                if send.messages.is_empty() {
                    return Err(SubmitError::EmptyBatch);
                }
                // A messages key of any length is fine here: the router hashes it to a
                // partition and only the partition id goes out, as the SDK's
                // `send_messages` hashes whatever key bytes it is given (an empty key
                // too). `Partitioning::messages_key` keeps the SDK constructor's 1..=255.
                let mut frames = 0usize;
                for message in &send.messages {
                    if message.payload.len() > MAX_PAYLOAD {
                        return Err(SubmitError::Invalid(WireError::InvalidLength {
                            field: "payload",
                            len: message.payload.len(),
                        }));
                    }
                    // The block goes out as given, of any length the frame can carry: the
                    // server stores it without reading or bounding it, a block sealed by an
                    // encryptor is no list of headers, and the SDK's `send_messages` sends
                    // whatever block a message holds (only its message builder stops at
                    // 100,000 bytes).
                    frames = frames.saturating_add(message.frame_len());
                }
                // A frame carries its origin timestamp as a 32-bit delta from the batch's
                // smallest: a wider span (about 72 minutes) cannot be sent as it is, and
                // the SDK refuses it too rather than store other times than those given.
                let stamps = send.messages.iter().map(|m| m.origin_timestamp);
                let span = stamps.clone().max().unwrap_or(0) - stamps.min().unwrap_or(0);
                if span > u64::from(u32::MAX) {
                    return Err(SubmitError::Invalid(WireError::InvalidValue {
                        field: ORIGIN_TIMESTAMP_SPAN,
                        value: span,
                    }));
                }
                // Metadata section (at most 4 + 2 * 257 + 6 + 4) and the batch header.
                4 + send.stream.encoded_len()
                    + send.topic.encoded_len()
                    + 6
                    + 4
                    + wire::BATCH_HEADER_SIZE
                    + frames
            }
            Request::Command(command) => {
                if SESSION_COMMANDS.contains(&command.code) {
                    return Err(SubmitError::SessionCommand { code: command.code });
                }
                command.body.len()
            }
            // A poll of no messages: the SDK 0.11.0 refuses it as well, before sending.
            Request::Poll(poll) if poll.count == 0 => return Err(SubmitError::EmptyPoll),
            Request::Poll(_) | Request::StoreOffset(_) | Request::Admin(_) => 0,
        };
        let size = HEADER_SIZE.saturating_add(body_len);
        if size > max_frame_size as usize {
            return Err(SubmitError::FrameTooLarge {
                size,
                max: max_frame_size,
            });
        }
        Ok(())
    }
}

/// Messages for one partition of one topic.
#[derive(Debug, Clone)]
pub struct SendRequest {
    /// The stream.
    pub stream: Identifier,
    /// The topic.
    pub topic: Identifier,
    /// How the partition is chosen; resolved by the router, as the 0.11.0 SDK does.
    pub partitioning: Partitioning,
    /// The batch: at least one message.
    pub messages: Vec<Message>,
}

/// A poll of one partition (or of whatever the server chooses when `partition_id` is `None`).
#[derive(Debug, Clone)]
pub struct PollRequest {
    /// Who polls: a consumer or a consumer group.
    pub consumer: Consumer,
    /// The stream.
    pub stream: Identifier,
    /// The topic.
    pub topic: Identifier,
    /// The partition; `None` lets the server pick (never routed).
    pub partition_id: Option<u32>,
    /// Where to start.
    pub strategy: PollingStrategy,
    /// Most messages to return.
    pub count: u32,
    /// Commit the consumer offset on the server. Auto-commit polls go to the primary. A
    /// group's poll whose commit the server fences (the partition became another member's
    /// meanwhile, or this client left the group) fails with that code and hands out
    /// nothing: the messages are the next owner's, as with the server's own auto-commit.
    pub auto_commit: bool,
}

/// A consumer offset to store on the partition's primary.
#[derive(Debug, Clone)]
pub struct StoreOffsetRequest {
    /// Whose offset.
    pub consumer: Consumer,
    /// The stream.
    pub stream: Identifier,
    /// The topic.
    pub topic: Identifier,
    /// The partition (required: an offset belongs to one partition).
    pub partition_id: u32,
    /// The offset.
    pub offset: u64,
}

/// A command the router carries without reading it: its code, its body as the wire carries
/// it (encoded by the caller, usually a `client::Call` constructor), and the
/// plane that decides which node serves it. Its reply comes back as a [`ReplyPayload`] for
/// the caller to decode. Every command of the protocol beyond sends, polls, offset stores
/// and the creates and reads routing itself depends on goes this way, so adding one takes
/// a codec and a constructor, and no change to routing.
#[derive(Clone)]
pub struct CommandRequest {
    /// The command code (protocol §1.7); the header's operation follows from it.
    pub code: u32,
    /// The encoded body.
    pub body: Bytes,
    /// Where it goes.
    pub plane: Plane,
}

// By hand: a body may hold a password or a token (`CREATE_USER`, `CHANGE_PASSWORD`), and
// `Debug` output reaches logs.
impl fmt::Debug for CommandRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandRequest")
            .field("code", &self.code)
            .field("body_len", &self.body.len())
            .field("plane", &self.plane)
            .finish()
    }
}

/// Which node serves a command, by the plane of the cluster it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Plane {
    /// A read of cluster metadata (streams, topics, users, tokens, groups): the metadata
    /// leader, over a data link (a follower applies a write up to half a second later, and
    /// a list read cannot tell it is stale); the coordinator while the leader cannot be
    /// reached.
    MetadataRead,
    /// A replicated metadata write: the metadata leader, over a data link (the session
    /// never moves for it).
    MetadataWrite,
    /// About the session or the node holding it (`PING`, `GET_ME`, `GET_CLIENTS`,
    /// `GET_STATS`): the coordinator, which holds it.
    Session,
    /// On one partition: its primary, where its writes are admitted and its reads are
    /// as fresh as our own writes.
    Partition {
        /// The stream.
        stream: Identifier,
        /// The topic.
        topic: Identifier,
        /// The partition.
        partition: u32,
        /// Whether it changes state (an attempt whose outcome is unknown is then not
        /// written again).
        write: bool,
    },
}

/// Metadata commands (sent to the metadata leader) and reads (served by the coordinator).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AdminRequest {
    /// `CREATE_STREAM` (202).
    CreateStream {
        /// Its name.
        name: Name,
    },
    /// `CREATE_TOPIC` (302).
    CreateTopic {
        /// The stream it belongs to.
        stream: Identifier,
        /// Its name.
        name: Name,
        /// How many partitions it starts with.
        partitions_count: u32,
    },
    /// `CREATE_PARTITIONS` (402).
    CreatePartitions {
        /// The stream.
        stream: Identifier,
        /// The topic.
        topic: Identifier,
        /// How many partitions to add.
        partitions_count: u32,
    },
    /// `GET_STREAM` (200).
    GetStream {
        /// The stream.
        stream: Identifier,
    },
    /// `GET_TOPIC` (300).
    GetTopic {
        /// The stream.
        stream: Identifier,
        /// The topic.
        topic: Identifier,
    },
}

impl AdminRequest {
    /// Whether it changes the cluster's metadata (a replicated write on the metadata leader)
    /// rather than reading it.
    pub fn is_write(&self) -> bool {
        match self {
            Self::CreateStream { .. }
            | Self::CreateTopic { .. }
            | Self::CreatePartitions { .. } => true,
            Self::GetStream { .. } | Self::GetTopic { .. } => false,
        }
    }
}

/// A successful outcome.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Reply {
    /// The batch was admitted.
    Sent(SendReceipt),
    /// Messages read.
    Polled(PollMessagesReply),
    /// The offset was stored.
    OffsetStored,
    /// A stream was created, or read (`None`: no such stream).
    Stream(Option<StreamDetails>),
    /// A topic was created, or read (`None`: no such topic).
    Topic(Option<TopicDetails>),
    /// Partitions were added.
    PartitionsCreated,
    /// The payload answering a [`Request::Command`], for its caller to decode.
    Payload(ReplyPayload),
}

/// The payload of a reply to a [`Request::Command`] (after any result section). Its `Debug`
/// shows only its length: a reply may carry a secret (`CREATE_PERSONAL_ACCESS_TOKEN`
/// answers with the token).
#[derive(Clone, PartialEq, Eq)]
pub struct ReplyPayload(pub Bytes);

impl fmt::Debug for ReplyPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReplyPayload({} bytes)", self.0.len())
    }
}

/// Where a batch went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendReceipt {
    /// The partition the batch was appended to.
    pub partition_id: u32,
    /// The offset of its first message, when the server reported it (a server that
    /// recognised a duplicate answers with no confirmation).
    pub base_offset: Option<u64>,
    /// How many messages the batch held.
    pub messages: u32,
    /// The node that admitted it, as this client numbers nodes: its place in the seed list
    /// (nodes the roster adds come after). Not the server's replica id: see `replica`.
    pub node: NodeId,
    /// The server's own replica id of that node (its place in the cluster's roster), once
    /// the roster has been read; `None` before, or for a node the roster does not list.
    pub replica: Option<u32>,
}

/// How a request ended, when it did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The request's deadline passed. Whether it may have taken effect is `in_doubt`.
    #[error("timed out after {after:?}{}", if *in_doubt { " (it may have taken effect)" } else { " (never admitted)" })]
    TimedOut {
        /// How long the request lived.
        after: Duration,
        /// `true`: a write (a send, an offset, a metadata change, a poll that commits) was
        /// in flight at its deadline, or an earlier attempt of it was lost in flight, so it
        /// may or may not have taken effect. `false`: no attempt of it can have taken
        /// effect (it never left the client, every node it reached refused it, or it only
        /// reads), and sending it again cannot duplicate it.
        in_doubt: bool,
    },
    /// The link closed (or fell silent) while the request was in flight: it may or may not
    /// have been admitted, and it was not written again. (Under
    /// `DeliveryGuarantee::AtLeastOnce` a send or an offset write is written again; one
    /// whose copy written again then fails too ends so, whatever failed it.)
    #[error("outcome unknown: {} lost it in flight", node.map_or_else(|| "the coordinator".to_owned(), |node| node.to_string()))]
    OutcomeUnknown {
        /// The node it was written to (`None`: the coordinator's, whichever it was then).
        node: Option<NodeId>,
    },
    /// The server answered with an error code.
    #[error("server error {code}")]
    Server {
        /// The code.
        code: ErrorCode,
    },
    /// The stream or topic does not exist.
    #[error("topic {stream}/{topic} not found")]
    TopicNotFound {
        /// The stream as given.
        stream: Identifier,
        /// The topic as given.
        topic: Identifier,
    },
    /// The partition id is not below the topic's partition count. A count read for the
    /// request is read again, paced, for up to `Config::own_write_settle` from the submit
    /// (a node may not have applied another client's `CREATE_PARTITIONS` yet) before the
    /// request fails so.
    #[error("partition {partition} out of range: the topic has {count}")]
    PartitionOutOfRange {
        /// The partition asked for.
        partition: u32,
        /// The topic's partition count.
        count: u32,
    },
    /// No node could be found that admits requests for this partition.
    #[error("no route to {partition}")]
    NoRoute {
        /// The partition.
        partition: PartitionKey,
    },
    /// Signing in failed for good (bad credentials, incompatible server).
    #[error("sign-in failed: {code}")]
    SignIn {
        /// What the server said.
        code: ErrorCode,
    },
    /// A node sent bytes that do not decode.
    #[error("malformed reply: {0}")]
    Malformed(WireError),
    /// The partition's queue was full when the request, after waiting for its topic's
    /// partition count, was to join it. Nothing was sent.
    #[error("queue full: {limit} requests pending for the partition")]
    QueueFull {
        /// The per-partition limit.
        limit: usize,
    },
    /// The server ended the session in answer to this request (an eviction that blames
    /// the request, such as a body or operation it refuses, or the second eviction in a
    /// row with the request in flight). Nothing was stored: the server evicts before it
    /// processes the request. It is not written again; the session is signed in again
    /// for every other request.
    #[error("evicted by the server ({reason:?}): {code}")]
    Evicted {
        /// The reason the server gave.
        reason: EvictionReason,
        /// The error the SDK 0.11.0 reports for this eviction.
        code: ErrorCode,
    },
    /// The link closed under this read twice in a row, each time with the read in flight:
    /// it may be what the node closes it for, so it is not written a third time.
    #[error("connection lost twice with the request in flight ({})", node.map_or_else(|| "the coordinator".to_owned(), |node| node.to_string()))]
    ConnectionLost {
        /// The node of the second link (`None`: the coordinator's).
        node: Option<NodeId>,
    },
    /// Its caller withdrew it (see `Router::withdraw`) before it was written.
    #[error("withdrawn by its caller before it was sent")]
    Withdrawn,
    /// The router was shut down before the request was written: nothing was stored. (A
    /// write already on the wire, or one an earlier attempt of which was lost in flight,
    /// ends `OutcomeUnknown` instead.)
    #[error("router shut down")]
    Shutdown,
    /// The router was shut down while the request waited for room (see
    /// `Router::submit_waiting`): it was never accepted, and nothing of it was sent.
    #[error("router closed while the request waited for room")]
    Closed,
}

impl RequestError {
    /// Whether the request may have taken effect on the server although it failed, so
    /// that sending it again may duplicate it: `OutcomeUnknown`, `TimedOut` in doubt,
    /// `Malformed` (a node answered, in bytes that do not say how), and the server's codes
    /// that say so ([`ErrorCode::says_outcome_unknown`]). Every other error says that it
    /// did not take effect.
    pub fn in_doubt(&self) -> bool {
        match self {
            Self::OutcomeUnknown { .. } | Self::Malformed(_) => true,
            Self::TimedOut { in_doubt, .. } => *in_doubt,
            Self::Server { code } => code.says_outcome_unknown(),
            Self::TopicNotFound { .. }
            | Self::PartitionOutOfRange { .. }
            | Self::NoRoute { .. }
            | Self::SignIn { .. }
            | Self::QueueFull { .. }
            | Self::Evicted { .. }
            | Self::ConnectionLost { .. }
            | Self::Withdrawn
            | Self::Shutdown
            | Self::Closed => false,
        }
    }
}

/// Why `submit` refused a request before anything was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// Too many requests are waiting (in all, or for one partition).
    #[error("queue full: {limit} requests pending")]
    QueueFull {
        /// The limit that was hit.
        limit: usize,
    },
    /// The encoded request would be larger than the configured maximum frame.
    #[error("request of {size} bytes exceeds the {max}-byte frame limit")]
    FrameTooLarge {
        /// The encoded size.
        size: usize,
        /// The limit.
        max: u32,
    },
    /// A send with no message.
    #[error("empty batch")]
    EmptyBatch,
    /// A poll of no messages (`count` 0).
    #[error("poll of 0 messages")]
    EmptyPoll,
    /// A field of the request cannot be encoded (for example a message key over 255 bytes).
    #[error("invalid request: {0}")]
    Invalid(WireError),
    /// A login code given as a [`Request::Command`]: it would replace the session every
    /// other request shares (or, for the legacy codes, end it), so it is refused here, as
    /// the SDK 0.11.0 refuses it (`InvalidCommand`). Credentials are given at connect.
    #[error("command {code} signs a session in and cannot be sent as a raw command")]
    SessionCommand {
        /// The code.
        code: u32,
    },
    /// The router is shutting down and takes no new requests.
    #[error("router closed")]
    Closed,
}

/// The completion of one request.
pub type Outcome = Result<Reply, RequestError>;
