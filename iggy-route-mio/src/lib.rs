//! A blocking Apache Iggy 0.11.0 client on `mio` that sends every request to the node that
//! can admit it, while the session stays where it is. For producers without an async
//! runtime.
//!
//! # How it works
//! All routing lives in [`iggy_route_core`], a state machine that does no I/O. This crate
//! only drives it: one I/O thread runs a `mio::Poll` loop that owns the
//! [`Router`](iggy_route_core::Router) and every socket. It reads each ready socket until
//! it would block, asks for WRITABLE readiness only while a connection has unsent bytes,
//! and sleeps no longer than the router's next deadline. A call on [`Client`] sends a
//! command over a channel, wakes the loop with a `mio::Waker`, and blocks on its own reply
//! channel until the router's `Completed` output answers it.
//!
//! [`Client`] is `Clone + Send + Sync`: producers on several threads share one client,
//! one I/O thread and one session. The thread stops when [`Client::shutdown`] is called or
//! the last clone is dropped.
//!
//! ```no_run
//! # fn example() -> Result<(), iggy_route_mio::ClientError> {
//! use iggy_route_mio::{Client, Message, Partitioning};
//!
//! let client = Client::from_connection_string("iggy://iggy:iggy@127.0.0.1:8090")?;
//! let message = Message::new("hello");
//! let receipt = client.send("orders", "events", Partitioning::partition_id(0), vec![message])?;
//! println!("stored at offset {:?} on {}", receipt.base_offset, receipt.node);
//! client.shutdown();
//! # Ok(())
//! # }
//! ```
//!
//! # TLS
//! With `Config::tls` (the connection string's `?tls=true&tls_domain=...&tls_ca_file=...`),
//! every link, the session's and each data link, runs TLS 1.3 or 1.2 through rustls's
//! sans-I/O session, driven by the same I/O thread and `mio::Poll` loop: no thread is
//! added and no call blocks. A link counts as connected once its handshake is complete,
//! within `Config::connect_timeout` of the dial. [`Client::connect`] fails with
//! [`ClientError::Tls`] before dialling when the CA file or the server name is no good,
//! and as soon as a handshake shows a certificate that is not accepted or, on every seed,
//! a node that does not speak TLS. See [`TlsError`] for each case.
//!
//! Streams and topics are named by number (`1u32`), by name (`"orders"`, always a name, even
//! `"7"`) or by [`Identifier`] ([`Identifier::parse`] reads digits as an id, as the SDK
//! does). A message may carry typed [`UserHeaders`] ([`Message::with_headers`]); a received
//! one reads them back with `headers()`, byte for byte as the SDK 0.11.0 writes and reads
//! them.
//!
//! # Backpressure
//! The router holds at most `Config::max_pending_requests` requests (and
//! `max_pending_per_lane` per partition). A call it has no room for waits in the router's
//! line and is let in as room frees up, in the order the calls were
//! made (a later call never overtakes one that waits, so one thread's sends to a
//! partition stay in order). The wait lasts at most `Config::request_timeout`, after which
//! the call fails with [`ClientError::QueueFull`]; at most `max_pending_requests` calls
//! wait, and a call beyond them fails with `QueueFull` at once. Once let in, its request
//! has its own `request_timeout`, so a call ends within twice `request_timeout` at most.
//! [`Client::try_send`] and
//! [`Client::try_request`] never wait: they fail with `QueueFull` at once when the router
//! is full or other calls are waiting. [`Client::shutdown`] ends waiting calls with
//! [`ClientError::Closed`].
//!
//! # Producers
//! [`Client::producer`] sets up a [`Producer`] of one topic, the SDK's `IggyProducer`:
//! direct (each `send` cut into chunks of `batch_length` messages, every acknowledgement
//! waited for), or background (`send` buffers within bounds and returns a
//! [`producer::Delivery`] that resolves to that call's own receipt; one thread per
//! producer submits batches in order, several in flight). See [`producer`].
//!
//! ```no_run
//! # fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use iggy_route_mio::{BackgroundConfig, Client, Message};
//!
//! let client = Client::from_connection_string("iggy://iggy:iggy@127.0.0.1:8090")?;
//! let producer = client.producer("orders", "events")?.background(BackgroundConfig::default()).build()?;
//! for n in 0..1000 {
//!     producer.send_one(Message::new(format!("order {n}")))?;
//! }
//! producer.shutdown()?; // flushes: every message acknowledged, or the failures reported
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod client;
mod connection;
pub mod consumer;
mod driver;
mod probe;
pub mod producer;
mod resolve;
mod responder;
mod session_wait;
#[cfg(test)]
mod test_pki;
#[cfg(test)]
mod tests;
mod tls;

pub use client::Client;
pub use consumer::{ConsumerBuilder, TopicConsumer};
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
