//! The connection-string grammar, case by case: what a well-formed string sets, and the
//! typed error for each malformed part.

use super::*;
use AddressProblem as A;
use ConnectionStringError as E;
use CredentialsProblem as C;

fn refusal(text: &str) -> ConnectionStringError {
    Config::from_connection_string(text).unwrap_err()
}

fn with_options(options: &str) -> Result<Config, ConnectionStringError> {
    Config::from_connection_string(&format!("iggy://u:p@h:8090?{options}"))
}

#[test]
fn seeds_and_credentials_are_read_as_written() {
    let config =
        Config::from_connection_string("iggy://iggy:secret@127.0.0.1:8090,10.0.0.2:8091").unwrap();
    assert_eq!(config.seeds, ["127.0.0.1:8090", "10.0.0.2:8091"]);
    assert_eq!(
        config.credentials,
        Credentials::user("iggy", "secret").unwrap()
    );
    // Nothing is percent-decoded, and `?` `,` `&` `=` are the password's own before the `@`.
    let config = Config::from_connection_string("iggy+tcp://u:p?a=1,b&c/%40#@h:+080").unwrap();
    assert_eq!(
        config.credentials,
        Credentials::user("u", "p?a=1,b&c/%40#").unwrap()
    );
    assert_eq!(config.seeds, ["h:80"]);
    let config = Config::from_connection_string("iggy://iggypat-123@h:1").unwrap();
    let token = Password::new("iggypat-123").unwrap();
    assert_eq!(config.credentials, Credentials::PersonalAccessToken(token));
}

#[test]
fn malformed_credentials_get_typed_errors() {
    let long = "x".repeat(256);
    let cases = [
        ("http://u:p@h:1".to_owned(), E::Scheme),
        ("iggy+quic://u:p@h:1".to_owned(), E::Scheme),
        ("iggy://u:p://@h:1".to_owned(), E::RepeatedSchemeSeparator),
        ("iggy://h:1".to_owned(), E::Credentials(C::Missing)),
        (
            "iggy://u:pw@127.0.0.1:1?x@host:8090".to_owned(),
            E::Credentials(C::RepeatedAt),
        ),
        (
            "iggy://u:p:q@h:1".to_owned(),
            E::Credentials(C::RepeatedColon),
        ),
        ("iggy://:p@h:1".to_owned(), E::Credentials(C::EmptyUsername)),
        ("iggy://u:@h:1".to_owned(), E::Credentials(C::EmptyPassword)),
        ("iggy://@h:1".to_owned(), E::Credentials(C::EmptyToken)),
        (
            format!("iggy://{long}:p@h:1"),
            E::Credentials(C::UsernameTooLong),
        ),
        (
            format!("iggy://u:{long}@h:1"),
            E::Credentials(C::PasswordTooLong),
        ),
        (
            format!("iggy://{long}@h:1"),
            E::Credentials(C::TokenTooLong),
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(refusal(&text), expected, "{text}");
    }
}

#[test]
fn malformed_addresses_get_typed_errors() {
    let address = |seed, problem| E::Address { seed, problem };
    let cases = [
        ("iggy://u:p@", address(1, A::Empty)),
        ("iggy://u:p@?tls=false", address(1, A::Empty)),
        ("iggy://u:p@h:1,", address(2, A::Empty)),
        ("iggy://u:p@host", address(1, A::MissingPort)),
        ("iggy://u:p@h:1,:2", address(2, A::EmptyHost)),
        ("iggy://u:p@h:", address(1, A::InvalidPort)),
        ("iggy://u:p@h:65536", address(1, A::InvalidPort)),
        ("iggy://u:p@h: 1", address(1, A::InvalidPort)),
        ("iggy://u:p@h:0", address(1, A::PortZero)),
        ("iggy://u:p@h:1:x", address(1, A::ExtraColon)),
        ("iggy://u:p@[::1]:8090", address(1, A::ExtraColon)),
        ("iggy://u:p@h:1?a=1?b=2", E::RepeatedQuestionMark),
    ];
    for (text, expected) in cases {
        assert_eq!(refusal(text), expected, "{text}");
    }
}

#[test]
fn absent_options_keep_the_defaults() {
    let defaults = Config::new(Vec::new(), Credentials::user("u", "p").unwrap());
    let config = Config::from_connection_string("iggy://u:p@h:8090").unwrap();
    assert_eq!(config.heartbeat_interval, defaults.heartbeat_interval);
    assert_eq!(
        config.reconnect_backoff_initial,
        defaults.reconnect_backoff_initial
    );
    assert_eq!(config.reconnect_backoff_max, defaults.reconnect_backoff_max);
}

#[test]
fn heartbeat_interval_sets_the_heartbeat() {
    for (value, expected) in [
        ("10s", Duration::from_secs(10)),
        ("250ms", Duration::from_millis(250)),
        ("1h 30m", Duration::from_secs(5_400)),
        ("24h", MAX_OPTION_WAIT),
    ] {
        let config = with_options(&format!("heartbeat_interval={value}")).unwrap();
        assert_eq!(config.heartbeat_interval, expected, "{value}");
    }
}

#[test]
fn reconnection_interval_sets_the_first_backoff_and_lifts_the_max_to_it() {
    let defaults = Config::new(Vec::new(), Credentials::user("u", "p").unwrap());
    let config = with_options("reconnection_interval=100ms").unwrap();
    assert_eq!(config.reconnect_backoff_initial, Duration::from_millis(100));
    assert_eq!(config.reconnect_backoff_max, defaults.reconnect_backoff_max);
    let config = with_options("reconnection_interval=10s").unwrap();
    assert_eq!(config.reconnect_backoff_initial, Duration::from_secs(10));
    assert_eq!(config.reconnect_backoff_max, Duration::from_secs(10));
}

#[test]
fn options_the_router_already_obeys_change_nothing() {
    let defaults = Config::from_connection_string("iggy://u:p@h:8090").unwrap();
    let config = with_options("tls=false&nodelay=true&reconnection_retries=unlimited").unwrap();
    assert_eq!(format!("{config:?}"), format!("{defaults:?}"));
}

#[test]
fn options_the_router_cannot_honour_are_refused_by_name() {
    let unsupported =
        |option| move |error: &E| matches!(error, E::Unsupported { option: o, .. } if *o == option);
    for (options, option) in [
        // Without tls=true the SDK keeps these and connects in plaintext.
        ("tls_domain=example.com", "tls_domain"),
        ("tls_ca_file=/ca.pem", "tls_ca_file"),
        ("tls=false&tls_ca_file=/ca.pem", "tls_ca_file"),
        ("reconnection_retries=3", "reconnection_retries"),
        ("reestablish_after=5s", "reestablish_after"),
        ("reestablish_after=0", "reestablish_after"),
        ("nodelay=false", "nodelay"),
    ] {
        let error = with_options(options).unwrap_err();
        assert!(unsupported(option)(&error), "{options}: {error:?}");
        assert!(error.to_string().contains(option), "{error}");
    }
}

#[test]
fn tls_options_set_the_tls_config_in_any_order() {
    let on = with_options("tls=true").unwrap();
    assert_eq!(on.tls, Some(crate::config::TlsConfig::default()));
    for options in [
        "tls=true&tls_domain=localhost&tls_ca_file=/etc/iggy/ca.pem",
        "tls_ca_file=/etc/iggy/ca.pem&tls_domain=localhost&tls=true",
    ] {
        let config = with_options(options).unwrap();
        let tls = config.tls.unwrap();
        assert_eq!(tls.domain.as_deref(), Some("localhost"));
        assert_eq!(
            tls.ca_file.as_deref(),
            Some(std::path::Path::new("/etc/iggy/ca.pem"))
        );
    }
    assert_eq!(with_options("tls=false").unwrap().tls, None);
    for (options, option) in [
        ("tls=true&tls_domain=", "tls_domain"),
        ("tls=true&tls_ca_file=", "tls_ca_file"),
    ] {
        let error = with_options(options).unwrap_err();
        assert!(
            matches!(&error, E::InvalidValue { option: o, .. } if *o == option),
            "{options}: {error:?}"
        );
    }
}

#[test]
fn malformed_options_get_typed_errors_naming_the_option() {
    let invalid = |option| move |error: &E| matches!(error, E::InvalidValue { option: o, .. } if *o == option);
    for (options, option) in [
        ("tls=TRUE", "tls"),
        ("tls=", "tls"),
        ("nodelay=1", "nodelay"),
        ("reconnection_retries=-1", "reconnection_retries"),
        ("reconnection_retries=Unlimited", "reconnection_retries"),
        ("heartbeat_interval=5", "heartbeat_interval"),
        ("heartbeat_interval=0s", "heartbeat_interval"),
        ("heartbeat_interval=unlimited", "heartbeat_interval"),
        ("reconnection_interval=fast", "reconnection_interval"),
        ("reestablish_after=soon", "reestablish_after"),
    ] {
        let error = with_options(options).unwrap_err();
        assert!(invalid(option)(&error), "{options}: {error:?}");
    }
    let cases = [
        (
            "heartbeat_interval=25h",
            E::OutOfRange {
                option: "heartbeat_interval",
                limit: "24h",
            },
        ),
        (
            "bogus=1",
            E::UnknownOption {
                option: "bogus".into(),
            },
        ),
        (
            "TLS=false",
            E::UnknownOption {
                option: "TLS".into(),
            },
        ),
        (
            "nodelay=true&nodelay=true",
            E::RepeatedOption { option: "nodelay" },
        ),
        ("", E::MalformedOption { position: 1 }),
        ("tls=false&", E::MalformedOption { position: 2 }),
        ("tls", E::MalformedOption { position: 1 }),
        (
            "tls=false&nodelay=true=x",
            E::MalformedOption { position: 2 },
        ),
    ];
    for (options, expected) in cases {
        assert_eq!(with_options(options).unwrap_err(), expected, "{options}");
    }
    let long_name = "n".repeat(500);
    let error = with_options(&format!("{long_name}=1")).unwrap_err();
    assert_eq!(
        error,
        E::UnknownOption {
            option: "n".repeat(MAX_SHOWN_NAME_CHARS)
        }
    );
}
