//! Raw commands against the real cluster (see `real_cluster.rs` for the environment).

use super::*;

/// Raw commands a user can get wrong: a legacy login code (38, which this server answers
/// by evicting the session) is refused before anything is written, as the SDK refuses it;
/// a `CREATE_STREAM` whose body does not decode fails at once, typed, costs no new link,
/// and the client's sends go on at once. Through each node as the coordinator, with each
/// adapter, on a topic of its own.
#[test]
fn a_request_the_server_evicts_for_fails_at_once_and_sends_go_on() {
    use bytes::Bytes;
    use iggy_route_core::wire::{ErrorCode, code};
    use iggy_route_core::{CommandRequest, Plane, RequestError, SubmitError};
    let Some(cluster) = RealCluster::from_env("evicted_request") else {
        return;
    };
    // A topic of its own, made without bouncing nodes: a restart leaves the server
    // answering `DELETE_SEGMENTS` 58 for a while, which another test of the suite meets
    // when it runs after one.
    let _serial = serial();
    let split = {
        let client = cluster.client(Adapter::Tokio, 0);
        let stream = unique_name("route-raw");
        admin(&client, create_stream(&stream));
        admin(&client, create_topic(&stream, "events", 3));
        client.shutdown();
        Split {
            stream,
            topic: "events".to_owned(),
            partitions: 3,
        }
    };
    for adapter in ADAPTERS {
        for coordinator in 0..cluster.nodes.len() {
            let client = cluster.client(adapter, coordinator);
            for partition in 0..split.partitions {
                let request = send(&split.stream, &split.topic, partition, 0, "learn");
                admitted_by(client.request(request)).unwrap();
            }
            let before = client.stats();
            let legacy = Request::Command(CommandRequest {
                code: code::LOGIN_USER,
                body: Bytes::new(),
                plane: Plane::Session,
            });
            match client.request(legacy) {
                Err(ClientError::Submit(SubmitError::SessionCommand { code })) => {
                    assert_eq!(code, code::LOGIN_USER);
                }
                other => panic!("{adapter:?}: a raw LOGIN_USER must be refused: {other:?}"),
            }
            let bad = Request::Command(CommandRequest {
                code: code::CREATE_STREAM,
                body: Bytes::from_static(&[200]),
                plane: Plane::MetadataWrite,
            });
            let started = Instant::now();
            let outcome = client.request(bad);
            let answered_in = started.elapsed();
            println!(
                "{adapter:?} via node {coordinator}: undecodable CREATE_STREAM -> {outcome:?} in {answered_in:?}"
            );
            // This server decodes the body before consensus and refuses it typed (the
            // model learned it): no eviction, no new link.
            match outcome {
                Err(ClientError::Request(RequestError::Server { code })) => {
                    assert_eq!(code, ErrorCode::InvalidCommand, "{adapter:?}");
                }
                other => panic!("{adapter:?}: expected InvalidCommand, got {other:?}"),
            }
            let resumed = Instant::now();
            for partition in 0..split.partitions {
                let request = send(&split.stream, &split.topic, partition, 0, "after");
                admitted_by(client.request(request)).unwrap();
            }
            println!(
                "{adapter:?} via node {coordinator}: {} sends after it in {:?}",
                split.partitions,
                resumed.elapsed()
            );
            let after = client.stats();
            assert!(
                after.reconnects <= before.reconnects + 1,
                "{adapter:?}: {} reconnects after the eviction",
                after.reconnects - before.reconnects
            );
            assert_eq!(after.session_moves, before.session_moves);
            assert_eq!(after.refusals, before.refusals, "{adapter:?}");
            client.shutdown();
        }
    }
}
