//! A configuration is checked before a router runs on it: a zero bound does not make a
//! router that refuses everything or spins, it makes a typed error.

use std::time::Duration;

use super::{Config, Credentials, DeliveryGuarantee, PollFrom};
use crate::wire::{HEADER_SIZE, Name};

/// Why a configuration was not accepted. It names the field, never a credential's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No seed address.
    #[error("no seed address")]
    NoSeeds,
    /// The TLS settings cannot be used as given.
    #[error("invalid TLS settings: {problem}")]
    Tls {
        /// What is wrong.
        problem: &'static str,
    },
    /// A seed that is not `host:port` with a port from 1 to 65535.
    #[error("seed {0:?} is not host:port")]
    Seed(String),
    /// A username the wire cannot carry (1 to 255 bytes).
    #[error("the username is empty or longer than 255 bytes")]
    Username,
    /// The client name or version the login reports cannot be carried (1 to 255 bytes).
    #[error("{field} must be 1 to 255 bytes")]
    ClientName {
        /// `client_name` or `client_version`.
        field: &'static str,
    },
    /// A duration or count that must be above zero.
    #[error("{field} must be above zero")]
    Zero {
        /// The field.
        field: &'static str,
    },
    /// An initial value above its maximum.
    #[error("{initial} must not exceed {max}")]
    Order {
        /// The initial value's field.
        initial: &'static str,
        /// The maximum's field.
        max: &'static str,
    },
    /// A bound too large for the router to add to an instant safely (over a day).
    #[error("{field} is longer than a day")]
    TooLong {
        /// The field.
        field: &'static str,
    },
    /// `max_frame_size` below a header, or a per-lane bound above the total.
    #[error("{field} is out of range: {why}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// What the range is.
        why: &'static str,
    },
}

/// Longest wait the router accepts in any bound: an `Instant` plus it must not overflow.
const LONGEST: Duration = Duration::from_secs(24 * 60 * 60);

impl Config {
    /// Checks every field. Adapters call it before they start; a router built on a
    /// configuration that fails it may refuse everything or give up at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.seeds.is_empty() {
            return Err(ConfigError::NoSeeds);
        }
        for seed in &self.seeds {
            let valid = seed.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty() && port.parse::<u16>().is_ok_and(|port| port > 0)
            });
            if !valid {
                return Err(ConfigError::Seed(seed.clone()));
            }
        }
        if let Credentials::UserPassword { username, .. } = &self.credentials
            && Name::new(username.clone()).is_err()
        {
            return Err(ConfigError::Username);
        }
        if let Some(tls) = &self.tls {
            let domain_ok = tls.domain.as_ref().is_none_or(|domain| {
                !domain.is_empty()
                    && domain.len() <= 253
                    && !domain.chars().any(|c| c.is_whitespace() || c.is_control())
            });
            if !domain_ok {
                return Err(ConfigError::Tls {
                    problem: "tls domain must be 1 to 253 characters without spaces",
                });
            }
            if tls
                .ca_file
                .as_ref()
                .is_some_and(|path| path.as_os_str().is_empty())
            {
                return Err(ConfigError::Tls {
                    problem: "tls CA file path is empty",
                });
            }
        }
        for (field, value) in [
            ("client_name", &self.client_name),
            ("client_version", &self.client_version),
        ] {
            if Name::new(value.clone()).is_err() {
                return Err(ConfigError::ClientName { field });
            }
        }
        let durations = [
            ("request_timeout", self.request_timeout),
            ("attempt_timeout", self.attempt_timeout),
            ("connect_timeout", self.connect_timeout),
            ("reconnect_backoff_initial", self.reconnect_backoff_initial),
            ("reconnect_backoff_max", self.reconnect_backoff_max),
            ("route_backoff_initial", self.route_backoff_initial),
            ("route_backoff_max", self.route_backoff_max),
            ("replay_interval", self.replay_interval),
            ("replay_interval_max", self.replay_interval_max),
            ("route_recheck_interval", self.route_recheck_interval),
            ("heartbeat_interval", self.heartbeat_interval),
            ("data_link_idle_timeout", self.data_link_idle_timeout),
        ];
        for (field, value) in durations {
            if value.is_zero() {
                return Err(ConfigError::Zero { field });
            }
            if value > LONGEST {
                return Err(ConfigError::TooLong { field });
            }
        }
        // Zero is allowed here: it turns the distrust of reads after our writes off (and
        // a zero linger writes at once).
        for (field, value) in [
            ("own_write_settle", self.own_write_settle),
            ("linger", self.linger),
        ] {
            if value > LONGEST {
                return Err(ConfigError::TooLong { field });
            }
        }
        if self.linger >= self.request_timeout {
            return Err(ConfigError::OutOfRange {
                field: "linger",
                why: "it must be shorter than request_timeout",
            });
        }
        let counts = [
            ("data_links_per_node", self.data_links_per_node),
            ("max_pending_requests", self.max_pending_requests),
            ("max_pending_per_lane", self.max_pending_per_lane),
            ("max_nodes", self.max_nodes),
            ("coalesce_max_messages", self.coalesce_max_messages as usize),
            ("coalesce_max_bytes", self.coalesce_max_bytes as usize),
        ];
        for (field, value) in counts {
            if value == 0 {
                return Err(ConfigError::Zero { field });
            }
        }
        for (initial, max, a, b) in [
            (
                "reconnect_backoff_initial",
                "reconnect_backoff_max",
                self.reconnect_backoff_initial,
                self.reconnect_backoff_max,
            ),
            (
                "route_backoff_initial",
                "route_backoff_max",
                self.route_backoff_initial,
                self.route_backoff_max,
            ),
            (
                "replay_interval",
                "replay_interval_max",
                self.replay_interval,
                self.replay_interval_max,
            ),
        ] {
            if a > b {
                return Err(ConfigError::Order { initial, max });
            }
        }
        if (self.max_frame_size as usize) <= HEADER_SIZE {
            return Err(ConfigError::OutOfRange {
                field: "max_frame_size",
                why: "it must exceed the 256-byte header",
            });
        }
        if self.max_pending_per_lane > self.max_pending_requests {
            return Err(ConfigError::OutOfRange {
                field: "max_pending_per_lane",
                why: "it must not exceed max_pending_requests",
            });
        }
        Ok(())
    }
}

/// Builds a [`Config`] from the production defaults of [`Config::new`], field by field,
/// and checks it on [`ConfigBuilder::build`].
#[derive(Debug, Clone)]
pub struct ConfigBuilder {
    config: Config,
}

macro_rules! setters {
    ($($field:ident: $type:ty),* $(,)?) => {
        $(
            #[doc = concat!("Sets [`Config::", stringify!($field), "`].")]
            #[must_use]
            pub fn $field(mut self, value: $type) -> Self {
                self.config.$field = value;
                self
            }
        )*
    };
}

impl ConfigBuilder {
    setters! {
        client_name: String,
        client_version: String,
        request_timeout: Duration,
        attempt_timeout: Duration,
        connect_timeout: Duration,
        reconnect_backoff_initial: Duration,
        reconnect_backoff_max: Duration,
        route_backoff_initial: Duration,
        route_backoff_max: Duration,
        replay_interval: Duration,
        replay_interval_max: Duration,
        max_replays: u32,
        route_recheck_interval: Duration,
        heartbeat_interval: Duration,
        data_link_idle_timeout: Duration,
        data_links_per_node: usize,
        max_pending_requests: usize,
        max_pending_per_lane: usize,
        max_frame_size: u32,
        max_nodes: usize,
        delivery: DeliveryGuarantee,
        poll_from: PollFrom,
        own_write_settle: Duration,
        coalesce_max_messages: u32,
        coalesce_max_bytes: u32,
        linger: Duration,
        follow_refusal_view: bool,
        balanced_skips_stalled: bool,
    }

    /// Sets [`Config::tls`]: TLS on every link.
    #[must_use]
    pub fn tls(mut self, value: super::TlsConfig) -> Self {
        self.config.tls = Some(value);
        self
    }

    /// The configuration, if every field is acceptable.
    pub fn build(self) -> Result<Config, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}

impl Config {
    /// A builder starting from the defaults of [`Config::new`].
    pub fn builder(seeds: Vec<String>, credentials: Credentials) -> ConfigBuilder {
        ConfigBuilder {
            config: Config::new(seeds, credentials),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::Password;

    fn builder() -> ConfigBuilder {
        Config::builder(
            vec!["127.0.0.1:8090".into()],
            Credentials::user("iggy", "iggy").unwrap(),
        )
    }

    #[test]
    fn the_defaults_are_valid() {
        assert!(builder().build().is_ok());
    }

    #[test]
    fn zero_bounds_are_errors_not_routers_that_refuse_everything() {
        assert_eq!(
            builder().max_pending_per_lane(0).build().unwrap_err(),
            ConfigError::Zero {
                field: "max_pending_per_lane"
            }
        );
        assert_eq!(
            builder()
                .attempt_timeout(Duration::ZERO)
                .build()
                .unwrap_err(),
            ConfigError::Zero {
                field: "attempt_timeout"
            }
        );
        assert_eq!(
            builder().data_links_per_node(0).build().unwrap_err(),
            ConfigError::Zero {
                field: "data_links_per_node"
            }
        );
    }

    #[test]
    fn inverted_and_oversized_bounds_are_errors() {
        assert_eq!(
            builder()
                .route_backoff_initial(Duration::from_secs(2))
                .route_backoff_max(Duration::from_secs(1))
                .build()
                .unwrap_err(),
            ConfigError::Order {
                initial: "route_backoff_initial",
                max: "route_backoff_max"
            }
        );
        assert!(matches!(
            builder()
                .request_timeout(Duration::from_secs(200_000))
                .build(),
            Err(ConfigError::TooLong { .. })
        ));
        assert!(matches!(
            builder().max_frame_size(100).build(),
            Err(ConfigError::OutOfRange { .. })
        ));
        assert!(matches!(
            builder()
                .max_pending_requests(10)
                .max_pending_per_lane(20)
                .build(),
            Err(ConfigError::OutOfRange { .. })
        ));
    }

    #[test]
    fn an_unusable_username_or_seed_is_a_config_error_never_a_silent_stand_in() {
        let credentials = Credentials::UserPassword {
            username: String::new(),
            password: Password::new("secret-pw".to_owned()).unwrap(),
        };
        let config = Config::new(vec!["127.0.0.1:8090".into()], credentials);
        let error = config.validate().unwrap_err();
        assert_eq!(error, ConfigError::Username);
        assert!(!format!("{error} {error:?}").contains("secret-pw"));
        let long = Credentials::UserPassword {
            username: "u".repeat(256),
            password: Password::new("p".to_owned()).unwrap(),
        };
        let config = Config::new(vec!["127.0.0.1:8090".into()], long);
        assert_eq!(config.validate().unwrap_err(), ConfigError::Username);
        for seed in ["", "host", "host:0", ":80", "host:99999"] {
            let config = Config::new(vec![seed.into()], Credentials::user("u", "p").unwrap());
            assert_eq!(
                config.validate(),
                Err(ConfigError::Seed(seed.into())),
                "{seed}"
            );
        }
        let none = Config::new(Vec::new(), Credentials::user("u", "p").unwrap());
        assert_eq!(none.validate(), Err(ConfigError::NoSeeds));
    }
}
