//! What a consumer hands out: a received message carries its partition, its offset, the
//! partition's newest offset at the poll, and its user headers.
#![allow(clippy::unwrap_used)]
// A test needs one real instant as the origin of its timeline; the core never reads the clock.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use iggy_route_core::client::consumer::{
    AutoCommit, ConsumerConfig, ConsumerIdentity, ConsumerState, Step,
};
use iggy_route_core::wire::{
    HeaderKey, HeaderValue, Identifier, PollMessagesReply, PolledMessage, UserHeaders,
};
use iggy_route_core::{Reply, Request};

#[test]
fn a_received_message_carries_its_partition_offset_and_the_partitions_current_offset() {
    let mut config = ConsumerConfig::new(
        Identifier::Numeric(1),
        Identifier::Numeric(1),
        ConsumerIdentity::Consumer(Identifier::Numeric(0)),
    );
    config.partition = Some(2);
    config.auto_commit = AutoCommit::Never;
    let mut state = ConsumerState::new(config);
    let now = Instant::now();
    assert!(matches!(
        state.next_step(now),
        Step::Submit(Request::Poll(_))
    ));
    let headers = UserHeaders::from([(HeaderKey::try_from("k").unwrap(), HeaderValue::from(5u64))]);
    let message = |offset| PolledMessage {
        offset,
        user_headers: headers.encode(),
        ..PolledMessage::default()
    };
    let reply = PollMessagesReply {
        partition_id: 2,
        current_offset: 9,
        messages: vec![message(3), message(4)],
    };
    state.answer(now, Ok(Reply::Polled(reply))).unwrap();
    let first = state.next_message(now).unwrap();
    assert_eq!(
        (first.partition_id, first.offset(), first.current_offset),
        (2, 3, 9)
    );
    assert_eq!(first.headers(), Ok(headers));
    let second = state.next_message(now).unwrap();
    assert_eq!((second.offset(), second.current_offset), (4, 9));
}
