//! An async Apache Iggy 0.11.0 client on tokio that sends every request to the node that
//! can admit it, while the session stays where it is.
//!
//! # How it works
//! All routing lives in [`iggy_route_core`], a state machine that does no I/O. This crate
//! only drives it: one task owns the [`Router`](iggy_route_core::Router) and is the only
//! code that touches it. Each connection has a task that connects and then forwards the
//! bytes it reads to the driver over a bounded channel, and a writer task fed by another
//! bounded channel; the driver never waits on a socket. A caller's request goes to the
//! driver with a oneshot that the router's `Completed` output resolves.
//!
//! [`Client`] is a channel sender plus shared counters: clone it freely and use it from as
//! many tasks as you like. The driver stops when [`Client::shutdown`] is called or every
//! clone is dropped.
//!
//! ```no_run
//! # async fn example() -> Result<(), iggy_route_tokio::ClientError> {
//! use iggy_route_tokio::{Client, Message, Partitioning};
//!
//! let client = Client::from_connection_string("iggy://iggy:iggy@127.0.0.1:8090").await?;
//! let message = Message::new("hello");
//! let receipt = client
//!     .send("orders", "events", Partitioning::partition_id(0), vec![message])
//!     .await?;
//! println!("stored at offset {:?} on {}", receipt.base_offset, receipt.node);
//! client.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Streams and topics are named by number (`1u32`), by name (`"orders"`, always a name, even
//! `"7"`) or by [`Identifier`] ([`Identifier::parse`] reads digits as an id, as the SDK
//! does). A message may carry typed [`UserHeaders`] ([`Message::with_headers`]); a received
//! one reads them back with `headers()`, byte for byte as the SDK 0.11.0 writes and reads
//! them.
//!
//! # Backpressure
//! The router holds at most `Config::max_pending_requests` requests (and
//! `Config::max_pending_per_lane` for one partition). A request that finds no room waits
//! for it, in line: first in, first out, so that a later call never overtakes one that
//! waits (one caller's sends to one partition keep their order). It waits at most
//! `Config::request_timeout` from the call, and the line holds at most
//! `max_pending_requests` requests; past either bound the call fails with
//! [`ClientError::QueueFull`]. Once let in, its request has its own `request_timeout` (two
//! bounds one after the other, like Kafka's `max.block.ms` then `delivery.timeout.ms`): a
//! call ends within twice `request_timeout` at most. [`Client::try_send`] and [`Client::try_request`] never wait:
//! they fail with `QueueFull` at once when there is no room, or when requests wait in line.
//! [`Client::shutdown`] fails every waiting request with [`ClientError::Closed`].
//!
//! # Dropping a call
//! A call's future may be dropped at any time. If its request has not been written yet (it
//! waits for room, for a route, for a link, or behind other requests of its partition), it
//! is withdrawn within about 20 ms and never sent. Once written it cannot be called back:
//! it completes by the usual rules with nobody to hear it, and a send may be stored.
//! The same holds for a background producer's call whose `Delivery` is dropped: the
//! messages are buffered and sent regardless (drop the delivery, not the producer, to
//! ignore the receipt).
//!
//! # TLS
//! With `tls=true` in the connection string (or `Config::tls`), every link is TLS 1.3 or
//! 1.2 through rustls (`ring`), verified against `tls_ca_file` or the bundled web PKI roots,
//! for `tls_domain` or each address's own host. The handshake is part of connecting a
//! link, so the router only ever sees links whose session is up, and plain TCP runs
//! exactly the code it ran before. [`Client::connect`] reports a certificate or
//! configuration problem at once as [`ClientError::Tls`] with a typed [`TlsError`], and a
//! cluster that does not speak TLS as `TlsError::NotTls` once every seed was tried.
//!
//! # Producers
//! [`Client::producer`] builds a [`Producer`] for one stream and topic (the SDK 0.11.0's
//! `IggyProducer`). In direct mode (`Producer<Direct>`, the default) `send` cuts the call
//! into chunks of `batch_length` messages and `batch_size` bytes and returns once each is
//! acknowledged, with their receipts. In background mode (`Producer<Background>`, from
//! [`ProducerBuilder::background`]) `send` returns once the messages are buffered, with a
//! [`producer::Delivery`] that resolves to that call's own receipt; one task per producer
//! submits the buffer's batches in order, up to `max_in_flight` at once, and
//! [`Producer::flush`] / [`Producer::shutdown`] wait for them. See [`producer`].
//!
//! # SDK traits (feature `sdk`)
//! With the `sdk` feature, [`Client`] implements the published SDK 0.11.0's
//! `iggy_common::Client` trait and its supertraits (`StreamClient`, `MessageClient`, ...),
//! so a program written against them switches to iggy-route by changing only the line that
//! builds its client:
//!
//! ```toml
//! iggy-route-tokio = { version = "0.1", features = ["sdk"] }
//! ```
//!
//! ```ignore
//! use std::sync::Arc;
//! use iggy_route_tokio::IntoIggyError;
//!
//! let client: Arc<dyn iggy_common::Client> = Arc::new(
//!     iggy_route_tokio::Client::from_connection_string(url)
//!         .await
//!         .map_err(IntoIggyError::into_iggy_error)?,
//! );
//! client.create_stream("orders").await?; // an IggyError on failure, as on the SDK
//! ```
//!
//! Each method calls the native one of the same name (same routing, the SDK's types and
//! errors); call them through the trait, as the native methods come first on the concrete
//! type. What differs from the SDK: `describe_options` is `FeatureUnavailable`,
//! `disconnect` leaves iggy-route's links open, and a request whose outcome is unknown
//! (it may have been stored) is `TransientNotCommitted` (57). Errors of the native methods
//! convert with `IntoIggyError`. The full tables (every method, every error, the events)
//! are in the documentation of the `sdk` module.

#![warn(missing_docs)]

mod client;
mod connection;
pub mod consumer;
mod driver;
mod probe;
pub mod producer;
#[cfg(feature = "sdk")]
pub mod sdk;
mod session_wait;
mod tls;
#[cfg(test)]
mod tls_peers;

pub use client::Client;
pub use consumer::{ConsumerBuilder, TopicConsumer};
/// The SDK crate whose traits [`Client`] implements, at the version it implements.
#[cfg(feature = "sdk")]
pub use iggy_common;
pub use iggy_route_core::client::ClientError;
pub use iggy_route_core::client::consumer::{AutoCommit, ConsumerStats, ReceivedMessage};
pub use iggy_route_core::partitioning::Partitioning;
pub use iggy_route_core::wire::{
    Consumer, ConsumerKind, HeaderError, HeaderKey, HeaderKind, HeaderValue, Identifier, Message,
    PollMessagesReply, PolledMessage, PollingStrategy, StreamDetails, TopicDetails, UserHeaders,
};
pub use iggy_route_core::{
    Config, Credentials, DeliveryGuarantee, PollRequest, Reply, Request, RequestError, SendReceipt,
    Stats, SubmitError, TlsConfig, TlsError,
};
pub use producer::{
    BackgroundConfig, Backpressure, ErrorCallback, Producer, ProducerBuilder, ProducerError,
    ProducerStats, SendFailure,
};
#[cfg(feature = "sdk")]
pub use sdk::IntoIggyError;
