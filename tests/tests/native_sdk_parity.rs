//! What an SDK 0.11.0 user expects of the native API, checked against the SDK itself:
//! - typed user headers make the very block the SDK writes for the same headers, and each
//!   side reads the other's blocks to the same headers;
//! - `Identifier::parse` reads text as the SDK's `Identifier::from_str` does;
//! - the tokio consumer is a `Stream` whose items carry their partition, their offset, the
//!   partition's current offset and their typed headers, on the loopback test cluster.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use iggy::prelude::{
    HeaderKey as SdkKey, HeaderKind as SdkKind, HeaderValue as SdkValue, IdKind,
    Identifier as SdkIdentifier, IggyMessage,
};
use iggy_route_core::Config;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    HeaderKey, HeaderKind, HeaderValue, Identifier, Message, PollingStrategy, UserHeaders,
};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::TopicConsumer;
use proptest::prelude::*;

type SdkHeaders = BTreeMap<SdkKey, SdkValue>;

/// Every kind, in the order of its code (1 to 15).
const KINDS: [HeaderKind; 15] = [
    HeaderKind::Raw,
    HeaderKind::String,
    HeaderKind::Bool,
    HeaderKind::Int8,
    HeaderKind::Int16,
    HeaderKind::Int32,
    HeaderKind::Int64,
    HeaderKind::Int128,
    HeaderKind::Uint8,
    HeaderKind::Uint16,
    HeaderKind::Uint32,
    HeaderKind::Uint64,
    HeaderKind::Uint128,
    HeaderKind::Float32,
    HeaderKind::Float64,
];

/// The SDK's kind of `code`, checked to be ours at that position by name as well.
fn sdk_kind(index: usize) -> SdkKind {
    let theirs = SdkKind::from_code(u8::try_from(index + 1).unwrap()).unwrap();
    assert_eq!(
        SdkKind::from_str(&KINDS[index].to_string()).unwrap(),
        theirs
    );
    theirs
}

/// The block the SDK writes for `headers`, on a message as its builder makes one.
fn sdk_block(headers: SdkHeaders) -> Bytes {
    IggyMessage::builder()
        .payload(Bytes::from_static(b"p"))
        .user_headers(headers)
        .build()
        .unwrap()
        .user_headers
        .unwrap_or_default()
}

/// The SDK's reading of `block`, as its `IggyMessage::user_headers_map` gives it to a reader.
fn sdk_read(block: &Bytes) -> SdkHeaders {
    let mut message = IggyMessage::builder()
        .payload(Bytes::from_static(b"p"))
        .build()
        .unwrap();
    message.header.user_headers_length = u32::try_from(block.len()).unwrap();
    message.user_headers = Some(block.clone());
    message.user_headers_map().unwrap().unwrap_or_default()
}

/// Both ways: the same headers make the same block, and each reads the other's.
fn assert_same_on_both_sides(ours: &UserHeaders, theirs: &SdkHeaders) {
    let our_block = ours.encode();
    let their_block = sdk_block(theirs.clone());
    assert_eq!(our_block, their_block, "the same block byte for byte");
    assert_eq!(our_block.len(), ours.encoded_len());
    assert_eq!(&UserHeaders::decode(&their_block).unwrap(), ours);
    assert_eq!(&sdk_read(&our_block), theirs);
}

#[test]
fn every_kind_made_by_its_typed_constructor_encodes_as_the_sdks() {
    let ours = UserHeaders::from([
        (
            HeaderKey::raw(&b"\x00\x01"[..]).unwrap(),
            HeaderValue::raw(&b"\xffraw"[..]).unwrap(),
        ),
        (
            HeaderKey::try_from("content-type").unwrap(),
            HeaderValue::try_from("text/plain").unwrap(),
        ),
        (HeaderKey::from(true), HeaderValue::from(false)),
        (HeaderKey::from(-1i8), HeaderValue::from(i8::MIN)),
        (HeaderKey::from(-2i16), HeaderValue::from(i16::MAX)),
        (HeaderKey::from(-3i32), HeaderValue::from(-70_000i32)),
        (HeaderKey::from(-4i64), HeaderValue::from(i64::MIN)),
        (HeaderKey::from(-5i128), HeaderValue::from(i128::MAX)),
        (HeaderKey::from(6u8), HeaderValue::from(u8::MAX)),
        (HeaderKey::from(7u16), HeaderValue::from(65_000u16)),
        (HeaderKey::from(8u32), HeaderValue::from(42u32)),
        (HeaderKey::from(9u64), HeaderValue::from(u64::MAX)),
        (HeaderKey::from(10u128), HeaderValue::from(u128::MAX - 1)),
        (HeaderKey::from(1.5f32), HeaderValue::from(-0.25f32)),
        (HeaderKey::from(2.5f64), HeaderValue::from(f64::MAX)),
    ]);
    let theirs = SdkHeaders::from([
        (
            SdkKey::try_from(&b"\x00\x01"[..]).unwrap(),
            SdkValue::try_from(&b"\xffraw"[..]).unwrap(),
        ),
        (
            SdkKey::try_from("content-type").unwrap(),
            SdkValue::try_from("text/plain").unwrap(),
        ),
        (SdkKey::from(true), SdkValue::from(false)),
        (SdkKey::from(-1i8), SdkValue::from(i8::MIN)),
        (SdkKey::from(-2i16), SdkValue::from(i16::MAX)),
        (SdkKey::from(-3i32), SdkValue::from(-70_000i32)),
        (SdkKey::from(-4i64), SdkValue::from(i64::MIN)),
        (SdkKey::from(-5i128), SdkValue::from(i128::MAX)),
        (SdkKey::from(6u8), SdkValue::from(u8::MAX)),
        (SdkKey::from(7u16), SdkValue::from(65_000u16)),
        (SdkKey::from(8u32), SdkValue::from(42u32)),
        (SdkKey::from(9u64), SdkValue::from(u64::MAX)),
        (SdkKey::from(10u128), SdkValue::from(u128::MAX - 1)),
        (SdkKey::from(1.5f32), SdkValue::from(-0.25f32)),
        (SdkKey::from(2.5f64), SdkValue::from(f64::MAX)),
    ]);
    assert_eq!(ours.len(), 15);
    assert_same_on_both_sides(&ours, &theirs);

    // What the SDK wrote, read back typed by our getters.
    let read = UserHeaders::decode(&sdk_block(theirs)).unwrap();
    let value = |key: HeaderKey| read.get(&key).unwrap().clone();
    assert_eq!(value(HeaderKey::from(8u32)).as_u32(), Ok(42));
    assert_eq!(
        read.get_named("content-type").unwrap().as_str(),
        Ok("text/plain")
    );
    assert_eq!(value(HeaderKey::from(true)).as_bool(), Ok(false));
    assert_eq!(value(HeaderKey::from(-5i128)).as_i128(), Ok(i128::MAX));
    assert_eq!(value(HeaderKey::from(1.5f32)).as_f32(), Ok(-0.25));
    assert!(value(HeaderKey::from(8u32)).as_u64().is_err());

    assert_same_on_both_sides(&UserHeaders::new(), &SdkHeaders::new());
}

/// The size of each kind of [`KINDS`]; `None` for 1..=255 bytes.
const SIZES: [Option<usize>; 15] = [
    None,
    None,
    Some(1),
    Some(1),
    Some(2),
    Some(4),
    Some(8),
    Some(16),
    Some(1),
    Some(2),
    Some(4),
    Some(8),
    Some(16),
    Some(4),
    Some(8),
];

/// A kind's index (code - 1) and a value of a size that kind accepts.
fn field() -> impl Strategy<Value = (usize, Vec<u8>)> {
    (0..KINDS.len()).prop_flat_map(|index| {
        let size = SIZES[index].map_or(1..=255, |size| size..=size);
        (Just(index), proptest::collection::vec(any::<u8>(), size))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any headers, made on both sides from the same kinds and bytes (keys of every kind,
    /// bytes of any value, in any number up to 16), agree both ways.
    #[test]
    fn any_headers_make_the_sdks_block_and_read_its_blocks(
        pairs in proptest::collection::vec((field(), field()), 0..16)
    ) {
        let mut ours = UserHeaders::new();
        let mut theirs = SdkHeaders::new();
        for ((key_kind, key), (value_kind, value)) in pairs {
            ours.insert(
                HeaderKey::new(KINDS[key_kind], key.clone()).unwrap(),
                HeaderValue::new(KINDS[value_kind], value.clone()).unwrap(),
            );
            theirs.insert(
                SdkKey::from_raw(sdk_kind(key_kind), &key).unwrap(),
                SdkValue::from_raw(sdk_kind(value_kind), &value).unwrap(),
            );
        }
        assert_same_on_both_sides(&ours, &theirs);
    }

    /// `Identifier::parse` and the SDK's `Identifier::from_str` agree on every text: the
    /// same id or name on the wire, or both refuse it.
    #[test]
    fn identifier_parse_reads_text_as_the_sdk_does(
        text in prop_oneof![
            "[+-]?[0-9]{0,11}[a-z ]?",
            "0{0,3}429496729[0-9]",
            ".{0,6}",
            "x{250,260}",
        ]
    ) {
        let ours = Identifier::parse(&text).ok().map(|id| {
            let mut out = BytesMut::new();
            id.encode(&mut out);
            out.to_vec()
        });
        let theirs = SdkIdentifier::from_str(&text).ok().map(|id| {
            let code = match id.kind {
                IdKind::Numeric => 1,
                IdKind::String => 2,
            };
            let mut out = vec![code, id.length];
            out.extend_from_slice(&id.value);
            out
        });
        prop_assert_eq!(ours, theirs, "{:?}", text);
    }
}

fn assert_send_sync_unpin<T: Send + Sync + Unpin>() {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tokio_consumer_streams_offsets_current_offsets_and_typed_headers() {
    assert_send_sync_unpin::<TopicConsumer>();
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(3).await;
    let (stream, topic) = cluster.create_stream_and_topic("orders", "events", 2);
    // The session sits on node 0; partition 1's primary elsewhere.
    assert!(cluster.set_primary(stream, topic, 1, 2));
    let mut config = Config::from_connection_string(&cluster.connection_string()).unwrap();
    config.request_timeout = Duration::from_secs(10);
    let client = iggy_route_tokio::Client::connect(config).await.unwrap();
    let messages = (0..5u32)
        .map(|n| {
            let headers = UserHeaders::from([
                (HeaderKey::try_from("n").unwrap(), HeaderValue::from(n)),
                (HeaderKey::from(1u8), HeaderValue::try_from("tag").unwrap()),
            ]);
            Message::with_id(u128::from(n) + 1, format!("m{n}")).with_headers(&headers)
        })
        .collect();
    client
        .send(stream, topic, Partitioning::PartitionId(1), messages)
        .await
        .unwrap();
    // Every replica's copy complete, so that whichever node serves a poll reports the
    // partition's true current offset.
    tokio::time::sleep(Duration::from_millis(600)).await;

    let mut consumer = client
        .consumer(stream, topic)
        .unwrap()
        .partition(1)
        .polling_strategy(PollingStrategy::First)
        .batch_length(2)
        .build()
        .unwrap();
    // A `next` given no time at all leaves its request out; the stream takes its answer.
    let mut received = Vec::new();
    if let Ok(first) = tokio::time::timeout(Duration::ZERO, consumer.next()).await {
        received.push(first.unwrap().unwrap());
    }
    while received.len() < 5 {
        let item = tokio::time::timeout(Duration::from_secs(10), StreamExt::next(&mut consumer))
            .await
            .expect("a message within 10 s")
            .expect("the stream goes on while the client is up")
            .unwrap();
        received.push(item);
    }
    for (n, item) in (0u32..).zip(&received) {
        assert_eq!(item.partition_id, 1);
        assert_eq!(item.offset(), u64::from(n), "each message once, in order");
        assert_eq!(item.current_offset, 4, "the partition's newest offset");
        assert_eq!(item.message.id, u128::from(n) + 1);
        assert_eq!(item.message.payload, Bytes::from(format!("m{n}")));
        let headers = item.headers().unwrap();
        assert_eq!(headers.len(), 2);
        assert_eq!(headers.get_named("n").map(HeaderValue::as_u32), Some(Ok(n)));
        assert_eq!(
            headers.get(&HeaderKey::from(1u8)).map(HeaderValue::as_str),
            Some(Ok("tag"))
        );
    }

    client.shutdown().await;
    let end = tokio::time::timeout(Duration::from_secs(10), StreamExt::next(&mut consumer))
        .await
        .expect("the stream ends promptly");
    assert!(
        end.is_none(),
        "the stream ends once the client is shut down"
    );
    cluster.shutdown().await;
}
