//! The producers' rules, written once for both adapters (the SDK 0.11.0's `IggyProducer`):
//! their settings and the one check of them (`ProducerConfig::validate_background`), how
//! a direct send is cut into chunks and counted (`DirectProducer`), and a background
//! producer's buffer (`ProducerBuffer`) and bookkeeping (`ProducerState`: waiting for
//! room, flushes, failures, shutdown). All of it is sans-IO: the adapters pass `now` in and
//! own the tasks, threads, channels and clients that carry it out.

mod background;
mod buffer;
mod builder;
mod config;
mod direct;
mod output;
mod own_call;

pub use builder::{Background, Direct, ProducerBuilder};
pub use config::{BackgroundConfig, Backpressure, ErrorCallback};

// The adapters' kit: public for them, not for users.
#[doc(hidden)]
pub use background::{Offered, ProducerState, Refusal, SharedState, WaitId};
#[doc(hidden)]
pub use buffer::ProducerBuffer;
#[doc(hidden)]
pub use builder::StartProducer;
#[doc(hidden)]
pub use config::{LONGEST_PRODUCER_WAIT, ProducerConfig, ProducerSettings};
#[doc(hidden)]
pub use direct::{DirectCall, DirectProducer, chunks};
#[doc(hidden)]
pub use output::{Handles, Output};
#[doc(hidden)]
pub use own_call::{OnError, ProducerKey};

use crate::client::ClientError;
use crate::request::{Request, SendReceipt};
use crate::wire::Message;

/// Why a flush (or a shutdown, which flushes) reports failure.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerError {
    /// Messages failed since the last flush and no `on_error` callback took them (each
    /// failed call's delivery handle was told too). A failure is reported by the first
    /// flush to end after it, and by every flush or shutdown that ends at that same moment
    /// (called from several threads or tasks): no flush then says `Ok` over a failure that
    /// came before it ended. A producer that stopped keeps them for the next flush. So do not add up the counts of flushes that may overlap:
    /// `ProducerStats::failed_messages` counts each failed message once.
    #[error("{messages} messages failed since the last flush; the last error: {last_error}")]
    SendsFailed {
        /// How many messages (failed, or whose outcome is unknown).
        messages: u64,
        /// Why the last of them failed.
        last_error: ClientError,
    },
    /// The producer's task or thread stopped abnormally (its `on_error` callback panicked,
    /// say): batches it had submitted may or may not have been stored, and no more will be.
    #[error("the producer's task stopped abnormally")]
    Stopped,
    /// A flush called from the producer's own `on_error` callback (on its thread or task),
    /// where waiting for the producer would wait for itself: it returns at once instead,
    /// having done nothing.
    #[error("called from the producer's own on_error callback, which cannot wait for itself")]
    OwnThread,
}

/// The adapter's id of one send call.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub u64);

/// The producer's id of one submitted batch.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchId(pub u64);

/// Why a send call was not buffered.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PushError {
    /// No room now: wait (as the producer's [`Backpressure`] says) and push again.
    #[error("the producer's buffer is full ({messages} messages, {bytes} bytes buffered)")]
    Full {
        /// Messages buffered.
        messages: usize,
        /// Bytes buffered.
        bytes: usize,
    },
    /// A send of no messages.
    #[error("a send needs at least one message")]
    Empty,
    /// A single call larger than the whole buffer: it could never fit.
    #[error("{messages} messages of {bytes} bytes exceed the producer's buffer")]
    TooLarge {
        /// Its messages.
        messages: usize,
        /// Its bytes.
        bytes: usize,
    },
}

/// A batch to submit, in order, to the client's router.
#[doc(hidden)]
#[derive(Debug)]
pub struct Batch {
    /// Its id, for [`ProducerBuffer::complete`].
    pub id: BatchId,
    /// The `Request::Send` carrying its messages.
    pub request: Request,
}

/// The outcome of one send call.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct Settled {
    /// The call.
    pub ticket: Ticket,
    /// Its own receipt, or its messages back with the error.
    pub outcome: Result<SendReceipt, SendFailure>,
}

/// Messages that were not (or may not have been) appended, and why.
#[derive(Debug, Clone)]
pub struct SendFailure {
    /// The call's messages, as it gave them (with their ids and timestamps as sent).
    pub messages: Vec<Message>,
    /// Why: for an unknown outcome they may be in the log.
    pub error: ClientError,
}

/// Counters of one producer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProducerStats {
    /// Messages acknowledged.
    pub sent_messages: u64,
    /// Messages whose send failed (or whose outcome is unknown).
    pub failed_messages: u64,
    /// Messages buffered and not yet submitted.
    pub buffered_messages: usize,
    /// Batches submitted and not yet answered.
    pub in_flight: usize,
}
