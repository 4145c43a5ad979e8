//! A producer on the blocking client (the SDK 0.11.0's `IggyProducer`), in two modes:
//!
//! - **direct** (the default): [`Producer::send`] is [`Client::send`] of the messages, cut
//!   into chunks of at most `batch_length` messages and `batch_size` bytes that are sent
//!   one after another; it returns once every chunk is acknowledged, with one receipt per
//!   chunk. A chunk that fails ends the call: the chunks before it are stored, the ones
//!   after it were never sent.
//! - **background** (a [`Producer<Background>`]): `send` buffers the messages and returns
//!   a [`Delivery`], which resolves to that call's own receipt. One thread per producer
//!   cuts the buffer into batches (full, lingered `linger_time`, or flushed) and hands
//!   each to the client's router in order without waiting for its answer, up to
//!   `max_in_flight` at once; the router may merge them further. The client's I/O thread
//!   stays the only one that touches sockets. A thread that holds many calls at once
//!   sends them with [`Producer::send_tagged`] instead, and waits on one
//!   [`DeliveryQueue`] for whichever settles first.
//!
//! A failed background send is never silent: its [`Delivery`] (or its [`DeliveryQueue`])
//! says so, the `on_error` callback gets its messages back, and without a callback the
//! next `flush` (or `shutdown`) names how many messages failed.
//!
//! ```no_run
//! # fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use iggy_route_mio::{BackgroundConfig, Client, Message, Partitioning};
//!
//! let client = Client::from_connection_string("iggy://iggy:iggy@127.0.0.1:8090")?;
//! let producer = client
//!     .producer("orders", "events")?
//!     .partitioning(Partitioning::Balanced)
//!     .linger_time(Duration::from_millis(5))
//!     .background(BackgroundConfig::default())
//!     .build()?;
//! let delivery = producer.send(vec![Message { payload: "hello".into(), ..Message::default() }])?;
//! producer.flush()?;
//! println!("stored at {:?}", delivery.wait().map(|receipt| receipt.base_offset));
//! producer.shutdown()?;
//! # Ok(())
//! # }
//! ```

mod background;
mod delivery;
mod direct;

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use iggy_route_core::SendReceipt;
use iggy_route_core::client::ClientError;
use iggy_route_core::client::producer::{DirectProducer, ProducerSettings};
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{Identifier, Message};

pub use background::Background;
pub use delivery::{Delivered, Delivery, DeliveryQueue, DeliverySender};
pub use direct::Direct;
pub use iggy_route_core::client::producer::{
    BackgroundConfig, Backpressure, ErrorCallback, ProducerError, ProducerStats, SendFailure,
};

use crate::Client;

/// A producer of one stream's topic, made by [`Client::producer`]. Cheap to clone: the
/// clones share one producer (in background mode, one buffer and one thread).
/// `Producer` alone is a direct producer; a background one is `Producer<Background>`.
#[derive(Debug)]
pub struct Producer<Mode = Direct> {
    mode: Arc<Mode>,
}

impl<Mode> Clone for Producer<Mode> {
    fn clone(&self) -> Self {
        Self {
            mode: Arc::clone(&self.mode),
        }
    }
}

/// Sets up a [`Producer`]: [`Client::producer`], then the settings, then
/// [`build`](ProducerBuilder::build).
#[derive(Debug)]
pub struct ProducerBuilder<Mode = Direct> {
    client: Client,
    settings: ProducerSettings,
    mode: PhantomData<fn() -> Mode>,
}

impl Client {
    /// Starts setting up a producer of `stream`'s `topic` (named as for [`Client::send`]).
    /// It is a direct producer unless [`ProducerBuilder::background`] is chosen.
    pub fn producer(
        &self,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<ProducerBuilder<Direct>, ClientError> {
        Ok(ProducerBuilder {
            client: self.clone(),
            settings: ProducerSettings::new(
                iggy_route_core::client::identifier(stream)?,
                iggy_route_core::client::identifier(topic)?,
            ),
            mode: PhantomData,
        })
    }
}

impl<Mode> ProducerBuilder<Mode> {
    /// How each batch's partition is chosen (default `Balanced`: the router picks the
    /// next partition for every batch).
    #[must_use]
    pub fn partitioning(mut self, partitioning: Partitioning) -> Self {
        self.settings.config.partitioning = partitioning;
        self
    }

    /// Most messages per send submitted (default 1,000).
    #[must_use]
    pub fn batch_length(mut self, messages: u32) -> Self {
        self.settings.config.batch_length = messages;
        self
    }

    /// Most message bytes (headers, payloads, user headers) per send submitted (default
    /// 1 MiB). A single message above it goes alone.
    #[must_use]
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.settings.config.batch_size = bytes;
        self
    }

    /// Background mode: how long the oldest buffered message waits for its batch to fill
    /// (default 1 ms). Direct mode sends at once.
    #[must_use]
    pub fn linger_time(mut self, linger: Duration) -> Self {
        self.settings.config.linger_time = linger;
        self
    }

    /// Direct mode (the default): `send` waits for every acknowledgement.
    pub fn direct(self) -> ProducerBuilder<Direct> {
        self.into_mode()
    }

    /// Background mode: `send` buffers, a thread of the producer submits.
    pub fn background(self, background: BackgroundConfig) -> ProducerBuilder<Background> {
        let mut builder = self.into_mode();
        builder.settings.set_background(background);
        builder
    }

    fn into_mode<Other>(self) -> ProducerBuilder<Other> {
        ProducerBuilder {
            client: self.client,
            settings: self.settings,
            mode: PhantomData,
        }
    }
}

impl ProducerBuilder<Direct> {
    /// A direct producer. Fails with `ClientError::Config` for a zero bound
    /// (`ProducerConfig::validate_direct`).
    pub fn build(self) -> Result<Producer<Direct>, ClientError> {
        self.settings.config.validate_direct()?;
        let direct = Direct {
            client: self.client,
            producer: DirectProducer::new(self.settings),
        };
        Ok(Producer {
            mode: Arc::new(direct),
        })
    }
}

impl ProducerBuilder<Background> {
    /// A background producer, with its thread started. Fails with `ClientError::Config`
    /// for a zero bound or a duration over a day
    /// (`ProducerConfig::validate_background`), and with `ClientError::Io` when the
    /// thread cannot be spawned.
    pub fn build(self) -> Result<Producer<Background>, ClientError> {
        self.settings.config.validate_background()?;
        let background = Background::start(self.client, self.settings)?;
        Ok(Producer {
            mode: Arc::new(background),
        })
    }
}

impl Producer<Direct> {
    /// Sends `messages` (in chunks of at most `batch_length` messages and `batch_size`
    /// bytes, one after another, each waiting for room in the router like
    /// [`Client::send`]) and returns once every chunk is acknowledged: one receipt per
    /// chunk, in order. A chunk that fails ends the call with its error; the chunks before
    /// it are stored, the ones after it were never sent.
    pub fn send(&self, messages: Vec<Message>) -> Result<Vec<SendReceipt>, ClientError> {
        self.mode.send(messages)
    }

    /// Sends one message and returns its receipt.
    pub fn send_one(&self, message: Message) -> Result<SendReceipt, ClientError> {
        let receipts = self.send(vec![message])?;
        receipts
            .into_iter()
            .next()
            .ok_or(ClientError::UnexpectedReply {
                operation: "send one",
            })
    }

    /// Nothing to wait for: every direct send has waited for its acknowledgements, and
    /// reported its own failure.
    pub fn flush(&self) -> Result<(), ProducerError> {
        Ok(())
    }

    /// Stops the producer: sends after it fail with `ClientError::Closed`. (Sends in
    /// progress finish.)
    pub fn shutdown(&self) -> Result<(), ProducerError> {
        self.mode.producer.close();
        Ok(())
    }

    /// Messages acknowledged and failed so far, and chunks in flight now.
    pub fn stats(&self) -> ProducerStats {
        self.mode.producer.stats()
    }
}

/// Producers on several threads share one producer: keep both modes
/// `Clone + Send + Sync`.
const _: () = {
    const fn shareable<T: Clone + Send + Sync>() {}
    shareable::<Producer<Direct>>();
    shareable::<Producer<Background>>();
};
