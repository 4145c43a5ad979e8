//! Iggy's connection string, read by the grammar of the 0.11.0 SDK's TCP transport, so that
//! a string the SDK takes is taken here and a string it refuses is refused here, except for
//! the deliberate differences listed on [`Config::from_connection_string`].
//!
//! The grammar, as the SDK reads it (`iggy_common` 0.11.0: `ConnectionString::new`,
//! `ConnectionStringUtils::parse_protocol`, `TcpConnectionStringOptions::parse_options`,
//! `IggyDuration::from_str`):
//! - the scheme `iggy://` or `iggy+tcp://`, and no other `://` anywhere after it;
//! - exactly one `@`. Before it, the credentials: `user:password` (both non-empty, exactly
//!   one `:`) or, without any `:`, a personal access token. Nothing is percent-decoded, so
//!   a password may hold `?`, `,`, `&`, `=`, `/` or `%` as they are, but never `@` or `:`;
//! - after it, the address `host:port`, the port a decimal `u16`;
//! - then optionally one `?` and `name=value` options joined by `&`, each with exactly one
//!   `=`. Names are case-sensitive and a name the SDK does not know is refused.
//!
//! Errors never carry text from before the `?`: when a string is mis-split (a password
//! holding `@`, say), secret text lands where an address is expected, so only an unknown
//! option's name is ever shown.

use std::time::Duration;

use super::duration::sdk_duration;
use super::{Config, Credentials, TlsConfig};
use crate::wire::{Name, Password};

const PLAIN_SCHEME: &str = "iggy://";
const TCP_SCHEME: &str = "iggy+tcp://";
const SCHEME_SEPARATOR: &str = "://";

/// The longest heartbeat or redial wait accepted. The SDK takes up to `u64::MAX` seconds,
/// but the router adds these waits to `Instant`s, which panics on overflow long before that,
/// and a wait of more than a day is a typo rather than a setting.
const MAX_OPTION_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

/// An unknown option's name is shown, but a pasted blob should not fill a log line.
const MAX_SHOWN_NAME_CHARS: usize = 64;

const EXPECTED_DURATION: &str = "a duration such as 5s, 100ms or 1h 30m";
const EXPECTED_NONZERO_DURATION: &str = "a non-zero duration such as 5s or 100ms";
const EXPECTED_BOOLEAN: &str = "true or false";
const EXPECTED_RETRIES: &str = "unlimited or a count";
const TLS_OFF: &str = "TLS settings without tls=true would be ignored: plaintext";
const EXPECTED_SERVER_NAME: &str = "a DNS name or an IP address";
const EXPECTED_PATH: &str = "a file path";

/// Why a connection string was not accepted. No variant carries the credentials or the
/// address text (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionStringError {
    /// It does not start with `iggy://` or `iggy+tcp://` (the router speaks TCP only).
    #[error("expected the iggy:// or iggy+tcp:// scheme")]
    Scheme,
    /// `://` appears again after the scheme.
    #[error("'://' may appear only once, after the scheme")]
    RepeatedSchemeSeparator,
    /// The credentials before the `@` are missing or malformed.
    #[error("invalid credentials: {0}")]
    Credentials(CredentialsProblem),
    /// A seed address is malformed.
    #[error("invalid address of seed {seed}: {problem}")]
    Address {
        /// The seed's position in the comma-separated list, from 1.
        seed: usize,
        /// What is wrong with it.
        problem: AddressProblem,
    },
    /// More than one `?` after the `@`.
    #[error("more than one '?' after the address")]
    RepeatedQuestionMark,
    /// An option that is not exactly one `name=value` pair (this includes an empty option,
    /// as after a trailing `?` or `&`).
    #[error("option {position} is not one name=value pair")]
    MalformedOption {
        /// The option's position after the `?`, from 1.
        position: usize,
    },
    /// An option the SDK does not know either (names are case-sensitive).
    #[error("unknown option {option:?}")]
    UnknownOption {
        /// The name as written, cut to 64 characters.
        option: String,
    },
    /// An option given twice. The SDK lets the last one win without checking the earlier
    /// one; which one was meant is anyone's guess, so it is refused here.
    #[error("option {option} is given more than once")]
    RepeatedOption {
        /// The option.
        option: &'static str,
    },
    /// A known option with a value it cannot take.
    #[error("invalid value for option {option}: expected {expected}")]
    InvalidValue {
        /// The option.
        option: &'static str,
        /// What it takes.
        expected: &'static str,
    },
    /// A well-formed value beyond what the router accepts.
    #[error("option {option} is out of range: at most {limit}")]
    OutOfRange {
        /// The option.
        option: &'static str,
        /// The largest value accepted.
        limit: &'static str,
    },
    /// A well-formed option (or value) the SDK honours and the router does not; refused
    /// rather than silently ignored.
    #[error("option {option} is not supported: {reason}")]
    Unsupported {
        /// The option.
        option: &'static str,
        /// Why not.
        reason: &'static str,
    },
}

/// What is wrong with the credentials. Deliberately without the text itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialsProblem {
    /// No `@`, so no credentials.
    #[error("missing (expected user:password@ or token@)")]
    Missing,
    /// More than one `@`: the grammar has no way to write `@` inside a password.
    #[error("'@' may appear only once")]
    RepeatedAt,
    /// More than one `:` before the `@`: the grammar has no way to write `:` in a password.
    #[error("':' may appear only once, between user and password")]
    RepeatedColon,
    /// `:password@` with no user.
    #[error("empty user name")]
    EmptyUsername,
    /// `user:@` with no password.
    #[error("empty password")]
    EmptyPassword,
    /// `@` with nothing before it: a personal access token cannot be empty.
    #[error("empty personal access token")]
    EmptyToken,
    /// A user name longer than the wire's one-byte length prefix allows.
    #[error("user name longer than 255 bytes")]
    UsernameTooLong,
    /// A password longer than the wire's one-byte length prefix allows.
    #[error("password longer than 255 bytes")]
    PasswordTooLong,
    /// A personal access token longer than the wire's one-byte length prefix allows.
    #[error("personal access token longer than 255 bytes")]
    TokenTooLong,
}

/// What is wrong with one seed address. Deliberately without the text itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddressProblem {
    /// Nothing there (also an empty entry in the seed list).
    #[error("empty")]
    Empty,
    /// No `:port`.
    #[error("missing :port")]
    MissingPort,
    /// `:port` with no host before it.
    #[error("empty host")]
    EmptyHost,
    /// The port is not a 16-bit decimal number (digits, optionally after a `+`).
    #[error("port is not a number from 1 to 65535")]
    InvalidPort,
    /// Port 0 cannot be dialled.
    #[error("port 0 cannot be dialled")]
    PortZero,
    /// More than one `:`: an IPv6 literal (which the SDK refuses as well) or text after
    /// the port.
    #[error("more than one ':' (IPv6 literals and text after the port are not accepted)")]
    ExtraColon,
}

impl Config {
    /// A configuration from Iggy's connection string,
    /// `iggy://user:password@host:port[,host:port...][?name=value&...]`
    /// (or `iggy://token@...` for a personal access token; `iggy+tcp://` is the same).
    /// Options not given keep the defaults of [`Config::new`]. Errors never show the
    /// credentials.
    ///
    /// Every option of the SDK 0.11.0's TCP transport is honoured or refused by name:
    /// - `heartbeat_interval=<duration>` sets [`Config::heartbeat_interval`];
    /// - `reconnection_interval=<duration>` sets [`Config::reconnect_backoff_initial`], and
    ///   raises [`Config::reconnect_backoff_max`] to it if below, since the max caps the wait;
    /// - `reconnection_retries=unlimited` is what the router does anyway; a count is
    ///   refused (`Unsupported`): the router redials without limit;
    /// - `tls=true` turns TLS on ([`Config::tls`]), `tls_domain=<name>` sets the name the
    ///   nodes' certificates are checked against, `tls_ca_file=<path>` the PEM file of the
    ///   authorities to trust; `tls=false` (the default) is plaintext;
    /// - `nodelay=true` changes nothing: both adapters set `TCP_NODELAY` on every link
    ///   they open. `nodelay=false` is refused (`Unsupported`): they never turn Nagle on;
    /// - `reestablish_after=<duration>` is refused (`Unsupported`): the router paces
    ///   redials with its own backoff, whose first step is `reconnection_interval`.
    ///
    /// Durations are read as the SDK reads them: lowercased, `0`, `unlimited`, `disabled`
    /// and `none` mean zero, otherwise terms such as `5s`, `100ms`, `1.5h` or `1h 30m`.
    ///
    /// Deliberate differences from the SDK, each refusing what it would accept unless said:
    /// - the refusals above (retry counts, `nodelay=false`, `reestablish_after`);
    /// - `tls_domain` or `tls_ca_file` without `tls=true` (`Unsupported`): the SDK keeps
    ///   them and connects in plaintext;
    /// - `tls` and `nodelay` take only `true` or `false`: the SDK reads any other value,
    ///   `TRUE` or `yes` included, as `false`, which for `tls` would mean plaintext;
    /// - a heartbeat or reconnection interval above 24 hours (`OutOfRange`);
    /// - an option given twice (the SDK keeps the last);
    /// - a `,` in the address separates seeds: several seeds are accepted (the SDK refuses
    ///   them), and a `,` inside one host is refused (the SDK keeps it in the host name);
    /// - port 0, and text after the port (`host:8090:x`, which the SDK accepts and cannot
    ///   dial);
    /// - an empty personal access token, and credentials over the wire's 255 bytes;
    /// - schemes other than exactly `iggy://` and `iggy+tcp://` (the SDK strips every
    ///   `iggy+` before reading the transport, so it takes `iggy+iggy+tcp://` too).
    pub fn from_connection_string(value: &str) -> Result<Self, ConnectionStringError> {
        let after_scheme = value
            .strip_prefix(PLAIN_SCHEME)
            .or_else(|| value.strip_prefix(TCP_SCHEME))
            .ok_or(ConnectionStringError::Scheme)?;
        if after_scheme.contains(SCHEME_SEPARATOR) {
            return Err(ConnectionStringError::RepeatedSchemeSeparator);
        }
        // The single `@` is found before anything else is read, so a password holding `@`
        // is refused as a whole instead of being read as an address.
        let (credentials_text, location) = split_at_the_only_at(after_scheme)?;
        let credentials = parse_credentials(credentials_text)?;
        let (addresses, options) = match location.split_once('?') {
            Some((_, options)) if options.contains('?') => {
                return Err(ConnectionStringError::RepeatedQuestionMark);
            }
            Some((addresses, options)) => (addresses, Some(options)),
            None => (location, None),
        };
        let mut config = Config::new(parse_seeds(addresses)?, credentials);
        if let Some(options) = options {
            apply_options(&mut config, options)?;
        }
        Ok(config)
    }
}

fn credentials_error(problem: CredentialsProblem) -> ConnectionStringError {
    ConnectionStringError::Credentials(problem)
}

fn split_at_the_only_at(text: &str) -> Result<(&str, &str), ConnectionStringError> {
    let (credentials, location) = text
        .split_once('@')
        .ok_or(credentials_error(CredentialsProblem::Missing))?;
    if location.contains('@') {
        return Err(credentials_error(CredentialsProblem::RepeatedAt));
    }
    Ok((credentials, location))
}

fn parse_credentials(text: &str) -> Result<Credentials, ConnectionStringError> {
    let Some((username, password)) = text.split_once(':') else {
        if text.is_empty() {
            return Err(credentials_error(CredentialsProblem::EmptyToken));
        }
        let token =
            Password::new(text).map_err(|_| credentials_error(CredentialsProblem::TokenTooLong))?;
        return Ok(Credentials::PersonalAccessToken(token));
    };
    if password.contains(':') {
        return Err(credentials_error(CredentialsProblem::RepeatedColon));
    }
    if username.is_empty() {
        return Err(credentials_error(CredentialsProblem::EmptyUsername));
    }
    if password.is_empty() {
        return Err(credentials_error(CredentialsProblem::EmptyPassword));
    }
    // Both checks are the wire's own (`Name`: 1 to 255 bytes, `Password`: at most 255),
    // made here so the error can say which field is too long without showing it.
    Name::new(username).map_err(|_| credentials_error(CredentialsProblem::UsernameTooLong))?;
    let password = Password::new(password)
        .map_err(|_| credentials_error(CredentialsProblem::PasswordTooLong))?;
    Ok(Credentials::UserPassword {
        username: username.to_owned(),
        password,
    })
}

/// `host:port` entries separated by `,`, each kept as `host:port` with the port in plain
/// decimal (the SDK also takes `+80` or `080`, which mean port 80).
fn parse_seeds(addresses: &str) -> Result<Vec<String>, ConnectionStringError> {
    addresses
        .split(',')
        .enumerate()
        .map(|(index, address)| {
            parse_seed(address).map_err(|problem| ConnectionStringError::Address {
                seed: index + 1,
                problem,
            })
        })
        .collect()
}

fn parse_seed(address: &str) -> Result<String, AddressProblem> {
    if address.is_empty() {
        return Err(AddressProblem::Empty);
    }
    let (host, port) = address.split_once(':').ok_or(AddressProblem::MissingPort)?;
    if host.is_empty() {
        return Err(AddressProblem::EmptyHost);
    }
    if port.contains(':') {
        return Err(AddressProblem::ExtraColon);
    }
    // `u16::from_str` is the SDK's own test for the port: digits with an optional `+`.
    let port: u16 = port.parse().map_err(|_| AddressProblem::InvalidPort)?;
    if port == 0 {
        return Err(AddressProblem::PortZero);
    }
    Ok(format!("{host}:{port}"))
}

/// The options of the SDK 0.11.0's TCP transport, and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TcpOption {
    Tls,
    TlsDomain,
    TlsCaFile,
    ReconnectionRetries,
    ReconnectionInterval,
    ReestablishAfter,
    HeartbeatInterval,
    Nodelay,
}

impl TcpOption {
    const ALL: [TcpOption; 8] = [
        TcpOption::Tls,
        TcpOption::TlsDomain,
        TcpOption::TlsCaFile,
        TcpOption::ReconnectionRetries,
        TcpOption::ReconnectionInterval,
        TcpOption::ReestablishAfter,
        TcpOption::HeartbeatInterval,
        TcpOption::Nodelay,
    ];

    fn name(self) -> &'static str {
        match self {
            TcpOption::Tls => "tls",
            TcpOption::TlsDomain => "tls_domain",
            TcpOption::TlsCaFile => "tls_ca_file",
            TcpOption::ReconnectionRetries => "reconnection_retries",
            TcpOption::ReconnectionInterval => "reconnection_interval",
            TcpOption::ReestablishAfter => "reestablish_after",
            TcpOption::HeartbeatInterval => "heartbeat_interval",
            TcpOption::Nodelay => "nodelay",
        }
    }

    fn from_name(name: &str) -> Option<TcpOption> {
        TcpOption::ALL
            .into_iter()
            .find(|option| option.name() == name)
    }

    fn invalid(self, expected: &'static str) -> ConnectionStringError {
        ConnectionStringError::InvalidValue {
            option: self.name(),
            expected,
        }
    }

    fn unsupported(self, reason: &'static str) -> ConnectionStringError {
        ConnectionStringError::Unsupported {
            option: self.name(),
            reason,
        }
    }
}

fn apply_options(config: &mut Config, options: &str) -> Result<(), ConnectionStringError> {
    let mut seen = Vec::with_capacity(TcpOption::ALL.len());
    for (index, pair) in options.split('&').enumerate() {
        let (name, value) = pair
            .split_once('=')
            .filter(|(_, value)| !value.contains('='))
            .ok_or(ConnectionStringError::MalformedOption {
                position: index + 1,
            })?;
        let option =
            TcpOption::from_name(name).ok_or_else(|| ConnectionStringError::UnknownOption {
                option: name.chars().take(MAX_SHOWN_NAME_CHARS).collect(),
            })?;
        if seen.contains(&option) {
            return Err(ConnectionStringError::RepeatedOption {
                option: option.name(),
            });
        }
        seen.push(option);
        apply_option(config, option, value)?;
    }
    // The SDK keeps `tls_domain` and `tls_ca_file` without `tls=true` and connects in
    // plaintext: a string that names a CA but turns nothing on is a mistake to point out.
    let tls_on = options.split('&').any(|pair| pair == "tls=true");
    if !tls_on {
        if let Some(option) = [TcpOption::TlsDomain, TcpOption::TlsCaFile]
            .into_iter()
            .find(|option| seen.contains(option))
        {
            return Err(option.unsupported(TLS_OFF));
        }
        config.tls = None;
    }
    // The backoff doubles from the initial wait but is capped by the max: a max below the
    // requested interval would quietly shorten it.
    config.reconnect_backoff_max = config
        .reconnect_backoff_max
        .max(config.reconnect_backoff_initial);
    Ok(())
}

fn apply_option(
    config: &mut Config,
    option: TcpOption,
    value: &str,
) -> Result<(), ConnectionStringError> {
    match option {
        TcpOption::Tls => match value {
            "false" => Ok(()),
            "true" => {
                config.tls.get_or_insert_with(TlsConfig::default);
                Ok(())
            }
            _ => Err(option.invalid(EXPECTED_BOOLEAN)),
        },
        TcpOption::TlsDomain => {
            if value.is_empty() || value.len() > 253 {
                return Err(option.invalid(EXPECTED_SERVER_NAME));
            }
            config.tls.get_or_insert_with(TlsConfig::default).domain = Some(value.to_owned());
            Ok(())
        }
        TcpOption::TlsCaFile => {
            if value.is_empty() {
                return Err(option.invalid(EXPECTED_PATH));
            }
            config.tls.get_or_insert_with(TlsConfig::default).ca_file = Some(value.into());
            Ok(())
        }
        TcpOption::ReconnectionRetries => {
            if value == "unlimited" {
                Ok(())
            } else if value.parse::<u32>().is_ok() {
                Err(option.unsupported("the router redials without limit"))
            } else {
                Err(option.invalid(EXPECTED_RETRIES))
            }
        }
        TcpOption::ReconnectionInterval => {
            config.reconnect_backoff_initial = wait(option, value)?;
            Ok(())
        }
        TcpOption::ReestablishAfter => {
            sdk_duration(value).ok_or(option.invalid(EXPECTED_DURATION))?;
            Err(option.unsupported(
                "the router paces redials with its own backoff; set reconnection_interval",
            ))
        }
        TcpOption::HeartbeatInterval => {
            config.heartbeat_interval = wait(option, value)?;
            Ok(())
        }
        TcpOption::Nodelay => match value {
            "true" => Ok(()),
            "false" => Err(option.unsupported("the adapters always turn Nagle's algorithm off")),
            _ => Err(option.invalid(EXPECTED_BOOLEAN)),
        },
    }
}

/// A non-zero duration (the SDK's `NonZeroIggyDuration`) of at most [`MAX_OPTION_WAIT`].
fn wait(option: TcpOption, value: &str) -> Result<Duration, ConnectionStringError> {
    let duration = sdk_duration(value).ok_or(option.invalid(EXPECTED_DURATION))?;
    if duration.is_zero() {
        return Err(option.invalid(EXPECTED_NONZERO_DURATION));
    }
    if duration > MAX_OPTION_WAIT {
        return Err(ConnectionStringError::OutOfRange {
            option: option.name(),
            limit: "24h",
        });
    }
    Ok(duration)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
