//! The producer builder both adapters hand out from `Client::producer`: the settings a user
//! chooses and the mode, written once, and the check of the settings for the mode. Starting
//! the producer on its own tasks or threads is the adapter's ([`StartProducer`]).

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use super::{BackgroundConfig, DirectProducer, ProducerSettings};
use crate::client::{Checked, ClientError, identifier};
use crate::partitioning::Partitioning;
use crate::wire::Identifier;

/// The mode of a producer whose `send` waits for every acknowledgement: the default. A
/// marker, never a value: it names the mode in `Producer<Direct>` and
/// `ProducerBuilder<Direct>`.
#[derive(Debug, Clone, Copy)]
pub enum Direct {}

/// The mode of a producer whose `send` buffers, and returns a delivery handle; a task
/// (tokio) or thread (mio) of the producer submits the batches. A marker, never a value.
#[derive(Debug, Clone, Copy)]
pub enum Background {}

/// How an adapter starts a producer from a builder's settings, which the core has checked
/// for the mode. For the adapters.
pub trait StartProducer: Sized {
    /// The adapter's direct producer.
    type Direct;
    /// The adapter's background producer.
    type Background;

    /// Starts a direct producer.
    ///
    /// # Errors
    /// What starting it met.
    fn start_direct(self, producer: Checked<DirectProducer>) -> Result<Self::Direct, ClientError>;

    /// Starts a background producer, with its task or thread.
    ///
    /// # Errors
    /// What starting it met (`ClientError::Io` when its task or thread cannot start).
    fn start_background(
        self,
        settings: Checked<ProducerSettings>,
    ) -> Result<Self::Background, ClientError>;
}

/// Builds a producer of one stream's topic on client `C`; from `Client::producer`. Direct
/// mode (`send` waits for every acknowledgement) unless
/// [`background`](Self::background) is chosen; the settings and their defaults are the
/// same on both adapters.
pub struct ProducerBuilder<C, Mode> {
    client: C,
    settings: ProducerSettings,
    mode: PhantomData<fn() -> Mode>,
}

impl<C: fmt::Debug, Mode> fmt::Debug for ProducerBuilder<C, Mode> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProducerBuilder")
            .field("client", &self.client)
            .field("settings", &self.settings)
            .finish()
    }
}

impl<C, Mode> ProducerBuilder<C, Mode> {
    /// A builder for a producer of `stream`/`topic` on `client`, with the defaults. For the
    /// adapters' `Client::producer`.
    #[doc(hidden)]
    pub fn new(
        client: C,
        stream: impl TryInto<Identifier, Error: Into<ClientError>>,
        topic: impl TryInto<Identifier, Error: Into<ClientError>>,
    ) -> Result<Self, ClientError> {
        Ok(Self {
            client,
            settings: ProducerSettings::new(identifier(stream)?, identifier(topic)?),
            mode: PhantomData,
        })
    }

    /// How each send's (direct) or batch's (background) partition is chosen (default
    /// `Partitioning::Balanced`: the router picks the next partition each time).
    #[must_use]
    pub fn partitioning(mut self, partitioning: Partitioning) -> Self {
        self.settings.config.partitioning = partitioning;
        self
    }

    /// Most messages per send the producer submits (default 1,000).
    #[must_use]
    pub fn batch_length(mut self, messages: u32) -> Self {
        self.settings.config.batch_length = messages;
        self
    }

    /// Most message bytes (headers, payloads, user headers) per send the producer submits
    /// (default 1 MiB); a single larger message goes alone.
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
    #[must_use]
    pub fn direct(self) -> ProducerBuilder<C, Direct> {
        self.into_mode()
    }

    /// Background mode: `send` returns once the messages are buffered, within these
    /// bounds; a task (tokio) or thread (mio) of the producer submits the batches.
    #[must_use]
    pub fn background(mut self, config: BackgroundConfig) -> ProducerBuilder<C, Background> {
        self.settings.set_background(config);
        self.into_mode()
    }

    fn into_mode<Other>(self) -> ProducerBuilder<C, Other> {
        ProducerBuilder {
            client: self.client,
            settings: self.settings,
            mode: PhantomData,
        }
    }
}

impl<C: StartProducer> ProducerBuilder<C, Direct> {
    /// The direct producer, `Producer<Direct>` on both adapters. Fails with
    /// `ClientError::Config` for a zero bound (see `ProducerConfig::validate_direct`).
    pub fn build(self) -> Result<C::Direct, ClientError> {
        self.settings.config.validate_direct()?;
        let producer = DirectProducer::new(self.settings);
        self.client.start_direct(Checked::new(producer))
    }
}

impl<C: StartProducer> ProducerBuilder<C, Background> {
    /// The background producer, `Producer<Background>` on both adapters. Fails with
    /// `ClientError::Config` for a setting it refuses
    /// (a zero bound, a duration over a day: see `ProducerConfig::validate_background`),
    /// and with `ClientError::Io` when the adapter cannot start the producer's task or
    /// thread. (The bounds are the adapters': their `Client` meets them.)
    pub fn build(self) -> Result<C::Background, ClientError> {
        self.settings.config.validate_background()?;
        self.client.start_background(Checked::new(self.settings))
    }
}
