//! The published SDK `iggy 0.11.0`, as an independent client, drives users, permissions,
//! passwords and personal access tokens against the loopback cluster: if the real SDK's
//! `UserClient` and `PersonalAccessTokenClient` calls decode what the node model answers,
//! and get the typed errors a 0.11.0 server gives, the model speaks those commands the way
//! the server does.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use iggy::prelude::*;
use iggy_route_tests::cluster::TestCluster;

async fn sdk_client(cluster: &TestCluster, user: &str, password: &str) -> IggyClient {
    let url = format!("iggy://{user}:{password}@{}", cluster.addr(0));
    let client = IggyClient::from_connection_string(&url).unwrap();
    client.connect().await.unwrap();
    client
}

fn named(name: &str) -> Identifier {
    Identifier::named(name).unwrap()
}

/// May send to and read the topics of `stream`, nothing else.
fn restricted(stream: u32) -> Permissions {
    let stream_permissions = StreamPermissions {
        send_messages: true,
        read_topics: true,
        ..StreamPermissions::default()
    };
    Permissions {
        global: GlobalPermissions::default(),
        streams: Some(BTreeMap::from([(stream as usize, stream_permissions)])),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_manages_users_and_is_refused_what_its_user_may_not_do() {
    let cluster = TestCluster::start(3).await;
    let root = sdk_client(&cluster, "iggy", "iggy").await;
    let stream = root.create_stream("orders").await.unwrap();

    let created = root
        .create_user(
            "alice",
            "alice-pw",
            UserStatus::Active,
            Some(restricted(stream.id)),
        )
        .await
        .unwrap();
    assert_eq!(created.id, 1);
    assert_eq!(created.username, "alice");
    assert_eq!(created.permissions, Some(restricted(stream.id)));
    let users = root.get_users().await.unwrap();
    assert_eq!(users.iter().map(|u| u.id).collect::<Vec<_>>(), [0, 1]);
    let root_details = root.get_user(&Identifier::numeric(0).unwrap()).await;
    let root_details = root_details.unwrap().unwrap();
    assert_eq!(root_details.username, "iggy");
    assert!(root_details.permissions.unwrap().global.manage_users);
    assert!(root.get_user(&named("nobody")).await.unwrap().is_none());
    assert!(matches!(
        root.create_user("alice", "other-pw", UserStatus::Active, None)
            .await,
        Err(IggyError::UserAlreadyExists)
    ));
    assert!(matches!(
        root.delete_user(&Identifier::numeric(0).unwrap()).await,
        Err(IggyError::CannotDeleteUser(_))
    ));

    let alice = sdk_client(&cluster, "alice", "alice-pw").await;
    assert!(matches!(
        alice.create_stream("mine").await,
        Err(IggyError::Unauthorized)
    ));
    assert!(matches!(
        alice.get_users().await,
        Err(IggyError::Unauthorized)
    ));
    assert_eq!(
        alice.get_user(&named("alice")).await.unwrap().unwrap().id,
        1
    );

    // Granted manage_streams, she may; renamed and deactivated, she signs in no more.
    let mut granted = restricted(stream.id);
    granted.global.manage_streams = true;
    root.update_permissions(&named("alice"), Some(granted))
        .await
        .unwrap();
    alice.create_stream("mine").await.unwrap();
    root.update_user(
        &named("alice"),
        Some("alicia"),
        Some(UserStatus::Inactive),
        &UserUpdateOptions::default(),
    )
    .await
    .unwrap();
    let again =
        IggyClient::from_connection_string(&format!("iggy://alicia:alice-pw@{}", cluster.addr(0)))
            .unwrap();
    assert!(again.connect().await.is_err());
    root.delete_user(&named("alicia")).await.unwrap();
    assert!(root.get_user(&named("alicia")).await.unwrap().is_none());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_signs_in_with_a_token_it_created_and_changes_a_password() {
    let cluster = TestCluster::start(3).await;
    let root = sdk_client(&cluster, "iggy", "iggy").await;
    let stream = root.create_stream("orders").await.unwrap();
    root.create_user(
        "alice",
        "alice-pw",
        UserStatus::Active,
        Some(restricted(stream.id)),
    )
    .await
    .unwrap();

    let alice = sdk_client(&cluster, "alice", "alice-pw").await;
    let token = alice
        .create_personal_access_token("ci", IggyExpiry::NeverExpire)
        .await
        .unwrap();
    let tokens = alice.get_personal_access_tokens().await.unwrap();
    assert_eq!(tokens.len(), 1);
    assert_eq!(tokens[0].name, "ci");
    assert!(tokens[0].expiry_at.is_none());
    assert!(matches!(
        alice
            .create_personal_access_token("ci", IggyExpiry::NeverExpire)
            .await,
        Err(IggyError::PersonalAccessTokenAlreadyExists(..))
    ));

    // The token signs another SDK client in as alice.
    let by_token = sdk_client(&cluster, "iggy", "iggy").await;
    let identity = by_token
        .login_with_personal_access_token(&token.token)
        .await
        .unwrap();
    assert_eq!(identity.user_id, 1);
    assert!(matches!(
        by_token.create_stream("mine").await,
        Err(IggyError::Unauthorized)
    ));

    alice.delete_personal_access_token("ci").await.unwrap();
    let refused = sdk_client(&cluster, "iggy", "iggy").await;
    assert!(
        refused
            .login_with_personal_access_token(&token.token)
            .await
            .is_err()
    );

    // Her own password, with the current one; the old one no longer signs in.
    alice
        .change_password(&named("alice"), "alice-pw", "alice-pw-2")
        .await
        .unwrap();
    let old =
        IggyClient::from_connection_string(&format!("iggy://alice:alice-pw@{}", cluster.addr(0)))
            .unwrap();
    assert!(old.connect().await.is_err());
    sdk_client(&cluster, "alice", "alice-pw-2").await;
    cluster.shutdown().await;
}
