//! Session states.

use super::*;
#[allow(unused_imports)]
use super::{
    bad_input::*, breaks::*, faults::*, guards::*, messages::*, probes::*, secrets::*, users::*,
};

/// Every call in `state` ("logged out", "disconnected", "shut down"), with its error code.
pub(crate) async fn calls_in_state(client: &dyn Client, state: &str) -> Vec<String> {
    let (stream, topic) = (named("orders"), named("events"));
    match state {
        "logged out" => client.logout_user().await.unwrap(),
        "disconnected" => client.disconnect().await.unwrap(),
        "shut down" => client.shutdown().await.unwrap(),
        _ => {}
    }
    let mut seen = Vec::new();
    for (name, call) in every_call(client, &stream, &topic) {
        if [
            "login_user",
            "logout_user",
            "disconnect",
            "connect",
            "shutdown",
        ]
        .contains(&name)
        {
            continue;
        }
        let outcome = tokio::time::timeout(Duration::from_secs(10), call).await;
        seen.push(format!("{state}: {name}: {outcome:?}"));
    }
    seen
}
