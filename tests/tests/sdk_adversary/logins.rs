//! Run-time logins as another user: the session and every later request run as that user,
//! through a reconnect too; a refused login leaves the client signed out until the next
//! one succeeds; the first user signs back in the same way.

#[allow(unused_imports)]
use super::guards::*;
use super::*;

/// A root client makes a reader, logs in as it (first with a wrong password), and back.
async fn login_program(cluster: &TestCluster, client: &dyn Client) -> Vec<String> {
    let mut seen = Vec::new();
    let reader = Permissions {
        global: GlobalPermissions {
            read_streams: true,
            ..GlobalPermissions::default()
        },
        streams: None,
    };
    client
        .create_user("reader", "reader-pw", UserStatus::Active, Some(reader))
        .await
        .unwrap();
    client.create_stream("before").await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;

    let wrong = client.login_user("reader", "not-its-pw").await;
    seen.push(format!("wrong password: {:?}", code(&wrong)));
    let streams = client.get_streams().await;
    seen.push(format!(
        "get_streams after it: {:?}",
        streams.map(|s| s.len()).map_err(|e| e.as_code())
    ));
    let login = client.login_user("reader", "reader-pw").await;
    seen.push(format!(
        "as reader: {:?}",
        login.map(|i| i.user_id).map_err(|e| e.as_code())
    ));
    let me = client.get_me().await;
    seen.push(format!(
        "me: {:?}",
        me.map(|c| c.user_id).map_err(|e| e.as_code())
    ));
    let created = client.create_stream("as-reader").await;
    seen.push(format!("create_stream as reader: {:?}", code(&created)));
    let streams = client.get_streams().await;
    seen.push(format!(
        "get_streams as reader: {:?}",
        streams.map(|s| s.len()).map_err(|e| e.as_code())
    ));

    // Every connection dropped: the client comes back as the reader, not as root.
    for node in 0..3 {
        cluster.drop_connections(node);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for attempt in 0..3 {
        let created = client.create_stream(&format!("after-drop-{attempt}")).await;
        if created.as_ref().err().map(IggyError::as_code) == Some(IggyError::Disconnected.as_code())
        {
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        }
        seen.push(format!(
            "create_stream after a reconnect: {:?}",
            code(&created)
        ));
        break;
    }

    let back = client.login_user("iggy", "iggy").await;
    seen.push(format!(
        "back as root: {:?}",
        back.map(|i| i.user_id).map_err(|e| e.as_code())
    ));
    let created = client.create_stream("as-root").await;
    seen.push(format!("create_stream as root: {:?}", code(&created)));
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_as_another_user_moves_every_later_request_to_that_user_as_the_sdks_does() {
    let cluster = TestCluster::start(3).await;
    let sdk = sdk_on(&cluster).await;
    let expected = login_program(&cluster, &*sdk).await;
    let _ = sdk.shutdown().await;

    let cluster = TestCluster::start(3).await;
    let route = route_on(&cluster).await;
    let got = login_program(&cluster, &*route).await;
    let _ = route.shutdown().await;
    assert_eq!(got, expected, "iggy-route (left) vs the SDK (right)");
}
