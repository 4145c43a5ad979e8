//! The values that cross between the routing layer and the layer that drives it: what
//! it decides ([`Decision`]), what it is told back ([`Attempt`], [`RouteAnswer`],
//! [`TopicAnswer`]) and why it wants to be woken ([`RoutingTimer`]).

use crate::event::Event;
use crate::ids::{NodeId, PartitionKey, RequestId, TopicKey};
use crate::request::RequestError;
use crate::wire::ErrorCode;

use super::Served;

/// Where a released request is to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// On a data link to this node.
    Node(NodeId),
    /// On the coordinator link (reads that any node serves).
    Coordinator,
}

/// What the routing layer wants done.
#[derive(Debug)]
#[must_use = "a decision left undone strands its request"]
pub enum Decision {
    /// Write this request (its next attempt) to the target.
    Write {
        /// The request.
        request: RequestId,
        /// Sends of the same partition that ride in the same frame, after `request`'s
        /// messages and in this order (coalescing). Whatever the frame comes to is
        /// reported once, for `request`, and applies to each of them.
        coalesced: Vec<RequestId>,
        /// Where.
        target: Target,
        /// The partition chosen for it (requests of a partition's lane).
        partition: Option<u32>,
    },
    /// Ask the coordinator who the partition's primary is (`GET_POLL_ROUTING`, 103).
    FetchRoute {
        /// The partition.
        partition: PartitionKey,
    },
    /// Read the topic's partition count (`GET_TOPIC`, 300).
    FetchTopic {
        /// The topic.
        topic: TopicKey,
    },
    /// Read the roster (`GET_CLUSTER_METADATA`, 12) for the metadata leader.
    FetchRoster,
    /// The request is over: `Ok` with the answer of its last served attempt.
    Completed {
        /// The request.
        request: RequestId,
        /// How it ended.
        outcome: Result<(), RequestError>,
    },
    /// Something to report.
    Event(Event),
}

/// What one attempt of a request came to, as the link layer saw it.
#[derive(Debug, Clone)]
pub enum Attempt {
    /// The node admitted and answered it; what the answer says, as far as routing cares.
    Done(Served),
    /// The node refused it: never admitted (status 58).
    Refused,
    /// The node refused it, and its refusal named another node as the partition's
    /// primary (its view of the group): worth writing to at once.
    RefusedNaming(NodeId),
    /// It never reached a node that could answer (no link, or a read whose link closed):
    /// safe to write again.
    NotSent,
    /// The link closed with it in flight: it may or may not have been admitted.
    Unknown,
    /// A final answer: the request fails with this error.
    Failed(RequestError),
    /// The node cannot answer yet (its copy lags the primary's): nothing was admitted and
    /// nothing is learned; the request is written again after this wait, first in its lane.
    NotYet(std::time::Duration),
}

/// What a route lookup came to.
#[derive(Debug)]
pub enum RouteAnswer {
    /// The partition's primary, under this metadata watermark.
    Primary {
        /// The node.
        node: NodeId,
        /// The watermark it was learned under.
        watermark: u64,
    },
    /// The cluster does not have the routing commands (or will not let us use them).
    Unsupported,
    /// No answer this time (58, or the coordinator link failed): look up again later.
    Unavailable,
    /// The partition (or its topic) does not exist, or another final error.
    Failed(RequestError),
}

/// What a topic read came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicAnswer {
    /// The topic exists with this many partitions.
    Found {
        /// Its partition count.
        partitions_count: u32,
    },
    /// The topic exists with this many partitions, says a node that has not applied this
    /// client's own latest metadata write (its reply's commit is below the client's
    /// metadata watermark): partitions the client has just added may be missing. Followers
    /// apply a commit up to half a second after the leader (seen on the real cluster).
    Behind {
        /// Its partition count on that node.
        partitions_count: u32,
    },
    /// No such stream or topic, says the metadata leader (or a node whose answer cannot
    /// predate a write: see [`TopicAnswer::AbsentOnFollower`]).
    NotFound,
    /// No such stream or topic, says a node that is not the metadata leader. A follower
    /// applies another client's create up to half a second after the leader commits it
    /// (seen on the real cluster), so the absence is believed only once the requests
    /// waiting for the topic are `own_write_settle` old.
    AbsentOnFollower,
    /// No answer this time: read it again later.
    Unavailable,
    /// The server will not tell this user (it may not read the topic): asking again
    /// changes nothing.
    Denied {
        /// What the server said.
        code: ErrorCode,
    },
}

/// Whether the cluster answers the routing commands (14, 103, 104, 123).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoutingCommands {
    /// Not known yet: assume they exist until a lookup says otherwise.
    Unknown,
    /// A lookup succeeded.
    Supported,
    /// Answered with `InvalidCommand` / `FeatureUnavailable`: discovery by refusal.
    Unsupported,
}

/// Why the routing layer wants `handle_timeout` called.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RoutingTimer {
    /// Decisions are queued: drain them now.
    Decisions,
    /// A request's deadline.
    RequestDeadline,
    /// A coordinator read is to be asked again.
    ReadRetry,
    /// A lane's backoff ends.
    LaneBackoff,
    /// A backing-off lane's route is to be looked up again.
    RouteRecheck,
    /// A topic's partition count is to be read again.
    TopicRetry,
    /// A partition's first send has lingered long enough for more to merge with.
    Linger,
}
