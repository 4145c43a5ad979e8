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

use std::sync::Arc;

use iggy_route_core::SendReceipt;
use iggy_route_core::client::producer::{DirectProducer, ProducerSettings, StartProducer};
use iggy_route_core::client::{Checked, ClientError};
use iggy_route_core::wire::Message;

pub use delivery::{Delivered, Delivery, DeliveryQueue, DeliverySender};
pub use iggy_route_core::client::producer::{
    Background, BackgroundConfig, Backpressure, Direct, ErrorCallback, ProducerError,
    ProducerStats, SendFailure,
};

use background::BackgroundMode;
use direct::DirectMode;

use crate::Client;

/// A producer of one stream's topic, made by [`Client::producer`]. Cheap to clone: the
/// clones share one producer (in background mode, one buffer and one thread).
/// `Producer` alone is a direct producer; a background one is `Producer<Background>`.
#[derive(Debug)]
pub struct Producer<M: Mode = Direct> {
    mode: Arc<M::Running>,
}

/// A producer's mode: [`Direct`] or [`Background`], the only two (the trait is sealed).
/// Generic code over producers of either mode names it: `fn f<M: Mode>(p: &Producer<M>)`.
pub trait Mode: sealed::Sealed {
    /// What a producer of this mode runs on.
    #[doc(hidden)]
    type Running: std::fmt::Debug + Send + Sync;
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

/// Sets up a [`Producer`]: [`Client::producer`], then the settings, then `build` (which
/// gives a `Producer<Direct>`, or a `Producer<Background>` after `background`). Its
/// settings and their rules are the core's, the same on both adapters.
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
        let direct = DirectMode {
            client: self,
            producer: producer.into_inner(),
        };
        Ok(Producer {
            mode: Arc::new(direct),
        })
    }

    /// With its thread started; `ClientError::Io` when the thread cannot be spawned.
    fn start_background(
        self,
        settings: Checked<ProducerSettings>,
    ) -> Result<Producer<Background>, ClientError> {
        let background = BackgroundMode::start(self, settings.into_inner())?;
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
