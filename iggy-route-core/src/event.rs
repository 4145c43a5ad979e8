//! What the router reports for observability, and the counters an adapter shows in `stats()`.

use crate::ids::{LinkId, NodeId, PartitionKey, RequestId, TopicKey};

/// What a link is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkRole {
    /// Carries the client's session: login, roster, route lookups, reads.
    Coordinator,
    /// Carries sends, routed polls and offset writes to one node, with its own login.
    Data,
}

/// Something that happened, for logs and counters. Routing never depends on an adapter
/// acting on these.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A link signed in and is ready for requests.
    LinkUp {
        /// The link.
        link: LinkId,
        /// Its node.
        node: NodeId,
        /// What it carries.
        role: LinkRole,
    },
    /// A link is gone.
    LinkDown {
        /// The link.
        link: LinkId,
        /// Its node.
        node: NodeId,
        /// What it carried.
        role: LinkRole,
    },
    /// A partition's primary was learned (from a lookup, or by a node admitting a send).
    RouteLearned {
        /// The partition.
        partition: PartitionKey,
        /// Its primary.
        node: NodeId,
    },
    /// A node refused a request ("never admitted", status 58): the route is dropped and a
    /// new one sought at once.
    Refused {
        /// The request.
        request: RequestId,
        /// The node that refused it.
        node: NodeId,
    },
    /// The cluster answers the routing commands with `InvalidCommand`: primaries are found
    /// by trying nodes (discovery by refusal).
    DiscoveryByRefusal,
    /// A node refused the sign-in (bad credentials, an incompatible protocol version, ...).
    SignInRefused {
        /// The node.
        node: NodeId,
        /// What it said.
        code: crate::wire::ErrorCode,
        /// No sign-in with these credentials can succeed (bad credentials or token, an
        /// incompatible protocol): every pending request was failed with `SignIn`.
        fatal: bool,
    },
    /// A committed command of this client changed the signed-in user's own password or
    /// name: links sign in with the new ones from now on (see [`Router::credentials`]).
    ///
    /// [`Router::credentials`]: crate::Router::credentials
    CredentialsChanged,
    /// The session (the coordinator link) moved to another node, because its node was
    /// unreachable.
    SessionMoved {
        /// Where it was.
        from: NodeId,
        /// Where it is now.
        to: NodeId,
    },
    /// A node broke the protocol; its link was closed. A write in flight on it ends with
    /// an unknown outcome (never a success), a read is asked again.
    ProtocolViolation {
        /// The link.
        link: LinkId,
        /// Its node.
        node: NodeId,
        /// What the node did.
        violation: ProtocolViolation,
    },
    /// A frame answered `TransientNotCommitted` (57) until its replays ran out or its
    /// request's deadline passed: the link was closed and the outcome is unknown.
    ReplaysExhausted {
        /// The request.
        request: RequestId,
        /// The node that kept answering 57.
        node: NodeId,
        /// Replays written before giving up.
        replays: u32,
    },
    /// A topic's partition count changed (another client added or deleted partitions, or
    /// we did): keyed sends of the topic now hash over `to` partitions, so a key may go to
    /// another partition than before, and its order across the change is not kept.
    PartitionsChanged {
        /// The topic.
        topic: TopicKey,
        /// The count keyed and balanced sends resolved against until now.
        from: u32,
        /// The count they resolve against from now on.
        to: u32,
    },
}

/// How a node broke the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolViolation {
    /// A reply whose request number or operation is not that of the request in flight.
    #[error(
        "reply to request {got_request} ({got_operation:?}) while {expected_request} ({expected_operation:?}) is in flight"
    )]
    MismatchedReply {
        /// The request number in flight.
        expected_request: u64,
        /// Its operation.
        expected_operation: crate::wire::Operation,
        /// The number the reply echoed.
        got_request: u64,
        /// The operation the reply echoed.
        got_operation: crate::wire::Operation,
    },
    /// A frame arrived while nothing was in flight.
    #[error("a frame while nothing is in flight")]
    Unsolicited,
    /// The node sent a request frame, which only clients send.
    #[error("a request frame from a node")]
    RequestFrame,
    /// Bytes that do not frame (a bad header, a size beyond the frame limit).
    #[error("undecodable bytes: {0}")]
    Undecodable(crate::wire::WireError),
    /// A successful reply whose body does not decode as the answer to its request.
    #[error("malformed reply body: {0}")]
    MalformedReply(crate::wire::WireError),
}

impl Event {
    /// Emits the event as a `tracing` event at the level it deserves: what a healthy client
    /// does at `debug`, what an operator should notice at `info`/`warn`. Adapters call this
    /// for every `Output::Event`.
    pub fn log(&self) {
        match self {
            Self::LinkUp { link, node, role } => tracing::debug!(%link, %node, ?role, "link up"),
            Self::LinkDown { link, node, role } => {
                tracing::debug!(%link, %node, ?role, "link down")
            }
            Self::RouteLearned { partition, node } => {
                tracing::debug!(%partition, %node, "route learned");
            }
            Self::Refused { request, node } => {
                tracing::debug!(%request, %node, "refused by a node that is not the primary; rerouting");
            }
            Self::DiscoveryByRefusal => {
                tracing::info!(
                    "the cluster has no routing commands; discovering primaries by refusal"
                );
            }
            Self::SignInRefused { node, code, fatal } => {
                tracing::warn!(%node, %code, fatal, "sign-in refused");
            }
            Self::CredentialsChanged => {
                tracing::info!(
                    "the signed-in user's password or name changed; later sign-ins use the new ones"
                );
            }
            Self::SessionMoved { from, to } => {
                tracing::warn!(%from, %to, "session moved: its node is unreachable");
            }
            Self::ProtocolViolation {
                link,
                node,
                violation,
            } => {
                tracing::warn!(%link, %node, %violation, "protocol violation; link closed");
            }
            Self::ReplaysExhausted {
                request,
                node,
                replays,
            } => {
                tracing::warn!(%request, %node, replays, "not committed (57) after every replay; outcome unknown");
            }
            Self::PartitionsChanged { topic, from, to } => {
                tracing::info!(%topic, from, to, "the topic's partition count changed; keys may map to other partitions");
            }
        }
    }
}

/// Counters since the router was made. New counters may come in a minor release.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Sends that completed with success.
    pub sends: u64,
    /// Refusals (status 58) received.
    pub refusals: u64,
    /// Route lookups sent (103) and discovery rounds started.
    pub lookups: u64,
    /// Connections opened to a node after a link to it was lost or failed.
    pub reconnects: u64,
    /// Times the session moved to another node.
    pub session_moves: u64,
    /// Requests completed (with any outcome).
    pub completed: u64,
    /// Requests completed by their deadline.
    pub timeouts: u64,
    /// Frames written again after a `TransientNotCommitted` (57).
    pub replays: u64,
    /// Links closed because their node broke the protocol.
    pub protocol_violations: u64,
    /// Sends written in a frame behind another send of their partition (coalesced).
    pub coalesced: u64,
    /// Refusals whose view named another node as the primary, which the refused
    /// request was written to at once (see `Config::follow_refusal_view`).
    pub refusal_views_followed: u64,
    /// Balanced sends that went to a later partition than their turn's, which waited for
    /// its primary or had a long queue (see `Config::balanced_skips_stalled`).
    pub balanced_passed_over: u64,
    /// Balanced sends that passed over at least one partition waiting for its primary
    /// (a subset of `balanced_passed_over`, which also counts long queues passed over).
    pub balanced_passed_stalled: u64,
    /// Consumer-group memberships that ended because their member link was lost (a
    /// leave is not counted): the group rebalanced without us until we join again.
    pub memberships_lost: u64,
}
