//! A producer's settings and the one rule that checks them, for both modes and both
//! adapters.

use std::sync::Arc;
use std::time::Duration;

use super::SendFailure;
use crate::ConfigError;
use crate::partitioning::Partitioning;
use crate::wire::Identifier;

/// What a background send does when the buffer has no room for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backpressure {
    /// Wait until there is room (bounded by the producer being shut down).
    Block,
    /// Wait at most this long, then fail.
    BlockWithTimeout(Duration),
    /// Fail at once.
    FailImmediately,
}

/// How a producer batches and bounds what it holds.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// How each batch's partition is chosen (by the router, as for any send).
    pub partitioning: Partitioning,
    /// Most messages per batch.
    pub batch_length: u32,
    /// Most message bytes (headers, payloads, user headers) per batch.
    pub batch_size: usize,
    /// How long the oldest buffered message waits for its batch to fill.
    pub linger_time: Duration,
    /// Most messages buffered and not yet submitted.
    pub max_buffered_messages: usize,
    /// Most message bytes buffered and not yet submitted.
    pub max_buffered_bytes: usize,
    /// Most batches submitted and not yet answered.
    pub max_in_flight: usize,
    /// What a send does when the buffer is full.
    pub backpressure: Backpressure,
}

impl Default for ProducerConfig {
    /// The SDK 0.11.0 producer's batch bounds (1,000 messages, 1 MiB, 1 ms linger, 32 MiB
    /// buffer), with 16 batches in flight so that the router's coalescing has work to merge.
    fn default() -> Self {
        Self {
            partitioning: Partitioning::Balanced,
            batch_length: 1_000,
            batch_size: 1024 * 1024,
            linger_time: Duration::from_millis(1),
            max_buffered_messages: 100_000,
            max_buffered_bytes: 32 * 1024 * 1024,
            max_in_flight: 16,
            backpressure: Backpressure::Block,
        }
    }
}

/// Hears of every background send call that failed, with its messages back. It runs on the
/// producer's task (tokio) or thread (mio): while it runs, no batch is submitted, so keep it
/// short (hand the failure to a channel, say). A panic in it stops the producer, on both
/// adapters: flushes and shutdown then report [`ProducerError::Stopped`](super::ProducerError::Stopped) and sends fail
/// `Closed`. Calls into its own producer from it never wait for the producer, on both
/// adapters: a `flush` returns [`ProducerError::OwnThread`](super::ProducerError::OwnThread)
/// at once, a `shutdown` returns `Ok` at once (the producer stops taking sends, and stops
/// once the callback has returned and what it holds is settled), and a `send` that would
/// wait for room fails `QueueFull`. It should not hold a clone of its own producer (the
/// producer then never stops on drop).
pub type ErrorCallback = Arc<dyn Fn(SendFailure) + Send + Sync>;

/// How a background producer bounds what it holds, and where failures go (the SDK's
/// `BackgroundConfig`). The defaults: 100,000 messages or 32 MiB
/// buffered, 16 batches in flight, senders block while the buffer is full, no callback.
#[derive(Clone)]
pub struct BackgroundConfig {
    /// Most messages buffered and not yet submitted.
    pub max_buffered_messages: usize,
    /// Most message bytes buffered and not yet submitted.
    pub max_buffered_bytes: usize,
    /// Most batches submitted and not yet answered. Keep it within the client's room
    /// (`Config::max_pending_requests`, twice over with the requests that may wait for
    /// room): a batch that finds the router full and as many requests already waiting fails
    /// with `ClientError::QueueFull`, like any request.
    pub max_in_flight: usize,
    /// What a send does while the buffer is full.
    pub backpressure: Backpressure,
    /// Gets every failed call's messages back (see [`ErrorCallback`]). Without one, the next
    /// flush reports how many messages failed.
    pub on_error: Option<ErrorCallback>,
}

impl Default for BackgroundConfig {
    fn default() -> Self {
        let defaults = ProducerConfig::default();
        Self {
            max_buffered_messages: defaults.max_buffered_messages,
            max_buffered_bytes: defaults.max_buffered_bytes,
            max_in_flight: defaults.max_in_flight,
            backpressure: defaults.backpressure,
            on_error: None,
        }
    }
}

// By hand: a callback has no `Debug`.
impl std::fmt::Debug for BackgroundConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundConfig")
            .field("max_buffered_messages", &self.max_buffered_messages)
            .field("max_buffered_bytes", &self.max_buffered_bytes)
            .field("max_in_flight", &self.max_in_flight)
            .field("backpressure", &self.backpressure)
            .field("on_error", &self.on_error.is_some())
            .finish()
    }
}

/// The longest duration a producer accepts (`linger_time`, a `BlockWithTimeout` wait), as
/// the client's `Config` accepts for its own bounds: the producer adds it to instants, and
/// a day keeps them far from overflow.
pub const LONGEST_PRODUCER_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

impl ProducerConfig {
    /// The checks of a direct producer: a batch of zero messages or zero bytes could never
    /// go.
    pub fn validate_direct(&self) -> Result<(), ConfigError> {
        if self.batch_length == 0 {
            return Err(ConfigError::Zero {
                field: "batch_length",
            });
        }
        if self.batch_size == 0 {
            return Err(ConfigError::Zero {
                field: "batch_size",
            });
        }
        Ok(())
    }

    /// The checks of a background producer: those of a direct one, no zero bound, and no
    /// duration over a day ([`LONGEST_PRODUCER_WAIT`], `ConfigError::TooLong`).
    ///
    /// The linger is bounded by a day only, not by the client's `request_timeout`: the
    /// linger is how long a message waits in the producer's buffer, and a batch's request
    /// timeout starts only once the linger is over and the batch is submitted, so the two
    /// never add up in one request (Kafka's `linger.ms` is likewise free of
    /// `request.timeout.ms`).
    pub fn validate_background(&self) -> Result<(), ConfigError> {
        self.validate_direct()?;
        for (field, value) in [
            ("max_buffered_messages", self.max_buffered_messages),
            ("max_buffered_bytes", self.max_buffered_bytes),
            ("max_in_flight", self.max_in_flight),
        ] {
            if value == 0 {
                return Err(ConfigError::Zero { field });
            }
        }
        if self.linger_time > LONGEST_PRODUCER_WAIT {
            return Err(ConfigError::TooLong {
                field: "linger_time",
            });
        }
        if let Backpressure::BlockWithTimeout(wait) = self.backpressure
            && wait > LONGEST_PRODUCER_WAIT
        {
            return Err(ConfigError::TooLong {
                field: "backpressure",
            });
        }
        Ok(())
    }

    /// Takes a background configuration's bounds (the callback stays with the adapter).
    pub fn set_background(&mut self, background: &BackgroundConfig) {
        self.max_buffered_messages = background.max_buffered_messages;
        self.max_buffered_bytes = background.max_buffered_bytes;
        self.max_in_flight = background.max_in_flight;
        self.backpressure = background.backpressure;
    }
}

/// What a producer builder holds besides its client, in either mode: where it sends, its
/// settings, and (background mode) its error callback.
#[derive(Clone)]
pub struct ProducerSettings {
    /// The stream.
    pub stream: Identifier,
    /// The topic.
    pub topic: Identifier,
    /// The settings, [`ProducerConfig::default`] to begin with.
    pub config: ProducerConfig,
    /// Background mode's error callback.
    pub on_error: Option<ErrorCallback>,
}

impl ProducerSettings {
    /// The defaults for `stream`/`topic`.
    pub fn new(stream: Identifier, topic: Identifier) -> Self {
        Self {
            stream,
            topic,
            config: ProducerConfig::default(),
            on_error: None,
        }
    }

    /// Takes a background configuration: its bounds and its callback.
    pub fn set_background(&mut self, background: BackgroundConfig) {
        self.config.set_background(&background);
        self.on_error = background.on_error;
    }
}

// By hand: a callback has no `Debug`.
impl std::fmt::Debug for ProducerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerSettings")
            .field("stream", &self.stream)
            .field("topic", &self.topic)
            .field("config", &self.config)
            .field("on_error", &self.on_error.is_some())
            .finish()
    }
}
