//! A producer for one stream and topic (the SDK 0.11.0's `IggyProducer`), in one of two
//! modes, chosen when it is built:
//! - **direct** ([`Producer<Direct>`], the default): `send` is [`Client::send`] of the call's
//!   messages, cut into chunks of at most `batch_length` messages and `batch_size` bytes that
//!   are sent one after another; it returns once every chunk is acknowledged, with one
//!   receipt per chunk.
//! - **background** ([`Producer<Background>`]): `send` returns once the call's messages are
//!   buffered, with a [`Delivery`] that resolves to the call's own receipt. One task per
//!   producer cuts the buffer into batches (full, lingered `linger_time`, or flushed) and
//!   submits them in order, up to `max_in_flight` at once; the core's
//!   `ProducerState` decides all of
//!   that (and who waits for room, and which flush is over), and the task only carries it
//!   out.
//!
//! Failures are never silent: a direct send returns its error; a background call's failure
//! reaches its [`Delivery`], the `on_error` callback if there is one, and otherwise the
//! next [`Producer::flush`] (or [`Producer::shutdown`]), which counts the failed messages.
//!
//! ```no_run
//! # async fn example(client: iggy_route_tokio::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use iggy_route_tokio::{BackgroundConfig, Message};
//!
//! let producer = client
//!     .producer("orders", "events")?
//!     .batch_length(500)
//!     .background(BackgroundConfig::default())
//!     .build()?;
//! let delivery = producer.send_one(Message { payload: "hello".into(), ..Message::default() }).await?;
//! // Or drop the delivery: the message is sent either way.
//! match delivery.await {
//!     Ok(receipt) => println!("stored at offset {:?}", receipt.base_offset),
//!     Err(failure) => println!("{} messages not stored: {}", failure.messages.len(), failure.error),
//! }
//! producer.shutdown().await?; // flushes what is buffered; says if any send failed
//! # Ok(())
//! # }
//! ```

mod background;
mod direct;

use std::fmt;
use std::sync::Arc;

use iggy_route_core::SendReceipt;
use iggy_route_core::client::producer::{DirectProducer, ProducerSettings, StartProducer};
use iggy_route_core::client::{Checked, ClientError};
use iggy_route_core::wire::Message;

use crate::Client;

pub use background::Delivery;
pub use iggy_route_core::client::producer::{
    Background, BackgroundConfig, Backpressure, Direct, ErrorCallback, ProducerError,
    ProducerStats, SendFailure,
};

use background::BackgroundMode;
use direct::DirectMode;

/// Builds a [`Producer`]; from [`Client::producer`]. Direct mode unless `background` is
/// called. Its settings and their rules are the core's, the same on both adapters.
pub type ProducerBuilder<M = Direct> =
    iggy_route_core::client::producer::ProducerBuilder<Client, M>;

#[doc(hidden)]
impl StartProducer for Client {
    type Direct = Producer<Direct>;
    type Background = Producer<Background>;

    fn start_direct(
        self,
        producer: Checked<DirectProducer>,
    ) -> Result<Producer<Direct>, ClientError> {
        let mode = DirectMode {
            client: self,
            producer: producer.into_inner(),
        };
        Ok(Producer {
            mode: Arc::new(mode),
        })
    }

    /// With its task spawned on the current tokio runtime; `ClientError::Io` outside one.
    fn start_background(
        self,
        settings: Checked<ProducerSettings>,
    ) -> Result<Producer<Background>, ClientError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|error| {
            ClientError::Io(std::io::Error::other(format!(
                "a background producer needs a tokio runtime: {error}"
            )))
        })?;
        let mode = BackgroundMode::start(&runtime, self, settings.into_inner());
        Ok(Producer {
            mode: Arc::new(mode),
        })
    }
}

/// A producer for one stream and topic: [`Producer<Direct>`] or [`Producer<Background>`]
/// (see the module documentation). Clone it into as many tasks as you like; clones share
/// one buffer (and, in background mode, one task).
pub struct Producer<M: Mode = Direct> {
    mode: Arc<M::Running>,
}

/// A producer's mode: [`Direct`] or [`Background`], the only two (the trait is sealed).
/// Generic code over producers of either mode names it: `fn f<M: Mode>(p: &Producer<M>)`.
pub trait Mode: sealed::Sealed {
    /// What a producer of this mode runs on.
    #[doc(hidden)]
    type Running: fmt::Debug + Send + Sync;
}

impl Mode for Direct {
    type Running = DirectMode;
}

impl Mode for Background {
    type Running = BackgroundMode;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Direct {}
    impl Sealed for super::Background {}
}

impl<M: Mode> Clone for Producer<M> {
    fn clone(&self) -> Self {
        Self {
            mode: Arc::clone(&self.mode),
        }
    }
}

impl<M: Mode> fmt::Debug for Producer<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("mode", &self.mode)
            .finish()
    }
}

impl Producer<Direct> {
    /// Sends `messages` in chunks of at most `batch_length` messages and `batch_size`
    /// bytes, one chunk after another, and returns once every chunk is acknowledged: one
    /// receipt per chunk, in order. On an error the chunks before the failing one are
    /// stored, the failing one ended as the error says, and the later ones were not sent.
    /// An empty `messages` is `SubmitError::EmptyBatch`; after [`Producer::shutdown`],
    /// `ClientError::Closed`.
    pub async fn send(&self, messages: Vec<Message>) -> Result<Vec<SendReceipt>, ClientError> {
        self.mode.send(messages).await
    }

    /// Sends one message and returns its receipt.
    pub async fn send_one(&self, message: Message) -> Result<SendReceipt, ClientError> {
        let receipts = self.mode.send(vec![message]).await?;
        receipts
            .into_iter()
            .next()
            .ok_or(ClientError::UnexpectedReply { operation: "send" })
    }

    /// Nothing is buffered in direct mode (every send waits for its acknowledgement, and
    /// returns its own failure): returns at once.
    pub async fn flush(&self) -> Result<(), ProducerError> {
        Ok(())
    }

    /// Stops the producer: later sends fail with `ClientError::Closed`. Sends already
    /// running finish as they would have. The client stays connected.
    pub async fn shutdown(&self) -> Result<(), ProducerError> {
        self.mode.producer.close();
        Ok(())
    }

    /// Counters: messages acknowledged and failed, chunks in flight (nothing is buffered).
    pub fn stats(&self) -> ProducerStats {
        self.mode.producer.stats()
    }
}

impl Producer<Background> {
    /// Buffers `messages` and returns once they are buffered (waiting for room as the
    /// producer's [`Backpressure`] says), with a handle that resolves to this call's own
    /// receipt (its partition and the offset of its first message); dropping the handle
    /// does not cancel the send. A call is never split: its messages go in one batch. A
    /// call cancelled (its future dropped) while it waits for room is not sent.
    ///
    /// Fails at once with `SubmitError::EmptyBatch` for no messages, with
    /// `ClientError::Invalid` for a call larger than the whole buffer (it could never
    /// fit), with
    /// `ClientError::QueueFull` when there is no room (`FailImmediately`, or
    /// `BlockWithTimeout` past its timeout), and with `ClientError::Closed` after
    /// [`Producer::shutdown`], or once a batch has found the client shut down (the
    /// producer then stops as if shut down: nothing it holds could go).
    pub async fn send(&self, messages: Vec<Message>) -> Result<Delivery, ClientError> {
        self.mode.send(messages).await
    }

    /// [`Producer::send`] of one message.
    pub async fn send_one(&self, message: Message) -> Result<Delivery, ClientError> {
        self.mode.send(vec![message]).await
    }

    /// Sends what is buffered now without waiting for its linger, and returns once every
    /// message buffered before this call is acknowledged or failed. Fails with
    /// [`ProducerError::SendsFailed`] naming how many messages failed since the last
    /// flush, unless an `on_error` callback took them (flushes that end at once, from
    /// several tasks, each report the same failures). Called from the producer's own
    /// `on_error`, it returns [`ProducerError::OwnThread`] at once.
    pub async fn flush(&self) -> Result<(), ProducerError> {
        self.mode.flush().await
    }

    /// Flushes, then stops the producer's task: later sends fail with
    /// `ClientError::Closed`, and so do calls still waiting for room. Returns what the
    /// flush returns. The client stays connected. Called from the producer's own
    /// `on_error`, it stops taking sends and returns `Ok` at once; the task stops once the
    /// callback has returned and what it holds is settled.
    pub async fn shutdown(&self) -> Result<(), ProducerError> {
        self.mode.shutdown().await
    }

    /// Counters: messages acknowledged and failed, messages buffered, batches in flight.
    pub fn stats(&self) -> ProducerStats {
        self.mode.stats()
    }
}

/// Producers are shared across tasks: keep them `Clone + Send + Sync`.
const _: () = {
    const fn shareable<T: Clone + Send + Sync>() {}
    shareable::<Producer<Direct>>();
    shareable::<Producer<Background>>();
};
