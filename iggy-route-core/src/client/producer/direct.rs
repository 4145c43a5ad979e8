//! A direct producer less its client: how a call is cut into chunks, which chunk goes
//! next, what a failed chunk means for the rest, and the counters.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::{ProducerConfig, ProducerSettings, ProducerStats};
use crate::client::ClientError;
use crate::request::{SendReceipt, SendRequest, SubmitError};
use crate::wire::{Identifier, Message};

/// Cuts a call into chunks of at most `batch_length` messages and `batch_size` bytes, in
/// order; a message larger than `batch_size` goes in a chunk of its own. A zero bound
/// (refused by [`ProducerConfig::validate_direct`]) is read as one, and the byte count
/// saturates, so no input panics.
pub fn chunks(messages: Vec<Message>, config: &ProducerConfig) -> Vec<Vec<Message>> {
    let max_messages = (config.batch_length as usize).max(1);
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

/// A direct producer, less its client: the stream and topic, the settings, whether it is
/// shut down, and its counters (shared by every clone of the producer, updated from any
/// thread or task). Each call is a [`DirectCall`].
#[derive(Debug)]
pub struct DirectProducer {
    stream: Identifier,
    topic: Identifier,
    config: ProducerConfig,
    closed: AtomicBool,
    sent_messages: AtomicU64,
    failed_messages: AtomicU64,
    in_flight: AtomicUsize,
}

impl DirectProducer {
    /// A running producer as `settings` say (a direct producer has no callback).
    pub fn new(settings: ProducerSettings) -> Self {
        Self {
            stream: settings.stream,
            topic: settings.topic,
            config: settings.config,
            closed: AtomicBool::new(false),
            sent_messages: AtomicU64::new(0),
            failed_messages: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    /// One call: refused with `SubmitError::EmptyBatch` for no messages and
    /// `ClientError::Closed` once shut down; otherwise cut into chunks to send in order.
    pub fn call(&self, messages: Vec<Message>) -> Result<DirectCall<'_>, ClientError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ClientError::Closed);
        }
        if messages.is_empty() {
            return Err(ClientError::Submit(SubmitError::EmptyBatch));
        }
        let unsent = messages.len();
        let chunks = chunks(messages, &self.config);
        Ok(DirectCall {
            producer: self,
            receipts: Vec::with_capacity(chunks.len()),
            chunks: chunks.into_iter(),
            unsent,
            out: None,
        })
    }

    /// Later calls fail `Closed`; calls running finish as they would have.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Counters so far (nothing is buffered in direct mode).
    pub fn stats(&self) -> ProducerStats {
        ProducerStats {
            sent_messages: self.sent_messages.load(Ordering::Relaxed),
            failed_messages: self.failed_messages.load(Ordering::Relaxed),
            buffered_messages: 0,
            in_flight: self.in_flight.load(Ordering::Relaxed),
        }
    }
}

/// One direct call, chunk after chunk: send each [`next_chunk`](Self::next_chunk), give
/// its answer to [`answered`](Self::answered), and take the [`receipts`](Self::receipts)
/// at the end. A failed chunk ends the call: the chunks before it are stored, it ended as
/// its error says, and the later ones are never sent (all counted failed). A call dropped
/// with a chunk out (a cancelled task) counts that chunk and the rest failed.
#[derive(Debug)]
pub struct DirectCall<'a> {
    producer: &'a DirectProducer,
    chunks: std::vec::IntoIter<Vec<Message>>,
    receipts: Vec<SendReceipt>,
    /// Messages not acknowledged yet.
    unsent: usize,
    /// The messages of the chunk out now.
    out: Option<usize>,
}

impl DirectCall<'_> {
    /// The next chunk to send, as the send request to make; `None` once all are sent.
    pub fn next_chunk(&mut self) -> Option<SendRequest> {
        let messages = self.chunks.next()?;
        self.out = Some(messages.len());
        self.producer.in_flight.fetch_add(1, Ordering::Relaxed);
        Some(SendRequest {
            stream: self.producer.stream.clone(),
            topic: self.producer.topic.clone(),
            partitioning: self.producer.config.partitioning.clone(),
            messages,
        })
    }

    /// The answer to the chunk out: its error ends the call.
    pub fn answered(
        &mut self,
        outcome: Result<SendReceipt, ClientError>,
    ) -> Result<(), ClientError> {
        let count = self.out.take().unwrap_or(0);
        self.producer.in_flight.fetch_sub(1, Ordering::Relaxed);
        match outcome {
            Ok(receipt) => {
                let sent = &self.producer.sent_messages;
                sent.fetch_add(count as u64, Ordering::Relaxed);
                self.unsent -= count;
                self.receipts.push(receipt);
                Ok(())
            }
            Err(error) => {
                self.fail_rest();
                Err(error)
            }
        }
    }

    fn fail_rest(&mut self) {
        let failed = &self.producer.failed_messages;
        failed.fetch_add(self.unsent as u64, Ordering::Relaxed);
        self.unsent = 0;
        self.chunks = Vec::new().into_iter();
    }

    /// One receipt per chunk, in order.
    pub fn receipts(mut self) -> Vec<SendReceipt> {
        std::mem::take(&mut self.receipts)
    }
}

impl Drop for DirectCall<'_> {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            self.producer.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.fail_rest();
        }
    }
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

    #[test]
    fn zero_bounds_and_huge_sizes_neither_panic_nor_lose_a_message() {
        let config = ProducerConfig {
            batch_length: 0,
            batch_size: 0,
            ..ProducerConfig::default()
        };
        assert_eq!(
            sizes(&chunks(messages(&[3, 0, 7]), &config)),
            [vec![3], vec![0], vec![7]]
        );
        let unbounded = ProducerConfig {
            batch_length: u32::MAX,
            batch_size: usize::MAX,
            ..ProducerConfig::default()
        };
        assert_eq!(sizes(&chunks(messages(&[1, 2]), &unbounded)), [vec![1, 2]]);
        assert!(chunks(Vec::new(), &unbounded).is_empty());
    }

    fn receipt() -> SendReceipt {
        SendReceipt {
            partition_id: 1,
            base_offset: Some(0),
            messages: 1,
            node: crate::NodeId(0),
            replica: None,
        }
    }

    fn producer(batch_length: u32) -> DirectProducer {
        let mut settings = ProducerSettings::new(Identifier::from(1u32), Identifier::from(2u32));
        settings.config.batch_length = batch_length;
        DirectProducer::new(settings)
    }

    #[test]
    fn a_failed_chunk_fails_the_rest_unsent_and_nothing_stays_in_flight() {
        let producer = producer(2);
        let mut call = producer.call(messages(&[1, 1, 1, 1, 1])).unwrap();
        assert_eq!(call.next_chunk().unwrap().messages.len(), 2);
        assert_eq!(producer.stats().in_flight, 1);
        call.answered(Ok(receipt())).unwrap();
        assert!(call.next_chunk().is_some());
        assert!(call.answered(Err(ClientError::Closed)).is_err());
        assert!(
            call.next_chunk().is_none(),
            "the chunk after a failure is never sent"
        );
        let stats = producer.stats();
        assert_eq!((stats.sent_messages, stats.failed_messages), (2, 3));
        assert_eq!((stats.in_flight, stats.buffered_messages), (0, 0));
    }

    #[test]
    fn a_call_dropped_mid_chunk_counts_the_rest_failed() {
        let producer = producer(1);
        let mut call = producer.call(messages(&[1, 1, 1])).unwrap();
        call.next_chunk().unwrap();
        drop(call);
        let stats = producer.stats();
        assert_eq!((stats.in_flight, stats.failed_messages), (0, 3));
    }

    #[test]
    fn empty_and_closed_calls_are_refused_and_counted_nowhere() {
        let producer = producer(1);
        assert!(matches!(
            producer.call(Vec::new()),
            Err(ClientError::Submit(SubmitError::EmptyBatch))
        ));
        producer.close();
        assert!(matches!(
            producer.call(messages(&[1])),
            Err(ClientError::Closed)
        ));
        assert_eq!(producer.stats(), ProducerStats::default());
    }

    #[test]
    fn every_chunk_answered_gives_one_receipt_each_in_order() {
        let producer = producer(2);
        let mut call = producer.call(messages(&[1, 1, 1])).unwrap();
        while let Some(_chunk) = call.next_chunk() {
            call.answered(Ok(receipt())).unwrap();
        }
        assert_eq!(call.receipts().len(), 2);
        assert_eq!(producer.stats().sent_messages, 3);
    }
}
