//! Three members of one consumer group, each with its own blocking client and thread, read
//! a topic of six partitions led by three nodes, on the embedded cluster, while one primary
//! moves to the next node every 50 ms: each member reads its own partitions from wherever
//! they are led and commits what it read on each partition's primary. Prints what each
//! member read, whether every message was read exactly once, and each client's session
//! moves and lost memberships.
//!
//! ```text
//! cargo run --release -p iggy-route-tests --example mio-group-failover
//! cargo run --release -p iggy-route-tests --example mio-group-failover -- --cluster iggy://iggy:iggy@127.0.0.1:28090,127.0.0.1:28091,127.0.0.1:28092
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use iggy_route_mio::{AutoCommit, Client, ClientError};
use iggy_route_tests::group_example::{
    GROUP, MEMBERS, PARTITIONS, PER_PARTITION, TOPIC, fill, move_primaries, place, report,
};

fn main() -> Result<(), ClientError> {
    // The embedded cluster runs on a runtime of its own; the members block on threads.
    let runtime = tokio::runtime::Runtime::new()?;
    let place = runtime.block_on(async {
        let place = place().await;
        fill(&place).await;
        place
    });
    println!(
        "{}/{TOPIC}: {PARTITIONS} partitions of {PER_PARTITION} messages",
        place.stream
    );
    let mut clients = Vec::new();
    let mut members = Vec::new();
    for _ in 0..MEMBERS {
        let client = Client::from_connection_string(&place.connection_string)?;
        let mut member = client
            .consumer(place.stream.as_str(), TOPIC)?
            .group(GROUP)?
            .batch_length(100)
            .poll_interval(Duration::from_millis(20))
            .auto_commit(AutoCommit::AfterPoll)
            .build()?;
        member.join()?;
        clients.push(client);
        members.push(member);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mover = move_primaries(&place, Arc::clone(&stop));
    let total = (PARTITIONS * PER_PARTITION) as usize;
    let group_read = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for mut member in members {
        let group_read = Arc::clone(&group_read);
        threads.push(std::thread::spawn(move || {
            let mut read = Vec::new();
            let give_up = Instant::now() + Duration::from_secs(60);
            while group_read.load(Ordering::SeqCst) < total && Instant::now() < give_up {
                match member.next_before(Instant::now() + Duration::from_millis(200)) {
                    Some(Ok(received)) => {
                        read.push(received);
                        group_read.fetch_add(1, Ordering::SeqCst);
                    }
                    Some(Err(error)) => eprintln!("{error}"),
                    None => {}
                }
            }
            if let Err(error) = member.shutdown(true) {
                eprintln!("leaving: {error}");
            }
            read
        }));
    }
    let reads: Vec<_> = threads
        .into_iter()
        .map(|thread| thread.join().unwrap_or_default())
        .collect();
    stop.store(true, Ordering::SeqCst);
    let moves = mover.join().unwrap_or(0);
    let once = report(&reads, moves);
    for (index, client) in clients.iter().enumerate() {
        let stats = client.stats();
        println!(
            "client {index}: {} session moves, {} memberships lost",
            stats.session_moves, stats.memberships_lost
        );
        client.shutdown();
    }
    drop(runtime);
    if !once {
        std::process::exit(1);
    }
    Ok(())
}
