//! The background producer's buffer (`iggy_route_core::client::producer`): batches of whole
//! calls, bounds, per-call receipts and failures.
#![allow(clippy::unwrap_used)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use bytes::Bytes;

use iggy_route_core::client::ClientError;
use iggy_route_core::client::producer::{Batch, ProducerBuffer, ProducerConfig, PushError, Ticket};
use iggy_route_core::wire::{Identifier, Message};
use iggy_route_core::{NodeId, Request, RequestError, SendReceipt};

fn message(tag: &str) -> Message {
    Message {
        payload: Bytes::from(tag.to_owned()),
        ..Message::default()
    }
}

fn call(tags: &[&str]) -> Vec<Message> {
    tags.iter().map(|tag| message(tag)).collect()
}

fn buffer(config: ProducerConfig) -> ProducerBuffer {
    ProducerBuffer::new(Identifier::Numeric(1), Identifier::Numeric(2), config)
}

fn payloads(batch: &Batch) -> Vec<String> {
    let Request::Send(send) = &batch.request else {
        panic!("not a send: {:?}", batch.request);
    };
    send.messages
        .iter()
        .map(|m| String::from_utf8(m.payload.to_vec()).unwrap())
        .collect()
}

fn receipt(base: u64, messages: u32) -> SendReceipt {
    SendReceipt {
        partition_id: 3,
        base_offset: Some(base),
        messages,
        node: NodeId(1),
        replica: None,
    }
}

#[test]
fn calls_are_batched_whole_and_in_order_up_to_the_batch_length() {
    let t0 = Instant::now();
    let mut producer = buffer(ProducerConfig {
        batch_length: 4,
        ..ProducerConfig::default()
    });
    producer.push(t0, Ticket(1), call(&["a", "b"])).unwrap();
    assert!(
        producer.next_batch(t0, false).is_none(),
        "neither full nor lingered"
    );
    producer.push(t0, Ticket(2), call(&["c"])).unwrap();
    producer.push(t0, Ticket(3), call(&["d", "e"])).unwrap();
    let first = producer.next_batch(t0, false).unwrap();
    assert_eq!(payloads(&first), ["a", "b", "c"], "a call is never split");
    assert!(
        producer.next_batch(t0, false).is_none(),
        "2 left, lingering"
    );
    let second = producer
        .next_batch(t0 + Duration::from_millis(1), false)
        .unwrap();
    assert_eq!(payloads(&second), ["d", "e"]);
    assert!(!producer.is_idle() && producer.in_flight() == 2);
}

#[test]
fn each_call_gets_its_own_receipt_with_its_own_offsets() {
    let t0 = Instant::now();
    let mut producer = buffer(ProducerConfig::default());
    producer.push(t0, Ticket(1), call(&["a", "b"])).unwrap();
    producer.push(t0, Ticket(2), call(&["c"])).unwrap();
    producer
        .push(t0, Ticket(3), call(&["d", "e", "f"]))
        .unwrap();
    let batch = producer.next_batch(t0, true).unwrap();
    let settled = producer.complete(batch.id, Ok(receipt(10, 6)));
    let own: Vec<(Ticket, Option<u64>, u32)> = settled
        .iter()
        .map(|s| {
            let r = s.outcome.as_ref().unwrap();
            assert_eq!(r.partition_id, 3);
            (s.ticket, r.base_offset, r.messages)
        })
        .collect();
    assert_eq!(
        own,
        [
            (Ticket(1), Some(10), 2),
            (Ticket(2), Some(12), 1),
            (Ticket(3), Some(13), 3)
        ]
    );
    assert!(producer.is_idle());
    assert_eq!(producer.stats().sent_messages, 6);
    assert!(
        producer.complete(batch.id, Ok(receipt(0, 6))).is_empty(),
        "a second answer settles nothing"
    );
}

#[test]
fn a_failed_batch_hands_each_call_its_own_messages_back() {
    let t0 = Instant::now();
    let mut producer = buffer(ProducerConfig::default());
    producer.push(t0, Ticket(1), call(&["a", "b"])).unwrap();
    producer.push(t0, Ticket(2), call(&["c"])).unwrap();
    let batch = producer.next_batch(t0, true).unwrap();
    let error = ClientError::Request(RequestError::OutcomeUnknown { node: None });
    let settled = producer.complete(batch.id, Err(error));
    let back: Vec<(Ticket, usize)> = settled
        .iter()
        .map(|s| (s.ticket, s.outcome.as_ref().unwrap_err().messages.len()))
        .collect();
    assert_eq!(back, [(Ticket(1), 2), (Ticket(2), 1)]);
    assert_eq!(producer.stats().failed_messages, 3);
}

#[test]
fn the_buffer_and_the_in_flight_batches_are_bounded() {
    let t0 = Instant::now();
    let mut producer = buffer(ProducerConfig {
        max_buffered_messages: 3,
        max_in_flight: 1,
        batch_length: 1,
        ..ProducerConfig::default()
    });
    producer.push(t0, Ticket(1), call(&["a", "b"])).unwrap();
    assert!(matches!(
        producer.push(t0, Ticket(2), call(&["c", "d"])),
        Err(PushError::Full { messages: 2, .. })
    ));
    assert!(matches!(
        producer.push(t0, Ticket(3), call(&["1", "2", "3", "4"])),
        Err(PushError::TooLarge { .. })
    ));
    assert!(matches!(
        producer.push(t0, Ticket(4), Vec::new()),
        Err(PushError::Empty)
    ));
    let batch = producer.next_batch(t0, false).unwrap();
    assert_eq!(
        payloads(&batch),
        ["a", "b"],
        "alone: larger than a batch, never split"
    );
    producer.push(t0, Ticket(5), call(&["e"])).unwrap();
    assert!(
        producer.next_batch(t0, true).is_none(),
        "one batch in flight at most"
    );
    assert_eq!(producer.poll_timeout(), None, "an answer wakes the loop");
    producer.complete(batch.id, Ok(receipt(0, 2)));
    assert_eq!(
        producer.poll_timeout(),
        Some(t0 + ProducerConfig::default().linger_time)
    );
    assert_eq!(payloads(&producer.next_batch(t0, true).unwrap()), ["e"]);
}

#[test]
fn abandoning_fails_every_buffered_call_with_its_messages() {
    let t0 = Instant::now();
    let mut producer = buffer(ProducerConfig::default());
    producer.push(t0, Ticket(1), call(&["a"])).unwrap();
    producer.push(t0, Ticket(2), call(&["b", "c"])).unwrap();
    let settled = producer.abandon(&ClientError::Closed);
    assert_eq!(settled.len(), 2);
    assert!(
        settled
            .iter()
            .all(|s| matches!(&s.outcome, Err(f) if matches!(f.error, ClientError::Closed)))
    );
    assert!(producer.is_idle());
    assert_eq!(producer.stats().failed_messages, 3);
}
