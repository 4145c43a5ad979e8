//! Accounts on the real server. A client that changes its own user's password and name
//! opens its data links afterwards (to every node: the split topic's primaries) signed in
//! as the user now is, on both adapters. Through the SDK's traits, a login as another user
//! runs every later request as that user, and a login back returns to the first one.

use std::time::{Duration, Instant};

use iggy::prelude::IggyError;
use iggy_route_core::Credentials;
use iggy_route_core::client::Call;
use iggy_route_core::wire::{GlobalPermissions, Permissions, UserStatus};
use iggy_route_tests::real_cluster::{RealCluster, admin, admitted_by, send, unique_name};
use iggy_route_tests::scripted::clients::{Adapter, TestClient};

use super::{ADAPTERS, DAY_RUNTIME, serial, split};

fn every_permission() -> Option<Permissions> {
    Some(Permissions {
        global: GlobalPermissions::ALL,
        streams: Vec::new(),
    })
}

/// One send to each partition of the split topic; the nodes that admitted them.
fn send_everywhere(client: &TestClient, stream: &str, topic: &str, partitions: u32) -> Vec<u32> {
    (0..partitions)
        .map(|partition| {
            let reply = client.request(send(stream, topic, partition, 0, "after a change"));
            admitted_by(reply).unwrap_or_else(|error| panic!("partition {partition}: {error}"))
        })
        .collect()
}

/// A client signed in as a user just made: a follower may not have applied the user yet
/// and refuses the sign-in until it has.
fn connect_when_known(adapter: Adapter, config: &iggy_route_core::Config) -> TestClient {
    let by = Instant::now() + Duration::from_secs(10);
    loop {
        match TestClient::connect(adapter, config.clone()) {
            Ok(client) => return client,
            Err(error) if Instant::now() < by => {
                println!("accounts: not known yet ({error}); again");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(error) => panic!("the new user never signed in: {error}"),
        }
    }
}

#[test]
fn own_password_and_name_changes_and_a_login_as_another_user() {
    let Some(cluster) = RealCluster::from_env("user_accounts") else {
        return;
    };
    let mut fixture = serial();
    let split = split(&cluster, &mut fixture);
    let root = cluster.client(Adapter::Tokio, 0);
    for adapter in ADAPTERS {
        let name = unique_name("owner");
        let call = Call::create_user(&name, "first-pw", UserStatus::Active, every_permission());
        admin(&root, call.unwrap().request);
        // A client with only its session link: every data link opens after the changes.
        let mut config = cluster.config(0);
        config.credentials = Credentials::user(name.as_str(), "first-pw").unwrap();
        let owner = connect_when_known(adapter, &config);
        let change = Call::change_password(name.as_str(), "first-pw", "second-pw").unwrap();
        admin(&owner, change.request);
        let renamed = format!("{name}-renamed");
        let rename = Call::update_user(name.as_str(), Some(&renamed), None).unwrap();
        admin(&owner, rename.request);
        let nodes = send_everywhere(&owner, &split.stream, &split.topic, split.partitions);
        let stats = owner.stats();
        owner.shutdown();
        println!(
            "accounts: {adapter:?}: renamed and a new password, then sends admitted by nodes \
             {nodes:?}, {} data links signed in afterwards",
            stats.reconnects
        );
        assert!(
            nodes
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                > 1,
            "the split topic reaches more than one node: {nodes:?}"
        );
    }

    // Through the SDK's traits: a reader, logged in as at run time, then back.
    let reader = unique_name("reader");
    let read_only = Permissions {
        global: GlobalPermissions {
            read_streams: true,
            read_topics: true,
            ..GlobalPermissions::default()
        },
        streams: Vec::new(),
    };
    let call = Call::create_user(&reader, "reader-pw", UserStatus::Active, Some(read_only));
    admin(&root, call.unwrap().request);
    root.shutdown();
    DAY_RUNTIME.block_on(async {
        let client = iggy_route_tokio::Client::connect(cluster.config(0))
            .await
            .unwrap();
        let sdk: &dyn iggy::prelude::Client = &client;
        let wrong = sdk.login_user(&reader, "not-its-pw").await.unwrap_err();
        assert_eq!(wrong.as_code(), IggyError::InvalidCredentials.as_code());
        let signed_out = sdk.get_streams().await.unwrap_err();
        assert_eq!(signed_out.as_code(), IggyError::Unauthenticated.as_code());
        let identity = sdk.login_user(&reader, "reader-pw").await.unwrap();
        let me = sdk.get_me().await.unwrap();
        assert_eq!(me.user_id, Some(identity.user_id));
        let refused = sdk
            .create_stream(&unique_name("as-reader"))
            .await
            .unwrap_err();
        assert_eq!(refused.as_code(), IggyError::Unauthorized.as_code());
        let visible = sdk.get_streams().await.unwrap().len();
        let Credentials::UserPassword { username, password } = cluster.config(0).credentials else {
            panic!("the suite signs in with a username and password");
        };
        let back = sdk.login_user(&username, password.expose()).await.unwrap();
        let stream = unique_name("as-root-again");
        sdk.create_stream(&stream).await.unwrap();
        sdk.delete_stream(&iggy::prelude::Identifier::named(&stream).unwrap())
            .await
            .unwrap();
        println!(
            "accounts: sdk traits: a wrong password refused (42) and signed out (40); as the \
             reader (user {}) a create refused (41), {visible} streams read; back as user {}",
            identity.user_id, back.user_id
        );
        client.shutdown().await;
    });
}
