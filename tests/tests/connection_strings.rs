//! `Config::from_connection_string` against the SDK 0.11.0's own parser for the TCP
//! transport (`TcpClient::from_connection_string`, public in `iggy`): every string of the
//! corpus is accepted by both or refused by both, and where both accept, the seed, the
//! credentials and the heartbeat we extract are the SDK's. The deliberate differences are
//! listed in `differences()` with their reasons, and each is checked to still be one.

#![allow(clippy::unwrap_used)]

use std::str::FromStr;
use std::time::Duration;

use iggy::binary::BinaryTransport;
use iggy::prelude::{ClientWrapper, IggyDuration, NonZeroIggyDuration, TcpClient};
use iggy_route_core::{
    AddressProblem as A, Config, ConnectionStringError as E, Credentials, CredentialsProblem as C,
};

/// What the SDK made of an accepted string, as far as its public API shows it.
struct SdkView {
    server_address: String,
    /// `Debug` of the client: the credentials (secret redacted) and the reconnection config.
    debug: String,
    heartbeat: Duration,
}

fn sdk_parse(text: &str, runtime: &tokio::runtime::Runtime) -> Option<SdkView> {
    let client = TcpClient::from_connection_string(text).ok()?;
    let debug = format!("{client:?}");
    let heartbeat = client.get_heartbeat_interval().get_duration();
    let info = runtime.block_on(ClientWrapper::Tcp(client).get_connection_info());
    Some(SdkView {
        server_address: info.server_address,
        debug,
        heartbeat,
    })
}

/// Strings on which both parsers must agree.
fn corpus() -> Vec<String> {
    let agreed = [
        // Accepted by both.
        "iggy://iggy:iggy@127.0.0.1:8090",
        "iggy+tcp://iggy:iggy@127.0.0.1:8090",
        "iggy://iggy:iggy@localhost:8090",
        "iggy://user.name-1:secret@my-host.example.com:1",
        "iggy://u:p@h:65535",
        "iggy://u:p@h:+8090",
        "iggy://u:p@h:08090",
        "iggy://u:p@h h:1",
        "iggy://iggypat-1234567890abcdef@127.0.0.1:8090",
        "iggy+tcp://iggypat-token@h:1?heartbeat_interval=1m",
        "iggy://u:pa?ss@h:1",
        "iggy://u:pa,ss@h:1",
        "iggy://u:pa&ss=w@h:1",
        "iggy://u:pa/%40#ss@h:1",
        "iggy://u:pässwörd€@h:1",
        "iggy://u:pa ss@h:1",
        "iggy+tcp://u:iggy+pw@h:1",
        "iggy://u:p@h:1?tls=false",
        "iggy://u:p@h:1?tls=true",
        "iggy+tcp://u:p@h:1?tls=true&tls_domain=h&tls_ca_file=/etc/ca.pem",
        "iggy://u:p@h:1?nodelay=true",
        "iggy://u:p@h:1?reconnection_retries=unlimited",
        "iggy://u:p@h:1?heartbeat_interval=10s",
        "iggy://u:p@h:1?heartbeat_interval=100ms",
        "iggy://u:p@h:1?heartbeat_interval=5S",
        "iggy://u:p@h:1?heartbeat_interval=1h 30m",
        "iggy://u:p@h:1?heartbeat_interval=1.5s",
        "iggy://u:p@h:1?heartbeat_interval=1 0s",
        "iggy://u:p@h:1?heartbeat_interval=2min5s",
        "iggy://u:p@h:1?heartbeat_interval=1M",
        "iggy://u:p@h:1?heartbeat_interval=3µs",
        "iggy://u:p@h:1?heartbeat_interval=24h",
        "iggy://u:p@h:1?reconnection_interval=500ms",
        "iggy://u:p@h:1?reconnection_interval=10s",
        "iggy://u:p@h:1?tls=false&nodelay=true&reconnection_retries=unlimited\
         &heartbeat_interval=3s&reconnection_interval=250ms",
        // Refused by both: the scheme.
        "",
        "iggy",
        "iggy://",
        "http://u:p@h:1",
        "iggy+quic://u:p@h:1",
        "iggy+http://u:p@h:1",
        "iggy+ws://u:p@h:1",
        "IGGY://u:p@h:1",
        "iggy+TCP://u:p@h:1",
        "iggy:/u:p@h:1",
        "u:p@h:1",
        "iggy://u:p@h:1://x",
        "iggy://u:p://q@h:1",
        // The credentials.
        "iggy://h:1",
        "iggy://u:p@h:1@x",
        "iggy://u:pw@127.0.0.1:1?x@host:8090",
        "iggy://u:p@@h:1",
        "iggy://u:p:q@h:1",
        "iggy://:p@h:1",
        "iggy://u:@h:1",
        "iggy://:@h:1",
        // The address.
        "iggy://u:p@",
        "iggy://u:p@?tls=false",
        "iggy://u:p@h",
        "iggy://u:p@h:",
        "iggy://u:p@:8090",
        "iggy://u:p@::1:8090",
        "iggy://u:p@[::1]:8090",
        "iggy://u:p@h:65536",
        "iggy://u:p@h:-1",
        "iggy://u:p@h:80a",
        "iggy://u:p@h: 80",
        "iggy://u:p@h:1/path",
        "iggy://u:p@h:1,",
        "iggy://u:p@h:1,h2",
        // The option list.
        "iggy://u:p@h:1?",
        "iggy://u:p@h:1??",
        "iggy://u:p@h:1?tls=false?",
        "iggy://u:p@h:1?&",
        "iggy://u:p@h:1?tls=false&",
        "iggy://u:p@h:1?&tls=false",
        "iggy://u:p@h:1?tls",
        "iggy://u:p@h:1?=false",
        "iggy://u:p@h:1?tls=false=true",
        "iggy://u:p@h:1?bogus=1",
        "iggy://u:p@h:1?tls=false&bogus=1",
        "iggy://u:p@h:1?TLS=false",
        "iggy://u:p@h:1?Heartbeat_Interval=5s",
        "iggy://u:p@h:1?tls =false",
        "iggy://u:p@h:1?tls_ca_file=a@b",
        "iggy://u:p@h:1?tls_domain=a=b",
        // Option values.
        "iggy://u:p@h:1?heartbeat_interval=0",
        "iggy://u:p@h:1?heartbeat_interval=0s",
        "iggy://u:p@h:1?heartbeat_interval=unlimited",
        "iggy://u:p@h:1?heartbeat_interval=none",
        "iggy://u:p@h:1?heartbeat_interval=5",
        "iggy://u:p@h:1?heartbeat_interval=abc",
        "iggy://u:p@h:1?heartbeat_interval=",
        "iggy://u:p@h:1?heartbeat_interval=-5s",
        "iggy://u:p@h:1?heartbeat_interval=.5s",
        "iggy://u:p@h:1?heartbeat_interval=1.s",
        "iggy://u:p@h:1?heartbeat_interval=1.5ns",
        "iggy://u:p@h:1?heartbeat_interval=0.0001h",
        "iggy://u:p@h:1?heartbeat_interval=5s s",
        "iggy://u:p@h:1?heartbeat_interval=1s,2s",
        "iggy://u:p@h:1?reconnection_interval=0",
        "iggy://u:p@h:1?reconnection_interval=soon",
        "iggy://u:p@h:1?reconnection_retries=-1",
        "iggy://u:p@h:1?reconnection_retries=Unlimited",
        "iggy://u:p@h:1?reconnection_retries=4294967296",
        "iggy://u:p@h:1?reconnection_retries=",
        "iggy://u:p@h:1?reestablish_after=soon",
        "iggy://u:p@h:1?reestablish_after=",
        "iggy://u:p@h:1?reestablish_after=-1s",
    ];
    agreed.into_iter().map(str::to_owned).collect()
}

/// What we do where the SDK does the opposite.
enum Ours {
    Refuse(fn(&E) -> bool),
    Accept { seeds: &'static [&'static str] },
}

struct Difference {
    text: String,
    ours: Ours,
    why: &'static str,
}

fn refuse(text: &str, why: &'static str, expected: fn(&E) -> bool) -> Difference {
    Difference {
        text: text.to_owned(),
        ours: Ours::Refuse(expected),
        why,
    }
}

/// The deliberate differences: the SDK accepts each string we refuse, and refuses each we
/// accept.
fn differences() -> Vec<Difference> {
    const NO_TLS: &str = "without tls=true the SDK keeps TLS settings and connects in \
                          plaintext, sending the password in the clear";
    const BOOLEAN: &str = "the SDK reads any value but `true` as false, so a misspelt \
                           `tls=TRUE` would silently mean plaintext";
    const RETRIES: &str = "the router redials without limit; a count cannot be honoured";
    const REESTABLISH: &str = "the router paces redials with its own backoff, not by this";
    const NAGLE: &str = "both adapters always set TCP_NODELAY";
    const WAIT: &str = "waits above 24h would overflow `Instant` arithmetic, and are typos";
    const REPEATED: &str = "the SDK keeps the last value unchecked; which was meant is unclear";
    const SEEDS: &str = "a ',' separates seeds: the router takes a seed list";
    const PORT_ZERO: &str = "port 0 cannot be dialled";
    const AFTER_PORT: &str = "the SDK reads the second ':' field as the port and keeps the \
                              whole text, which cannot be dialled";
    const EMPTY_TOKEN: &str = "an empty personal access token cannot sign in";
    const LONG: &str = "the wire's one-byte length prefix caps credentials at 255 bytes";
    const SCHEME: &str = "the SDK strips every `iggy+` before reading the transport; only \
                          `iggy://` and `iggy+tcp://` are taken here";
    let long = "x".repeat(256);
    vec![
        refuse("iggy://u:p@h:1?tls_domain=example.com", NO_TLS, |e| {
            matches!(
                e,
                E::Unsupported {
                    option: "tls_domain",
                    ..
                }
            )
        }),
        refuse("iggy://u:p@h:1?tls_domain=", NO_TLS, |e| {
            matches!(
                e,
                E::InvalidValue {
                    option: "tls_domain",
                    ..
                }
            )
        }),
        refuse("iggy://u:p@h:1?tls_ca_file=/etc/ca.pem", NO_TLS, |e| {
            matches!(
                e,
                E::Unsupported {
                    option: "tls_ca_file",
                    ..
                }
            )
        }),
        refuse("iggy://u:p@h:1?tls=TRUE", BOOLEAN, |e| {
            matches!(e, E::InvalidValue { option: "tls", .. })
        }),
        refuse("iggy://u:p@h:1?tls=yes", BOOLEAN, |e| {
            matches!(e, E::InvalidValue { option: "tls", .. })
        }),
        refuse("iggy://u:p@h:1?tls=", BOOLEAN, |e| {
            matches!(e, E::InvalidValue { option: "tls", .. })
        }),
        refuse("iggy://u:p@h:1?nodelay=1", BOOLEAN, |e| {
            matches!(
                e,
                E::InvalidValue {
                    option: "nodelay",
                    ..
                }
            )
        }),
        refuse("iggy://u:p@h:1?reconnection_retries=3", RETRIES, |e| {
            matches!(
                e,
                E::Unsupported {
                    option: "reconnection_retries",
                    ..
                }
            )
        }),
        refuse("iggy://u:p@h:1?reconnection_retries=+0", RETRIES, |e| {
            matches!(
                e,
                E::Unsupported {
                    option: "reconnection_retries",
                    ..
                }
            )
        }),
        refuse("iggy://u:p@h:1?reestablish_after=5s", REESTABLISH, |e| {
            matches!(
                e,
                E::Unsupported {
                    option: "reestablish_after",
                    ..
                }
            )
        }),
        refuse("iggy://u:p@h:1?reestablish_after=0", REESTABLISH, |e| {
            matches!(
                e,
                E::Unsupported {
                    option: "reestablish_after",
                    ..
                }
            )
        }),
        refuse("iggy://u:p@h:1?nodelay=false", NAGLE, |e| {
            matches!(
                e,
                E::Unsupported {
                    option: "nodelay",
                    ..
                }
            )
        }),
        refuse("iggy://u:p@h:1?heartbeat_interval=25h", WAIT, |e| {
            matches!(
                e,
                E::OutOfRange {
                    option: "heartbeat_interval",
                    ..
                }
            )
        }),
        refuse("iggy://u:p@h:1?heartbeat_interval=1w", WAIT, |e| {
            matches!(
                e,
                E::OutOfRange {
                    option: "heartbeat_interval",
                    ..
                }
            )
        }),
        refuse(
            "iggy://u:p@h:1?heartbeat_interval=18446744073709551615s",
            WAIT,
            |e| {
                matches!(
                    e,
                    E::OutOfRange {
                        option: "heartbeat_interval",
                        ..
                    }
                )
            },
        ),
        refuse("iggy://u:p@h:1?reconnection_interval=2days", WAIT, |e| {
            matches!(
                e,
                E::OutOfRange {
                    option: "reconnection_interval",
                    ..
                }
            )
        }),
        refuse("iggy://u:p@h:1?tls=false&tls=false", REPEATED, |e| {
            matches!(e, E::RepeatedOption { option: "tls" })
        }),
        refuse(
            "iggy://u:p@h:1?heartbeat_interval=1s&heartbeat_interval=2s",
            REPEATED,
            |e| {
                matches!(
                    e,
                    E::RepeatedOption {
                        option: "heartbeat_interval"
                    }
                )
            },
        ),
        // The SDK checks only the last value, so the malformed first one goes unnoticed.
        refuse(
            "iggy://u:p@h:1?heartbeat_interval=bogus&heartbeat_interval=5s",
            REPEATED,
            |e| {
                matches!(
                    e,
                    E::InvalidValue {
                        option: "heartbeat_interval",
                        ..
                    }
                )
            },
        ),
        Difference {
            text: "iggy://u:p@h1:1,h2:2".to_owned(),
            ours: Ours::Accept {
                seeds: &["h1:1", "h2:2"],
            },
            why: SEEDS,
        },
        Difference {
            text: "iggy://u:p@10.0.0.1:8090,10.0.0.2:8090,10.0.0.3:8090?heartbeat_interval=1s"
                .to_owned(),
            ours: Ours::Accept {
                seeds: &["10.0.0.1:8090", "10.0.0.2:8090", "10.0.0.3:8090"],
            },
            why: SEEDS,
        },
        refuse("iggy://u:p@,h:1", SEEDS, |e| {
            matches!(
                e,
                E::Address {
                    seed: 1,
                    problem: A::Empty
                }
            )
        }),
        refuse("iggy://u:p@h,x:1", SEEDS, |e| {
            matches!(
                e,
                E::Address {
                    seed: 1,
                    problem: A::MissingPort
                }
            )
        }),
        refuse("iggy://u:p@h:0", PORT_ZERO, |e| {
            matches!(
                e,
                E::Address {
                    seed: 1,
                    problem: A::PortZero
                }
            )
        }),
        refuse("iggy://u:p@h:00", PORT_ZERO, |e| {
            matches!(
                e,
                E::Address {
                    seed: 1,
                    problem: A::PortZero
                }
            )
        }),
        refuse("iggy://u:p@h:8090:x", AFTER_PORT, |e| {
            matches!(
                e,
                E::Address {
                    seed: 1,
                    problem: A::ExtraColon
                }
            )
        }),
        refuse("iggy://u:p@h:8090:", AFTER_PORT, |e| {
            matches!(
                e,
                E::Address {
                    seed: 1,
                    problem: A::ExtraColon
                }
            )
        }),
        refuse("iggy://u:p@fe80:1::2", AFTER_PORT, |e| {
            matches!(
                e,
                E::Address {
                    seed: 1,
                    problem: A::ExtraColon
                }
            )
        }),
        refuse("iggy://@h:1", EMPTY_TOKEN, |e| {
            matches!(e, E::Credentials(C::EmptyToken))
        }),
        refuse(&format!("iggy://{long}:p@h:1"), LONG, |e| {
            matches!(e, E::Credentials(C::UsernameTooLong))
        }),
        refuse(&format!("iggy://u:{long}@h:1"), LONG, |e| {
            matches!(e, E::Credentials(C::PasswordTooLong))
        }),
        refuse(&format!("iggy://{long}@h:1"), LONG, |e| {
            matches!(e, E::Credentials(C::TokenTooLong))
        }),
        refuse("iggy+iggy+tcp://u:p@h:1", SCHEME, |e| {
            matches!(e, E::Scheme)
        }),
        refuse("iggy+tciggy+p://u:p@h:1", SCHEME, |e| {
            matches!(e, E::Scheme)
        }),
    ]
}

/// `host:port` with the port in plain decimal, as our seeds are kept.
fn normalized(server_address: &str) -> String {
    let (host, port) = server_address.split_once(':').unwrap();
    format!("{host}:{}", port.parse::<u16>().unwrap())
}

fn assert_same_extraction(text: &str, ours: &Config, sdk: &SdkView) {
    assert_eq!(ours.seeds, [normalized(&sdk.server_address)], "{text}");
    let credentials = match &ours.credentials {
        Credentials::UserPassword { username, .. } => {
            format!("UsernamePassword({username:?}, \"[REDACTED]\")")
        }
        Credentials::PersonalAccessToken(_) => "PersonalAccessToken(\"[REDACTED]\")".to_owned(),
    };
    assert!(sdk.debug.contains(&credentials), "{text}: {}", sdk.debug);
    // Both default to 5 s, so the heartbeat matches whether or not the string sets it.
    assert_eq!(ours.heartbeat_interval, sdk.heartbeat, "{text}");
    if text.contains("reconnection_interval=") {
        let interval = NonZeroIggyDuration::new(ours.reconnect_backoff_initial).unwrap();
        let shown = format!("max_retries: None, interval: {interval:?}");
        assert!(sdk.debug.contains(&shown), "{text}: {}", sdk.debug);
    }
}

/// The password, where the text has a `user:password@` part long enough to look for.
fn password_of(text: &str) -> Option<&str> {
    let (_, after_scheme) = text.split_once("://")?;
    let (credentials, _) = after_scheme.rsplit_once('@')?;
    let (_, password) = credentials.split_once(':')?;
    (password.len() >= 4).then_some(password)
}

#[test]
fn the_corpus_is_read_as_the_sdk_reads_it() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let corpus = corpus();
    let (mut accepted, mut refused) = (0, 0);
    for text in &corpus {
        let ours = Config::from_connection_string(text);
        let sdk = sdk_parse(text, &runtime);
        match (&ours, &sdk) {
            (Ok(ours), Some(sdk)) => {
                assert_same_extraction(text, ours, sdk);
                accepted += 1;
            }
            (Err(error), None) => {
                if let Some(password) = password_of(text) {
                    let shown = format!("{error} {error:?}");
                    assert!(!shown.contains(password), "{text}: {shown}");
                }
                refused += 1;
            }
            (Ok(_), None) => panic!("we accept and the SDK refuses {text:?}"),
            (Err(error), Some(_)) => panic!("the SDK accepts and we refuse {text:?}: {error:?}"),
        }
    }
    assert!(corpus.len() >= 60, "{}", corpus.len());
    assert!(
        accepted >= 25 && refused >= 60,
        "{accepted} accepted, {refused} refused"
    );
}

#[test]
fn the_deliberate_differences_are_still_differences() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for Difference { text, ours, why } in differences() {
        let sdk_accepts = sdk_parse(&text, &runtime).is_some();
        match ours {
            Ours::Refuse(expected) => {
                assert!(sdk_accepts, "{text:?}: the SDK refuses it too now ({why})");
                let error = Config::from_connection_string(&text).unwrap_err();
                assert!(expected(&error), "{text:?}: {error:?}");
            }
            Ours::Accept { seeds } => {
                assert!(!sdk_accepts, "{text:?}: the SDK accepts it too now ({why})");
                let config = Config::from_connection_string(&text).unwrap();
                assert_eq!(config.seeds, seeds, "{text:?}");
            }
        }
    }
}

/// Where the extracted credentials cannot be read back from the SDK (it redacts the
/// secret), they are checked against what the string says.
#[test]
fn passwords_with_separator_characters_are_kept_verbatim() {
    for (text, username, password) in [
        ("iggy://u:pa?ss@h:1", "u", "pa?ss"),
        ("iggy://u:pa,ss@h:1?tls=false", "u", "pa,ss"),
        ("iggy://u:pa&ss=w@h:1", "u", "pa&ss=w"),
        ("iggy://u:pa/%40#ss@h:1", "u", "pa/%40#ss"),
        ("iggy://u:pässwörd€@h:1", "u", "pässwörd€"),
        ("iggy+tcp://u:iggy+pw@h:1", "u", "iggy+pw"),
    ] {
        let config = Config::from_connection_string(text).unwrap();
        let expected = Credentials::user(username, password).unwrap();
        assert_eq!(config.credentials, expected, "{text}");
    }
    let config = Config::from_connection_string("iggy://iggypat-123@h:1").unwrap();
    let Credentials::PersonalAccessToken(token) = config.credentials else {
        panic!("expected a personal access token");
    };
    assert_eq!(token.expose(), "iggypat-123");
}

/// Our duration grammar against the SDK's `IggyDuration::from_str`, through the one option
/// that takes any duration (`reestablish_after`, refused as unsupported once it parses),
/// and the values through `heartbeat_interval` where that takes them.
#[test]
fn durations_are_read_as_the_sdk_reads_them() {
    let texts = [
        "0",
        "00",
        "0s",
        "unlimited",
        "UNLIMITED",
        "none",
        "disabled",
        "5s",
        "5S",
        "5 s",
        "5sec",
        "5secs",
        "5 seconds",
        "100ms",
        "100 msec",
        "100millis",
        "10us",
        "10usec",
        "3µs",
        "7ns",
        "7nsec",
        "7nanos",
        "1m",
        "1M",
        "2min",
        "2mins",
        "2 minutes",
        "1h",
        "1hr",
        "2hrs",
        "1hour",
        "1h 30m",
        "1h30m",
        "2min5s",
        "1 0s",
        "1.5s",
        "1. 5 s",
        "1.5h",
        "1.5m",
        "0.000000001s",
        "0.0000000001s",
        "1.00000000000000000000s",
        "0.99999999999s",
        "1.0ns",
        "0.5ns",
        "1.5us",
        "0.0001h",
        "1d",
        "1day",
        "2days",
        "1w",
        "1wk",
        "1wks",
        "1week",
        "1month",
        "1months",
        "1y",
        "1yr",
        "1year",
        "1w\u{212a}",
        "1\u{212a}",
        "",
        " ",
        "5",
        "s",
        ".5s",
        "1.s",
        "1..5s",
        "-1s",
        "+1s",
        "5s s",
        "5 sec onds",
        "5fortnights",
        "1s,2s",
        "1s;",
        "1_000s",
        "1e3ms",
        "٣s",
        "18446744073709551615s",
        "18446744073709551616s",
        "18446744073709551615ns",
        "18446744073709551616ns",
        "5s ",
        " 5s",
    ];
    for text in texts {
        let sdk = IggyDuration::from_str(text).ok().map(|d| d.get_duration());
        let string = format!("iggy://u:p@h:1?reestablish_after={text}");
        let error = Config::from_connection_string(&string).unwrap_err();
        // Refused as unsupported once the value parses, as invalid when it does not.
        let ours = matches!(error, E::Unsupported { .. });
        assert!(
            ours || matches!(error, E::InvalidValue { .. }),
            "{text:?}: {error:?}"
        );
        assert_eq!(ours, sdk.is_some(), "{text:?}: the SDK reads {sdk:?}");
        let Some(expected) = sdk.filter(|d| !d.is_zero() && *d <= Duration::from_secs(86_400))
        else {
            continue;
        };
        let string = format!("iggy://u:p@h:1?heartbeat_interval={text}");
        let config = Config::from_connection_string(&string).unwrap();
        assert_eq!(config.heartbeat_interval, expected, "{text:?}");
    }
}
