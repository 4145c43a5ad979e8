//! What the router is told at construction: where the cluster is, who signs in, and every
//! bound (timeouts, pool sizes, queue lengths) that keeps its waits and its memory finite.

use std::fmt;
use std::time::Duration;

use crate::wire::Password;

/// How to sign in. The secret never appears in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// Username and password (`LOGIN_REGISTER`, code 40).
    UserPassword {
        /// The user name.
        username: String,
        /// The password.
        password: Password,
    },
    /// A personal access token (`LOGIN_REGISTER_WITH_PAT`, code 45).
    PersonalAccessToken(Password),
}

impl Credentials {
    /// Username and password credentials, checked against the wire's limits (a name of
    /// 1 to 255 bytes, a password of at most 255) before anything is sent.
    pub fn user(
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Result<Self, crate::wire::WireError> {
        let username = username.into();
        crate::wire::Name::new(username.clone())?;
        Ok(Self::UserPassword {
            username,
            password: Password::new(password.into())?,
        })
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UserPassword { username, .. } => f
                .debug_struct("UserPassword")
                .field("username", username)
                .field("password", &"***")
                .finish(),
            Self::PersonalAccessToken(_) => f.write_str("PersonalAccessToken(***)"),
        }
    }
}

/// Whether a send whose link closed while it was in flight may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Never write a message twice: such a send completes with `RequestError::OutcomeUnknown`.
    AtMostOnce,
    /// Send it again on a new link (a new session cannot be deduplicated by the server, so the
    /// message may be stored twice). Opt in only where duplicates are acceptable.
    AtLeastOnce,
}

/// Router configuration. `Config::new` gives production defaults; every field is public.
#[derive(Debug, Clone)]
pub struct Config {
    /// Seed addresses, `host:port`. The first reachable one carries the session.
    pub seeds: Vec<String>,
    /// Sign-in credentials, used by the coordinator and by every data link.
    pub credentials: Credentials,
    /// Reported to the server in the login body.
    pub client_name: String,
    /// Reported to the server in the login body.
    pub client_version: String,
    /// Whole life of one request, from `submit` to `Completed`.
    pub request_timeout: Duration,
    /// One exchange on one link: past it the node counts as silent and the link is closed.
    pub attempt_timeout: Duration,
    /// A connection attempt that has not succeeded by then is abandoned.
    pub connect_timeout: Duration,
    /// First wait before reconnecting to a node that failed; doubles up to the max.
    pub reconnect_backoff_initial: Duration,
    /// Longest wait between reconnection attempts.
    pub reconnect_backoff_max: Duration,
    /// First wait when a lookup names the node that just refused (an election in progress).
    pub route_backoff_initial: Duration,
    /// Longest such wait.
    pub route_backoff_max: Duration,
    /// Wait before replaying a `TransientNotCommitted` (57) on the same link.
    pub replay_interval: Duration,
    /// A link with nothing sent for this long sends a `PING`.
    pub heartbeat_interval: Duration,
    /// A data link unused for this long is closed.
    pub data_link_idle_timeout: Duration,
    /// Data links per node, so sends to different partitions on one node do not wait for
    /// each other (the protocol allows one request in flight per connection).
    pub data_links_per_node: usize,
    /// Requests waiting or in flight, in all.
    pub max_pending_requests: usize,
    /// Requests waiting for one partition (or for the metadata leader, or the coordinator).
    pub max_pending_per_lane: usize,
    /// Largest frame accepted from a node, and largest request frame accepted from the caller.
    pub max_frame_size: u32,
    /// Most nodes the router will track (seeds plus roster entries).
    pub max_nodes: usize,
    /// What to do with a send whose link closed while it was in flight.
    pub delivery: Delivery,
}

impl Config {
    /// Defaults for a production client: 30 s per request, 5 s per attempt, 4 data links
    /// per node, 10,000 pending requests.
    pub fn new(seeds: Vec<String>, credentials: Credentials) -> Self {
        Self {
            seeds,
            credentials,
            client_name: "iggy-route".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            request_timeout: Duration::from_secs(30),
            attempt_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(3),
            reconnect_backoff_initial: Duration::from_millis(50),
            reconnect_backoff_max: Duration::from_secs(2),
            route_backoff_initial: Duration::from_millis(5),
            route_backoff_max: Duration::from_millis(500),
            replay_interval: Duration::from_millis(20),
            heartbeat_interval: Duration::from_secs(5),
            data_link_idle_timeout: Duration::from_secs(60),
            data_links_per_node: 4,
            max_pending_requests: 10_000,
            max_pending_per_lane: 2_000,
            max_frame_size: crate::wire::DEFAULT_MAX_FRAME_SIZE,
            max_nodes: 64,
            delivery: Delivery::AtMostOnce,
        }
    }
}

/// Why a connection string was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionStringError {
    /// It does not start with `iggy://` (or `iggy+tcp://`).
    #[error("expected the iggy:// scheme")]
    Scheme,
    /// No `user:password@` part.
    #[error("missing credentials (user:password@)")]
    Credentials,
    /// No address, or an address without a port.
    #[error("invalid address {0:?}")]
    Address(String),
    /// A credential the wire cannot carry.
    #[error("invalid credential: {0}")]
    Invalid(crate::wire::WireError),
}

impl Config {
    /// A configuration from Iggy's own connection string,
    /// `iggy://user:password@host:port[,host:port...]` (options after `?` are ignored).
    /// The password never appears in the error.
    pub fn from_connection_string(value: &str) -> Result<Self, ConnectionStringError> {
        let rest = value
            .strip_prefix("iggy://")
            .or_else(|| value.strip_prefix("iggy+tcp://"))
            .ok_or(ConnectionStringError::Scheme)?;
        let rest = rest.split('?').next().unwrap_or(rest);
        let (credentials, hosts) = rest
            .rsplit_once('@')
            .ok_or(ConnectionStringError::Credentials)?;
        let (user, password) = credentials
            .split_once(':')
            .ok_or(ConnectionStringError::Credentials)?;
        if user.is_empty() {
            return Err(ConnectionStringError::Credentials);
        }
        let mut seeds = Vec::new();
        for host in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
            let valid_port = host
                .rsplit_once(':')
                .is_some_and(|(name, port)| !name.is_empty() && port.parse::<u16>().is_ok());
            if !valid_port {
                return Err(ConnectionStringError::Address(host.to_owned()));
            }
            seeds.push(host.to_owned());
        }
        if seeds.is_empty() {
            return Err(ConnectionStringError::Address(String::new()));
        }
        let credentials =
            Credentials::user(user, password).map_err(ConnectionStringError::Invalid)?;
        Ok(Self::new(seeds, credentials))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn connection_string_gives_seeds_and_credentials() {
        let config =
            Config::from_connection_string("iggy://iggy:secret@127.0.0.1:8090,10.0.0.2:8091")
                .unwrap();
        assert_eq!(config.seeds, vec!["127.0.0.1:8090", "10.0.0.2:8091"]);
        assert_eq!(
            config.credentials,
            Credentials::user("iggy", "secret").unwrap()
        );
    }

    #[test]
    fn bad_connection_strings_get_typed_errors_without_the_password() {
        use ConnectionStringError as E;
        assert_eq!(
            Config::from_connection_string("http://a:b@h:1").unwrap_err(),
            E::Scheme
        );
        assert_eq!(
            Config::from_connection_string("iggy://h:1").unwrap_err(),
            E::Credentials
        );
        let error = Config::from_connection_string("iggy://u:pw-123@host").unwrap_err();
        assert_eq!(error, E::Address("host".into()));
        assert!(!error.to_string().contains("pw-123"));
        assert!(Config::from_connection_string("iggy://u:p@").is_err());
    }

    #[test]
    fn debug_output_never_shows_secrets() {
        let config = Config::new(
            vec!["127.0.0.1:8090".into()],
            Credentials::user("iggy", "s3cret-pw").unwrap(),
        );
        let shown = format!("{config:?}");
        assert!(!shown.contains("s3cret-pw"), "{shown}");
        assert!(shown.contains("iggy"));
        let pat = Credentials::PersonalAccessToken(Password::new("tok-123").unwrap());
        assert!(!format!("{pat:?}").contains("tok-123"));
    }
}
