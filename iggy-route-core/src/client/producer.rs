//! The sans-IO half of a background producer (the SDK's `IggyProducer` in background mode,
//! Kafka's record accumulator): send calls are buffered within bounds, cut into batches of
//! up to `batch_length` messages and `batch_size` bytes (or sooner, once the oldest has
//! lingered `linger_time`), and at most `max_in_flight` batches are out at once. When a
//! batch is answered, each call in it gets its own outcome: its own receipt, whose offsets
//! follow those of the calls before it in the batch, or its own messages back with the
//! error. The adapters run the loop (a task or a thread) and own the clock.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ClientError;
use crate::partitioning::Partitioning;
use crate::request::{Request, SendReceipt, SendRequest};
use crate::wire::{Identifier, Message};

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
/// adapters: flushes and shutdown then report [`ProducerError::Stopped`] and sends fail
/// `Closed`. Calls into its own producer from it never wait for the producer: on the
/// blocking producer a `flush` returns [`ProducerError::OwnThread`] at once, a `shutdown`
/// returns at once (the thread stops after the callback), and a `send` that would wait for
/// room fails `QueueFull`. It should not hold a clone of its own producer (the producer
/// then never stops on drop).
pub type ErrorCallback = Arc<dyn Fn(SendFailure) + Send + Sync>;

/// How a background producer bounds what it holds, and where failures go (the SDK's
/// `BackgroundConfig`). The defaults are [`ProducerConfig`]'s: 100,000 messages or 32 MiB
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

/// Why a flush (or a shutdown, which flushes) reports failure.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerError {
    /// Messages failed since the last flush and no `on_error` callback took them (each
    /// failed call's delivery handle was told too).
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
    /// Called on the producer's own thread (from its `on_error` callback), where waiting
    /// for the producer would wait for itself: it returns at once instead, having done
    /// nothing.
    #[error("called from the producer's own thread, which cannot wait for itself")]
    OwnThread,
}

/// The adapter's id of one send call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub u64);

/// The producer's id of one submitted batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchId(pub u64);

/// Why a send call was not buffered.
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
#[derive(Debug)]
pub struct Batch {
    /// Its id, for [`ProducerBuffer::complete`].
    pub id: BatchId,
    /// The `Request::Send` carrying its messages.
    pub request: Request,
}

/// The outcome of one send call.
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

/// One buffered send call.
#[derive(Debug)]
struct Call {
    ticket: Ticket,
    messages: Vec<Message>,
    bytes: usize,
    at: Instant,
}

/// A submitted batch: its calls in order with their message counts, and a copy of its
/// messages (cheap: payloads are shared) to hand back should it fail.
#[derive(Debug)]
struct Out {
    calls: Vec<(Ticket, usize)>,
    messages: Vec<Message>,
}

/// The background buffer. See the module documentation.
#[derive(Debug)]
pub struct ProducerBuffer {
    stream: Identifier,
    topic: Identifier,
    config: ProducerConfig,
    buffered: VecDeque<Call>,
    buffered_messages: usize,
    buffered_bytes: usize,
    out: BTreeMap<BatchId, Out>,
    next_batch: u64,
    sent_messages: u64,
    failed_messages: u64,
}

impl ProducerBuffer {
    /// An empty buffer for sends to `stream`/`topic`.
    pub fn new(stream: Identifier, topic: Identifier, config: ProducerConfig) -> Self {
        Self {
            stream,
            topic,
            config,
            buffered: VecDeque::new(),
            buffered_messages: 0,
            buffered_bytes: 0,
            out: BTreeMap::new(),
            next_batch: 1,
            sent_messages: 0,
            failed_messages: 0,
        }
    }

    /// The configuration it runs on.
    pub fn config(&self) -> &ProducerConfig {
        &self.config
    }

    /// Buffers one send call (its messages already stamped with their origin timestamps).
    pub fn push(
        &mut self,
        now: Instant,
        ticket: Ticket,
        messages: Vec<Message>,
    ) -> Result<(), PushError> {
        if messages.is_empty() {
            return Err(PushError::Empty);
        }
        let bytes: usize = messages.iter().map(Message::frame_len).sum();
        if messages.len() > self.config.max_buffered_messages
            || bytes > self.config.max_buffered_bytes
        {
            return Err(PushError::TooLarge {
                messages: messages.len(),
                bytes,
            });
        }
        let fits = self.buffered_messages + messages.len() <= self.config.max_buffered_messages
            && self.buffered_bytes + bytes <= self.config.max_buffered_bytes;
        if !fits {
            return Err(PushError::Full {
                messages: self.buffered_messages,
                bytes: self.buffered_bytes,
            });
        }
        self.buffered_messages += messages.len();
        self.buffered_bytes += bytes;
        self.buffered.push_back(Call {
            ticket,
            messages,
            bytes,
            at: now,
        });
        Ok(())
    }

    /// The next batch to submit, when one is due: a full batch is ready, the oldest
    /// message has lingered `linger_time`, or the caller is `flushing`. `None` while
    /// `max_in_flight` batches are out. A call is never split between batches (its receipt
    /// is one run of offsets); one larger than a batch goes alone.
    pub fn next_batch(&mut self, now: Instant, flushing: bool) -> Option<Batch> {
        if self.out.len() >= self.config.max_in_flight.max(1) {
            return None;
        }
        let oldest = self.buffered.front()?.at;
        let full = self.buffered_messages >= self.config.batch_length as usize
            || self.buffered_bytes >= self.config.batch_size;
        if !(flushing || full || now >= oldest + self.config.linger_time) {
            return None;
        }
        let (mut count, mut bytes) = (0usize, 0usize);
        let mut calls = Vec::new();
        let mut messages = Vec::new();
        while let Some(call) = self.buffered.front() {
            let over = count + call.messages.len() > self.config.batch_length as usize
                || bytes + call.bytes > self.config.batch_size;
            if over && !calls.is_empty() {
                break;
            }
            let Some(call) = self.buffered.pop_front() else {
                break;
            };
            count += call.messages.len();
            bytes += call.bytes;
            calls.push((call.ticket, call.messages.len()));
            messages.extend(call.messages);
        }
        self.buffered_messages -= count;
        self.buffered_bytes -= bytes;
        let id = BatchId(self.next_batch);
        self.next_batch += 1;
        let request = Request::Send(SendRequest {
            stream: self.stream.clone(),
            topic: self.topic.clone(),
            partitioning: self.config.partitioning.clone(),
            messages: messages.clone(),
        });
        self.out.insert(id, Out { calls, messages });
        Some(Batch { id, request })
    }

    /// When the oldest buffered message's linger ends and a batch could go (`None` when
    /// nothing is buffered or every in-flight slot is taken: an answer wakes the loop then).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.out.len() >= self.config.max_in_flight.max(1) {
            return None;
        }
        self.buffered
            .front()
            .map(|call| call.at + self.config.linger_time)
    }

    /// A submitted batch ended: each of its calls, in order, with its own outcome. An
    /// unknown batch (answered twice, or never submitted) settles nothing.
    pub fn complete(
        &mut self,
        batch: BatchId,
        outcome: Result<SendReceipt, ClientError>,
    ) -> Vec<Settled> {
        let Some(Out { calls, messages }) = self.out.remove(&batch) else {
            return Vec::new();
        };
        match outcome {
            Ok(receipt) => {
                let mut offset = receipt.base_offset;
                let settled = calls
                    .into_iter()
                    .map(|(ticket, count)| {
                        let messages = u32::try_from(count).unwrap_or(u32::MAX);
                        let own = SendReceipt {
                            base_offset: offset,
                            messages,
                            ..receipt
                        };
                        offset = offset.map(|base| base.saturating_add(u64::from(messages)));
                        Settled {
                            ticket,
                            outcome: Ok(own),
                        }
                    })
                    .collect();
                self.sent_messages += messages.len() as u64;
                settled
            }
            Err(error) => {
                self.failed_messages += messages.len() as u64;
                let mut rest = messages.into_iter();
                calls
                    .into_iter()
                    .map(|(ticket, count)| Settled {
                        ticket,
                        outcome: Err(SendFailure {
                            messages: rest.by_ref().take(count).collect(),
                            error: error.clone(),
                        }),
                    })
                    .collect()
            }
        }
    }

    /// Messages buffered and not yet submitted.
    pub fn buffered_messages(&self) -> usize {
        self.buffered_messages
    }

    /// Batches submitted and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.out.len()
    }

    /// Nothing buffered and nothing in flight: a flush is over.
    pub fn is_idle(&self) -> bool {
        self.buffered.is_empty() && self.out.is_empty()
    }

    /// Counters so far.
    pub fn stats(&self) -> ProducerStats {
        ProducerStats {
            sent_messages: self.sent_messages,
            failed_messages: self.failed_messages,
            buffered_messages: self.buffered_messages,
            in_flight: self.out.len(),
        }
    }

    /// Takes every buffered call back, unsent, as failed with `error` (a producer shut
    /// down without flushing, or a client that closed).
    pub fn abandon(&mut self, error: &ClientError) -> Vec<Settled> {
        self.buffered_messages = 0;
        self.buffered_bytes = 0;
        let abandoned: Vec<Settled> = self
            .buffered
            .drain(..)
            .map(|call| Settled {
                ticket: call.ticket,
                outcome: Err(SendFailure {
                    messages: call.messages,
                    error: error.clone(),
                }),
            })
            .collect();
        self.failed_messages += abandoned
            .iter()
            .map(|settled| {
                settled
                    .outcome
                    .as_ref()
                    .err()
                    .map_or(0, |f| f.messages.len()) as u64
            })
            .sum::<u64>();
        abandoned
    }
}
