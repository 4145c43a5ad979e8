//! A multi-tenant SDK 0.11.0 program, written only against the SDK's traits, that runs on
//! either client: iggy-route's (the default, feature `sdk`) or the SDK's own `IggyClient`
//! (with `--sdk`). Only `build_client` differs between the two.
//!
//! As the administrator it gives each tenant a stream and a writer user allowed to send to
//! and read that stream only. Then one client works as each tenant in turn, by `login_user`
//! at run time: it sends the tenant's orders to the tenant's stream, and checks that the
//! server refuses it the other tenant's stream and the user list (`Unauthorized`). Back as
//! the administrator, it counts what each stream holds and removes the writers. With
//! iggy-route, every request after a login runs as the user logged in as, the sends on their
//! partitions' primaries included.
//!
//! ```text
//! cargo run --release -p iggy-route-tests --bin iggy-route-test-cluster -- --split --port-base 8090
//! cargo run --release -p iggy-route-tokio --features sdk --example tokio-sdk-tenants
//! ```
//!
//! The connection string is the first argument that does not start with `--`, else
//! `IGGY_CONNECTION_STRING`, else `iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092`;
//! its user must be allowed to manage streams and users. The SDK's client takes one node: it
//! is given the first. The server built from the public 0.11.0 source refuses the SDK's
//! `create_topic` (`UnsupportedOptionKey`); run it there with the tenants' topics made
//! beforehand.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use iggy::prelude::{
    Client, GlobalPermissions, Identifier, IggyClientBuilder, IggyError, IggyMessage, Partitioning,
    Permissions, StreamPermissions, TopicCreateOptions, UserStatus,
};
use iggy_route_tokio::IntoIggyError;

const TENANTS: [&str; 2] = ["acme", "globex"];
const TOPIC: &str = "orders";
const ORDERS: u32 = 12;

/// The one place that knows which client runs the program.
async fn build_client(connection_string: &str, sdk: bool) -> Result<Arc<dyn Client>, IggyError> {
    if sdk {
        let client =
            IggyClientBuilder::from_connection_string(&first_node(connection_string))?.build()?;
        client.connect().await?;
        return Ok(Arc::new(client));
    }
    let client = iggy_route_tokio::Client::from_connection_string(connection_string)
        .await
        .map_err(IntoIggyError::into_iggy_error)?;
    Ok(Arc::new(client))
}

#[tokio::main]
async fn main() -> Result<(), IggyError> {
    let sdk = std::env::args().any(|arg| arg == "--sdk");
    let connection_string = connection_string();
    let administrator = credentials(&connection_string)?;
    let client = build_client(&connection_string, sdk).await?;
    let kind = if sdk {
        "the SDK's IggyClient"
    } else {
        "iggy-route"
    };
    println!("running on {kind}");
    let result = run(client.as_ref(), &administrator).await;
    client.shutdown().await?;
    result
}

fn stream_of(tenant: &str) -> String {
    format!("tenant-{tenant}")
}

fn writer_of(tenant: &str) -> (String, String) {
    (format!("{tenant}-writer"), format!("{tenant}-example-pw"))
}

/// The SDK program: nothing here knows which client it holds.
async fn run(
    client: &dyn Client,
    (admin, admin_password): &(String, String),
) -> Result<(), IggyError> {
    let topic = Identifier::from_str(TOPIC)?;
    // As the administrator: a stream and a writer per tenant.
    for tenant in TENANTS {
        let stream = Identifier::from_str(&stream_of(tenant))?;
        let stream_id = match client.get_stream(&stream).await? {
            Some(found) => found.id,
            None => client.create_stream(&stream_of(tenant)).await?.id,
        };
        if client.get_topic(&stream, &topic).await?.is_none() {
            let options = TopicCreateOptions {
                partitions_count: Some(3),
                ..TopicCreateOptions::default()
            };
            client.create_topic(&stream, TOPIC, &options).await?;
        }
        let own_stream_only = Permissions {
            global: GlobalPermissions::default(),
            streams: Some(BTreeMap::from([(
                stream_id as usize,
                StreamPermissions {
                    read_stream: true,
                    send_messages: true,
                    ..StreamPermissions::default()
                },
            )])),
        };
        let (user, password) = writer_of(tenant);
        let user_id = Identifier::from_str(&user)?;
        if client.get_user(&user_id).await?.is_some() {
            client.delete_user(&user_id).await?;
        }
        client
            .create_user(&user, &password, UserStatus::Active, Some(own_stream_only))
            .await?;
    }

    // As each tenant in turn, on the same client.
    for (index, tenant) in TENANTS.iter().enumerate() {
        let (user, password) = writer_of(tenant);
        let identity = client.login_user(&user, &password).await?;
        let own = Identifier::from_str(&stream_of(tenant))?;
        for order in 0..ORDERS {
            let mut messages = vec![
                IggyMessage::builder()
                    .payload(Bytes::from(format!("{tenant} order {order}")))
                    .build()?,
            ];
            let key = Partitioning::messages_key_str(&format!("customer-{}", order % 4))?;
            client
                .send_messages(&own, &topic, &key, &mut messages)
                .await?;
        }
        let other = Identifier::from_str(&stream_of(TENANTS[(index + 1) % TENANTS.len()]))?;
        let mut intruder = vec![IggyMessage::builder().payload(Bytes::from("x")).build()?];
        let refused_send = client
            .send_messages(&other, &topic, &Partitioning::balanced(), &mut intruder)
            .await;
        let refused_list = client.get_users().await;
        expect_unauthorized("a send to the other tenant's stream", &refused_send)?;
        expect_unauthorized("the user list", &refused_list)?;
        println!(
            "as {user} (user {}): {ORDERS} orders sent to {}; the other tenant's stream and the \
             user list refused (Unauthorized)",
            identity.user_id,
            stream_of(tenant)
        );
    }

    // Back as the administrator: what each stream holds, and the writers removed.
    client.login_user(admin, admin_password).await?;
    for tenant in TENANTS {
        let stream = Identifier::from_str(&stream_of(tenant))?;
        let held = client
            .get_topic(&stream, &topic)
            .await?
            .map_or(0, |details| details.messages_count);
        println!("{} holds {held} messages", stream_of(tenant));
        let (user, _) = writer_of(tenant);
        client.delete_user(&Identifier::from_str(&user)?).await?;
    }
    Ok(())
}

fn expect_unauthorized<T>(what: &str, result: &Result<T, IggyError>) -> Result<(), IggyError> {
    match result {
        Err(error) if error.as_code() == IggyError::Unauthorized.as_code() => Ok(()),
        Err(error) => {
            eprintln!("{what}: expected Unauthorized, got {error}");
            Err(IggyError::Error)
        }
        Ok(_) => {
            eprintln!("{what}: expected Unauthorized, and it was allowed");
            Err(IggyError::Error)
        }
    }
}

fn connection_string() -> String {
    std::env::args()
        .skip(1)
        .find(|arg| !arg.starts_with("--"))
        .or_else(|| std::env::var("IGGY_CONNECTION_STRING").ok())
        .unwrap_or_else(|| {
            "iggy://iggy:iggy@127.0.0.1:8090,127.0.0.1:8091,127.0.0.1:8092".to_owned()
        })
}

/// The administrator's username and password, from the connection string's
/// `iggy://user:password@...` (the program logs in as it again after the tenants).
fn credentials(connection_string: &str) -> Result<(String, String), IggyError> {
    let rest = connection_string
        .split_once("://")
        .map_or(connection_string, |(_, rest)| rest);
    let (user_info, _) = rest
        .split_once('@')
        .ok_or(IggyError::InvalidConfiguration)?;
    let (user, password) = user_info
        .split_once(':')
        .ok_or(IggyError::InvalidConfiguration)?;
    Ok((user.to_owned(), password.to_owned()))
}

/// The connection string with its first node only: the SDK's client connects to one.
fn first_node(connection_string: &str) -> String {
    let (head, query) = connection_string
        .split_once('?')
        .map_or((connection_string, None), |(head, query)| {
            (head, Some(query))
        });
    let first = head.split(',').next().unwrap_or(head);
    match query {
        Some(query) => format!("{first}?{query}"),
        None => first.to_owned(),
    }
}
