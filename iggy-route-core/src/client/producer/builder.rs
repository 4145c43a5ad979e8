//! The producer builder both adapters hand out from `Client::producer`: the settings a user
//! chooses and the mode, written once, and the check of the settings for the mode. Starting
//! the producer on its own tasks or threads is the adapter's ([`StartProducer`]).

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use super::{BackgroundConfig, ProducerSettings};
use crate::client::{ClientError, identifier};
use crate::partitioning::Partitioning;
use crate::wire::Identifier;

/// The two modes of an adapter's producer, as the adapter's own types. For the adapters.
pub trait ProducerModes {
    /// The mode whose `send` waits for every acknowledgement.
    type Direct;
    /// The mode whose `send` buffers, and a task or thread of the producer submits.
    type Background;
}

/// How an adapter starts a producer in mode `Mode` from a builder's settings. For the
/// adapters.
pub trait StartProducer<Mode>: Sized {
    /// The producer started.
    type Producer;

    /// Whether `Mode` buffers and submits in the background. It decides which of the
    /// core's rules checks the settings before [`start`](Self::start) sees them.
    const BACKGROUND: bool;

    /// Starts the producer with settings the core has checked for the mode.
    ///
    /// # Errors
    /// What starting it met (`ClientError::Io` when a task or thread cannot start).
    fn start(self, settings: ProducerSettings) -> Result<Self::Producer, ClientError>;
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
    pub fn direct(self) -> ProducerBuilder<C, C::Direct>
    where
        C: ProducerModes,
    {
        self.into_mode()
    }

    /// Background mode: `send` returns once the messages are buffered, within these
    /// bounds; a task (tokio) or thread (mio) of the producer submits the batches.
    #[must_use]
    pub fn background(mut self, config: BackgroundConfig) -> ProducerBuilder<C, C::Background>
    where
        C: ProducerModes,
    {
        self.settings.set_background(config);
        self.into_mode()
    }

    /// The producer. Fails with `ClientError::Config` for a setting the mode refuses (a
    /// zero bound; in background mode also a duration over a day, see
    /// `ProducerConfig::validate_background`),
    /// and with `ClientError::Io` when the adapter cannot start the producer's task or
    /// thread. (The bounds are the adapters': their `Client` meets them.)
    pub fn build(self) -> Result<C::Producer, ClientError>
    where
        C: StartProducer<Mode>,
    {
        if C::BACKGROUND {
            self.settings.config.validate_background()?;
        } else {
            self.settings.config.validate_direct()?;
        }
        self.client.start(self.settings)
    }

    fn into_mode<Other>(self) -> ProducerBuilder<C, Other> {
        ProducerBuilder {
            client: self.client,
            settings: self.settings,
            mode: PhantomData,
        }
    }
}
