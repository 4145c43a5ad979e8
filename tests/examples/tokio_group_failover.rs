//! Three members of one consumer group, each with its own async client, read a topic of six
//! partitions led by three nodes, on the embedded cluster, while one primary moves to the
//! next node every 50 ms: each member reads its own partitions from wherever they are led
//! and commits what it read on each partition's primary. Prints what each member read,
//! whether every message was read exactly once, and each client's session moves and lost
//! memberships.
//!
//! ```text
//! cargo run --release -p iggy-route-tests --example tokio-group-failover
//! cargo run --release -p iggy-route-tests --example tokio-group-failover -- --cluster iggy://iggy:iggy@127.0.0.1:28090,127.0.0.1:28091,127.0.0.1:28092
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use iggy_route_tests::group_example::{
    GROUP, MEMBERS, PARTITIONS, PER_PARTITION, TOPIC, fill, move_primaries, place, report,
};
use iggy_route_tokio::{AutoCommit, Client, ClientError};

#[tokio::main]
async fn main() -> Result<(), ClientError> {
    let place = place().await;
    fill(&place).await;
    println!(
        "{}/{TOPIC}: {PARTITIONS} partitions of {PER_PARTITION} messages",
        place.stream
    );
    // Every member joins before any reads, so the partitions are shared out once.
    let mut clients = Vec::new();
    let mut members = Vec::new();
    for _ in 0..MEMBERS {
        let client = Client::from_connection_string(&place.connection_string).await?;
        let mut member = client
            .consumer(place.stream.as_str(), TOPIC)?
            .group(GROUP)?
            .batch_length(100)
            .poll_interval(Duration::from_millis(20))
            .auto_commit(AutoCommit::AfterPoll)
            .build()?;
        member.join().await?;
        clients.push(client);
        members.push(member);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mover = move_primaries(&place, Arc::clone(&stop));
    let total = (PARTITIONS * PER_PARTITION) as usize;
    let group_read = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for mut member in members {
        let group_read = Arc::clone(&group_read);
        tasks.push(tokio::spawn(async move {
            let mut read = Vec::new();
            let give_up = tokio::time::Instant::now() + Duration::from_secs(60);
            while group_read.load(Ordering::SeqCst) < total && tokio::time::Instant::now() < give_up
            {
                let wait = tokio::time::timeout(Duration::from_millis(200), member.next()).await;
                match wait {
                    Ok(Some(Ok(received))) => {
                        read.push(received);
                        group_read.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(Some(Err(error))) => eprintln!("{error}"),
                    Ok(None) => break,
                    Err(_) => {}
                }
            }
            if let Err(error) = member.shutdown(true).await {
                eprintln!("leaving: {error}");
            }
            read
        }));
    }
    let mut reads = Vec::new();
    for task in tasks {
        reads.push(task.await.unwrap_or_default());
    }
    stop.store(true, Ordering::SeqCst);
    let moves = mover.join().unwrap_or(0);
    let once = report(&reads, moves);
    for (index, client) in clients.iter().enumerate() {
        let stats = client.stats();
        println!(
            "client {index}: {} session moves, {} memberships lost",
            stats.session_moves, stats.memberships_lost
        );
        client.shutdown().await;
    }
    if !once {
        std::process::exit(1);
    }
    Ok(())
}
