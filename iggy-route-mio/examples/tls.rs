//! Connects over TLS, verifying every node against the CA the connection string names,
//! sends one message to each partition and prints the node that admitted it. First it
//! shows what a client that does not trust that CA gets: a typed `TlsError`, at connect.
//!
//! Against the test cluster serving TLS (it makes a CA at start and prints a connection
//! string with `tls=true&tls_domain=localhost&tls_ca_file=...`):
//!
//! ```text
//! cargo run --release -p iggy-route-tests --bin iggy-route-test-cluster -- --split --tls
//! cargo run -p iggy-route-mio --example mio-tls -- '<the connection string it printed>'
//! ```
//!
//! The connection string is the first argument, else `IGGY_CONNECTION_STRING`.

use std::process::ExitCode;

use iggy_route_mio::{Client, ClientError, Message, Partitioning};

const STREAM: &str = "example-stream";
const TOPIC: &str = "example-topic";
const PARTITIONS: u32 = 3;

fn main() -> ExitCode {
    let Some(connection_string) = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("IGGY_CONNECTION_STRING").ok())
    else {
        eprintln!("give the TLS cluster's connection string as the first argument");
        return ExitCode::from(2);
    };
    if !connection_string.contains("tls=true") {
        eprintln!("not a TLS connection string: start the test cluster with --tls");
        return ExitCode::from(2);
    }
    match run(&connection_string) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

fn run(connection_string: &str) -> Result<(), ClientError> {
    // Without `tls_ca_file` the client trusts the bundled web PKI roots only, which did
    // not sign the cluster's certificate: the connect fails at once, saying why.
    let untrusting = without_option(connection_string, "tls_ca_file");
    match Client::from_connection_string(&untrusting) {
        Err(ClientError::Tls(error)) => println!("without the cluster's CA: {error}"),
        Err(other) => println!("without the cluster's CA, another failure: {other}"),
        Ok(client) => {
            println!("without the cluster's CA: connected (it has a public certificate)");
            client.shutdown();
        }
    }

    let client = Client::from_connection_string(connection_string)?;
    if client.get_stream(STREAM)?.is_none() {
        client.create_stream(STREAM)?;
    }
    if client.get_topic(STREAM, TOPIC)?.is_none() {
        client.create_topic(STREAM, TOPIC, PARTITIONS)?;
    }
    let partitions = client
        .get_topic(STREAM, TOPIC)?
        .map_or(PARTITIONS, |topic| topic.summary.partitions_count);
    for partition in 0..partitions {
        let message = Message {
            payload: format!("over TLS to partition {partition}").into(),
            ..Message::default()
        };
        let receipt = client.send(
            STREAM,
            TOPIC,
            Partitioning::partition_id(partition),
            vec![message],
        )?;
        println!(
            "partition {partition}: offset {:?}, admitted by {} over TLS",
            receipt.base_offset, receipt.node
        );
    }
    let stats = client.stats();
    println!(
        "refusals {}, session moves {}",
        stats.refusals, stats.session_moves
    );
    client.shutdown();
    Ok(())
}

/// `connection_string` without the query option `name`.
fn without_option(connection_string: &str, name: &str) -> String {
    let Some((base, query)) = connection_string.split_once('?') else {
        return connection_string.to_owned();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|option| option.split('=').next() != Some(name))
        .collect();
    if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}
