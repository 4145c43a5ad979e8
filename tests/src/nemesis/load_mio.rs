//! The nemesis load through the blocking adapter (`iggy_route_mio`): see `load.rs`. Every
//! task is a thread.

use std::collections::HashMap;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use iggy_route_core::client::ClientError;
use iggy_route_core::client::consumer::{ConsumerState, Step};
use iggy_route_core::{Config, Stats};
use iggy_route_mio::producer::{Background, DeliveryQueue};
use iggy_route_mio::{BackgroundConfig, Client, Producer};

use super::ledger::{Ended, Ids, Kind, SendCall, messages};
use super::load::{
    BULK, BULK_PACE, ConsumerBook, DIRECT_BOUND, Load, PLAIN_PACE, SINGLE_PACE, background_bound,
    draw_plain, partitioning,
};
use crate::scripted::clients::Adapter;
use crate::sim::rng::SimRng;

/// Plain consumer id of the blocking adapter.
const CONSUMER_ID: u32 = 102;

/// The blocking half of the load, running.
#[derive(Debug)]
pub struct MioLoad {
    main: Client,
    members: Vec<Client>,
    threads: Vec<(String, JoinHandle<()>)>,
}

/// Starts the blocking load: its main client's session on `coordinator`, its members' on
/// the nodes `member_nodes` names.
pub fn start(
    load: &Load,
    config: &dyn Fn(usize) -> Config,
    coordinator: usize,
    member_nodes: &[usize],
) -> Result<MioLoad, String> {
    let connect = |node: usize| {
        Client::connect(config(node)).map_err(|error| format!("mio client on node {node}: {error}"))
    };
    let main = connect(coordinator)?;
    let members = member_nodes
        .iter()
        .map(|&node| connect(node))
        .collect::<Result<Vec<_>, _>>()?;
    let mut threads = Vec::new();
    let mut spawn = |name: String, work: Box<dyn FnOnce() + Send>| -> Result<(), String> {
        let handle = std::thread::Builder::new()
            .name(name.clone())
            .spawn(work)
            .map_err(|error| format!("spawn {name}: {error}"))?;
        threads.push((name, handle));
        Ok(())
    };
    for worker in 0..2u64 {
        let name = format!("mio plain {worker}");
        let ids = load.ledger.source(&name, Adapter::Mio);
        let (load, client, rng) = (load.clone(), main.clone(), load.rng(100 + worker));
        spawn(name, Box::new(move || plain(&load, &client, ids, rng)))?;
    }
    let bulk_key = format!("bulk-mio-{}", load.seed % 1000);
    for (name, batch, kind, pace) in [
        ("mio background x1", 1, Kind::Balanced, SINGLE_PACE),
        ("mio background x100", BULK, Kind::Key(bulk_key), BULK_PACE),
    ] {
        let partitioning = partitioning(&kind)?;
        let producer = main
            .producer(load.stream.as_str(), load.topic.as_str())
            .and_then(|builder| {
                builder
                    .partitioning(partitioning)
                    .batch_length(batch)
                    .background(BackgroundConfig::default())
                    .build()
            })
            .map_err(|error| format!("{name}: {error}"))?;
        let ids = load.ledger.source(name, Adapter::Mio);
        let load = load.clone();
        let work = move || background(&load, &producer, ids, (kind, batch, pace));
        spawn(name.to_owned(), Box::new(work))?;
    }
    let (consumer_load, consumer_client) = (load.clone(), main.clone());
    spawn(
        "mio plain consumer".to_owned(),
        Box::new(move || plain_consumer(&consumer_load, &consumer_client)),
    )?;
    for (index, client) in members.iter().enumerate() {
        let name = format!("mio member {index}");
        let (load, client, book_name) = (load.clone(), client.clone(), name.clone());
        spawn(name, Box::new(move || member(&load, &client, &book_name)))?;
    }
    Ok(MioLoad {
        main,
        members,
        threads,
    })
}

impl MioLoad {
    /// Each client's counters, by name.
    pub fn stats(&self) -> Vec<(String, Stats)> {
        let mut stats = vec![("mio main".to_owned(), self.main.stats())];
        for (index, member) in self.members.iter().enumerate() {
            stats.push((format!("mio member {index}"), member.stats()));
        }
        stats
    }

    /// Waits for every thread to end (the stop flag is set), then shuts the clients down.
    /// Returns the threads that did not end within `limit` (each one a hang), and each
    /// client's counters once its load ended.
    pub fn finish(mut self, limit: Duration) -> (Vec<String>, Vec<(String, Stats)>) {
        let deadline = Instant::now() + limit;
        let mut problems = Vec::new();
        for (name, handle) in std::mem::take(&mut self.threads) {
            while !handle.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if handle.is_finished() {
                if handle.join().is_err() {
                    problems.push(format!("{name} panicked"));
                }
            } else {
                problems.push(format!("{name} did not end within {limit:?}"));
            }
        }
        let stats = self.stats();
        self.main.shutdown();
        for member in &self.members {
            member.shutdown();
        }
        (problems, stats)
    }
}

fn plain(load: &Load, client: &Client, mut ids: Ids, mut rng: SimRng) {
    while !load.stopping() {
        let (kind, partitioning, count) = draw_plain(&mut rng, load.partitions);
        let (first, seq) = ids.take(count);
        let started = load.ledger.now();
        let sent = client.send(
            load.stream.as_str(),
            load.topic.as_str(),
            partitioning,
            messages(first, count),
        );
        load.ledger.send(SendCall {
            source: ids.source,
            seq,
            kind,
            first_id: first,
            count,
            started,
            ended_at: load.ledger.now(),
            bound: DIRECT_BOUND,
            ended: Ended::of(sent.as_ref()),
        });
        std::thread::sleep(PLAIN_PACE);
    }
}

/// Calls of `count` messages every `pace`; their outcomes come back on one queue, read
/// while the next call waits, so each is recorded when it settles.
fn background(
    load: &Load,
    producer: &Producer<Background>,
    mut ids: Ids,
    (kind, count, pace): (Kind, u32, Duration),
) {
    let mut queue = DeliveryQueue::new();
    let reports = queue.sender();
    let mut pending: HashMap<u64, SendCall> = HashMap::new();
    let settle = |pending: &mut HashMap<u64, SendCall>, tag: u64, ended: Ended| {
        if let Some(call) = pending.remove(&tag) {
            load.ledger.send(SendCall {
                ended_at: load.ledger.now(),
                ended,
                ..call
            });
        }
    };
    while !load.stopping() {
        let (first, seq) = ids.take(count);
        let started = load.ledger.now();
        let bound = background_bound(pending.len());
        pending.insert(
            seq,
            SendCall {
                source: ids.source,
                seq,
                kind: kind.clone(),
                first_id: first,
                count,
                started,
                ended_at: started,
                bound,
                ended: Ended::Failed(String::new()),
            },
        );
        if let Err(error) = producer.send_tagged(messages(first, count), seq, &reports) {
            settle(&mut pending, seq, Ended::error(&error));
        }
        let next = Instant::now() + pace;
        while let Some(left) = next.checked_duration_since(Instant::now()) {
            if let Some(delivered) = queue.recv_timeout(left) {
                let outcome = delivered.outcome.as_ref().map_err(|failure| &failure.error);
                settle(&mut pending, delivered.tag, Ended::of(outcome));
            } else if queue.pending() == 0 {
                std::thread::sleep(left);
            }
        }
    }
    // Every call settles: the shutdown flushes what is buffered.
    let _ = producer.shutdown();
    while let Some(delivered) = queue.recv() {
        let outcome = delivered.outcome.as_ref().map_err(|failure| &failure.error);
        settle(&mut pending, delivered.tag, Ended::of(outcome));
    }
    for tag in pending.keys().copied().collect::<Vec<_>>() {
        settle(&mut pending, tag, Ended::Failed("never settled".to_owned()));
    }
}

fn plain_consumer(load: &Load, client: &Client) {
    let mut book = ConsumerBook::new(&load.ledger, "mio plain consumer", Adapter::Mio, false);
    let built = client
        .consumer(load.stream.as_str(), load.topic.as_str())
        .and_then(|builder| builder.consumer_id(CONSUMER_ID))
        .and_then(|builder| builder.build());
    let mut consumer = match built {
        Ok(consumer) => consumer,
        Err(error) => {
            book.failed(&format!("build: {error}"));
            return;
        }
    };
    while !load.stopping() {
        match consumer.next_before(Instant::now() + Duration::from_millis(200)) {
            Some(Ok(received)) => book.handed(0, &received),
            Some(Err(error)) => book.failed(&error.to_string()),
            None => {}
        }
    }
}

fn member(load: &Load, client: &Client, name: &str) {
    let mut book = ConsumerBook::new(&load.ledger, name, Adapter::Mio, true);
    let config = match load.member_config() {
        Ok(config) => config,
        Err(error) => {
            book.failed(&format!("config: {error}"));
            return;
        }
    };
    let mut state = ConsumerState::new(config);
    let mut leaving: Option<Instant> = None;
    loop {
        while let Some(received) = state.next_message(Instant::now()) {
            book.handed(state.stats().joins, &received);
        }
        if load.stopping() && leaving.is_none() {
            state.request_commit();
            leaving = Some(Instant::now() + DIRECT_BOUND);
        }
        if let Some(until) = leaving
            && (!state.commit_requested() || Instant::now() > until)
        {
            break;
        }
        match state.next_step(Instant::now()) {
            Step::Submit(request) => {
                let submitted = book.submitting(&request);
                let answer = client.request(request);
                book.answered(submitted, &answer);
                if matches!(answer, Err(ClientError::Closed)) {
                    return;
                }
                // An error here was counted with its request; the state goes on.
                let _ = state.answer(Instant::now(), answer);
            }
            Step::Wait(until) => {
                let until = until.min(Instant::now() + Duration::from_millis(100));
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
            }
        }
    }
    if let Some(call) = state.leave_call() {
        let submitted = book.submitting(&call.request);
        let answer = client.request(call.request);
        book.answered(submitted, &answer);
        if answer.and_then(|reply| call.reply.extract(reply)).is_ok() {
            state.left();
        }
    }
}
