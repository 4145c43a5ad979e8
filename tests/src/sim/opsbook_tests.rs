//! Tests of the rules of `opsbook.rs`.

#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use iggy_route_core::ReplyPayload;
use iggy_route_core::wire::{PollMessagesReply, PolledMessage};

use super::*;

fn log(len: u64) -> Vec<StoredMessage> {
    (0..len)
        .map(|offset| StoredMessage {
            offset,
            id: u128::from(offset),
            timestamp: 0,
            origin_timestamp: 0,
            payload: Bytes::from(offset.to_string()),
            user_headers: Bytes::new(),
        })
        .collect()
}

fn polled(offsets: std::ops::Range<u64>) -> Outcome {
    let messages = offsets
        .map(|offset| PolledMessage {
            offset,
            payload: Bytes::from(offset.to_string()),
            ..PolledMessage::default()
        })
        .collect();
    Ok(Reply::Polled(PollMessagesReply {
        partition_id: 0,
        current_offset: 9,
        messages,
    }))
}

fn op(kind: OpKind) -> PlannedOp {
    PlannedOp {
        at: Duration::ZERO,
        router: 0,
        kind,
    }
}

const AUTO: OpKind = OpKind::AutoPoll {
    partition: 0,
    count: 3,
};

fn none(_: u32, _: u32) -> Option<u64> {
    None
}

#[test]
fn a_plain_poll_must_start_where_it_asked_and_match_the_log() {
    let log = log(10);
    let plain = op(OpKind::PlainPoll {
        partition: 0,
        count: 3,
        pick: 0,
    });
    let mut book = OpsBook::new(true);
    book.submitted(RequestId(1), plain, 4).unwrap();
    book.submitted(RequestId(2), plain, 4).unwrap();
    let (z, logs) = (Duration::ZERO, [log.as_slice()]);
    book.completed(0, RequestId(1), &polled(4..7), z, &logs, &none)
        .unwrap();
    assert!(
        book.completed(0, RequestId(2), &polled(5..8), z, &logs, &none)
            .is_err()
    );
    assert!(
        book.completed(0, RequestId(1), &polled(4..7), z, &logs, &none)
            .is_err()
    );
}

#[test]
fn an_auto_commit_poll_must_not_repeat_or_go_back() {
    let log = log(10);
    let (z, logs) = (Duration::ZERO, [log.as_slice()]);
    let mut book = OpsBook::new(true);
    book.submitted(RequestId(1), op(AUTO), 0).unwrap();
    book.completed(0, RequestId(1), &polled(0..3), z, &logs, &none)
        .unwrap();
    book.submitted(RequestId(2), op(AUTO), 0).unwrap();
    assert!(
        book.completed(0, RequestId(2), &polled(2..4), z, &logs, &none)
            .is_err()
    );
    // Without the strict rule (no routing commands) a repeat passes.
    let mut book = OpsBook::new(false);
    book.submitted(RequestId(1), op(AUTO), 0).unwrap();
    book.completed(0, RequestId(1), &polled(0..3), z, &logs, &none)
        .unwrap();
    book.submitted(RequestId(2), op(AUTO), 0).unwrap();
    book.completed(0, RequestId(2), &polled(2..4), z, &logs, &none)
        .unwrap();
}

#[test]
fn a_stored_offset_must_be_the_one_written() {
    let store = op(OpKind::Store {
        partition: 0,
        pick: 0,
    });
    let mut book = OpsBook::new(true);
    book.submitted(RequestId(1), store, 5).unwrap();
    let ok = Ok(Reply::OffsetStored);
    let five = |_: u32, _: u32| Some(5);
    let six = |_: u32, _: u32| Some(6);
    assert!(
        book.completed(0, RequestId(1), &ok, Duration::ZERO, &[], &six)
            .is_err()
    );
    let mut book = OpsBook::new(true);
    book.submitted(RequestId(1), store, 5).unwrap();
    book.completed(0, RequestId(1), &ok, Duration::ZERO, &[], &five)
        .unwrap();
    assert!(book.finish(&|_| 0).is_ok());
}

#[test]
fn the_stored_offset_of_a_poll_consumer_must_not_go_back() {
    let mut book = OpsBook::new(true);
    book.check_stored(1, &|_, _| Some(5)).unwrap();
    assert!(book.check_stored(1, &|_, _| Some(4)).is_err());
}

/// A member's sync answered "no assignment" is judged at the end: a defect unless the
/// membership ended, by the router's own count or by a fault that cut its member
/// connection (the nodes end it at once; a leave may then close the link before the
/// router hears of the cut, and it counts no loss).
#[test]
fn a_stranger_answer_is_excused_only_by_a_lost_or_cut_membership() {
    let stranger = || {
        let mut book = OpsBook::new(true);
        book.submitted(RequestId(1), op(OpKind::Join), 0).unwrap();
        let joined = Ok(Reply::Payload(ReplyPayload(Bytes::new())));
        let z = Duration::ZERO;
        book.completed(0, RequestId(1), &joined, z, &[], &none)
            .unwrap();
        book.submitted(RequestId(2), op(OpKind::Sync), 0).unwrap();
        book.completed(0, RequestId(2), &joined, z, &[], &none)
            .unwrap();
        book
    };
    let not_lost = |_: usize| 0;
    assert!(stranger().finish(&not_lost).is_err());
    assert!(stranger().finish(&|_| 1).is_ok());
    let mut cut = stranger();
    cut.membership_cut(0);
    assert!(cut.finish(&not_lost).is_ok());
    let mut other_router_cut = stranger();
    other_router_cut.membership_cut(1);
    assert!(other_router_cut.finish(&not_lost).is_err());
}
