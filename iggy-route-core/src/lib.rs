//! The sans-IO core of iggy-route: it sends every request of an Apache Iggy 0.11.0 client
//! to the node that can admit it, while the client's session stays where it is.
//!
//! Most programs use it through an adapter (`iggy-route-tokio` or `iggy-route-mio`). An
//! adapter drives a [`Router`]: it feeds inputs stamped with the time, carries out the
//! outputs, and sleeps until [`Router::poll_timeout`]:
//!
//! ```
//! use std::time::Instant;
//! use iggy_route_core::{Config, Credentials, Output, Router};
//!
//! let credentials = Credentials::user("iggy", "iggy").expect("a valid user name");
//! let config = Config::new(vec!["127.0.0.1:8090".to_owned()], credentials);
//! let mut router = Router::new(config, 7, Instant::now());
//! // Its first output asks for the session's link; an adapter dials it and reports
//! // `handle_connected`, then hands every byte it reads to `handle_read`.
//! let mut dials = 0;
//! while let Some(output) = router.poll_output() {
//!     if let Output::Connect { addr, .. } = output {
//!         assert_eq!(addr, "127.0.0.1:8090");
//!         dials += 1;
//!     }
//! }
//! assert_eq!(dials, 1);
//! assert!(router.poll_timeout().is_some(), "the connect has a deadline");
//! ```
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
//! - `routing` (internal): every decision, in typed values (no bytes).
//! - [`router`]: the links and framing around it, and the outer face adapters drive (see
//!   [`Router`] for the drive contract).
//! - [`client`]: what the adapters' clients share without doing I/O: their error type and
//!   each operation's request and expected reply.
//!
//! Values flow one way. The router (the parent) owns the links, the requests and their
//! payloads; it hands the routing layer (the child) typed facts and answers and drains its
//! decisions. The routing layer never calls the router, never holds a payload and never
//! encodes.
//!
//! # One send, start to end
//! A steady-state send (the partition's route known, a data link to its primary idle)
//! visits each layer once on the way out and once on the way back:
//! 1. The adapter's `send` builds a `client::Call` and calls [`Router::submit`] with
//!    the [`Request`]. The router checks its shape (`Request::validate`), stamps message
//!    ids, and keeps it in its request table.
//! 2. It hands the request's `routing::RequestFacts` to `routing::Routing::admit`. The
//!    routing layer resolves the partition against the topic's cached count, queues the
//!    request in the partition's lane and, the lane being free and its route fresh,
//!    releases it: one `routing::Decision::Write` naming the node and the partition.
//! 3. The router finishes the input in one turn: it applies the decision (the request
//!    joins the node's ready queue), writes it on the node's idle data link (encoded from
//!    its own copy of the request, framed with that link's identity) and queues one
//!    [`Output::Transmit`]. The link's reply deadline is filed in the timer index, which
//!    [`Router::poll_timeout`] reads.
//! 4. The reply arrives as [`Router::handle_read`]: the frame is matched to the exchange
//!    in flight, decoded into the caller's [`Reply`] (kept by the router), and reported to
//!    routing as `routing::Attempt::Done` with what routing needs of it
//!    (`routing::Served`).
//! 5. The routing layer confirms the route, frees the lane (releasing the next request, if
//!    any) and decides `routing::Decision::Completed`; the router applies it in the same
//!    input's turn and queues [`Output::Completed`] with the kept reply, which the adapter
//!    hands to the waiting caller.
//!
//! A refusal (58) takes the same path back with `routing::Attempt::Refused`: routing
//! drops the route and decides a lookup (or the next node) at once, and the request goes
//! out again from step 3.
//!
//! # Cargo features
//! Neither is on by default, and a client needs neither.
//! - `server`: the server half of the [`wire`] codec (request decoders, reply encoders
//!   and the frame helpers a test server uses). The loopback test cluster in the
//!   workspace's `tests/` crate and the mio adapter's unit tests turn it on.
//! - `internals` (hidden): the routing layer as a module and the router's inspection
//!   methods (routes, lanes, links), for the workspace's tests and simulation.
//! - `fuzzing` (implies `server` and `internals`): the hidden `fuzzing` module, the fuzz targets' entry
//!   points and the `FakeCluster` the router tests run against. `fuzz/` turns it on.
//!
//! The crate's own tests and benches see them all (it is its own dev-dependency with
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
/// The routing layer is the router's own child: a user drives the [`Router`], never this.
/// Its tests and the simulation reach it through the hidden `internals` feature.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod routing;
#[cfg(not(feature = "internals"))]
mod routing;

pub use config::{
    AddressProblem, Config, ConfigBuilder, ConfigError, ConnectionStringError, Credentials,
    CredentialsProblem, DeliveryGuarantee, PollFrom, TlsConfig, TlsError,
};
// The adapters' TLS client configuration (feature `rustls`): public for them, not for users.
#[cfg(feature = "rustls")]
#[doc(hidden)]
pub use config::TlsClient;
pub use event::{Event, LinkRole, ProtocolViolation, Stats};
pub use ids::{LinkId, NodeId, PartitionKey, RequestId, TopicKey};
pub use request::{
    AdminRequest, CommandRequest, ORIGIN_TIMESTAMP_SPAN, Outcome, Plane, PollRequest, Reply,
    ReplyPayload, Request, RequestError, SendReceipt, SendRequest, StoreOffsetRequest, SubmitError,
};
pub use router::{CloseReason, ConnectError, Output, Router, TimerKind};
