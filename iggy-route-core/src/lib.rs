//! The sans-IO core of iggy-route: it sends every request of an Apache Iggy 0.11.0 client
//! to the node that can admit it, while the client's session stays where it is.
//!
//! # The model
//! In an Iggy cluster every partition is its own consensus group with its own primary, and
//! only the primary admits a send; any other node refuses it with status 58 ("never
//! admitted"). After ordinary failovers the primaries of one topic sit on different nodes.
//! The core keeps one **coordinator link** that carries the session (login, roster, route
//! lookups, reads) and, per node, a small pool of **data links** with their own logins.
//! A send goes to its partition's primary over a data link to that node.
//!
//! # How routing knowledge is learned
//! The primary of a partition is asked for with `GET_POLL_ROUTING` (103) on the
//! coordinator, once per partition at a time (single-flight), and cached with the metadata
//! watermark it was learned under. A metadata write moves the watermark and makes cached
//! routes and partition counts stale. Where the cluster answers 103 with `InvalidCommand`
//! (servers built before the routing commands), the core finds primaries by trying the
//! roster's nodes in turn and keeping the one that admits (discovery by refusal).
//!
//! # When we redirect, when we back off
//! A refusal is new information: the route is dropped and the next thing the core does for
//! that partition is a lookup (or, under discovery, a write to the next node), at once. It
//! never replays a refused request on the node that refused it unless a newer route names
//! that node again; only then (an election in progress) does it back off, with seeded
//! jitter from a few milliseconds, doubling, capped well under a second. `57` (outcome
//! unknown) is replayed on the same link only. A link that closes with a write in flight
//! makes the outcome unknown, and the write is not repeated unless the caller opted into
//! at-least-once delivery.
//!
//! # Layers
//! - [`wire`]: the Iggy 0.11.0 binary protocol, both directions.
//! - [`routing`]: every decision, in typed values (no bytes).
//! - [`router`]: the links and framing around it, and the outer face adapters drive (see
//!   [`Router`] for the drive contract).
//! - [`client`]: what the adapters' clients share without doing I/O: their error type and
//!   each operation's request and expected reply.
//!
//! # Cargo features
//! Neither is on by default, and a client needs neither.
//! - `server`: the server half of the [`wire`] codec (request decoders, reply encoders
//!   and the frame helpers a test server uses). The loopback test cluster in the
//!   workspace's `tests/` crate and the mio adapter's unit tests turn it on.
//! - `fuzzing` (implies `server`): the hidden `fuzzing` module, the fuzz targets' entry
//!   points and the `FakeCluster` the router tests run against. `fuzz/` turns it on.
//!
//! The crate's own tests and benches see both (it is its own dev-dependency with
//! `fuzzing` on).
#![warn(missing_docs)]

pub mod client;
pub mod partitioning;
pub mod wire;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

mod config;
mod event;
mod ids;
mod request;
mod rng;
pub mod router;
pub mod routing;

pub use config::{
    AddressProblem, Config, ConfigBuilder, ConfigError, ConnectionStringError, Credentials,
    CredentialsProblem, Delivery, PollFrom,
};
pub use event::{Event, LinkRole, ProtocolViolation, Stats};
pub use ids::{LinkId, NodeId, PartitionKey, RequestId, TopicKey};
pub use request::{
    AdminRequest, Outcome, PollRequest, Reply, Request, RequestError, SendReceipt, SendRequest,
    StoreOffsetRequest, SubmitError,
};
pub use router::{CloseReason, ConnectError, Output, Router, TimerKind};
