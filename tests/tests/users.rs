//! Users, permissions, passwords and personal access tokens through the tokio client
//! against the loopback cluster: a restricted user is refused with the server's code and
//! allowed what it may, a token it creates signs a new client in as that user until it is
//! deleted, and a changed password replaces the old one.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use iggy_route_core::client::ClientError;
use iggy_route_core::partitioning::Partitioning;
use iggy_route_core::wire::{
    ErrorCode, GlobalPermissions, Message, Permissions, StreamPermissions, TokenExpiry, UserStatus,
};
use iggy_route_core::{Config, Credentials, RequestError};
use iggy_route_tests::cluster::TestCluster;
use iggy_route_tokio::Client;

fn config(cluster: &TestCluster, credentials: Credentials) -> Config {
    let seeds: Vec<String> = cluster.addrs().iter().map(ToString::to_string).collect();
    let mut config = Config::new(seeds, credentials);
    config.connect_timeout = Duration::from_millis(300);
    config
}

fn user(name: &str, password: &str) -> Credentials {
    Credentials::user(name, password).unwrap()
}

fn server_code(result: Result<impl std::fmt::Debug, ClientError>) -> ErrorCode {
    match result {
        Err(ClientError::Request(RequestError::Server { code })) => code,
        other => panic!("expected a server error, got {other:?}"),
    }
}

fn message(text: &str) -> Vec<Message> {
    vec![Message {
        payload: text.to_owned().into(),
        ..Message::default()
    }]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restricted_user_a_token_and_a_password_change_end_to_end() {
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(3).await;
    let root = Client::connect(config(&cluster, user("iggy", "iggy")))
        .await
        .unwrap();
    let stream = root.create_stream("orders").await.unwrap();
    root.create_topic("orders", "t", 2).await.unwrap();
    root.create_stream("audit").await.unwrap();

    // Alice may send to and read "orders", nothing else.
    let permissions = Permissions {
        global: GlobalPermissions::default(),
        streams: vec![StreamPermissions {
            stream_id: stream.id,
            send_messages: true,
            read_topics: true,
            ..StreamPermissions::default()
        }],
    };
    let alice = root
        .create_user(
            "alice",
            "alice-pw",
            UserStatus::Active,
            Some(permissions.clone()),
        )
        .await
        .unwrap();
    assert_eq!(alice.id, 1, "the root user is 0");
    assert_eq!(alice.permissions.as_ref(), Some(&permissions));
    let listed = root.get_users().await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|u| u.username.as_str())
            .collect::<Vec<_>>(),
        ["iggy", "alice"]
    );

    let as_alice = Client::connect(config(&cluster, user("alice", "alice-pw")))
        .await
        .unwrap();
    as_alice
        .send("orders", "t", Partitioning::PartitionId(1), message("hi"))
        .await
        .unwrap();
    assert_eq!(
        server_code(as_alice.create_stream("mine").await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        server_code(as_alice.get_users().await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        server_code(as_alice.delete_user("iggy").await),
        ErrorCode::Unauthorized
    );
    let me = as_alice.get_user("alice").await.unwrap().unwrap();
    assert_eq!(me.id, 1);
    assert_eq!(root.get_user(42u32).await.unwrap(), None);

    // A token signs a new client in as alice until it is deleted.
    let token = as_alice
        .create_personal_access_token("ci", TokenExpiry::Never)
        .await
        .unwrap();
    assert_eq!(format!("{token:?}"), "***");
    let tokens = as_alice.get_personal_access_tokens().await.unwrap();
    assert_eq!(tokens.len(), 1);
    assert_eq!(tokens[0].name.as_str(), "ci");
    let by_token = Client::connect(config(
        &cluster,
        Credentials::PersonalAccessToken(token.clone()),
    ))
    .await
    .unwrap();
    by_token
        .send("orders", "t", Partitioning::PartitionId(0), message("pat"))
        .await
        .unwrap();
    assert_eq!(
        server_code(by_token.create_stream("mine").await),
        ErrorCode::Unauthorized
    );
    by_token.shutdown().await;
    as_alice.delete_personal_access_token("ci").await.unwrap();
    assert_eq!(
        server_code(as_alice.delete_personal_access_token("ci").await),
        ErrorCode::ResourceNotFound
    );
    assert!(
        Client::connect(config(&cluster, Credentials::PersonalAccessToken(token)))
            .await
            .is_err()
    );

    // A changed password replaces the old one.
    as_alice
        .change_password("alice", "alice-pw", "alice-pw-2")
        .await
        .unwrap();
    assert!(
        Client::connect(config(&cluster, user("alice", "alice-pw")))
            .await
            .is_err()
    );
    let again = Client::connect(config(&cluster, user("alice", "alice-pw-2")))
        .await
        .unwrap();
    again.shutdown().await;

    // Granted more, alice may create a stream; deleted, she may do nothing.
    let mut granted = permissions;
    granted.global.manage_streams = true;
    root.update_permissions("alice", Some(granted))
        .await
        .unwrap();
    as_alice.create_stream("mine").await.unwrap();
    root.update_user("alice", Some("alicia"), None)
        .await
        .unwrap();
    assert_eq!(
        root.get_user(1u32)
            .await
            .unwrap()
            .unwrap()
            .username
            .as_str(),
        "alicia"
    );
    root.delete_user("alicia").await.unwrap();
    assert_eq!(root.get_user("alicia").await.unwrap(), None);
    assert_eq!(
        server_code(as_alice.create_stream("gone").await),
        ErrorCode::Unauthorized
    );
    // Checked before anything is sent, as the SDK checks it.
    assert!(matches!(
        root.create_user("al", "pw-ok", UserStatus::Active, None)
            .await,
        Err(ClientError::Invalid(_))
    ));

    as_alice.shutdown().await;
    root.shutdown().await;
    cluster.shutdown().await;
}

/// A client that changes its own user's password and name keeps working: its first data
/// links to the other nodes, opened right after the change while those followers have not
/// applied it yet (they refuse the new password for a while, as a real cluster's do), and
/// every link after all are lost, sign in as the user now is, on both adapters. Before,
/// each later sign-in offered the credentials the client was built with and was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_password_and_name_changes_survive_a_reconnect_on_both_adapters() {
    iggy_route_tests::error_events::install();
    let cluster = TestCluster::start(3).await;
    let root = Client::connect(config(&cluster, user("iggy", "iggy")))
        .await
        .unwrap();
    for name in ["tokio-owner", "mio-owner"] {
        let everything = Permissions {
            global: GlobalPermissions::ALL,
            streams: Vec::new(),
        };
        root.create_user(name, "first-pw", UserStatus::Active, Some(everything))
            .await
            .unwrap();
    }
    // One partition per node: the sends after a change open a data link to each.
    let (stream, topic) = cluster.create_stream_and_topic("spread", "t", 3);
    for partition in 0..3 {
        cluster.set_primary(stream, topic, partition, partition as usize);
    }
    let drop_every_link = |cluster: &TestCluster| {
        for node in 0..3 {
            cluster.drop_connections(node);
        }
    };

    let owner = Client::connect(config(&cluster, user("tokio-owner", "first-pw")))
        .await
        .unwrap();
    owner
        .change_password("tokio-owner", "first-pw", "second-pw")
        .await
        .unwrap();
    owner
        .update_user("tokio-owner", Some("tokio-renamed"), None)
        .await
        .unwrap();
    for partition in 0..3 {
        owner
            .send(
                "spread",
                "t",
                Partitioning::PartitionId(partition),
                message("now"),
            )
            .await
            .unwrap();
    }
    drop_every_link(&cluster);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let streams = owner.get_streams().await.unwrap();
    assert_eq!(streams.len(), 1, "the spread stream");
    assert!(
        owner.stats().reconnects > 0,
        "the links came back signed in"
    );
    owner.shutdown().await;

    let mio_config = config(&cluster, user("mio-owner", "first-pw"));
    let mio = tokio::task::spawn_blocking(move || {
        let owner = iggy_route_mio::Client::connect(mio_config).unwrap();
        // By numeric id this time: the router knows its user's id from its sign-in.
        let id = owner.get_user("mio-owner").unwrap().unwrap().id;
        owner.change_password(id, "first-pw", "second-pw").unwrap();
        owner.update_user(id, Some("mio-renamed"), None).unwrap();
        for partition in 0..3 {
            owner
                .send(
                    "spread",
                    "t",
                    Partitioning::PartitionId(partition),
                    message("now"),
                )
                .unwrap();
        }
        owner
    })
    .await
    .unwrap();
    drop_every_link(&cluster);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let reconnects = tokio::task::spawn_blocking(move || {
        assert_eq!(mio.get_streams().unwrap().len(), 1);
        let reconnects = mio.stats().reconnects;
        mio.shutdown();
        reconnects
    })
    .await
    .unwrap();
    assert!(reconnects > 0, "the links came back signed in");
    root.shutdown().await;
}
