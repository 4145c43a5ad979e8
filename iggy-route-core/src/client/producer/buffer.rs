//! The buffer of a background producer (Kafka's record accumulator): send calls are
//! buffered within bounds, cut into batches of up to `batch_length` messages and
//! `batch_size` bytes (or sooner, once the oldest has lingered `linger_time`), and at most
//! `max_in_flight` batches are out at once. When a batch is answered, each call in it gets
//! its own outcome: its own receipt, whose offsets follow those of the calls before it in
//! the batch, or its own messages back with the error.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use super::{
    Batch, BatchId, ProducerConfig, ProducerStats, PushError, SendFailure, Settled, Ticket,
};
use crate::client::ClientError;
use crate::request::{Request, SendReceipt, SendRequest};
use crate::wire::{Identifier, Message};

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
        if !self.fits(messages.len(), bytes) {
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
        if !self.batch_due(now, flushing) {
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

    /// Message bytes buffered and not yet submitted.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// Whether a call of `messages` messages and `bytes` bytes has room now.
    pub fn fits(&self, messages: usize, bytes: usize) -> bool {
        self.buffered_messages.saturating_add(messages) <= self.config.max_buffered_messages
            && self.buffered_bytes.saturating_add(bytes) <= self.config.max_buffered_bytes
    }

    /// Whether a batch is due by `now` (full, lingered, or `flushing`) and an in-flight
    /// slot is free for it.
    fn batch_due(&self, now: Instant, flushing: bool) -> bool {
        let Some(oldest) = self.buffered.front() else {
            return false;
        };
        let full = self.buffered_messages >= self.config.batch_length as usize
            || self.buffered_bytes >= self.config.batch_size;
        self.out.len() < self.config.max_in_flight.max(1)
            && (flushing || full || now >= oldest.at + self.config.linger_time)
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
