#![allow(clippy::unwrap_used)]

use std::io;

use super::*;
use crate::partitioning::Partitioning;
use crate::wire::{Consumer, ConsumerKind, Identifier, Name, PollingStrategy, WireError};
use crate::{AdminRequest, Config, NodeId, PollRequest, Reply, Request, SendReceipt};

fn consumer() -> Consumer {
    Consumer {
        kind: ConsumerKind::Consumer,
        id: Identifier::Numeric(7),
    }
}

fn named(name: &str) -> Identifier {
    Identifier::Named(Name::new(name).unwrap())
}

fn receipt() -> SendReceipt {
    SendReceipt {
        partition_id: 1,
        base_offset: Some(10),
        messages: 1,
        node: NodeId(2),
        replica: None,
    }
}

#[test]
fn send_builds_a_send_request_with_the_messages_as_given() {
    let message = Message {
        origin_timestamp: 5,
        ..Message::default()
    };
    let call = Call::send("orders", 3u32, Partitioning::partition_id(4), vec![message]).unwrap();
    let Request::Send(send) = &call.request else {
        panic!("not a send: {:?}", call.request);
    };
    assert_eq!(send.stream, named("orders"));
    assert_eq!(send.topic, Identifier::Numeric(3));
    assert_eq!(send.partitioning, Partitioning::partition_id(4));
    assert_eq!(send.messages.len(), 1);
    assert_eq!(send.messages[0].origin_timestamp, 5);
    assert_eq!(call.reply.operation(), "send");
}

#[test]
fn poll_never_auto_commits_and_poll_request_keeps_every_field() {
    let call = Call::poll(1u32, "t", Some(2), consumer(), PollingStrategy::First, 50).unwrap();
    assert!(matches!(
        &call.request,
        Request::Poll(PollRequest {
            stream: Identifier::Numeric(1),
            partition_id: Some(2),
            strategy: PollingStrategy::First,
            count: 50,
            auto_commit: false,
            ..
        })
    ));
    let Request::Poll(mut request) = call.request else {
        unreachable!()
    };
    request.auto_commit = true;
    let call = Call::poll_request(request);
    assert!(matches!(
        call.request,
        Request::Poll(PollRequest {
            auto_commit: true,
            ..
        })
    ));
}

#[test]
fn store_offset_builds_a_store_offset_request() {
    let call = Call::store_offset(consumer(), 1u32, 2u32, 3, 99).unwrap();
    let Request::StoreOffset(store) = &call.request else {
        panic!("not a store offset: {:?}", call.request);
    };
    assert_eq!(store.consumer, consumer());
    assert_eq!((store.partition_id, store.offset), (3, 99));
    assert_eq!(call.reply.operation(), "store offset");
}

#[test]
fn admin_builders_build_their_admin_requests() {
    let call = Call::create_stream("orders").unwrap();
    assert!(matches!(
        &call.request,
        Request::Admin(AdminRequest::CreateStream { name }) if name.as_str() == "orders"
    ));
    let call = Call::create_topic(1u32, "events", 6).unwrap();
    assert!(matches!(
        &call.request,
        Request::Admin(AdminRequest::CreateTopic {
            stream: Identifier::Numeric(1),
            partitions_count: 6,
            ..
        })
    ));
    let call = Call::create_partitions(1u32, "events", 2).unwrap();
    assert!(matches!(
        &call.request,
        Request::Admin(AdminRequest::CreatePartitions {
            partitions_count: 2,
            ..
        })
    ));
    let call = Call::get_stream(Identifier::Numeric(0)).unwrap();
    assert!(matches!(
        &call.request,
        Request::Admin(AdminRequest::GetStream {
            stream: Identifier::Numeric(0)
        })
    ));
    let call = Call::get_topic("s", "t").unwrap();
    let Request::Admin(AdminRequest::GetTopic { stream, topic }) = &call.request else {
        panic!("not a get topic: {:?}", call.request);
    };
    assert_eq!((stream, topic), (&named("s"), &named("t")));
}

#[test]
fn names_the_wire_cannot_carry_are_invalid_arguments() {
    let too_long = "x".repeat(256);
    assert!(matches!(
        Call::create_stream(""),
        Err(ClientError::Invalid(WireError::InvalidLength { .. }))
    ));
    assert!(matches!(
        Call::get_topic(1u32, too_long.as_str()),
        Err(ClientError::Invalid(_))
    ));
}

#[test]
fn extractors_return_the_value_of_the_right_reply_kind() {
    let call = Call::send(1u32, 1u32, Partitioning::Balanced, Vec::new()).unwrap();
    assert_eq!(
        call.reply.extract(Reply::Sent(receipt())).unwrap(),
        receipt()
    );
    let call = Call::store_offset(consumer(), 1u32, 1u32, 0, 0).unwrap();
    call.reply.extract(Reply::OffsetStored).unwrap();
    let call = Call::create_partitions(1u32, 1u32, 1).unwrap();
    call.reply.extract(Reply::PartitionsCreated).unwrap();
    // A read of a missing stream or topic is an answer, not an error.
    let call = Call::get_stream(1u32).unwrap();
    assert_eq!(call.reply.extract(Reply::Stream(None)).unwrap(), None);
    let call = Call::get_topic(1u32, 1u32).unwrap();
    assert_eq!(call.reply.extract(Reply::Topic(None)).unwrap(), None);
}

#[test]
fn extractors_return_unexpected_reply_on_another_kind() {
    fn unexpected<T: std::fmt::Debug>(call: Call<T>, reply: Reply) -> &'static str {
        match call.reply.extract(reply) {
            Err(ClientError::UnexpectedReply { operation }) => operation,
            other => panic!("expected UnexpectedReply, got {other:?}"),
        }
    }
    let send = Call::send(1u32, 1u32, Partitioning::Balanced, Vec::new()).unwrap();
    assert_eq!(unexpected(send, Reply::OffsetStored), "send");
    let poll = Call::poll(1u32, 1u32, None, consumer(), PollingStrategy::Last, 1).unwrap();
    assert_eq!(unexpected(poll, Reply::Sent(receipt())), "poll");
    let store = Call::store_offset(consumer(), 1u32, 1u32, 0, 0).unwrap();
    assert_eq!(unexpected(store, Reply::PartitionsCreated), "store offset");
    // Creating must return what was created: "no such stream" is not an answer to it.
    let create = Call::create_stream("s").unwrap();
    assert_eq!(unexpected(create, Reply::Stream(None)), "create stream");
    let create = Call::create_topic(1u32, "t", 1).unwrap();
    assert_eq!(unexpected(create, Reply::Topic(None)), "create topic");
    let create = Call::create_partitions(1u32, 1u32, 1).unwrap();
    assert_eq!(unexpected(create, Reply::OffsetStored), "create partitions");
    let get = Call::get_stream(1u32).unwrap();
    assert_eq!(unexpected(get, Reply::Topic(None)), "get stream");
    let get = Call::get_topic(1u32, 1u32).unwrap();
    assert_eq!(unexpected(get, Reply::Stream(None)), "get topic");
}

#[test]
fn stamp_origin_timestamps_fills_only_zeros() {
    let mut messages = vec![
        Message::default(),
        Message {
            origin_timestamp: 42,
            ..Message::default()
        },
        Message::default(),
    ];
    stamp_origin_timestamps(&mut messages, 1_000);
    let stamps: Vec<u64> = messages.iter().map(|m| m.origin_timestamp).collect();
    assert_eq!(stamps, [1_000, 42, 1_000]);
}

#[test]
fn stamping_a_call_stamps_a_send_and_leaves_other_requests_alone() {
    let stamped = Message {
        origin_timestamp: 42,
        ..Message::default()
    };
    let messages = vec![Message::default(), stamped];
    let mut call = Call::send(1u32, 2u32, Partitioning::balanced(), messages).unwrap();
    call.stamp_origin_timestamps(1_000);
    let Request::Send(send) = &call.request else {
        panic!("not a send: {:?}", call.request);
    };
    let stamps: Vec<u64> = send.messages.iter().map(|m| m.origin_timestamp).collect();
    assert_eq!(stamps, [1_000, 42]);

    let mut call = Call::store_offset(consumer(), 1u32, 2u32, 3, 99).unwrap();
    let before = format!("{:?}", call.request);
    call.stamp_origin_timestamps(1_000);
    assert_eq!(format!("{:?}", call.request), before);
}

#[test]
fn connect_errors_tell_unreachable_from_other() {
    let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
    assert_eq!(connect_error(&refused), ConnectError::Unreachable);
    let other = io::Error::other("boom");
    assert_eq!(
        connect_error(&other),
        ConnectError::Other("boom".to_owned())
    );
}

#[test]
fn client_errors_never_show_the_password() {
    let secret = "hunter2-secret";
    let too_long = "p".repeat(300);
    let strings = [
        format!("http://iggy:{secret}@h:1"),
        format!("iggy://iggy:{secret}@"),
        format!("iggy://iggy:{secret}@host-without-port"),
        format!("iggy://iggy:{secret}{too_long}@h:1"),
    ];
    for value in strings {
        let error = ClientError::from(Config::from_connection_string(&value).unwrap_err());
        for shown in [format!("{error}"), format!("{error:?}")] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
}

#[test]
fn client_error_messages_are_short_and_typed() {
    let error = ClientError::UnexpectedReply { operation: "poll" };
    assert_eq!(error.to_string(), "unexpected reply to poll");
    let error = ClientError::from(io::Error::other("no threads"));
    assert_eq!(error.to_string(), "i/o error: no threads");
    assert_eq!(ClientError::Closed.to_string(), "client shut down");
}

#[test]
fn session_signal_answers_on_the_coordinator_link_or_a_fatal_refusal_only() {
    use crate::event::{Event, LinkRole};
    use crate::ids::{LinkId, NodeId};
    use crate::wire::ErrorCode;
    let up = |role| Event::LinkUp {
        link: LinkId(1),
        node: NodeId(0),
        role,
    };
    assert!(matches!(
        super::session_signal(&up(LinkRole::Coordinator)),
        Some(Ok(()))
    ));
    assert!(super::session_signal(&up(LinkRole::Data)).is_none());
    let refused = |fatal| Event::SignInRefused {
        node: NodeId(0),
        code: ErrorCode::InvalidCredentials,
        fatal,
    };
    assert!(matches!(
        super::session_signal(&refused(true)),
        Some(Err(ClientError::Request(crate::RequestError::SignIn {
            code: ErrorCode::InvalidCredentials
        })))
    ));
    assert!(
        super::session_signal(&refused(false)).is_none(),
        "a passing refusal keeps waiting"
    );
}

#[test]
fn queue_full_is_one_variant_whether_refused_at_submit_or_after_waiting() {
    use crate::{RequestError, SubmitError};
    assert!(matches!(
        ClientError::from(SubmitError::QueueFull { limit: 3 }),
        ClientError::QueueFull { limit: 3 }
    ));
    assert!(matches!(
        ClientError::from(RequestError::QueueFull { limit: 4 }),
        ClientError::QueueFull { limit: 4 }
    ));
    assert!(matches!(
        ClientError::from(SubmitError::EmptyBatch),
        ClientError::Submit(SubmitError::EmptyBatch)
    ));
}
