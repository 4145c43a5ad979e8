//! The coordinator's node killed while the adapters send: one session move, and nothing
//! acknowledged lost.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use iggy_route_core::Reply;
use iggy_route_core::client::ClientError;
use iggy_route_tests::real_cluster::{
    ELECTION_WAIT, REJOIN_WAIT, RealCluster, admitted_by, read_all, send,
};
use iggy_route_tests::scripted::clients::Adapter;

use super::{ADAPTERS, fresh_id, serial, split};

/// The coordinator's node (node 0) is killed while three threads send: the session moves
/// once, sends resume once the cluster has elected, and nothing acknowledged is lost. Each
/// adapter gets a topic split afresh, so that the node it kills leads partitions under its
/// load (the receipts say so, by the server's replica id), as the first adapter's does.
#[test]
fn under_load() {
    let Some(cluster) = RealCluster::with_ctl_from_env("coordinator_killed_under_load") else {
        return;
    };
    let mut fixture = serial();
    for adapter in ADAPTERS {
        // Node 0's death moves primaries: a split made before it no longer has any there.
        *fixture = None;
        let split = split(&cluster, &mut fixture);
        let client = cluster.client(adapter, 0);
        let mut on_the_victim = 0;
        for partition in 0..split.partitions {
            let request = send(&split.stream, &split.topic, partition, fresh_id(), "before");
            if let Ok(Reply::Sent(receipt)) = client.request(request) {
                on_the_victim += u32::from(receipt.replica == Some(0));
            }
        }
        assert!(
            on_the_victim > 0,
            "{adapter:?}: the node to kill leads no partition"
        );
        let load_for = Duration::from_secs(2) + ELECTION_WAIT + Duration::from_secs(10);
        let outcomes = Mutex::new(Outcomes::default());
        std::thread::scope(|scope| {
            for worker in 0..3u32 {
                let (client, split, outcomes) = (&client, &split, &outcomes);
                scope.spawn(move || {
                    let started = Instant::now();
                    let mut partition = worker;
                    while started.elapsed() < load_for {
                        partition = (partition + 1) % split.partitions;
                        let id = fresh_id();
                        let request = send(&split.stream, &split.topic, partition, id, "load");
                        let result = admitted_by(client.request(request));
                        let at = started.elapsed();
                        outcomes.lock().unwrap().record(partition, id, at, result);
                    }
                });
            }
            std::thread::sleep(Duration::from_secs(2));
            cluster.ctl("kill", 0);
        });
        cluster.ctl("start", 0);
        let stats = client.stats();
        let outcomes = outcomes.into_inner().unwrap();
        println!(
            "{adapter:?}: {} acknowledged, {} unknown, {} failed; last failure at {:?}; \
             {} session moves, {} refusals",
            outcomes.acknowledged.len(),
            outcomes.unknown,
            outcomes.failed,
            outcomes.last_failure,
            stats.session_moves,
            stats.refusals
        );
        assert_eq!(stats.session_moves, 1, "{adapter:?}");
        assert!(
            outcomes.last_ok > outcomes.last_failure.unwrap_or_default(),
            "{adapter:?}: sends resumed after the election"
        );
        client.shutdown();
        std::thread::sleep(REJOIN_WAIT);
        println!("{adapter:?}: {on_the_victim} partitions were led by the killed node");
        let reader = cluster.client(Adapter::Tokio, 2);
        for partition in 0..split.partitions {
            let stored: BTreeSet<u128> = read_all(&reader, &split.stream, &split.topic, partition)
                .into_iter()
                .collect();
            let lost: Vec<u128> = outcomes
                .acknowledged
                .iter()
                .filter(|(p, id)| *p == partition && !stored.contains(id))
                .map(|(_, id)| *id)
                .collect();
            assert!(
                lost.is_empty(),
                "{adapter:?} partition {partition} lost {lost:?}"
            );
        }
        reader.shutdown();
    }
    *fixture = None;
}

#[derive(Debug, Default)]
struct Outcomes {
    acknowledged: Vec<(u32, u128)>,
    unknown: u64,
    failed: u64,
    last_ok: Duration,
    last_failure: Option<Duration>,
}

impl Outcomes {
    fn record(&mut self, partition: u32, id: u128, at: Duration, result: Result<u32, ClientError>) {
        match result {
            Ok(_) => {
                self.acknowledged.push((partition, id));
                self.last_ok = self.last_ok.max(at);
            }
            Err(error) => {
                if matches!(
                    error,
                    ClientError::Request(iggy_route_core::RequestError::OutcomeUnknown { .. })
                ) {
                    self.unknown += 1;
                } else {
                    self.failed += 1;
                }
                self.last_failure = Some(self.last_failure.unwrap_or_default().max(at));
            }
        }
    }
}
