//! The nemesis load through the async adapter (`iggy_route_tokio`): see `load.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use iggy_route_core::client::ClientError;
use iggy_route_core::client::consumer::{ConsumerState, Step};
use iggy_route_core::{Config, Stats};
use iggy_route_tokio::producer::Background;
use iggy_route_tokio::{BackgroundConfig, Client, Producer};
use tokio::runtime::Runtime;
use tokio::task::{JoinHandle, JoinSet};

use super::ledger::{Ended, Ids, Kind, SendCall, messages};
use super::load::{
    BULK, BULK_PACE, ConsumerBook, DIRECT_BOUND, Load, PLAIN_PACE, SINGLE_PACE, background_bound,
    draw_plain, partitioning,
};
use crate::scripted::clients::Adapter;
use crate::sim::rng::SimRng;

/// Plain consumer id of the async adapter.
const CONSUMER_ID: u32 = 101;

/// The async half of the load, running.
#[derive(Debug)]
pub struct TokioLoad {
    runtime: Runtime,
    /// The client of the senders, the producers and the plain consumer.
    main: Client,
    /// One client per group member.
    members: Vec<Client>,
    /// Senders and producers: they end when the load stops.
    senders: Vec<JoinHandle<()>>,
    /// The plain consumer: it ends when the main client shuts down.
    consumer: Option<JoinHandle<()>>,
    /// Group members: they commit and leave when the load stops.
    member_tasks: Vec<JoinHandle<()>>,
}

/// Starts the async load: its main client's session on `coordinator`, its members' on the
/// nodes `member_nodes` names. `config` makes a client's configuration for a node.
pub fn start(
    load: &Load,
    config: &dyn Fn(usize) -> Config,
    coordinator: usize,
    member_nodes: &[usize],
) -> Result<TokioLoad, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| format!("tokio runtime: {error}"))?;
    let connect = |node: usize| {
        runtime
            .block_on(Client::connect(config(node)))
            .map_err(|error| format!("tokio client on node {node}: {error}"))
    };
    let main = connect(coordinator)?;
    let members = member_nodes
        .iter()
        .map(|&node| connect(node))
        .collect::<Result<Vec<_>, _>>()?;
    let mut senders = Vec::new();
    for worker in 0..2u64 {
        let ids = load
            .ledger
            .source(&format!("tokio plain {worker}"), Adapter::Tokio);
        let task = plain(load.clone(), main.clone(), ids, load.rng(worker));
        senders.push(runtime.spawn(task));
    }
    let _guard = runtime.enter();
    let bulk_key = format!("bulk-tokio-{}", load.seed % 1000);
    for (name, batch, kind, pace) in [
        ("tokio background x1", 1, Kind::Balanced, SINGLE_PACE),
        (
            "tokio background x100",
            BULK,
            Kind::Key(bulk_key),
            BULK_PACE,
        ),
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
        let ids = load.ledger.source(name, Adapter::Tokio);
        let task = background(load.clone(), producer, ids, (kind, batch, pace));
        senders.push(runtime.spawn(task));
    }
    let consumer = runtime.spawn(plain_consumer(load.clone(), main.clone()));
    let member_tasks = members
        .iter()
        .enumerate()
        .map(|(index, client)| {
            let name = format!("tokio member {index}");
            runtime.spawn(member(load.clone(), client.clone(), name))
        })
        .collect();
    Ok(TokioLoad {
        runtime,
        main,
        members,
        senders,
        consumer: Some(consumer),
        member_tasks,
    })
}

impl TokioLoad {
    /// Each client's counters, by name.
    pub fn stats(&self) -> Vec<(String, Stats)> {
        let mut stats = vec![("tokio main".to_owned(), self.main.stats())];
        for (index, member) in self.members.iter().enumerate() {
            stats.push((format!("tokio member {index}"), member.stats()));
        }
        stats
    }

    /// The main client's session moves so far.
    pub fn main_session_moves(&self) -> u64 {
        self.main.stats().session_moves
    }

    /// Waits for the load to end (the stop flag is set), then shuts the clients down.
    /// Returns what did not end within `limit` (each one a hang), and each client's
    /// counters once its load ended.
    pub fn finish(mut self, limit: Duration) -> (Vec<String>, Vec<(String, Stats)>) {
        let mut problems = Vec::new();
        let mut stats = Vec::new();
        let deadline = tokio::time::Instant::now() + limit;
        let senders = std::mem::take(&mut self.senders);
        let members = std::mem::take(&mut self.member_tasks);
        let consumer = self.consumer.take();
        self.runtime.block_on(async {
            for (what, tasks) in [("a sender", senders), ("a group member", members)] {
                for task in tasks {
                    if tokio::time::timeout_at(deadline, task).await.is_err() {
                        problems.push(format!("tokio: {what} did not end within {limit:?}"));
                    }
                }
            }
            // The plain consumer waits for a message until its client is shut down.
            stats = self.stats();
            self.main.shutdown().await;
            if let Some(consumer) = consumer
                && tokio::time::timeout_at(deadline, consumer).await.is_err()
            {
                problems.push("tokio: the plain consumer did not end".to_owned());
            }
            for member in &self.members {
                member.shutdown().await;
            }
        });
        (problems, stats)
    }
}

async fn plain(load: Load, client: Client, mut ids: Ids, mut rng: SimRng) {
    while !load.stopping() {
        let (kind, partitioning, count) = draw_plain(&mut rng, load.partitions);
        let (first, seq) = ids.take(count);
        let started = load.ledger.now();
        let sent = client
            .send(
                load.stream.as_str(),
                load.topic.as_str(),
                partitioning,
                messages(first, count),
            )
            .await;
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
        tokio::time::sleep(PLAIN_PACE).await;
    }
}

async fn background(
    load: Load,
    producer: Producer<Background>,
    mut ids: Ids,
    (kind, count, pace): (Kind, u32, Duration),
) {
    let mut settling = JoinSet::new();
    while !load.stopping() {
        while settling.try_join_next().is_some() {}
        let (first, seq) = ids.take(count);
        let started = load.ledger.now();
        let call = SendCall {
            source: ids.source,
            seq,
            kind: kind.clone(),
            first_id: first,
            count,
            started,
            ended_at: started,
            bound: background_bound(settling.len()),
            ended: Ended::Failed(String::new()),
        };
        match producer.send(messages(first, count)).await {
            Ok(delivery) => {
                let ledger = Arc::clone(&load.ledger);
                settling.spawn(async move {
                    let outcome = delivery.await;
                    ledger.send(SendCall {
                        ended_at: ledger.now(),
                        ended: Ended::of(outcome.as_ref().map_err(|failure| &failure.error)),
                        ..call
                    });
                });
            }
            Err(error) => load.ledger.send(SendCall {
                ended_at: load.ledger.now(),
                ended: Ended::error(&error),
                ..call
            }),
        }
        tokio::time::sleep(pace).await;
    }
    // Every call settles: the shutdown flushes what is buffered.
    let _ = producer.shutdown().await;
    while settling.join_next().await.is_some() {}
}

async fn plain_consumer(load: Load, client: Client) {
    let mut book = ConsumerBook::new(&load.ledger, "tokio plain consumer", Adapter::Tokio, false);
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
    while let Some(next) = consumer.next().await {
        match next {
            Ok(received) => book.handed(0, &received),
            Err(error) => book.failed(&error.to_string()),
        }
    }
}

async fn member(load: Load, client: Client, name: String) {
    let mut book = ConsumerBook::new(&load.ledger, &name, Adapter::Tokio, true);
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
                let answer = client.request(request).await;
                book.answered(submitted, &answer);
                if matches!(answer, Err(ClientError::Closed)) {
                    return;
                }
                // An error here was counted with its request; the state goes on.
                let _ = state.answer(Instant::now(), answer);
            }
            Step::Wait(until) => {
                let until = until.min(Instant::now() + Duration::from_millis(100));
                tokio::time::sleep_until(until.into()).await;
            }
        }
    }
    if let Some(call) = state.leave_call() {
        let submitted = book.submitting(&call.request);
        let answer = client.request(call.request).await;
        book.answered(submitted, &answer);
        if answer.and_then(|reply| call.reply.extract(reply)).is_ok() {
            state.left();
        }
    }
}
