//! A cached partition count grows old: keyed and balanced sends keep resolving against it
//! while the topic is read again in the background, and a changed count is announced.
#![allow(clippy::unwrap_used, clippy::wildcard_enum_match_arm)]
// A test needs one real instant as the origin of its timeline; every other instant is
// derived from it, and the code under test never reads the clock.
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::Duration;

use iggy_route_core::Event;
use iggy_route_core::partitioning::{Partitioning, resolve_partition};
use iggy_route_core::routing::{Decision, TopicAnswer};
use support::*;

fn keyed(key: &[u8]) -> Partitioning {
    Partitioning::messages_key(key.to_vec()).unwrap()
}

/// Every decision, with the topic reads and partition-count events picked out.
fn decisions(routing: &mut iggy_route_core::routing::Routing) -> (usize, Vec<(u32, u32)>) {
    let (mut reads, mut changes) = (0, Vec::new());
    while let Some(decision) = routing.poll_decision() {
        match decision {
            Decision::FetchTopic { .. } => reads += 1,
            Decision::Event(Event::PartitionsChanged { from, to, .. }) => changes.push((from, to)),
            _ => {}
        }
    }
    (reads, changes)
}

#[test]
fn a_keyed_send_after_another_client_added_partitions_moves_within_the_bound() {
    let t0 = origin();
    let mut routing = warmed(t0, 3, &[(0, 0), (1, 0), (2, 0)]);
    decisions(&mut routing);
    // Young: resolved against the cache, nothing read.
    let at = t0 + Duration::from_millis(500);
    let young = routing.admit(at, send(keyed(b"key-A"))).unwrap();
    assert_eq!(routing.partition_of(young), resolve_partition(b"key-A", 3));
    assert_eq!(decisions(&mut routing), (0, vec![]));
    // Old: still resolved against the cache (no send waits for the read), read again.
    let at = t0 + Duration::from_millis(1_100);
    let old = routing.admit(at, send(keyed(b"key-A"))).unwrap();
    assert_eq!(routing.partition_of(old), resolve_partition(b"key-A", 3));
    assert_eq!(decisions(&mut routing), (1, vec![]));
    // One read in flight at a time.
    routing.admit(at, send(keyed(b"key-B"))).unwrap();
    assert_eq!(decisions(&mut routing), (0, vec![]));
    // Another client made it six: announced, and keys hash over six from now on.
    routing.handle_topic(
        at,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 6,
        },
    );
    assert_eq!(decisions(&mut routing).1, vec![(3, 6)]);
    let moved = routing.admit(at, send(keyed(b"key-A"))).unwrap();
    assert_eq!(routing.partition_of(moved), resolve_partition(b"key-A", 6));
    // An unchanged count is read again a bound later, and not announced.
    let later = at + Duration::from_millis(1_100);
    routing.admit(later, send(keyed(b"key-A"))).unwrap();
    assert_eq!(decisions(&mut routing).0, 1);
    routing.handle_topic(
        later,
        &topic(),
        TopicAnswer::Found {
            partitions_count: 6,
        },
    );
    assert_eq!(decisions(&mut routing).1, vec![]);
}
