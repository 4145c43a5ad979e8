//! `iggy-route-test-cluster`'s logic (`iggy_route_tests::try_cluster`), run as the binary
//! runs it: arguments parsed from a command line, the cluster started, its printed
//! connection string read back, and both adapters sending through it. Every send must be
//! admitted by its partition's primary on the split layout, plaintext and TLS, and bad
//! arguments or a taken port must come back as errors, not panics.

#![allow(clippy::unwrap_used)]

use clap::Parser;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::Message;
use iggy_route_core::{NodeId, SendReceipt};
use iggy_route_tests::try_cluster::{Args, ArgsError, Layout, TryCluster};

/// `SendMessages`, as the nodes count it.
const SEND_MESSAGES: u32 = 101;

fn args(line: &[&str]) -> Args {
    let mut full = vec!["iggy-route-test-cluster"];
    full.extend_from_slice(line);
    Args::try_parse_from(full).unwrap()
}

/// A cluster on its own runtime, whose workers serve it while the test thread blocks.
struct Running {
    cluster: Option<TryCluster>,
    runtime: tokio::runtime::Runtime,
}

impl Running {
    fn start(line: &[&str]) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let cluster = runtime.block_on(TryCluster::start(&args(line))).unwrap();
        Self {
            cluster: Some(cluster),
            runtime,
        }
    }

    fn cluster(&self) -> &TryCluster {
        self.cluster.as_ref().unwrap()
    }

    /// The connection string as a user reads it from the binary's output.
    fn printed_connection_string(&self) -> String {
        let printed = self.cluster().describe();
        let line = printed
            .lines()
            .find_map(|line| line.strip_prefix("connection string: "))
            .unwrap_or_else(|| panic!("no connection string in {printed:?}"));
        line.to_owned()
    }

    /// Each node's `SendMessages` count so far.
    fn sends_by_node(&self) -> Vec<u64> {
        let cluster = self.cluster().cluster();
        (0..cluster.node_count())
            .map(|node| cluster.stats(node).requests(SEND_MESSAGES))
            .collect()
    }

    fn connect(&self, adapter: Adapter) -> AnyClient {
        let connection_string = self.printed_connection_string();
        match adapter {
            Adapter::Tokio => {
                let connect = iggy_route_tokio::Client::from_connection_string(&connection_string);
                AnyClient::Tokio(
                    self.runtime.block_on(connect).unwrap(),
                    self.runtime.handle().clone(),
                )
            }
            Adapter::Mio => AnyClient::Mio(
                iggy_route_mio::Client::from_connection_string(&connection_string).unwrap(),
            ),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Shut down before the runtime goes, so no node task is cut off mid-write.
        if let Some(cluster) = self.cluster.take() {
            self.runtime.block_on(cluster.shutdown());
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Adapter {
    Tokio,
    Mio,
}

enum AnyClient {
    Tokio(iggy_route_tokio::Client, tokio::runtime::Handle),
    Mio(iggy_route_mio::Client),
}

impl AnyClient {
    fn send(&self, layout: &Layout, partition: u32, payload: String) -> SendReceipt {
        let (stream, topic) = (layout.stream.as_str(), layout.topic.as_str());
        let messages = vec![Message {
            payload: payload.into(),
            ..Message::default()
        }];
        let to = Partitioning::partition_id(partition);
        match self {
            Self::Tokio(client, runtime) => runtime
                .block_on(client.send(stream, topic, to, messages))
                .unwrap(),
            Self::Mio(client) => client.send(stream, topic, to, messages).unwrap(),
        }
    }

    fn session_moves(&self) -> u64 {
        match self {
            Self::Tokio(client, _) => client.stats().session_moves,
            Self::Mio(client) => client.stats().session_moves,
        }
    }

    fn shutdown(self) {
        match self {
            Self::Tokio(client, runtime) => runtime.block_on(client.shutdown()),
            Self::Mio(client) => client.shutdown(),
        }
    }
}

fn payload(adapter: Adapter, round: u32, partition: u32) -> String {
    format!("{adapter:?} round {round} partition {partition}")
}

/// Both adapters, one after the other, on the cluster `line` starts, each connected with
/// the printed connection string: every receipt names the partition's primary; once the
/// first round has taught the client the routes, the second reaches only the primaries
/// (each node's `SendMessages` count grows by exactly the partitions it leads) and meets no
/// refusal; the session never moves; every payload is stored, in order, in its partition.
fn every_send_lands_on_its_primary(line: &[&str]) {
    let running = Running::start(line);
    let layout = running.cluster().layout().unwrap().clone();
    let partitions = layout.primaries.len() as u32;
    let adapters = [Adapter::Tokio, Adapter::Mio];
    for adapter in adapters {
        let client = running.connect(adapter);
        let mut refusals_before = 0;
        let mut sends_before = Vec::new();
        for round in 0..2 {
            if round == 1 {
                refusals_before = running.cluster().cluster().total_refusals();
                sends_before = running.sends_by_node();
            }
            for partition in 0..partitions {
                let receipt = client.send(&layout, partition, payload(adapter, round, partition));
                assert_eq!(receipt.partition_id, partition, "{adapter:?}");
                assert_eq!(receipt.messages, 1, "{adapter:?}");
                assert_eq!(
                    receipt.node,
                    NodeId(layout.primaries[partition as usize] as u32),
                    "{adapter:?} round {round}: partition {partition} admitted off its primary"
                );
            }
        }
        assert_eq!(
            running.cluster().cluster().total_refusals(),
            refusals_before,
            "{adapter:?}: refused with every route known"
        );
        let sends_after = running.sends_by_node();
        for (node, (before, after)) in sends_before.iter().zip(&sends_after).enumerate() {
            let led = layout.primaries.iter().filter(|&&p| p == node).count() as u64;
            assert_eq!(
                after - before,
                led,
                "{adapter:?}: sends that reached node {node}"
            );
        }
        assert_eq!(client.session_moves(), 0, "{adapter:?}");
        client.shutdown();
    }
    for partition in 0..partitions {
        let stored: Vec<String> = running
            .cluster()
            .cluster()
            .partition_log(layout.stream_id, layout.topic_id, partition)
            .iter()
            .map(|message| String::from_utf8_lossy(&message.payload).into_owned())
            .collect();
        let expected: Vec<String> = adapters
            .iter()
            .flat_map(|&adapter| (0..2).map(move |round| payload(adapter, round, partition)))
            .collect();
        assert_eq!(stored, expected, "partition {partition}");
    }
}

#[test]
fn split_layout_puts_each_partition_on_its_own_node() {
    let running = Running::start(&["--nodes", "3", "--split", "--partitions", "6"]);
    let layout = running.cluster().layout().unwrap();
    assert_eq!(layout.primaries, vec![0, 1, 2, 0, 1, 2]);
    for partition in 0..6 {
        let primary =
            running
                .cluster()
                .cluster()
                .primary(layout.stream_id, layout.topic_id, partition);
        assert_eq!(primary, Some(partition as usize % 3));
    }
    let printed = running.cluster().describe();
    assert!(printed.contains("primary of partitions 1, 4"), "{printed}");
    assert_eq!(
        running
            .printed_connection_string()
            .matches("127.0.0.1:")
            .count(),
        3
    );
}

#[test]
fn both_adapters_send_to_the_split_primaries() {
    every_send_lands_on_its_primary(&["--nodes", "3", "--split"]);
}

#[test]
fn both_adapters_send_to_the_split_primaries_over_tls() {
    every_send_lands_on_its_primary(&["--nodes", "3", "--split", "--tls", "--partitions", "4"]);
}

#[test]
fn both_adapters_send_to_the_split_primaries_with_routing_commands() {
    every_send_lands_on_its_primary(&["--nodes", "2", "--split", "--routing-commands"]);
}

#[test]
fn without_split_every_primary_is_the_leader() {
    every_send_lands_on_its_primary(&["--nodes", "3", "--partitions", "2"]);
}

#[test]
fn an_empty_cluster_has_no_layout_and_takes_a_clients_own_topic() {
    let running = Running::start(&["--nodes", "2", "--empty"]);
    assert!(running.cluster().layout().is_none());
    assert!(running.cluster().describe().contains("no stream or topic"));
    let client =
        iggy_route_mio::Client::from_connection_string(&running.printed_connection_string())
            .unwrap();
    client.create_stream("mine").unwrap();
    client.create_topic("mine", "events", 2).unwrap();
    let receipt = client
        .send(
            "mine",
            "events",
            Partitioning::partition_id(1),
            vec![Message {
                payload: "hello".into(),
                ..Message::default()
            }],
        )
        .unwrap();
    assert_eq!((receipt.partition_id, receipt.base_offset), (1, Some(0)));
    client.shutdown();
}

#[test]
fn arguments_that_describe_no_cluster_are_named() {
    let long_name = "n".repeat(256);
    let cases: [(&[&str], ArgsError); 8] = [
        (&["--nodes", "0"], ArgsError::Nodes(0)),
        (&["--nodes", "6"], ArgsError::Nodes(6)),
        (&["--partitions", "0"], ArgsError::Partitions(0)),
        (&["--partitions", "1001"], ArgsError::Partitions(1001)),
        (&["--nodes", "1", "--split"], ArgsError::SplitOnOneNode),
        (&["--stream", ""], ArgsError::Name(String::new())),
        (&["--topic", &long_name], ArgsError::Name(long_name.clone())),
        (
            &["--nodes", "5", "--port-base", "65532"],
            ArgsError::PortRange {
                base: 65532,
                nodes: 5,
            },
        ),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (line, expected) in cases {
        let parsed = args(line);
        assert_eq!(parsed.validate(), Err(expected.clone()), "{line:?}");
        assert!(!expected.to_string().is_empty());
        // Starting anyway is an error too, not a panic and not a cluster.
        let started = runtime.block_on(TryCluster::start(&parsed));
        let error = started.err().unwrap();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{line:?}");
    }
    // The last port that exists is fine; an empty cluster needs no valid names.
    assert_eq!(
        args(&["--nodes", "5", "--port-base", "65531"]).validate(),
        Ok(())
    );
    assert_eq!(
        args(&["--empty", "--partitions", "0", "--stream", ""]).validate(),
        Ok(())
    );
}

#[test]
fn malformed_command_lines_are_usage_errors() {
    for line in [
        &["--nodes", "three"][..],
        &["--seconds", "0"],
        &["--port-base", "0"],
        &["--port-base", "70000"],
        &["--empty", "--split"],
        &["--partitions", "-1"],
        &["--unknown"],
    ] {
        let mut full = vec!["iggy-route-test-cluster"];
        full.extend_from_slice(line);
        let error = Args::try_parse_from(full).unwrap_err();
        assert_eq!(error.exit_code(), 2, "{line:?}");
    }
}

#[test]
fn a_taken_port_is_an_error_and_frees_what_was_bound() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Hold the port node 1 would need; node 0 takes the port below it if it is free.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let base = port - 1;
    let base_text = base.to_string();
    let started = runtime.block_on(TryCluster::start(&args(&[
        "--nodes",
        "3",
        "--port-base",
        &base_text,
    ])));
    let error = started.err().unwrap();
    assert_eq!(error.kind(), std::io::ErrorKind::AddrInUse, "{error}");
    // Node 0's listener (if it got the port below) was closed with the failed start.
    if error.to_string().contains("node 1") {
        std::net::TcpListener::bind(("127.0.0.1", base)).unwrap();
    }
    drop(taken);
}

#[test]
fn a_given_port_base_is_where_the_nodes_listen() {
    // Ports the OS just handed out and took back are very likely free for a moment.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = probe.local_addr().unwrap().port();
    drop(probe);
    let base_text = base.to_string();
    let running = Running::start(&["--nodes", "1", "--port-base", &base_text]);
    assert_eq!(
        running.printed_connection_string(),
        format!("iggy://iggy:iggy@127.0.0.1:{base}")
    );
}

/// The built binary, run as a user runs it.
fn binary() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_iggy-route-test-cluster"))
}

/// Waits at most `limit` for `child` to exit; kills it past that.
fn wait_bounded(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            panic!("the binary did not exit within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn the_binary_serves_its_printed_connection_string_and_stops_on_time() {
    use std::io::BufRead as _;
    let mut child = binary()
        .args([
            "--nodes",
            "2",
            "--split",
            "--partitions",
            "2",
            "--seconds",
            "5",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut connection_string = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(found) = line.strip_prefix("connection string: ") {
            connection_string = Some(found.to_owned());
        }
        if line.starts_with("running for") {
            break;
        }
    }
    let connection_string = connection_string.unwrap();
    let client = iggy_route_mio::Client::from_connection_string(&connection_string).unwrap();
    for partition in 0..2 {
        let receipt = client
            .send(
                "example-stream",
                "example-topic",
                Partitioning::partition_id(partition),
                vec![Message {
                    payload: "from outside".into(),
                    ..Message::default()
                }],
            )
            .unwrap();
        assert_eq!(receipt.node, NodeId(partition), "partition {partition}");
    }
    client.shutdown();
    let status = wait_bounded(&mut child, std::time::Duration::from_secs(20));
    assert!(status.success(), "{status}");
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert_eq!(rest, vec!["stopped".to_owned()]);
}

#[test]
fn the_binary_exits_with_2_on_bad_arguments() {
    for line in [
        &["--nodes", "1", "--split"][..],
        &["--nodes", "9"],
        &["--partitions", "0"],
        &["--nodes", "3", "--port-base", "65534"],
        &["--seconds", "0"],
        &["--what"],
    ] {
        let mut child = binary()
            .args(line)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let status = wait_bounded(&mut child, std::time::Duration::from_secs(10));
        assert_eq!(status.code(), Some(2), "{line:?}");
        let mut said = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
        assert!(!said.trim().is_empty(), "{line:?}: nothing said");
    }
}
