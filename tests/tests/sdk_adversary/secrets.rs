//! Secrets.

use super::*;
#[allow(unused_imports)]
use super::{
    bad_input::*, breaks::*, faults::*, guards::*, messages::*, probes::*, session_states::*,
    users::*,
};

#[derive(Clone, Default)]
pub(crate) struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_passed_through_the_sdk_traits_reaches_debug_output_or_a_log_line() {
    const OWN: &str = "Own-pw-4f1e9c";
    const NEW_USER: &str = "New-user-pw-8d2a71";
    const CHANGED: &str = "Changed-pw-3b9e05";
    const WRONG: &str = "Wrong-login-pw-6c7d12";
    let lines = Lines::default();
    let writer = lines.clone();
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .try_init();
    let cluster = TestCluster::start(3).await;
    cluster.with_state(|state| state.add_user("auditor", OWN));
    let mut config = route_config(&cluster);
    config.credentials = iggy_route_core::Credentials::user("auditor", OWN).unwrap();
    let client: Arc<dyn Client> =
        Arc::new(iggy_route_tokio::Client::connect(config).await.unwrap());
    let mut shown = Vec::new();
    shown.push(format!("{client:?} {client:#?}"));
    let mut errors = Vec::new();
    errors.push(format!("{:?}", client.login_user("auditor", WRONG).await));
    errors.push(format!("{:?}", client.login_user("auditor", OWN).await));
    errors.push(format!("{:?}", client.login_user("someone", WRONG).await));
    // A refused login leaves the session signed out, as the SDK's: sign in again.
    errors.push(format!("{:?}", client.login_user("auditor", OWN).await));
    errors.push(format!(
        "{:?}",
        client
            .create_user("newbie", NEW_USER, UserStatus::Active, None)
            .await
    ));
    errors.push(format!(
        "{:?}",
        client
            .change_password(&named("newbie"), NEW_USER, CHANGED)
            .await
    ));
    errors.push(format!(
        "{:?}",
        client
            .change_password(&named("newbie"), WRONG, CHANGED)
            .await
    ));
    let token = client
        .create_personal_access_token("audit-token", IggyExpiry::NeverExpire)
        .await;
    errors.push(format!("{:?}", token.as_ref().map(|_| ())));
    let token = token.map(|t| t.token).unwrap_or_default();
    errors.push(format!(
        "{:?}",
        client.login_with_personal_access_token(&token).await
    ));
    errors.push(format!(
        "{:?}",
        client.login_with_personal_access_token(WRONG).await
    ));
    shown.push(format!("{client:?} {client:#?}"));
    let mut by_token = route_config(&cluster);
    by_token.credentials = iggy_route_core::Credentials::PersonalAccessToken(
        iggy_route_core::wire::Password::new(token.clone()).unwrap(),
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    if let Ok(token_client) = iggy_route_tokio::Client::connect(by_token).await {
        let token_client: Arc<dyn Client> = Arc::new(token_client);
        shown.push(format!("{token_client:?} {token_client:#?}"));
        errors.push(format!(
            "{:?}",
            token_client.login_with_personal_access_token(&token).await
        ));
        let _ = token_client.shutdown().await;
    }
    client.shutdown().await.unwrap();
    let logs = String::from_utf8_lossy(&lines.0.lock().unwrap()).into_owned();
    let mut leaks = Vec::new();
    for secret in [OWN, NEW_USER, CHANGED, WRONG, token.as_str()] {
        if shown.iter().any(|s| s.contains(secret)) {
            leaks.push(format!("{secret} in the client's Debug output"));
        }
        if errors.iter().any(|s| s.contains(secret)) {
            leaks.push(format!("{secret} in a returned error"));
        }
        if logs.contains(secret) {
            let line = logs
                .lines()
                .find(|l| l.contains(secret))
                .unwrap_or_default();
            leaks.push(format!("{secret} in a log line: {line}"));
        }
    }
    assert!(!token.is_empty());
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}
