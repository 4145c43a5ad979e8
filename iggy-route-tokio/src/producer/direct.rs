//! Direct mode: each `send` is sent from the caller's task, chunk after chunk, and returns
//! the receipts. Nothing is buffered between calls.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use iggy_route_core::SendReceipt;
use iggy_route_core::client::ClientError;
use iggy_route_core::client::producer::{ProducerConfig, ProducerStats};
use iggy_route_core::wire::{Identifier, Message};

use crate::Client;

/// The state of a direct producer (see [`Producer<Direct>`](crate::Producer)).
#[derive(Debug)]
pub struct Direct {
    client: Client,
    stream: Identifier,
    topic: Identifier,
    config: ProducerConfig,
    closed: AtomicBool,
    sent_messages: AtomicU64,
    failed_messages: AtomicU64,
    in_flight: AtomicUsize,
}

impl Direct {
    pub(super) fn new(
        client: Client,
        stream: Identifier,
        topic: Identifier,
        config: ProducerConfig,
    ) -> Self {
        Self {
            client,
            stream,
            topic,
            config,
            closed: AtomicBool::new(false),
            sent_messages: AtomicU64::new(0),
            failed_messages: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    pub(super) async fn send(
        &self,
        messages: Vec<Message>,
    ) -> Result<Vec<SendReceipt>, ClientError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ClientError::Closed);
        }
        if messages.is_empty() {
            return Err(super::empty_send());
        }
        let chunks = chunks(messages, &self.config);
        let mut receipts = Vec::with_capacity(chunks.len());
        let mut unsent: u64 = chunks.iter().map(|chunk| chunk.len() as u64).sum();
        for chunk in chunks {
            let count = chunk.len() as u64;
            self.in_flight.fetch_add(1, Ordering::Relaxed);
            let sent = self
                .client
                .send(
                    self.stream.clone(),
                    self.topic.clone(),
                    self.config.partitioning.clone(),
                    chunk,
                )
                .await;
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            match sent {
                Ok(receipt) => {
                    self.sent_messages.fetch_add(count, Ordering::Relaxed);
                    unsent -= count;
                    receipts.push(receipt);
                }
                Err(error) => {
                    // The failing chunk and the ones never sent after it.
                    self.failed_messages.fetch_add(unsent, Ordering::Relaxed);
                    return Err(error);
                }
            }
        }
        Ok(receipts)
    }

    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    pub(super) fn stats(&self) -> ProducerStats {
        ProducerStats {
            sent_messages: self.sent_messages.load(Ordering::Relaxed),
            failed_messages: self.failed_messages.load(Ordering::Relaxed),
            buffered_messages: 0,
            in_flight: self.in_flight.load(Ordering::Relaxed),
        }
    }
}

/// Cuts a call into chunks of at most `batch_length` messages and `batch_size` bytes, in
/// order; a message larger than `batch_size` goes in a chunk of its own.
fn chunks(messages: Vec<Message>, config: &ProducerConfig) -> Vec<Vec<Message>> {
    let max_messages = config.batch_length as usize;
    let mut chunks = Vec::new();
    let mut chunk = Vec::new();
    let mut bytes = 0usize;
    for message in messages {
        let len = message.frame_len();
        let over = chunk.len() >= max_messages || bytes.saturating_add(len) > config.batch_size;
        if over && !chunk.is_empty() {
            chunks.push(std::mem::take(&mut chunk));
            bytes = 0;
        }
        bytes = bytes.saturating_add(len);
        chunk.push(message);
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    chunks
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use bytes::Bytes;

    use super::*;

    fn messages(sizes: &[usize]) -> Vec<Message> {
        sizes
            .iter()
            .map(|&size| Message {
                payload: Bytes::from(vec![b'x'; size]),
                ..Message::default()
            })
            .collect()
    }

    fn sizes(chunks: &[Vec<Message>]) -> Vec<Vec<usize>> {
        chunks
            .iter()
            .map(|chunk| chunk.iter().map(|m| m.payload.len()).collect())
            .collect()
    }

    #[test]
    fn a_call_is_cut_by_message_count_in_order() {
        let config = ProducerConfig {
            batch_length: 2,
            ..ProducerConfig::default()
        };
        let cut = chunks(messages(&[1, 2, 3, 4, 5]), &config);
        assert_eq!(sizes(&cut), [vec![1, 2], vec![3, 4], vec![5]]);
    }

    #[test]
    fn a_call_is_cut_by_bytes_and_an_oversize_message_goes_alone() {
        let header = Message::default().frame_len();
        let config = ProducerConfig {
            batch_size: 2 * header + 100,
            ..ProducerConfig::default()
        };
        let cut = chunks(messages(&[50, 50, 10, 500, 1]), &config);
        assert_eq!(sizes(&cut), [vec![50, 50], vec![10], vec![500], vec![1]]);
    }
}
