//! Each adapter's own `Client` against a scripted node that misbehaves on the wire: replies
//! written a byte at a time or split at every offset, a node that reads slowly, a close in
//! the middle of a frame, a frame header announcing 2^31 bytes, and unsolicited bytes and
//! frames around the replies. Every scenario runs once per adapter (`tokio_*`, `mio_*`),
//! asserts only through the public API and the node's own record, and is bounded by the
//! short timeouts of `short_config` (2 s per attempt, 4 s per request).

#![allow(clippy::unwrap_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use iggy_route_core::client::ClientError;
use iggy_route_core::wire::code;
use iggy_route_core::{RequestError, SendReceipt};
use iggy_route_tests::scripted::checks::{assert_genuine, assert_our_topic};
use iggy_route_tests::scripted::clients::{Adapter, TestClient, short_config};
use iggy_route_tests::scripted::{Delivery, Fault, On, Reading, ScriptedNode};

/// The largest single allocation this process has asked for, so a test can show that a
/// frame header announcing gigabytes did not make the client reserve them.
static LARGEST_ALLOCATION: AtomicUsize = AtomicUsize::new(0);

struct TrackLargest;

// SAFETY: every call is forwarded unchanged to the system allocator; the only addition is
// an atomic maximum of the requested size.
unsafe impl GlobalAlloc for TrackLargest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is `GlobalAlloc::alloc`'s, passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST_ALLOCATION.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: as for `dealloc`; `new_size` is the caller's, checked by its contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: TrackLargest = TrackLargest;

/// No single allocation may come near a gigabyte. The largest legitimate ones here are the
/// slow-reader test's 8 MiB payloads and the buffers that hold them.
const ALLOCATION_CEILING: usize = 256 * 1024 * 1024;

/// The attempt timeout of `short_config`: a failure a test provokes must show before it.
const ATTEMPT: Duration = Duration::from_secs(2);

fn connect(adapter: Adapter, node: &ScriptedNode) -> TestClient {
    iggy_route_tests::error_events::install();
    TestClient::connect(adapter, short_config(vec![node.seed()])).unwrap()
}

/// A payload that names its test-wide `tag` in its first 8 bytes and is `len` bytes long.
fn tagged(tag: u64, len: usize) -> Bytes {
    let mut payload = tag.to_le_bytes().to_vec();
    payload.extend((8..len.max(8)).map(|i| (i as u64).wrapping_mul(31).wrapping_add(tag) as u8));
    Bytes::from(payload)
}

/// A failure must be typed, from the request's own life (never a panic or a closed client).
fn assert_typed(error: &ClientError) {
    assert!(
        matches!(
            error,
            ClientError::Request(
                RequestError::OutcomeUnknown { .. }
                    | RequestError::Malformed(_)
                    | RequestError::TimedOut { .. }
            )
        ),
        "{error:?}"
    );
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < until, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn finish(client: TestClient, node: ScriptedNode) {
    client.shutdown();
    drop(node);
    iggy_route_tests::error_events::assert_none();
}

// 1. Partial writes ------------------------------------------------------------------------

/// Every reply arrives a byte at a time, then split at every offset of a topic reply and of
/// a send reply: the results are exactly right and no link is lost.
fn partial_writes(adapter: Adapter) {
    let node = ScriptedNode::start();
    node.set_delivery(Delivery::ByteAtATime);
    // Login, roster, topic read, route lookup and the data link's login: all byte by byte.
    let client = connect(adapter, &node);
    assert_our_topic(client.get_topic().unwrap());
    let mut tag = 0;
    for partition in [0, 1, 2, 0, 1, 2] {
        tag += 1;
        let payload = tagged(tag, 64);
        let receipt = client.send(partition, payload.clone()).unwrap();
        assert_genuine(&node, &receipt, partition, &payload);
    }
    for at in 1..node.topic_reply_len() {
        node.set_delivery(Delivery::SplitAt(at));
        assert_our_topic(client.get_topic().unwrap());
    }
    // A send reply is the 256-byte header and one 20-byte confirmation behind its count.
    for at in 1..256 + 24 {
        node.set_delivery(Delivery::SplitAt(at));
        tag += 1;
        let payload = tagged(tag, 16);
        let receipt = client.send(1, payload.clone()).unwrap();
        assert_genuine(&node, &receipt, 1, &payload);
    }
    assert_eq!(client.stats().reconnects, 0);
    assert_eq!(node.stats().closed_by_client, 0, "no link was given up");
    finish(client, node);
}

#[test]
fn tokio_partial_writes_give_correct_results() {
    partial_writes(Adapter::Tokio);
}

#[test]
fn mio_partial_writes_give_correct_results() {
    partial_writes(Adapter::Mio);
}

// 2. A slow reader -------------------------------------------------------------------------

/// Producers on three partitions and a topic reader at once, while the node reads in small
/// pieces with pauses: first 7-byte reads under many small requests, then 16 KiB reads
/// under 8 MiB batches (more than loopback's socket buffers hold, so the client's writes
/// meet a full buffer and wait for writability: checked once by hand for mio). Every
/// request succeeds; every partition holds its batches in order, byte for byte.
fn slow_reader(adapter: Adapter) {
    let node = ScriptedNode::start();
    let mut config = short_config(vec![node.seed()]);
    config.data_links_per_node = 2;
    iggy_route_tests::error_events::install();
    let client = TestClient::connect(adapter, config).unwrap();
    let phases = [
        (7, Duration::from_micros(200), 12, 100),
        (16 * 1024, Duration::from_micros(300), 2, 8 * 1024 * 1024),
    ];
    let sent: Mutex<Vec<(u32, Bytes, SendReceipt)>> = Mutex::new(Vec::new());
    let mut tag = 0u64;
    for (chunk, pause, batches, len) in phases {
        node.set_reading(Reading::Slow { chunk, pause });
        let first_tag = tag;
        std::thread::scope(|scope| {
            for partition in 0..3u32 {
                let (client, sent) = (&client, &sent);
                scope.spawn(move || {
                    for seq in 0..batches {
                        let tag = first_tag + u64::from(partition) * 1000 + seq;
                        let payload = tagged(tag, len);
                        let receipt = client.send(partition, payload.clone()).unwrap();
                        sent.lock().unwrap().push((partition, payload, receipt));
                    }
                });
            }
            scope.spawn(|| {
                for _ in 0..20 {
                    assert_our_topic(client.get_topic().unwrap());
                }
            });
        });
        tag += 10_000;
    }
    let sent = sent.into_inner().unwrap();
    let stored = node.stored();
    for partition in 0..3u32 {
        let mine: Vec<&(u32, Bytes, SendReceipt)> =
            sent.iter().filter(|(p, ..)| *p == partition).collect();
        let theirs: Vec<_> = stored.iter().filter(|b| b.partition == partition).collect();
        assert_eq!(mine.len(), theirs.len(), "partition {partition}");
        // Each producer sent in order and waited for each reply, so order is sent order.
        for (offset, ((_, payload, receipt), batch)) in mine.iter().zip(&theirs).enumerate() {
            assert_eq!(
                batch.payloads,
                vec![payload.clone()],
                "partition {partition}"
            );
            assert_eq!(batch.base_offset, offset as u64);
            assert_eq!(receipt.base_offset, Some(offset as u64));
        }
    }
    assert_eq!(client.stats().reconnects, 0);
    finish(client, node);
}

#[test]
fn tokio_slow_reader_loses_and_reorders_nothing() {
    slow_reader(Adapter::Tokio);
}

#[test]
fn mio_slow_reader_loses_and_reorders_nothing() {
    slow_reader(Adapter::Mio);
}

// 3. A close in mid-frame ------------------------------------------------------------------

/// Half a send reply, then the connection closes: the send's outcome is unknown (the node
/// did store it), it is reported at once, and the next send succeeds on a fresh link. Half
/// a topic reply: the read is asked again on a fresh link and succeeds. The node answers
/// route lookups with `InvalidCommand`, as servers without the routing commands do, so
/// this also runs sends found by discovery.
fn close_mid_frame(adapter: Adapter) {
    let node = ScriptedNode::start();
    node.set_routing_commands(false);
    let client = connect(adapter, &node);
    let warm = tagged(1, 32);
    assert_genuine(&node, &client.send(0, warm.clone()).unwrap(), 0, &warm);
    assert!(node.stats().requests(code::GET_POLL_ROUTING) >= 1);

    node.inject(On::Send, Fault::CloseMidFrame, 1);
    let connections = node.stats().connections;
    let lost = tagged(2, 32);
    let started = Instant::now();
    let error = client.send(0, lost.clone()).unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::Request(RequestError::OutcomeUnknown { .. })
        ),
        "{error:?}"
    );
    assert!(started.elapsed() < ATTEMPT, "{:?}", started.elapsed());
    assert!(
        node.stored()
            .iter()
            .any(|b| b.payloads == vec![lost.clone()]),
        "the node stored it: unknown, not unsent, is the truth"
    );

    let after = tagged(3, 32);
    assert_genuine(&node, &client.send(0, after.clone()).unwrap(), 0, &after);
    assert!(node.stats().connections > connections, "a fresh link");

    node.inject(On::GetTopic, Fault::CloseMidFrame, 1);
    let started = Instant::now();
    assert_our_topic(client.get_topic().unwrap());
    assert!(started.elapsed() < ATTEMPT, "{:?}", started.elapsed());
    assert_eq!(node.faults_left(), 0);
    finish(client, node);
}

#[test]
fn tokio_close_in_mid_frame_is_outcome_unknown_then_recovers() {
    close_mid_frame(Adapter::Tokio);
}

#[test]
fn mio_close_in_mid_frame_is_outcome_unknown_then_recovers() {
    close_mid_frame(Adapter::Mio);
}

// 4. A frame header announcing 2^31 bytes --------------------------------------------------

/// A reply header announcing 2^31 bytes: the link is closed on the header alone (the
/// client closes it; the node sees it go) with a typed error well before the attempt
/// timeout, nothing near that size is allocated, and the client recovers. With the frame
/// cap raised to `u32::MAX` the header is allowed, and still only the bytes that arrive
/// are buffered until the attempt times out.
fn huge_frame(adapter: Adapter) {
    const TWO_GIB: u32 = 1 << 31;
    let node = ScriptedNode::start();
    let client = connect(adapter, &node);
    let warm = tagged(1, 32);
    assert_genuine(&node, &client.send(0, warm.clone()).unwrap(), 0, &warm);

    node.inject(On::Send, Fault::AnnounceSize(TWO_GIB), 1);
    let closed = node.stats().closed_by_client;
    let started = Instant::now();
    let error = client.send(0, tagged(2, 32)).unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::Request(RequestError::OutcomeUnknown { .. })
        ),
        "{error:?}"
    );
    assert!(started.elapsed() < ATTEMPT / 2, "{:?}", started.elapsed());
    wait_until("the client closes the link", ATTEMPT, || {
        node.stats().closed_by_client > closed
    });

    node.inject(On::GetTopic, Fault::AnnounceSize(TWO_GIB), 1);
    let started = Instant::now();
    assert_our_topic(client.get_topic().unwrap());
    assert!(started.elapsed() < ATTEMPT / 2, "{:?}", started.elapsed());
    let after = tagged(3, 32);
    assert_genuine(&node, &client.send(0, after.clone()).unwrap(), 0, &after);
    client.shutdown();

    let mut config = short_config(vec![node.seed()]);
    config.max_frame_size = u32::MAX;
    config.attempt_timeout = Duration::from_millis(500);
    let uncapped = TestClient::connect(adapter, config).unwrap();
    node.inject(On::Send, Fault::AnnounceSize(TWO_GIB), 1);
    let error = uncapped.send(0, tagged(4, 32)).unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::Request(RequestError::OutcomeUnknown { .. })
        ),
        "{error:?}"
    );
    let after = tagged(5, 32);
    assert_genuine(&node, &uncapped.send(0, after.clone()).unwrap(), 0, &after);
    let largest = LARGEST_ALLOCATION.load(Ordering::Relaxed);
    assert!(
        largest < ALLOCATION_CEILING,
        "largest allocation {largest} bytes"
    );
    finish(uncapped, node);
}

#[test]
fn tokio_frame_announcing_2_gib_closes_the_link_without_allocating_it() {
    huge_frame(Adapter::Tokio);
}

#[test]
fn mio_frame_announcing_2_gib_closes_the_link_without_allocating_it() {
    huge_frame(Adapter::Mio);
}

// 5. Unsolicited input ---------------------------------------------------------------------

/// Sends `count` batches to partition 0 in turn; each must succeed genuinely or fail typed.
/// Returns how many succeeded.
fn send_each(client: &TestClient, node: &ScriptedNode, tag: &mut u64, count: usize) -> usize {
    let mut ok = 0;
    for _ in 0..count {
        *tag += 1;
        let payload = tagged(*tag, 48);
        match client.send(0, payload.clone()) {
            Ok(receipt) => {
                assert_genuine(node, &receipt, 0, &payload);
                ok += 1;
            }
            Err(error) => assert_typed(&error),
        }
    }
    ok
}

/// A node that answers at once and puts more right behind its replies: a second reply
/// frame, or bytes that begin no frame. The client never panics, never takes the extra for
/// an answer, and works normally once the node behaves.
fn unsolicited_input(adapter: Adapter) {
    let node = ScriptedNode::start();
    let client = connect(adapter, &node);
    let mut tag = 0;
    // A second frame in the same write: it arrives with the reply, finds nothing in flight
    // and costs the link, not the send (a split read could cost the next send, typed).
    node.inject(On::Send, Fault::TrailingFrame, 3);
    send_each(&client, &node, &mut tag, 6);
    assert_eq!(node.faults_left(), 0);
    // Junk behind a reply is the start of a frame while nothing is in flight: read with the
    // reply, it closes the link before the next request is written on it (no send lost);
    // read only after the next request went out, it spoils that request's reply, which
    // then ends typed. So each of the three costs at most one send.
    node.inject(On::Send, Fault::TrailingJunk, 3);
    let ok = send_each(&client, &node, &mut tag, 6);
    assert!((3..=6).contains(&ok), "{ok} of 6");
    assert_eq!(node.faults_left(), 0);
    node.inject(On::GetTopic, Fault::TrailingFrame, 3);
    for _ in 0..6 {
        match client.get_topic() {
            Ok(topic) => assert_our_topic(topic),
            Err(error) => assert_typed(&error),
        }
    }
    assert_eq!(node.faults_left(), 0);
    assert_eq!(send_each(&client, &node, &mut tag, 3), 3, "recovered");
    assert_our_topic(client.get_topic().unwrap());
    finish(client, node);
}

#[test]
fn tokio_unsolicited_frames_and_bytes_are_never_taken_for_replies() {
    unsolicited_input(Adapter::Tokio);
}

#[test]
fn mio_unsolicited_frames_and_bytes_are_never_taken_for_replies() {
    unsolicited_input(Adapter::Mio);
}

/// A late duplicate of the previous send's reply arrives just before the real reply to the
/// next send on the same link (its request number is the old one, its offset bogus): it
/// must not complete the next send as a success. The link is dropped and that send's
/// outcome is unknown; later sends succeed.
fn stale_duplicate(adapter: Adapter) {
    let node = ScriptedNode::start();
    let client = connect(adapter, &node);
    let mut tag = 0;
    for _ in 0..2 {
        // The first send is answered and leaves a late duplicate behind; the second meets
        // it on the same link and ends unknown (the node did store it).
        node.inject(On::Send, Fault::StaleBeforeNextReply, 1);
        assert_eq!(send_each(&client, &node, &mut tag, 2), 1);
        assert_eq!(node.faults_left(), 0);
    }
    assert_eq!(send_each(&client, &node, &mut tag, 3), 3, "recovered");
    finish(client, node);
}

#[test]
fn tokio_a_late_duplicate_reply_never_completes_the_next_send() {
    stale_duplicate(Adapter::Tokio);
}

#[test]
fn mio_a_late_duplicate_reply_never_completes_the_next_send() {
    stale_duplicate(Adapter::Mio);
}
